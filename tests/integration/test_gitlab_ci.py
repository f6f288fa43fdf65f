"""The GitLab pipeline (.gitlab-ci.yml), run offline by gitlab-ci-local 4.73.0
with the shell executor, against a real kernel project: a git repository made
from Debian's linux-source-6.12 (tests/integration/kernel_project.py).

The pipeline runs as the kernel project's trigger starts it (source
`pipeline`, KERNEL_REPO + KERNEL_SHA + KERNEL_BRANCH, or KERNEL_MR_IID +
KERNEL_TARGET_BRANCH for a merge request) or as rtlab's own merge request
does, in a throw-away rtlab CI project that holds this checkout's
.gitlab-ci.yml with the matrix narrowed to one board and one variant, a 3 s
cyclictest and a test budget (qemu-tcg max 200 ms); jobs call rtlab from this
checkout (RTLAB_HOME) and publish to a real influxd started here (the store
the regression verdict reads its baselines from).

The jobs run as a user of their own (rtlab-ci), never as root, the way a
lab's runner service runs them (docs/runner.md): `make runner-setup` as root
once (tests/integration/ci_runner.py), then gitlab-ci-local started as that
user by env/runner-exec.sh. So the kernel project, the CI project and
rtlab's checkout are the user's to read, its caches its own, and every
kernel tree it builds is confined (rtlab/kernel/sandbox.py).

    good     the unchanged kernel, pushed to `main` with RTLAB_REGRESSION=0 (a
             branch's first pipeline: nothing to compare with yet)
                                                          -> passes, 3 runs published
    push     the same commit pushed again to `main`       -> the verdict against main's 3 runs
    mr       a kernel merge request into `main`           -> 5 runs, the verdict against main's last 5
    paired   a kernel merge request (the latency bug) whose board class's
             baseline is paired, KERNEL_BASE_SHA its diff base
                                                          -> both commits booted alternately, the
                                                             paired verdict in the gate, no store
    rtlab-mr rtlab's own merge request into `main`        -> 5 runs, the verdict against main's last 5
    latency  a kthread busy for 400 ms without preemption -> gate FAIL naming the budget
    no-rt    PREEMPT_RT made unreachable in Kconfig       -> gate FAIL, build_error

The verdict's outcome between two unchanged sessions on TCG is the
statistics' business (tests/integration/test_compare_local.py and
bench/bench_verdict.py); here it must have run, against the right branch's
runs, with the repeats the workflow sets, and the gate's exit code must be the
verdict's.

good and latency run qemu-aarch64 × preempt (the PREEMPT_DYNAMIC kernel booted
with preempt=full): the same configuration tests/integration/test_kernel_build.py
builds, so one machine compiles it once. no-rt runs × rt and stops at the
option check, before compiling.

Kernel builds: the CI jobs check the kernel out in one work tree per runner
(ci/kernel-tree.sh) and build with O= inside it, so compiler command lines
hold no absolute path and ccache serves every clone (rtlab/kernel.py,
_object_dir). The first build of the configuration on a machine compiles
~850 files (12-15 CPU minutes); after that `good` is all ccache hits, and
`latency`, one changed file, recompiles that file and links (asserted below
from the build job's build.json).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Optional

import pytest
import yaml

from ci_runner import Runner, lab_runner
from kernel_project import make_kernel_project
from rtlab.plan.budgets import load_budgets
from rtlab.store import InfluxV1, LocalInfluxd
from rtlab.store.base import rows

# the gates judge boots' latency against a 200 ms budget and against the
# baseline until decided: a second guest beside them is emulation noise they
# would have to outvote (tests/conftest.py)
pytestmark = pytest.mark.guest_verdict

ROOT = Path(__file__).resolve().parents[2]
BOARD, ARCH = "qemu-aarch64", "aarch64"
BUDGET_MAX_US = 200_000
#: the shipped qemu-tcg max (budgets/default.yaml: 2 s), for the pipelines that must pass
GOOD_BUDGET_MAX_US = int(load_budgets(ROOT / "budgets" / "default.yaml").lookup(
    "qemu-tcg", "preempt", "cyclictest", "idle").max_us)


def gitlab_ci_local() -> str | None:
    local = ROOT / ".cache" / "gitlab-ci-local" / "bin" / "gitlab-ci-local"
    return str(local) if local.exists() else shutil.which("gitlab-ci-local")


GCL = gitlab_ci_local()
# make test installs gitlab-ci-local (make gitlab-ci-local), rsync and the build packages
assert GCL and shutil.which("rsync") and shutil.which("aarch64-linux-gnu-gcc"), \
    "needs gitlab-ci-local (make gitlab-ci-local), rsync and the kernel build packages"


def test_pipeline_matches_gitlab_schema():
    r = subprocess.run([str(ROOT / ".venv" / "bin" / "check-jsonschema"), "--builtin-schema",
                        "vendor.gitlab-ci", "--data-transform", "gitlab-ci", str(ROOT / ".gitlab-ci.yml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_pipeline_shape():
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    assert ci["stages"] == ["build", "test", "publish", "gate"]
    test = ci["test"]
    assert test["resource_group"] == "board-$BOARD"
    # exit 1 definitive (orange, the gate fails the pipeline), 3 passed with keys not gated
    assert test["allow_failure"] == {"exit_codes": [1, 3]}
    assert test["retry"]["exit_codes"] == [2] and test["retry"]["max"] == 2
    # the gate: 1 and 2 fail the pipeline, 3 passes it with warnings
    assert ci["gate"]["allow_failure"] == {"exit_codes": [3]}
    assert "script_failure" not in test["retry"]["when"]  # exit 1 is never retried
    assert test["artifacts"]["when"] == "always" and test["artifacts"]["reports"]["junit"]
    # the gate runs after failed (allowed) test jobs too; no kernel job in a bisect pipeline
    assert ci["gate"]["rules"][-1] == {"when": "always"}
    for job in ("build", "test", "gate", "publish"):
        rules = ci[job].get("rules") or ci[".kernel-pipeline"]["rules"]
        assert rules[0] == {"if": "$BISECT_GOOD || $BISECT_BAD", "when": "never"}, job
    assert ".kernel-pipeline" in ci["build"]["extends"] and ".kernel-pipeline" in ci["test"]["extends"]
    # one JUnit report per measurement in the merge request: the test jobs'
    assert "reports" not in ci["gate"]["artifacts"]
    # housekeeping only on the nightly schedule, never in a kernel's pipeline
    # (nor on a vendor report's schedule: tests/unit/test_ci_schedules.py)
    nightly = [{"if": '$CI_PIPELINE_SOURCE == "schedule" && $RTLAB_CAMPAIGN == "nightly-soak"'}]
    assert ci["prune"]["rules"] == nightly
    assert "kernel prune" in " ".join(ci["prune"]["script"]) and ci["prune"]["allow_failure"] is True
    # the bisect pipeline (API or by hand): one job, the report kept whatever happens
    b = ci["bisect"]
    assert b["rules"] == [{"if": "$BISECT_GOOD && $BISECT_BAD"}]
    assert b["resource_group"] == "board-$BISECT_BOARD" and b["artifacts"]["when"] == "always"
    script = " ".join(b["script"])
    for v in ("BISECT_GOOD", "BISECT_BAD", "BISECT_BOARD", "BISECT_VARIANT", "BISECT_SUITE", "BISECT_LOAD",
              "BISECT_REPEAT"):
        assert f'"${v}"' in script, v  # quoted, never split by the shell
    assert '"$RTLAB" bisect --kernel-tree "$KERNEL_TREE"' in script and "bisect-report" in b["artifacts"]["paths"][0]
    assert "BISECT_GOOD && $BISECT_BAD" in ci["workflow"]["rules"][0]["if"]
    # nightly: the reference kernel on every board, then change points over the history
    assert ci["regressions"]["rules"] == nightly and ci["regressions"]["allow_failure"] == {"exit_codes": [1]}
    assert '"$RTLAB" regressions' in " ".join(ci["regressions"]["script"])
    assert "schedule" in ci["reference"]["rules"][0]["if"]
    assert "--campaign reference" in " ".join(ci["reference"]["script"])
    sources = " ".join(r.get("if", "") for r in ci["workflow"]["rules"])
    for s in ("merge_request_event", "schedule", "pipeline", "trigger", "push"):
        assert s in sources, s
    # kernel commits get the regression verdict: a kernel merge request runs
    # 5 repeats (the candidate), a kernel push 3 (what baselines are made of);
    # the merge request's rule comes first (both match a trigger with KERNEL_SHA)
    rules = ci["workflow"]["rules"]
    kmr = next(i for i, r in enumerate(rules) if "$KERNEL_MR_IID" in r.get("if", ""))
    kpush = next(i for i, r in enumerate(rules) if "$KERNEL_SHA" in r.get("if", "") and "MR_IID" not in r["if"]
                 and "BISECT" not in r["if"])
    assert kmr < kpush and rules[kmr]["variables"]["RTLAB_REPEAT"] == "5"
    assert int(rules[kpush]["variables"]["RTLAB_REPEAT"]) >= 3
    mr = next(r for r in rules if "merge_request_event" in r.get("if", ""))
    assert mr["variables"]["RTLAB_REPEAT"] == "5"
    gate = "\n".join(ci["gate"]["script"])
    assert '. "$RTLAB_HOME/ci/verdict.sh"' in gate and '--branch "$RTLAB_BASELINE_BRANCH"' in gate
    assert '--pin "$RTLAB_BASELINE_PIN"' in gate and "merge_request_event" not in gate  # verdict.sh decides
    assert "results/*/*/*/compare.json" in ci["gate"]["artifacts"]["paths"]
    assert '. "$RTLAB_HOME/ci/verdict.sh"' in " ".join(ci[".rtlab"]["before_script"])
    for v in ("KERNEL_BRANCH", "KERNEL_MR_IID", "KERNEL_TARGET_BRANCH", "KERNEL_MR_SOURCE_BRANCH"):
        assert ci["variables"][v] == "", v


def test_lava_pipeline_shape():
    """RTLAB_LAB=lava: test-lava replaces build and test, the same publish and
    gate take its artifacts; a kernel project's commit (KERNEL_REPO) is
    rendered with kernels built from its tree (--kernel-tree), while
    KERNEL_SHA, which ci/kernel-tree.sh sets for the pinned source too, is
    not the test (the pinned source: Debian's kernels)."""
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    assert ci["variables"]["RTLAB_LAB"] == "labgrid" and ci["variables"]["RTLAB_LAVA_URI"] == ""
    lava_rule = {"if": '$RTLAB_LAB == "lava"', "when": "never"}
    assert lava_rule in ci[".kernel-pipeline"]["rules"]
    job = ci["test-lava"]
    assert job["rules"][-1] == {"if": '$RTLAB_LAB == "lava"'} and job["stage"] == "test"
    assert job["allow_failure"] == {"exit_codes": [1]} and job["retry"]["exit_codes"] == [2]
    script = "\n".join(job["script"])
    assert 'if [ -n "$KERNEL_REPO" ]; then set -- --kernel-tree "$KERNEL_TREE"' in script
    assert '"$KERNEL_SHA"' not in script
    assert "--local-lab" in script and '--uri "$RTLAB_LAVA_URI"' in script
    # a remote server's workers fetch the images over HTTP from the runner
    assert ci["variables"]["RTLAB_ARTIFACTS_URL"] == ""
    assert '--artifacts-url "$RTLAB_ARTIFACTS_URL"' in script and "--artifacts-dir" in script
    # publish and gate take every earlier stage's artifacts, test-lava's and report jobs' too
    for later in ("publish", "gate"):
        assert "needs" not in ci[later] and ci[later]["stage"] in ("publish", "gate"), later


def verdict_env(**env) -> dict:
    """What ci/verdict.sh decides for these CI variables (bash, as the jobs source it)."""
    r = subprocess.run(["bash", "-c", f'. "{ROOT}/ci/verdict.sh" && env'], capture_output=True, text=True,
                       env={"PATH": os.environ["PATH"], **env})
    assert r.returncode == 0, r.stderr
    out = dict(ln.split("=", 1) for ln in r.stdout.splitlines() if ln.startswith("RTLAB_"))
    return {k: out.get(k, "") for k in ("RTLAB_KERNEL_BRANCH", "RTLAB_BASELINE_BRANCH")}


def test_the_baseline_commit_for_paired_boots_is_checked():
    kernel = {"KERNEL_REPO": "https://git.example/linux.git", "KERNEL_SHA": "a" * 40, "KERNEL_BRANCH": "rt-next"}

    def base_sha(value: str):
        r = subprocess.run(["bash", "-c", f'. "{ROOT}/ci/verdict.sh" && echo "base=$RTLAB_BASE_SHA"'],
                           capture_output=True, text=True,
                           env={"PATH": os.environ["PATH"], **kernel, "KERNEL_BASE_SHA": value})
        return r.returncode, r.stdout.strip().splitlines()[-1] if r.returncode == 0 else r.stderr

    assert base_sha("b" * 40) == (0, "base=" + "b" * 40)
    assert base_sha("0" * 40) == (0, "base=")        # a new branch's "before": none
    assert base_sha("") == (0, "base=")
    for bad in ("HEAD~1", "--upload-pack=x", "b" * 41, "abc", "$(id)"):
        rc, err = base_sha(bad)
        assert rc != 0 and "KERNEL_BASE_SHA" in err and "is not a commit id" in err, (bad, err)


def test_which_baseline_each_pipeline_is_judged_against():
    kernel = {"KERNEL_REPO": "https://git.example/linux.git", "KERNEL_SHA": "a" * 40}
    # a kernel push: filed under its branch, compared with the branch's earlier runs
    assert verdict_env(**kernel, KERNEL_BRANCH="rt-next", CI_COMMIT_BRANCH="main") == \
        {"RTLAB_KERNEL_BRANCH": "rt-next", "RTLAB_BASELINE_BRANCH": "rt-next"}
    # a kernel merge request: filed under its source branch (never its target's), against its target
    assert verdict_env(**kernel, KERNEL_MR_IID="42", KERNEL_TARGET_BRANCH="rt-next",
                       KERNEL_MR_SOURCE_BRANCH="fix/timer") == \
        {"RTLAB_KERNEL_BRANCH": "fix/timer", "RTLAB_BASELINE_BRANCH": "rt-next"}
    assert verdict_env(**kernel, KERNEL_MR_IID="42", KERNEL_TARGET_BRANCH="rt-next")["RTLAB_KERNEL_BRANCH"] == "mr-42"
    # rtlab's own merge request and push
    assert verdict_env(CI_PIPELINE_SOURCE="merge_request_event", CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main",
                       CI_MERGE_REQUEST_SOURCE_BRANCH_NAME="gate") == \
        {"RTLAB_KERNEL_BRANCH": "gate", "RTLAB_BASELINE_BRANCH": "main"}
    assert verdict_env(CI_PIPELINE_SOURCE="push", CI_COMMIT_BRANCH="main") == \
        {"RTLAB_KERNEL_BRANCH": "main", "RTLAB_BASELINE_BRANCH": ""}
    # RTLAB_REGRESSION=0 (a branch's first pipeline): budgets only
    assert verdict_env(**kernel, KERNEL_BRANCH="rt-next", RTLAB_REGRESSION="0")["RTLAB_BASELINE_BRANCH"] == ""


@pytest.fixture(scope="module")
def runner() -> Runner:
    """The lab runner's user, set up as root once (make runner-setup)."""
    return lab_runner()


@pytest.fixture(scope="module")
def kernel_project(runner):
    """The kernel project the trigger names (KERNEL_REPO): the runner's user
    clones it, so it is that user's (git refuses another user's repository)."""
    from rtlab.kernel import ensure_source
    src = ensure_source(progress=None)
    dest = runner.workdir("kernel") / "linux"
    project = make_kernel_project(src.path, dest)
    runner.chown(dest)
    return {**project, "_path": str(dest)}


def make_ci_project(proj: Path, variants: str | list[str], budget_us: int = BUDGET_MAX_US,
                    regression: str = "", duration_s: int = 2) -> Path:
    """The rtlab CI project: .gitlab-ci.yml with the matrices `rtlab ci
    matrix` makes of its campaign, one board × *variants* (*regression*: the
    budget file's regression: section, YAML)."""
    from rtlab.run.cimatrix import ci_matrix

    proj.mkdir(parents=True)
    variants = [variants] if isinstance(variants, str) else variants
    (proj / "budgets.yaml").write_text(textwrap.dedent(f"""
        budgets:
          qemu-tcg: {{"*": {{"*": {{"*": {{max_us: {budget_us}}}}}}}}}
    """) + regression)
    (proj / "campaign.yaml").write_text(textwrap.dedent(f"""
        name: ci-test
        budgets: budgets.yaml
        boards: [{BOARD}]
        variants: [{', '.join(variants)}]
        suites:
          # 2 s (the default): the latency bug stalls a CPU for 400 ms every
          # ~900 ms, and a 1 s run missed it (no sample past the range on either
          # CPU) in 1 of 10 boots: the verdict would see a mixture, not the bug
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: {duration_s}, priority: 90, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
    """))
    m = ci_matrix(proj / "campaign.yaml")
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    ci["build"]["parallel"]["matrix"] = m.build_matrix()
    ci["test"]["parallel"]["matrix"] = ci["test-lava"]["parallel"]["matrix"] = m.test_matrix()
    (proj / ".gitlab-ci.yml").write_text(yaml.safe_dump(ci, sort_keys=False))
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ci"]):
        subprocess.run(["git", "-C", str(proj), *args], check=True)
    return proj


@pytest.fixture(scope="module")
def ci_projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("rtlab-ci")
    # the shipped qemu-tcg budget: a good kernel's TCG max reached 384
    # ms on a loaded host, and these projects' pipelines must all pass; the
    # budget test's project keeps BUDGET_MAX_US, under the bug's 400 ms
    return {v: make_ci_project(base / v, v, budget_us=GOOD_BUDGET_MAX_US) for v in ("preempt", "rt")}


@pytest.fixture(scope="module")
def store(tmp_path_factory, runner):
    """The lab's store: a real influxd on free loopback ports (the jobs'
    spool, if the store is down, is their own: RTLAB_STATE_DIR)."""
    state = tmp_path_factory.mktemp("rtlab-store")
    srv = LocalInfluxd(state)
    srv.start()
    InfluxV1(srv.url, "ci").create_database()
    yield {"RTLAB_INFLUX_URL": srv.url, "RTLAB_INFLUX_DB": "ci", "RTLAB_STATE_DIR": str(runner.workdir("state"))}
    srv.stop()


def stored_runs(store: dict, branch: str) -> set[str]:
    q = (f'SELECT "run_id", "verdict" FROM "verdict" WHERE "scope" = \'measurement\' '
         f'AND "branch" = \'{branch}\'')
    return {r["run_id"] for r in rows(InfluxV1(store["RTLAB_INFLUX_URL"], store["RTLAB_INFLUX_DB"]).query(q))}


def run_pipeline(ci_project: Path, kernel_repo: Optional[Path], sha: Optional[str], name: str, tmp_path: Path,
                 store: Optional[dict] = None, *, as_root: bool = False, **extra: str):
    """One pipeline as the kernel project's trigger job starts it (*extra*:
    more pipeline variables, e.g. KERNEL_BRANCH; without *kernel_repo*, as
    rtlab's own merge request starts it), its jobs run as the lab runner's
    user (*as_root*: as root, for a LAVA lab only root's tests can reach)."""
    runner = None if as_root else lab_runner()
    proj = (tmp_path if runner is None else runner.workdir("pipeline")) / name
    subprocess.run(["git", "clone", "-q", str(ci_project), str(proj)], check=True)
    if runner is not None:
        runner.chown(proj)
    from rtlab.kernel import cache_root
    cache = cache_root() if runner is None else runner.cache
    variables = {
        "CI_PIPELINE_SOURCE": "pipeline",
        "RTLAB_HOME": str(ROOT if runner is None else runner.rtlab_home),
        "RTLAB_CAMPAIGN": str(proj / "campaign.yaml"), "RTLAB_PUBLISH": "0",
        # the runner's one kernel work tree (kept between runs, as on a runner)
        "RTLAB_CI_KERNEL_DIR": str(cache / "ci" / "test-kernel"),
        # the lab's budgets, as an operator sets them at project level: the
        # campaign's own budget file never judges (a trigger names the campaign)
        "RTLAB_GATE_BUDGETS": str(proj / "budgets.yaml"),
    }
    if kernel_repo is not None:
        variables.update({"KERNEL_REPO": str(kernel_repo), "KERNEL_SHA": str(sha)})
    if store is not None:
        variables.update({**store, "RTLAB_PUBLISH": "1"})
    variables.update(extra)
    cmd = [GCL if runner is None else str(runner.gitlab_ci_local), "--force-shell-executor", "--no-color",
           "--concurrency", "1"]
    for k, v in variables.items():
        cmd += ["--variable", f"{k}={v}"]
    predefined = ",".join(k for k in variables if k.startswith("CI_"))
    if runner is None:
        # root reads the kernel project, which is the runner's user's: root's
        # own environment vouches for that one path (rtlab never does)
        trust = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory",
                 "GIT_CONFIG_VALUE_0": str(kernel_repo)} if kernel_repo is not None else {}
        r = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, timeout=3 * 3600,
                           env={**os.environ, **trust, "GCL_IGNORE_PREDEFINED_VARS": predefined})
    else:
        r = subprocess.run(runner.argv(cmd, {"GCL_IGNORE_PREDEFINED_VARS": predefined}), cwd=proj,
                           capture_output=True, text=True, timeout=3 * 3600)
    logs = {p.stem: p.read_text() for p in (proj / ".gitlab-ci-local" / "output").glob("*.log")}
    return as_gitlab_decides(r), proj, logs


