"""The GitLab pipeline (.gitlab-ci.yml), run offline by gitlab-ci-local 4.73.0
with the shell executor, against a real kernel project: a git repository made
from Debian's linux-source-6.12 (tests/integration/kernel_project.py).

The pipeline runs as the kernel project's trigger starts it (source
`pipeline`, KERNEL_REPO + KERNEL_SHA), in a throw-away rtlab CI project that
holds this checkout's .gitlab-ci.yml with the matrix narrowed to one board
and one variant, a 3 s cyclictest and a test budget (qemu-tcg max 200 ms);
jobs call rtlab from this checkout (RTLAB_HOME).

    good     the unchanged kernel                         -> pipeline passes
    latency  a kthread busy for 400 ms without preemption -> gate FAIL naming the budget
    no-rt    PREEMPT_RT made unreachable in Kconfig       -> gate FAIL, build_error

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
from pathlib import Path

import pytest
import yaml

from kernel_project import make_kernel_project
from rtlab.kernel import cache_root

ROOT = Path(__file__).resolve().parents[2]
BOARD, ARCH = "qemu-aarch64", "aarch64"
BUDGET_MAX_US = 200_000


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
    assert test["allow_failure"] == {"exit_codes": [1]}
    assert test["retry"]["exit_codes"] == [2] and test["retry"]["max"] == 2
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
    assert ci["prune"]["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
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
    schedule = [{"if": '$CI_PIPELINE_SOURCE == "schedule"'}]
    assert ci["regressions"]["rules"] == schedule and ci["regressions"]["allow_failure"] == {"exit_codes": [1]}
    assert '"$RTLAB" regressions' in " ".join(ci["regressions"]["script"])
    assert "schedule" in ci["reference"]["rules"][0]["if"]
    assert "--campaign reference" in " ".join(ci["reference"]["script"])
    sources = " ".join(r.get("if", "") for r in ci["workflow"]["rules"])
    for s in ("merge_request_event", "schedule", "pipeline", "trigger", "push"):
        assert s in sources, s


@pytest.fixture(scope="module")
def kernel_project(tmp_path_factory):
    from rtlab.kernel import ensure_source
    src = ensure_source(progress=None)
    dest = tmp_path_factory.mktemp("kernel") / "linux"
    return {**make_kernel_project(src.path, dest), "_path": str(dest)}


def make_ci_project(proj: Path, variant: str) -> Path:
    """The rtlab CI project: .gitlab-ci.yml narrowed to one board × variant."""
    proj.mkdir(parents=True)
    ci = yaml.safe_load((ROOT / ".gitlab-ci.yml").read_text())
    ci["build"]["parallel"]["matrix"] = [{"ARCH": [ARCH], "VARIANT": [variant]}]
    ci["test"]["parallel"]["matrix"] = [{"BOARD": [BOARD], "VARIANT": [variant]}]
    (proj / ".gitlab-ci.yml").write_text(yaml.safe_dump(ci, sort_keys=False))
    (proj / "budgets.yaml").write_text(textwrap.dedent(f"""
        budgets:
          qemu-tcg: {{"*": {{"*": {{"*": {{max_us: {BUDGET_MAX_US}}}}}}}}}
    """))
    (proj / "campaign.yaml").write_text(textwrap.dedent(f"""
        name: ci-test
        budgets: budgets.yaml
        boards: [{BOARD}]
        variants: [{variant}]
        suites:
          - name: cyclictest
            loads: [idle]
            params: {{interval_us: 1000, duration_s: 3, priority: 90, histogram_us: 2000}}
            overrides: {{qemu-tcg: {{histogram_us: 20000}}}}
    """))
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "ci"]):
        subprocess.run(["git", "-C", str(proj), *args], check=True)
    return proj


@pytest.fixture(scope="module")
def ci_projects(tmp_path_factory):
    base = tmp_path_factory.mktemp("rtlab-ci")
    return {v: make_ci_project(base / v, v) for v in ("preempt", "rt")}


def run_pipeline(ci_project: Path, kernel_repo: Path, sha: str, name: str, tmp_path: Path):
    """One pipeline as the kernel project's trigger job starts it."""
    proj = tmp_path / name
    subprocess.run(["git", "clone", "-q", str(ci_project), str(proj)], check=True)
    variables = {
        "CI_PIPELINE_SOURCE": "pipeline", "KERNEL_REPO": str(kernel_repo), "KERNEL_SHA": sha,
        "RTLAB_HOME": str(ROOT), "RTLAB_CAMPAIGN": str(proj / "campaign.yaml"), "RTLAB_PUBLISH": "0",
        # the runner's one kernel work tree (kept between runs, as on a runner)
        "RTLAB_CI_KERNEL_DIR": str(cache_root() / "ci" / "test-kernel"),
    }
    cmd = [GCL, "--force-shell-executor", "--no-color", "--concurrency", "1"]
    for k, v in variables.items():
        cmd += ["--variable", f"{k}={v}"]
    r = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, timeout=3 * 3600,
                       env={**os.environ, "GCL_IGNORE_PREDEFINED_VARS": "CI_PIPELINE_SOURCE"})
    logs = {p.stem: p.read_text() for p in (proj / ".gitlab-ci-local" / "output").glob("*.log")}
    return r, proj, logs


