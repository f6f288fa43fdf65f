# rtlab: the two commands of README.md do all set-up on a fresh Debian 12
# (what that changes on the host: docs/getting-started.md).
#   make run    the main job: every board x variant, table, exit code
#   make test   unit and integration tests (real QEMU boots through labgrid)
# Set-up is idempotent and quiet the second time.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
RTLAB := $(VENV)/bin/rtlab
STAMPS := .cache/stamps
GCL := .cache/gitlab-ci-local/bin/gitlab-ci-local
PYTHON ?= python3

.PHONY: all setup images rtbench pythons runner-setup run test test-durations test-rack test-rack-soak test-long test-pipeline lint reference-jobs bench clean gitlab-ci-local
all: run

setup: $(STAMPS)/host $(VENV)/.installed

# rtlab/targets/arch.py: each architecture's QEMU and cross packages
$(STAMPS)/host: env/apt-packages.txt env/setup-host.sh rtlab/targets/arch.py
	@bash env/setup-host.sh
	@mkdir -p $(STAMPS) && touch $@

$(VENV)/.installed: pyproject.toml | $(STAMPS)/host
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[dev]'
	@touch $@

# rtbench (our POSIX primitive benchmarks), native and cross-built for every
# architecture of rtlab/targets/arch.py (its build/<rtbench_arch>/rtbench)
rtbench: setup
	@if [ -f rtbench/Makefile ]; then $(MAKE) -s -C rtbench && \
	  for a in $$($(PY) -m rtlab.targets.arch --field rtbench_arch); do $(MAKE) -s -C rtbench ARCH=$$a || exit 1; done; fi

# board images: Debian's pinned kernels + an initramfs per arch (cached by content)
images: setup rtbench
	@$(RTLAB) images >/dev/null

# a lab runner host, as root, once: the user the CI jobs run as
# (RUNNER_USER, default rtlab) and what it is granted, nothing more
# (env/runner-setup.sh, docs/runner.md). The checkout and its .venv must be
# readable by that user: a checkout such as /opt/rtlab, and a python outside
# root's home (PYTHON=/usr/bin/python3 where root's python3 is not Debian's).
RUNNER_USER ?= rtlab
runner-setup: images
	@bash env/runner-setup.sh $(RUNNER_USER)

# a venv of rtlab's dependencies for each Python version rtlab supports that
# this machine has (pyenv's, python3.N on PATH; tools/pythons.py), shared in
# ~/.cache/rtlab/pythons: tests/unit/test_cli_reference.py checks the CLI
# reference under each
pythons: setup
	@$(PY) tools/pythons.py --setup

# exit code: rtlab's is 0 all within budget, 1 a budget broke, 2 infra error;
# make turns any non-zero into 2, so the line below says which it was.
run: images
	@$(RTLAB) run $(RUN_ARGS); rc=$$?; \
	  case $$rc in 0) ;; 1) echo "rtlab run: exit 1 (a latency budget broke)";; \
	  *) echo "rtlab run: exit $$rc (infra error or bad input)";; esac; exit $$rc

# make test: the default selection (pyproject.toml: not rack, not long) in
# four phases (tests/conftest.py; docs/testing.md), each writing
# results/pytest/<phase>.xml (make test-durations) and <phase>.load:
#   parallel       tests/unit, tests/faults and tests marked light on
#                  TEST_WORKERS workers (pytest-xdist --dist loadfile: a
#                  file on one worker; files with a test marked
#                  over_a_minute first, tests/conftest.py)
#   two-at-a-time  the other integration tests (QEMU boots, builds, LAVA,
#                  the rack): two files at a time, as in parallel
#   one-at-a-time  tests marked guest_verdict (a statistical verdict on a
#                  QEMU guest's latency), one at a time
#   alone          tests marked serial (latency on this machine), last
# Every phase runs even if one fails; the exit code is 1 if any did.
TEST_PHASES := parallel two-at-a-time one-at-a-time alone
TEST_XML := results/pytest
TEST_WORKERS ?= 2
test: images $(GCL) pythons
	@mkdir -p $(TEST_XML); rm -f $(TEST_XML)/*.xml $(TEST_XML)/*.load; rc=0; \
	for phase in $(TEST_PHASES); do \
	  case $$phase in parallel) xdist="-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder";; two-at-a-time) xdist="-n 2 --dist loadfile --no-loadscope-reorder";; *) xdist="";; esac; \
	  echo "make test: phase $$phase"; cat /proc/loadavg > $(TEST_XML)/$$phase.load; \
	  $(PY) -m pytest --phase $$phase $$xdist --junitxml=$(TEST_XML)/$$phase.xml $(PYTEST_ARGS); r=$$?; \
	  cat /proc/loadavg >> $(TEST_XML)/$$phase.load; \
	  case $$r in 0|5) ;; *) echo "make test: phase $$phase failed (pytest exit $$r)"; rc=1;; esac; \
	done; exit $$rc

# the last make test's time per test file, slowest first (bench/suite_durations.py)
test-durations:
	@$(PY) bench/suite_durations.py

# ruff and mypy over rtlab/ (also part of make test: tests/unit/test_lint.py)
lint: setup
	@$(VENV)/bin/ruff check rtlab && $(VENV)/bin/mypy --cache-dir .cache/mypy

# rewrite tests/reference/lava from the renderer, after an intended change (review the diff)
reference-jobs: images
	@RTLAB_UPDATE_REFERENCE=1 $(PY) -m pytest -q tests/unit/test_lava_reference.py

# every variant of every virtual twin in the rack (labgrid/README.md "Virtual
# twins"): builds the kernels Debian does not ship once (armv7l none/preempt,
# docs/measurements/kernel-builds.md; then cached), then boots each variant
# through PDU, ser2net, lease and lock. Not part of make test.
test-rack: images
	@$(PY) -m pytest -m rack tests/integration/test_rack_twins.py $(PYTEST_ARGS)

# the lab soak: `rtlab run` jobs from 4 clients on 2 runner hosts against 4
# QEMU boards on 2 exporter hosts (rack up --hosts 2: network namespaces),
# RTLAB_SOAK_S (600) seconds with random faults (tests/integration/
# test_rack_soak.py; needs CAP_NET_ADMIN). Not part of make test.
test-rack-soak: images
	@$(PY) -m pytest -m rack -s tests/integration/test_rack_soak.py $(PYTEST_ARGS)

# the tests marked long: boots and waits that no capability's one proof in
# make test needs (each names the test that proves its capability there):
# coordinator restarts and lease expiry on the rack in full (make test runs
# their short forms), a LAVA device failing its health check, the twins'
# boots, more pipelines, fault paths that boot again (docs/testing.md)
test-long: images $(GCL)
	@$(PY) -m pytest -m long $(PYTEST_ARGS)

# only the GitLab pipelines on real kernel commits (part of make test too)
test-pipeline: images $(GCL)
	@$(PY) -m pytest tests/integration/test_gitlab_ci.py $(PYTEST_ARGS)

bench: images
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# gitlab-ci-local 4.73.0 (the last release that runs on Node 20), for running
# .gitlab-ci.yml offline (tests/integration/test_gitlab_ci.py); needs rsync
gitlab-ci-local: $(GCL)
$(GCL):
	@command -v npm >/dev/null || { echo "gitlab-ci-local: installing npm"; apt-get install -y -qq --no-install-recommends npm >/dev/null; }
	@npm install -g --silent --prefix .cache/gitlab-ci-local gitlab-ci-local@4.73.0 >/dev/null
	@test ! -x $(GCL) || $(GCL) --version

clean:
	rm -rf results .pytest_cache