def as_gitlab_decides(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """The pipeline's result as GitLab gives it: failed when a job failed
    that its allow_failure does not allow. gitlab-ci-local 4.73.0 marks such
    a job FAIL in its summary (its jobStatus reads `exit_codes`), but exits
    0 whenever the job has any allow_failure at all (getFailed tests the
    object's truth): the gate's `allow_failure: exit_codes: [3]` made a
    gate exit 1 a passed pipeline there, never in GitLab."""
    summary = r.stdout.rsplit("\n\n", 1)[-1].splitlines()
    failed = [ln.split()[1] for ln in summary if ln.split()[:1] == ["FAIL"] and len(ln.split()) > 1]
    if failed and r.returncode == 0:
        return subprocess.CompletedProcess(r.args, 1, r.stdout + f"\n(as GitLab: failed jobs {failed})\n", r.stderr)
    return r


def gate_lines(logs: dict) -> list[str]:
    gate = logs.get("gate", "")
    return [ln.strip() for ln in gate.splitlines() if "gate: " in ln and "echo" not in ln]


@pytest.fixture(scope="module")
def seeded(kernel_project, ci_projects, store, tmp_path_factory):
    """`main`'s first pipeline: a kernel push of the unchanged commit with
    RTLAB_REGRESSION=0 (nothing to compare with yet), published: the
    baseline the later pipelines are judged against."""
    r, proj, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), kernel_project["good"],
                                 "good", tmp_path_factory.mktemp("seed"), store,
                                 KERNEL_BRANCH="main", RTLAB_REGRESSION="0")
    return r, proj, logs, stored_runs(store, "main")