def gate_lines(logs: dict) -> list[str]:
    gate = logs.get("gate", "")
    return [ln.strip() for ln in gate.splitlines() if "gate: " in ln and "echo" not in ln]


def test_good_commit_passes(kernel_project, ci_projects, tmp_path):
    r, proj, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), kernel_project["good"],
                                 "good", tmp_path)
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
    assert "gate exit 0" in logs["gate"], logs["gate"][-3000:]
    assert [ln for ln in gate_lines(logs) if ln.startswith("gate: PASS")], gate_lines(logs)
    arts = proj / ".gitlab-ci-local" / "artifacts"
    runs = list(arts.rglob("run.json"))
    assert len(runs) == 1, runs
    run = json.loads(runs[0].read_text())
    assert run["verdict"] == "pass" and run["commit"]["sha"] == kernel_project["good"]
    job = next(j for j in run["jobs"] if j["variant"] == "preempt")
    assert job["board"] == BOARD and not job.get("build_error") and not job.get("infra_error")
    # the kernel under test was booted: built from the commit, not Debian's
    built = json.loads(next(arts.rglob("kernel/aarch64/preempt/build.json")).read_text())
    assert built["commit"] == kernel_project["good"] and built["preempt"] == "dynamic"
    junit = list(arts.rglob("junit/*.xml"))
    assert junit and "<testcase" in junit[0].read_text()


def test_latency_bug_fails_the_gate_on_the_budget(kernel_project, ci_projects, tmp_path):
    r, proj, logs = run_pipeline(ci_projects["preempt"], _repo(kernel_project), kernel_project["latency"],
                                 "latency", tmp_path)
    assert r.returncode != 0, "pipeline passed a 400 ms non-preemptible section"
    lines = gate_lines(logs)
    fails = [ln for ln in lines if ln.startswith("gate: FAIL")]
    assert fails and not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert any(f"{BOARD}/preempt/cyclictest/idle" in ln and f">= budget {BUDGET_MAX_US} us" in ln
               for ln in fails), lines
    assert "gate exit 1" in logs["gate"]
    # the test job failed with exit 1 (allowed, not retried), not infra
    test_log = next(v for k, v in logs.items() if k.startswith("test"))
    assert "rtlab run exit 1" in test_log
    # one changed file: ccache served the rest of the tree from another clone
    arts = proj / ".gitlab-ci-local" / "artifacts"
    built = json.loads(next(arts.rglob("kernel/aarch64/preempt/build.json")).read_text())
    assert built["commit"] == kernel_project["latency"]
    cc = built["ccache"]
    assert cc["hits"] >= 0.95 * (cc["hits"] + cc["misses"]), cc


def test_dropped_preempt_rt_fails_the_gate_as_build_error(kernel_project, ci_projects, tmp_path):
    r, proj, logs = run_pipeline(ci_projects["rt"], _repo(kernel_project), kernel_project["no-rt"],
                                 "no-rt", tmp_path)
    assert r.returncode != 0
    lines = gate_lines(logs)
    assert any(ln.startswith("gate: FAIL") and "build_error" in ln and "CONFIG_PREEMPT_RT" in ln
               for ln in lines), lines
    assert not [ln for ln in lines if ln.startswith("gate: INFRA")], lines
    assert "gate exit 1" in logs["gate"]


def _repo(kernel_project: dict) -> Path:
    return Path(kernel_project["_path"])