def test_good_commit_passes(kernel_project, seeded):
    r, proj, logs, published = seeded
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "gate exit 0" in logs["gate"], logs["gate"][-3000:]
    assert [ln for ln in gate_lines(logs) if ln.startswith("gate: PASS")], gate_lines(logs)
    assert "gate: budgets only (kernel push to main (RTLAB_REGRESSION=0: budgets only))" in gate_lines(logs)
    arts = proj / ".gitlab-ci-local" / "artifacts"
    runs = list(arts.rglob("run.json"))
    assert len(runs) == 1, runs
    run = json.loads(runs[0].read_text())
    assert run["verdict"] == "pass" and run["commit"]["sha"] == kernel_project["good"]
    # a kernel push: 3 runs per job, filed under the kernel's branch, published
    assert run["commit"]["branch"] == "main" and run["commit"]["pipeline_source"] == "pipeline"
    assert sorted(j["repeat"] for j in run["jobs"]) == [1, 2, 3]
    assert published == {run["run_id"]}, published
    job = next(j for j in run["jobs"] if j["variant"] == "preempt")
    assert job["board"] == BOARD and not job.get("build_error") and not job.get("infra_error")
    # the kernel under test was booted: built from the commit, not Debian's
    built = json.loads(next(arts.rglob("kernel/aarch64/preempt/build.json")).read_text())
    assert built["commit"] == kernel_project["good"] and built["preempt"] == "dynamic"
    junit = list(arts.rglob("junit/*.xml"))
    assert junit and "<testcase" in junit[0].read_text()


def verdict_ran(proj: Path, logs: dict, for_what: str, baseline_runs: set[str], repeats: int) -> dict:
    """The regression verdict ran in the gate against *baseline_runs* (the
    branch's, from the store), over the candidate's batches (measured until
    decided, the shipped default: *repeats* runs in the first, the first
    look's); the gate's exit code is the verdict's (the budgets held), and
    every key was decided. Returns the first batch's compare.json."""
    gate = logs["gate"]
    lines = gate_lines(logs)
    assert any(ln.startswith(f"gate: regression verdict for the {for_what}: baseline the last 5 runs of branch main")
               for ln in lines), lines
    assert any(ln.startswith("gate: baseline: store: last 5 runs of branch main, campaign ci-test") for ln in lines), lines
    arts = proj / ".gitlab-ci-local" / "artifacts"
    # ("latest", the results' pointer to the newest run, is a symlink that
    # artifact copying turns into a directory)
    runs = sorted((json.loads(p.read_text()) for p in arts.rglob("run.json") if "latest" not in p.parts),
                  key=lambda r: r["run_id"])
    assert runs and all(r["verdict"] == "pass" for r in runs), [r.get("verdict") for r in runs]
    assert sorted(j["repeat"] for j in runs[0]["jobs"]) == list(range(1, repeats + 1))
    # the gate's artifact, per batch (the test job's batches carry the
    # verdict it measured until too)
    cmp_files = sorted(p for p in (arts / "gate").rglob("compare.json") if "latest" not in p.parts)
    assert len(cmp_files) == len(runs), cmp_files
    v = json.loads(cmp_files[0].read_text())
    # one verdict over every batch: the same in each batch's run dir
    assert all(json.loads(p.read_text())["keys"] == v["keys"] for p in cmp_files)
    assert sorted(v["candidate"]["runs"]) == [r["run_id"] for r in runs], v["candidate"]
    assert all(k["outcome"] != "undecided" for k in v["keys"]), [k["line"] for k in v["keys"]]
    assert all(k["sees"] and k["decided_by"] for k in v["keys"]), v["keys"]
    assert set(v["baseline"]["runs"]) == baseline_runs, (v["baseline"], baseline_runs)
    assert "branch main" in v["baseline"]["source"] and runs[0]["run_id"] not in v["baseline"]["runs"]
    assert v["keys"] and all(k["label"].startswith(f"{BOARD}/preempt/cyclictest") for k in v["keys"]), v["keys"]
    assert list(arts.rglob("regression.html")), "no comparison report"
    assert f"gate exit {v['exit_code']}" in gate, (v["outcome"], gate[-3000:])
    return {**v, "_run": runs[0]}


def test_kernel_push_gets_the_verdict_against_its_branch(kernel_project, ci_projects, store, seeded, tmp_path):
    seed_runs = seeded[3]
    assert len(seed_runs) == 1, "the seed pipeline published nothing"
    r, proj, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), kernel_project["good"],
                                 "push", tmp_path, store, KERNEL_BRANCH="main")
    v = verdict_ran(proj, logs, "kernel push to main", seed_runs, repeats=5)
    # and it feeds main's baseline in turn (every batch)
    assert v["_run"]["run_id"] in stored_runs(store, "main") and seed_runs < stored_runs(store, "main")


@pytest.mark.over_a_minute
def test_kernel_merge_request_gets_the_verdict_against_its_target(kernel_project, ci_projects, store, seeded,
                                                                  tmp_path):
    main_runs = stored_runs(store, "main")
    r, proj, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), kernel_project["good"],
                                 "mr", tmp_path, store, KERNEL_MR_IID="7", KERNEL_TARGET_BRANCH="main",
                                 KERNEL_MR_SOURCE_BRANCH="fix-timers")
    v = verdict_ran(proj, logs, "kernel merge request !7 into main", main_runs, repeats=5)
    # the shipped defaults on an unchanged commit: every key NO-REGRESSION,
    # green; or, where TCG's max spread puts what a key can see above the
    # class's +1000 % (a store baseline of few sessions), not gated: the gate
    # exits 3 and the pipeline passes with warnings (allow_failure), never red
    assert v["outcome"] in ("no-regression", "blind"), [k["line"] for k in v["keys"]]
    if v["outcome"] == "blind":
        assert "gate exit 3" in logs["gate"] and r.returncode == 0, logs["gate"][-3000:] + r.stdout[-3000:]
        assert any(ln.startswith("gate: not gated: ") for ln in gate_lines(logs)), gate_lines(logs)
    else:
        assert "gate exit 0" in logs["gate"] and r.returncode == 0, [k["line"] for k in v["keys"]]
    # the operator's RTLAB_GATE_BUDGETS sets budgets only: the lab's policy holds
    assert "has no regression: section: the lab's default.yaml: regression" in v["policy_source"], v["policy_source"]
    # filed under its own branch: a merge request never feeds its target's baseline
    assert v["_run"]["commit"]["branch"] == "fix-timers"
    assert stored_runs(store, "main") == main_runs and v["_run"]["run_id"] in stored_runs(store, "fix-timers")


@pytest.mark.over_a_minute
def test_rtlab_merge_request_gets_the_verdict_against_its_target(ci_projects, store, seeded, tmp_path):
    main_runs = stored_runs(store, "main")
    # rtlab's own merge request: the pinned Debian source is the kernel under test
    r, proj, logs = run_pipeline(ci_projects["preempt"], None, None, "rtlab-mr", tmp_path, store,
                                 CI_PIPELINE_SOURCE="merge_request_event",
                                 CI_MERGE_REQUEST_TARGET_BRANCH_NAME="main",
                                 CI_MERGE_REQUEST_SOURCE_BRANCH_NAME="faster-gate")
    v = verdict_ran(proj, logs, "rtlab merge request into main", main_runs, repeats=5)
    assert v["_run"]["commit"]["branch"] == "faster-gate"


def test_bad_trigger_variables_fail_the_gate_naming_them(ci_projects, kernel_project, tmp_path):
    """A kernel trigger that says neither its branch nor a merge request, or
    a branch name that is an option: the gate stops (INFRA), never a
    budgets-only pass; nothing is booted for the gate to judge (no test job
    runs: RTLAB_CAMPAIGN is a file that is not there)."""
    for name, extra, words in [
            ("no-branch", {}, "KERNEL_BRANCH is empty"),
            ("option", {"KERNEL_MR_IID": "3", "KERNEL_TARGET_BRANCH": "--all"}, "KERNEL_TARGET_BRANCH=--all"),
            ("iid", {"KERNEL_MR_IID": "3;reboot", "KERNEL_TARGET_BRANCH": "main"}, "KERNEL_MR_IID=3;reboot")]:
        env = {**os.environ, "KERNEL_REPO": "x", "KERNEL_SHA": "a" * 40, **extra}
        env.pop("KERNEL_BRANCH", None)
        r = subprocess.run(["bash", "-c", f'. "{ROOT}/ci/verdict.sh" || echo FAILED'], capture_output=True,
                           text=True, env=env)
        assert "FAILED" in r.stdout and words in r.stderr, (name, r.stdout, r.stderr)


def forget_builds_of(commit: str) -> None:
    """Drop *commit*'s builds from the runner's kernel build cache (never
    its compiler cache): a claim about how a build was made needs a build
    made now, not one an earlier run on this machine left (built cold, say,
    before any other commit had warmed ccache)."""
    for record in (lab_runner().cache / "kernel" / "builds" / ARCH).glob("*/build.json"):
        try:
            if json.loads(record.read_text()).get("commit") == commit:
                shutil.rmtree(record.parent)
        except (OSError, ValueError):
            continue


@pytest.mark.over_a_minute
def test_latency_bug_fails_the_gate_on_the_budget(kernel_project, tmp_path_factory, tmp_path):
    """A kernel merge request of the latency-bug commit, triggered with a
    campaign from outside the lab's repository (as the merge request could
    name one in its own tree) whose budget file beside it allows 1000 s: the campaign chooses
    what is measured, never how it is judged. The test job and the gate judge
    by the operator's RTLAB_GATE_BUDGETS, and the gate says so: FAIL.

    The lab's campaign names preempt and preempt-iso (`rtlab ci matrix`
    makes the matrices): one build job compiles the PREEMPT_DYNAMIC kernel
    both boot, and the preempt-iso job boots it with CPU 1 isolated and
    measures there."""
    forget_builds_of(kernel_project["latency"])
    # 3 s: a window that holds several of the hog's 400 ms stalls in its one run
    project = make_ci_project(tmp_path_factory.mktemp("rtlab-ci-iso") / "preempt", ["preempt", "preempt-iso"],
                              duration_s=3)
    outside = lab_runner().workdir("kernel-tree-rtlab")
    (outside / "loose.yaml").write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 1000000000}}}}\n')
    (outside / "campaign.yaml").write_text(
        (project / "campaign.yaml").read_text().replace("budgets: budgets.yaml", "budgets: loose.yaml"))
    lab_runner().chown(outside)
    # a kernel merge request gated on budgets only (RTLAB_REGRESSION=0): one
    # run is enough (the trigger's RTLAB_REPEAT wins over the workflow's)
    r, proj, logs = run_pipeline(project, _repo(kernel_project), kernel_project["latency"],
                                 "latency", tmp_path, KERNEL_MR_IID="9", KERNEL_TARGET_BRANCH="main",
                                 KERNEL_MR_SOURCE_BRANCH="timers", RTLAB_REGRESSION="0", RTLAB_REPEAT="1",
                                 RTLAB_CAMPAIGN=str(outside / "campaign.yaml"))
    assert r.returncode != 0, "pipeline passed a 400 ms non-preemptible section"
    lines = gate_lines(logs)
    fails = [ln for ln in lines if ln.startswith("gate: FAIL")]
    assert fails and not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert any(f"{BOARD}/preempt/cyclictest/idle" in ln and f">= budget {BUDGET_MAX_US} us" in ln
               for ln in fails), lines
    assert any(ln.startswith("gate: budgets only (kernel merge request !9 into main") for ln in lines), lines
    judged = [ln for ln in lines if " judged by budgets " in ln]
    assert judged and all(f"judged by budgets {proj / 'budgets.yaml'}" in ln for ln in judged), lines
    assert "loose.yaml" not in "\n".join(judged)
    assert "gate exit 1" in logs["gate"]
    # the test job failed with exit 1 (allowed, not retried), not infra
    test_log = next(v for k, v in logs.items() if k.startswith("test") and "preempt-iso" not in k)
    assert "rtlab run exit 1" in test_log
    # one kernel built, booted by both test jobs: preempt-iso with CPU 1 isolated, measured there
    (build,) = [k for k in logs if k.startswith("build")]
    assert "aarch64" in build and "preempt" in build and "iso" not in build, sorted(logs)
    assert len([k for k in logs if k.startswith("test")]) == 2, sorted(logs)
    arts = proj / ".gitlab-ci-local" / "artifacts"
    jobs = {j["variant"]: j for p in arts.rglob("run.json") if "latest" not in p.parts
            for j in json.loads(p.read_text())["jobs"]}
    assert set(jobs) == {"preempt", "preempt-iso"}, set(jobs)
    iso = jobs["preempt-iso"]
    assert iso["infra_error"] is None and iso["build_error"] is None and iso["verdict"] in ("pass", "fail"), iso
    assert iso["kernel"]["version"] == jobs["preempt"]["kernel"]["version"]  # the one build
    assert iso["kernel"]["isolated"] == "1" and "isolcpus=" in iso["kernel"]["cmdline"], iso["kernel"]
    assert [t["cpu"] for m in iso["measurements"] for t in m["output"]["threads"]] == [1]
    # one changed file: ccache served the rest of the tree from another clone
    built = json.loads(next(arts.rglob("kernel/aarch64/preempt/build.json")).read_text())
    assert built["commit"] == kernel_project["latency"]
    assert not json.loads(next(arts.rglob("kernel/aarch64/preempt/build-result.json")).read_text()).get("cached")
    cc = built["ccache"]
    assert cc["hits"] >= 0.95 * (cc["hits"] + cc["misses"]), cc


def test_latency_bug_merge_request_is_a_regression_with_the_shipped_defaults(kernel_project, store, seeded,
                                                                             tmp_path_factory, tmp_path):
    # under a budget the 400 ms stall holds (5 s): only the regression verdict
    # can fail it, against main's baseline in the store, measured until decided
    loose = make_ci_project(tmp_path_factory.mktemp("rtlab-ci-loose") / "preempt", "preempt", budget_us=5_000_000)
    r, proj, logs = run_pipeline(loose, _repo(kernel_project), kernel_project["latency"], "mr-latency", tmp_path,
                                 store, KERNEL_MR_IID="8", KERNEL_TARGET_BRANCH="main",
                                 KERNEL_MR_SOURCE_BRANCH="hog")
    lines = gate_lines(logs)
    assert r.returncode != 0 and "gate exit 1" in logs["gate"], lines
    assert any(ln.startswith("gate: PASS over") for ln in lines), lines  # the budgets held
    reg = [ln for ln in lines if ln.endswith(": REGRESSION") and f"{BOARD}/preempt/cyclictest/idle: max +" in ln]
    assert reg and " sees +" in reg[0], lines
    assert "gate: exit 1 (budgets PASS, regression verdict REGRESSION)" in lines, lines


# make test-long: make test proves a commit that cannot be built into a variant
# with tests/integration/test_kernel_build.py::test_dropped_preempt_rt_fails_before_anything_is_compiled
# and the gate's build_error FAIL with tests/unit/test_junit_ci.py
@pytest.mark.long
def test_dropped_preempt_rt_fails_the_gate_as_build_error(kernel_project, ci_projects, tmp_path):
    r, proj, logs = run_pipeline(ci_projects["rt"], _repo(kernel_project), kernel_project["no-rt"],
                                 "no-rt", tmp_path, KERNEL_BRANCH="sched", RTLAB_REPEAT="1")
    assert r.returncode != 0
    lines = gate_lines(logs)
    assert any(ln.startswith("gate: FAIL") and "build_error" in ln and "CONFIG_PREEMPT_RT" in ln
               for ln in lines), lines
    assert not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert "gate exit 1" in logs["gate"]


#: a lab's policy that pairs qemu-tcg (shipped: the store, README "Paired
#: boots"), as the operator's RTLAB_GATE_BUDGETS; min_runs 2 (shipped: 3)
PAIRED_POLICY = """regression:
  statistics: {"*": [p99, p99.9], qemu-tcg: [max]}
  min_runs: 2
  baseline: {"*": store, qemu-tcg: paired}
  min_effect:
    qemu-tcg: {relative: 0.5, abs_us: 200, max: {relative: 1.0, abs_us: 20000}}
"""


# make test-long: paired boots are proven by test_paired.py; this is their pipeline form (6 boots)
@pytest.mark.long
def test_kernel_merge_request_on_a_paired_class_boots_both_commits(kernel_project, tmp_path_factory, tmp_path):
    """A kernel merge request whose board class's baseline is paired: the
    test job boots the merge request's diff base (KERNEL_BASE_SHA) and its
    head alternately (`rtlab paired`) and the gate judges the pairs, with
    no store at all. The head is the latency-bug commit under a budget it
    holds (5 s), so only the regression verdict can catch it: with three
    pairs it may be REGRESSION or UNDECIDED (two degrees of freedom: one
    quiet baseline boot against a stalled one widens the interval a lot;
    at two pairs it was UNDECIDED once, max x67 [0.93, 537]), never shown
    unchanged; its power is test_paired.py's."""
    good, bad = kernel_project["good"], kernel_project["latency"]
    ci = make_ci_project(tmp_path_factory.mktemp("rtlab-ci-paired") / "preempt", "preempt",
                         budget_us=5_000_000, regression=PAIRED_POLICY)
    r, proj, logs = run_pipeline(ci, _repo(kernel_project), bad, "paired-mr", tmp_path, None,
                                 KERNEL_MR_IID="9", KERNEL_TARGET_BRANCH="main", KERNEL_MR_SOURCE_BRANCH="hog",
                                 KERNEL_BASE_SHA=good, RTLAB_PAIRS="3",
                                 # (the lab's policy, as an operator sets it: run_pipeline's
                                 # RTLAB_GATE_BUDGETS, never the campaign's own)
                                 RTLAB_CI_PAIRED_DIR=str(lab_runner().cache / "ci" / "test-kernel-paired"))
    test_log = next(v for k, v in logs.items() if k.startswith("test"))
    assert "baseline method for qemu-aarch64: paired (budgets.yaml: regression: qemu-tcg: paired)" in test_log, \
        test_log[-3000:]
    assert "rtlab run exit 0" in test_log, test_log[-3000:]  # the candidate runs' budgets held
    # the test job's artifact: results/BOARD/VARIANT/{pairs.json,baseline/,candidate/}
    (session,) = {p.parent for p in (proj / ".gitlab-ci-local" / "artifacts").rglob("pairs.json")}
    assert session.parts[-2:] == (BOARD, "preempt"), session
    pairs = json.loads((session / "pairs.json").read_text())
    assert pairs["commits"] == {"baseline": good, "candidate": bad}
    assert [p["order"] for p in pairs["pairs"]] == [["baseline", "candidate"], ["candidate", "baseline"],
                                                   ["baseline", "candidate"]]
    for p in pairs["pairs"]:  # each side booted its own commit's kernel
        for side, sha in (("baseline", good), ("candidate", bad)):
            run = json.loads((session / side / Path(p[side]).name / "run.json").read_text())
            assert run["commit"]["sha"] == sha, run["commit"]
            # filed under the merge request's branch: the candidate only
            assert run["commit"].get("branch") == {"baseline": None, "candidate": "hog"}[side], run["commit"]
    lines = gate_lines(logs)
    assert (f"gate: regression verdict for the kernel merge request !9 into main: paired boots against commit "
            f"{good}: results/{BOARD}/preempt") in lines, lines
    assert not [ln for ln in lines if "runs of branch main" in ln], lines  # no store was asked
    assert f"gate: paired boots: results/{BOARD}/preempt (3 pairs)" in lines, lines
    assert "gate: PASS over 3 runs" in lines, lines
    v = json.loads(next((proj / ".gitlab-ci-local").rglob(f"results/{BOARD}/preempt/compare.json")).read_text())
    assert v["method"] == "paired" and v["policy"]["source"] == "budgets.yaml: regression", v
    (key,) = v["keys"]
    (mx,) = key["stats"]
    assert key["key"] == f"{BOARD}/preempt/cyclictest/idle" and mx["name"] == "max" and mx["pairs"] == 3, key
    assert min(mx["candidate"]) > 300_000, mx  # the 400 ms hog in every boot of the head: its kernel booted
    assert v["outcome"] in ("regression", "undecided"), v
    assert f"gate exit {v['exit_code']}" in logs["gate"], logs["gate"][-3000:]
    print(f"\npaired kernel MR, 3 pairs: {v['outcome']}: max x{mx['ratio']} [{mx['lower']}, {mx['upper']}]")


def _repo(kernel_project: dict) -> Path:
    return Path(kernel_project["_path"])


#: a budget every TCG measurement breaks: the gate's FAIL then shows that the
#: measurements reached it through the results path (a pass could also be an
#: empty judgement), and lava-run's verdict on the same job is FAIL as well
LAVA_BUDGET_US = 1


def board_device_healthy(lab, st) -> None:
    """Until the board's device has passed its health check (the lab's first
    job on it): a Bad device would leave a pipeline's job queued until
    --wait gives up."""
    deadline = time.monotonic() + 1500
    while (health := lab.api(st, f"devices/{BOARD}-01/")["health"]) not in ("Good", "Bad"):
        assert time.monotonic() < deadline, f"{BOARD}-01 still {health} after 1500 s"
        time.sleep(5)
    assert health == "Good", f"{BOARD}-01 failed its health check: see {lab.dir / 'log'}"


# make test-long: make test proves the LAVA path's parts one by one:
# test_lava_run.py::test_each_arch_runs_through_lava_run_ingests_and_gates (render, run,
# ingest, gate) and test_lava_server.py::test_server_job_equals_lava_run (the server)
@pytest.mark.long
def test_lava_lab_runs_the_test_stage_and_the_same_gate_judges_it(lava_lab, tmp_path_factory, tmp_path):
    """RTLAB_LAB=lava (rtlab's own pipeline, "Run pipeline" in the web UI):
    no kernel build and no labgrid test job; test-lava renders the campaign's
    jobs, submits them through lavacli to the runner's local LAVA lab
    (RTLAB_LAVA_URI empty: --local-lab), waits, fetches and ingests them into
    results/<board>/<variant>/, and the gate judges them as it judges
    labgrid's. The same job run by lava-run here, beside the pipeline, must
    get the same verdict."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import rtlab, rtlab_retry_infra

    lab, st = lava_lab
    board_device_healthy(lab, st)
    proj = make_ci_project(tmp_path_factory.mktemp("rtlab-ci-lava") / "lava", "rt", budget_us=LAVA_BUDGET_US)
    # the same job for lava-run: the CI project's campaign, rendered as test-lava renders it
    jobs = tmp_path / "lava-run-jobs"
    res = rtlab("lava", "render", "--campaign", proj / "campaign.yaml", "--board", BOARD, "--variant", "rt",
                "--no-lab-boards", "--out", jobs)
    assert res.returncode == 0, res.stdout + res.stderr
    with ThreadPoolExecutor(1) as pool:
        # judged by the operator's budgets, as the pipeline's RTLAB_GATE_BUDGETS judges (a
        # spec's own budget file is never used: docs/design/security.md)
        local = pool.submit(rtlab_retry_infra, "lava", "run", jobs, "--out", tmp_path / "records", "--results",
                            tmp_path / "lava-run-results", "--budgets", proj / "budgets.yaml", timeout=1800)
        r, clone, logs = run_pipeline(proj, None, None, "lava", tmp_path, as_root=True, CI_PIPELINE_SOURCE="web",
                                      RTLAB_LAB="lava", RTLAB_LAVA_LAB_DIR=str(lab.dir))
        via_run = local.result()
    out = r.stdout[-6000:] + r.stderr[-2000:]
    # the test stage was LAVA's: no kernel built, no labgrid job
    assert not [k for k in logs if k.startswith("build") or k.startswith("test ") or k.startswith("test:")
                or k == "test"], (sorted(logs), out)
    test_log = next((v for k, v in logs.items() if k.startswith("test-lava")), None)
    assert test_log is not None, (sorted(logs), out)
    assert "rtlab lava submit exit 1" in test_log, test_log[-4000:]
    # the gate judged what came back: FAIL on the budget, never INFRA, exit 1
    assert r.returncode != 0, out
    lines = gate_lines(logs)
    fails = [ln for ln in lines if ln.startswith("gate: FAIL")]
    assert fails and not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert any(f"{BOARD}/rt/cyclictest/idle" in ln and f">= budget {LAVA_BUDGET_US} us" in ln for ln in fails), lines
    assert "gate exit 1" in logs["gate"], logs["gate"][-3000:]
    # the one results path: results/<board>/<variant>/<run>/run.json, whose
    # measurement's evidence is the server's own record of the job
    arts = clone / ".gitlab-ci-local" / "artifacts"
    runs = [p for p in arts.rglob("run.json") if "latest" not in p.parts]
    assert len(runs) == 1, runs
    run = json.loads(runs[0].read_text())
    (job,) = run["jobs"]
    (m,) = job["measurements"]
    assert run["verdict"] == job["verdict"] == m["verdict"] == "fail" and job["infra_error"] is None, job
    assert (job["board"], job["variant"]) == (BOARD, "rt") and job["kernel"]["realtime"]
    evidence = json.loads(next(runs[0].parent.rglob("lava/job.json")).read_text())
    jid = str(evidence["id"])
    records = list(arts.rglob(f"lava-records/job-{jid}/job.json"))
    assert records, f"no lava-records/job-{jid} in the test-lava artifacts"
    # the job is the server's: lavacli shows it, Finished on the lab's device
    show = subprocess.run(["lavacli", "--uri", st.uri, "jobs", "show", jid, "--json"], capture_output=True,
                          text=True, timeout=120)
    assert show.returncode == 0, show.stdout + show.stderr
    server_job = json.loads(show.stdout)
    assert (server_job["state"], server_job["health"]) == ("Finished", "Complete"), server_job
    assert server_job["device"] == f"{BOARD}-01"
    assert server_job["description"].startswith(f"rtlab ci-test {BOARD} rt cyclictest@idle"), server_job
    cases = {c["name"]: c for c in lab.api(st, f"jobs/{jid}/tests/?limit=200")["results"]}
    assert float(cases["t0-max-latency"]["measurement"]) == \
        pytest.approx(m["output"]["threads"][0]["max_us"], abs=1)
    # lava-run gives the same verdict on the same job, for the same reason
    assert via_run.returncode == 1, via_run.stdout[-3000:] + via_run.stderr[-2000:]
    local_run = json.loads((Path(via_run.stdout.split("results: ")[-1].split()[0]) / "run.json").read_text())
    (l_job,) = local_run["jobs"]
    (l_m,) = l_job["measurements"]
    assert (l_job["verdict"], l_m["verdict"]) == (job["verdict"], m["verdict"])
    assert l_job["kernel"]["version"] == job["kernel"]["version"]
    assert [t["cpu"] for t in l_m["output"]["threads"]] == [t["cpu"] for t in m["output"]["threads"]]
    assert l_m["budget"]["max_us"] == m["budget"]["max_us"] == LAVA_BUDGET_US


# make test-long: the LAVA pipeline is proven by
#   test_lava_lab_runs_the_test_stage_and_the_same_gate_judges_it, the commit's own kernel in a pipeline by
#   the kernel push
@pytest.mark.long
def test_kernel_push_on_a_lava_lab_boots_the_commits_own_kernel(lava_lab, kernel_project, ci_projects, seeded,
                                                                 tmp_path):
    """RTLAB_LAB=lava for a kernel project's push: test-lava renders the jobs
    with kernels built from the pushed commit (`rtlab lava render
    --kernel-tree`: the build the seeded pipeline left in the kernel cache),
    the lab's worker boots that kernel and the gate judges it; a commit whose
    rt variant does not build is FAIL with the build error, never INFRA, as
    in the labgrid test job."""
    lab, st = lava_lab
    board_device_healthy(lab, st)
    good = kernel_project["good"]
    r, clone, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), good, "lava-good", tmp_path,
                                  as_root=True,
                                  RTLAB_LAB="lava", RTLAB_LAVA_LAB_DIR=str(lab.dir), KERNEL_BRANCH="main",
                                  RTLAB_REGRESSION="0", RTLAB_REPEAT="1")
    out = r.stdout[-6000:] + r.stderr[-2000:]
    assert r.returncode == 0, out
    test_log = next((v for k, v in logs.items() if k.startswith("test-lava")), None)
    assert test_log is not None, (sorted(logs), out)
    assert "rtlab lava submit exit 0" in test_log, test_log[-4000:]
    assert [ln for ln in gate_lines(logs) if ln.startswith("gate: PASS")], gate_lines(logs)
    arts = clone / ".gitlab-ci-local" / "artifacts"
    (run_json,) = [p for p in arts.rglob("run.json") if "latest" not in p.parts]
    run = json.loads(run_json.read_text())
    assert run["commit"]["sha"] == good
    (job,) = run["jobs"]
    assert (job["board"], job["variant"], job["verdict"]) == (BOARD, "preempt", "pass"), job
    # the kernel the job staged is the commit's build, and the board ran it
    # (the boot definition checked `uname -r` against it: else INFRA)
    spec = json.loads(next(run_json.parent.rglob("job-spec.json")).read_text())
    assert spec["kernel"]["commit"] == good and "/kernel/builds/" in spec["kernel"]["path"], spec["kernel"]
    assert job["kernel"]["release"] == spec["kernel"]["release"] and job["kernel"]["version"] == spec["kernel"]["uname_v"]
    evidence = json.loads(next(run_json.parent.rglob("lava/job.json")).read_text())
    assert evidence["description"].endswith(good[:12]) and evidence["device"] == f"{BOARD}-01", evidence

    r, clone, logs = run_pipeline(ci_projects["rt"], _repo(kernel_project), kernel_project["no-rt"], "lava-no-rt",
                                  tmp_path, as_root=True, RTLAB_LAB="lava", RTLAB_LAVA_LAB_DIR=str(lab.dir), KERNEL_BRANCH="sched",
                                  RTLAB_REGRESSION="0", RTLAB_REPEAT="1")
    assert r.returncode != 0
    test_log = next((v for k, v in logs.items() if k.startswith("test-lava")), "")
    assert "rtlab lava submit exit 1" in test_log, test_log[-4000:]
    lines = gate_lines(logs)
    assert any(ln.startswith("gate: FAIL") and "build_error" in ln and "CONFIG_PREEMPT_RT" in ln
               for ln in lines), lines
    assert not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert "gate exit 1" in logs["gate"]
