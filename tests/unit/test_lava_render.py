"""`rtlab lava render`: the default campaign as LAVA jobs that pass LAVA's own
schema (Debian's lava-common, strict) and run exactly what the labgrid path runs."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from rtlab.targets.boards import find_board
from rtlab.plan.campaign import load_campaign
from rtlab.lava import onboard
from rtlab.lava.boards import load_lava_boards
from rtlab.lava.devices import qemu_device_text
from rtlab.lava.render import fact_commands, load_job, render_campaign
from rtlab.lava.schema import validate_texts
from rtlab.suites import SUITES
from rtlab.suites.board import READ_LOOP, read_kernel_facts, shell_line, tool_wrapper

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("lava-jobs")
    index = render_campaign(load_campaign(), out)
    return out, index


def jobs_of(out, index):
    return {(j["board"], j["variant"], j["suite"]): (out / j["file"], *load_job(out / j["file"]))
            for j in index["jobs"]}


def test_every_job_of_the_default_campaign_passes_lavas_schema(rendered):
    out, index = rendered
    texts = [(j["file"], (out / j["file"]).read_text()) for j in index["jobs"]]
    results, version = validate_texts(texts)
    assert version.startswith("20")  # Debian's lava-common, e.g. 2023.01
    assert len(results) == len(index["jobs"]) >= 10
    assert {k: e for k, e in results.items() if e} == {}


def test_the_schema_check_is_lavas_and_strict(rendered):
    out, index = rendered
    path = out / index["jobs"][0]["file"]
    job = yaml.safe_load(path.read_text())
    # `expected` only exists from LAVA 2026.01: 2023.01 must reject it
    job["actions"][2]["test"]["definitions"][1]["expected"] = ["t0-max-latency"]
    bad_ctx = yaml.safe_load(path.read_text())
    bad_ctx["context"]["rtlab_board"] = "x"  # not a whitelisted context key
    no_to = yaml.safe_load(path.read_text())
    del no_to["actions"][0]["deploy"]["to"]
    results, _ = validate_texts([("expected", yaml.safe_dump(job)), ("context", yaml.safe_dump(bad_ctx)),
                                 ("no-to", yaml.safe_dump(no_to))])
    assert all(results.values()), results
    assert "expected" in results["expected"]


def test_campaign_boards_variants_suites_loads_become_jobs(rendered):
    out, index = rendered
    campaign = load_campaign()
    lava_boards = load_lava_boards()
    jobs = jobs_of(out, index)
    na = {(n["board"], n["variant"]) for n in index["not_available"]}
    boards = [b for b in campaign.boards if b.name in lava_boards] + \
             [lb.board for lb in lava_boards.values() if lb.lab]
    expect = {(b.name, v.name, f"{s.name}@{load}") for b in boards for v in campaign.variants
              for s in campaign.suites for load in s.loads if (b.name, v.name) not in na}
    # what is not rendered is a load with a host side (network) or memory
    # scaling on a board without a memory figure; idle always renders
    not_rendered = {(n["board"], n["variant"], n["suite"]): n["reason"] for n in index["not_rendered"]}
    assert all(not s.endswith("@idle") for _, _, s in not_rendered)
    assert all("host side" in why or "memory" in why for why in not_rendered.values()), not_rendered
    assert set(jobs) == expect - set(not_rendered) and jobs
    # this machine as a board cannot be booted by LAVA: said, not silently dropped
    assert [s["board"] for s in index["skipped_boards"]] == ["local"]
    # Debian's arm64 kernels cannot be preempt=none/full: listed like `rtlab run` does
    assert ("qemu-aarch64", "none") in na


def test_qemu_jobs_boot_what_labgrid_boots_and_run_the_same_command(rendered):
    out, index = rendered
    campaign = load_campaign()
    lg_jobs = {(j.board.name, j.variant.name): j for j in campaign.jobs()}
    for (board, variant, suite_id), (_, job, spec) in jobs_of(out, index).items():
        lb = load_lava_boards()[board]
        if lb.lab:
            continue
        lg = lg_jobs[(board, variant)]
        run = next(r for r in lg.suites if r.id == suite_id)
        argv = SUITES[run.suite].command(run)
        command = shell_line(argv)
        # same tool, same arguments, same wrapper as rtlab.suites.board.run_tool
        steps = job["actions"][2]["test"]["definitions"][1]["repository"]["run"]["steps"]
        assert tool_wrapper(argv) in steps
        assert job["metadata"]["rtlab.command"] == command == spec["command"]
        # the kernel and command line the labgrid path stages for this board
        boot_args = lg.variant.boot_args_for(lg.board.isolate_cpu, lg.board.cpus)
        kernel = job["actions"][0]["deploy"]["images"]["kernel"]
        assert kernel["image_arg"] == f'-kernel {{kernel}} -append "{lb.qemu.kernel_args(boot_args)}"'
        assert Path(kernel["url"][len("file://"):]) == Path(spec["kernel"]["path"])
        ramdisk = job["actions"][0]["deploy"]["images"]["ramdisk"]
        assert ramdisk["compression"] == "gz" and ramdisk["format"] == "cpio.newc"
        assert ramdisk["overlays"] == {"lava": True}
        boot = job["actions"][1]["boot"]
        assert boot["method"] == "qemu" and boot["media"] == "tmpfs" and boot["prompts"] == ["rtlab# "]
        assert job["context"]["arch"] in ("amd64", "arm64") and job["context"]["no_kvm"] is True


def test_uboot_job_for_a_real_board(rendered):
    out, index = rendered
    uboot = {k: v for k, v in jobs_of(out, index).items() if k[0] == "rk3568-rock-3a"}
    assert uboot, "the lab board rk3568-rock-3a renders U-Boot jobs"
    path, job, spec = uboot[("rk3568-rock-3a", "rt-iso", "cyclictest@idle")]
    deploy, boot = job["actions"][0]["deploy"], job["actions"][1]["boot"]
    assert deploy["to"] == "tftp" and deploy["kernel"]["type"] == "image"
    assert deploy["ramdisk"]["compression"] == "gz"
    assert deploy["dtb"]["url"].endswith("rockchip/rk3568-rock-3a.dtb")
    assert boot == {"method": "u-boot", "commands": "ramdisk", "timeout": boot["timeout"], "prompts": ["rtlab# "]}
    assert job["device_type"] == "rk3568-rock-3a"
    # the variant's boot args for this board: isolate CPU 3 of 4
    assert job["context"]["extra_kernel_args"] == \
        "isolcpus=nohz,domain,managed_irq,3 nohz_full=3 rcu_nocbs=3 irqaffinity=0-2"
    assert "-a 3 -t 1" in spec["command"]
    assert spec["board"]["budget_class"] == "rk3568"
    # the DTB is the one of the kernel package booted
    dtb = Path(deploy["dtb"]["url"][len("file://"):])
    assert dtb.read_bytes()[:4] == b"\xd0\x0d\xfe\xed" and spec["kernel"]["release"] in str(dtb)


def test_declared_cases_in_metadata_not_in_expected(rendered):
    out, index = rendered
    for (path, job, spec) in jobs_of(out, index).values():
        text = path.read_text()
        assert "\nexpected:" not in text and " expected:" not in text
        declared = job["metadata"]["rtlab.expected"].split(",")
        assert declared == spec["expected"]
        threads = len(spec["suite"]["cpus"])
        want = [f"1_cyclictest-idle/{c}" for c in ["cyclictest", *onboard.rt_case_names(threads)]]
        assert [c for c in declared if c.startswith("1_")] == want
        assert "0_rtlab-boot/kernel-facts" in declared


def test_timeouts_scale_with_suite_duration(tmp_path):
    def campaign(duration):
        f = tmp_path / f"c{duration}.yaml"
        f.write_text(textwrap.dedent(f"""
            name: t{duration}
            budgets: {ROOT}/budgets/default.yaml
            boards: [qemu-x86_64]
            variants: [rt]
            suites:
              - name: cyclictest
                params: {{duration_s: {duration}}}
        """))
        return load_campaign(f)

    def timeouts(duration):
        idx = render_campaign(campaign(duration), tmp_path / f"o{duration}", lab_boards=False)
        job, _ = load_job(tmp_path / f"o{duration}" / idx["jobs"][0]["file"])
        return job["timeouts"]["job"]["minutes"], job["actions"][2]["test"]["timeout"]["minutes"]

    short, long_ = timeouts(5), timeouts(1800)
    # the runner allows a suite twice its duration: so does the test action
    assert long_[1] * 60 >= 2 * 1800 and long_[0] > long_[1] > short[1]


def test_facts_are_what_kernel_facts_reads():
    cmds = fact_commands()
    assert "uname -m" in cmds and f"{READ_LOOP} < /proc/cmdline" in cmds
    # replaying the commands with answers gives the per-command reader's result (what the labgrid path batches)
    from rtlab.lava.ingest import _ReplayShell
    sh = _ReplayShell({c: ([f"answer {i}"], 0) for i, c in enumerate(cmds)})
    facts = read_kernel_facts(sh)
    assert not sh.missing and facts["release"] == "answer 0"


def test_shipped_qemu_device_dictionaries_are_generated_from_the_env_files():
    for lb in load_lava_boards().values():
        if lb.boot != "qemu":
            continue
        assert lb.device.read_text() == qemu_device_text(lb), \
            f"{lb.device} is stale: .venv/bin/python -m rtlab.lava.devices --write"
        dev = yaml.safe_load(lb.device.read_text())
        opts = dev["actions"]["boot"]["methods"]["qemu"]["parameters"]["options"]
        assert "-enable-kvm" not in " ".join(opts) and "-accel tcg" in opts
        assert f"-smp {find_board(lb.name).cpus}" in opts
        # what lava.md says a hand-written dictionary must have
        assert dev["constants"]["posix"]["lava_test_sh_cmd"] == "/bin/sh"
        assert dev["actions"]["deploy"]["methods"]["image"]["parameters"]["guest"]["size"]


def test_cli_render_validates_and_reports(tmp_path):
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "lava", "render", "--out", str(tmp_path / "j"),
                          "--board", "qemu-aarch64", "--variant", "rt"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1/1 jobs valid" in res.stdout
    index = json.loads((tmp_path / "j" / "index.json").read_text())
    assert [(j["board"], j["variant"]) for j in index["jobs"]] == [("qemu-aarch64", "rt")]
    # --artifacts-url: the lab serves <out>/artifacts/ over HTTP, each file under its content's digest
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "lava", "render", "--out", str(tmp_path / "h"),
                          "--board", "rk3568-rock-3a", "--variant", "rt", "--artifacts-url",
                          "https://lab.example/rtlab"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    index = json.loads((tmp_path / "h" / "index.json").read_text())
    job = yaml.safe_load((tmp_path / "h" / index["jobs"][0]["file"]).read_text())
    dtb = job["actions"][0]["deploy"]["dtb"]
    assert dtb["url"] == f"https://lab.example/rtlab/aarch64/{dtb['sha256sum'][:16]}/rk3568-rock-3a.dtb"
    assert (tmp_path / "h" / "artifacts" / "aarch64" / dtb["sha256sum"][:16] / "rk3568-rock-3a.dtb").is_file()
    # --artifacts-dir: the runner's served directory instead of <out>/artifacts
    for bad, words in ((["--artifacts-dir", str(tmp_path / "s")], "only with --artifacts-url"),
                       (["--artifacts-url", "file:///srv/a"], "is not an http:// or https:// URL")):
        res = subprocess.run([sys.executable, "-m", "rtlab.cli", "lava", "render", "--out", str(tmp_path / "x"),
                              "--board", "qemu-aarch64", "--variant", "rt", *bad], cwd=ROOT, capture_output=True,
                             text=True, timeout=300)
        assert res.returncode == 2 and words in res.stderr, res.stderr


def test_artifacts_are_named_by_content(tmp_path):
    """Two kernels of one name (two variants' Image, two commits') get two
    URLs in one served directory, and a file published twice is linked once."""
    from rtlab.lava.render import Artifacts

    a, b = tmp_path / "a" / "Image", tmp_path / "b" / "Image"
    for f, data in ((a, b"rt kernel"), (b, b"dynamic kernel")):
        f.parent.mkdir()
        f.write_bytes(data)
    served = tmp_path / "served"
    art = Artifacts(tmp_path / "out", "http://runner:8099/", served)
    ua, ub = art.url(a, "aarch64"), art.url(b, "aarch64")
    assert ua != ub and ua.startswith("http://runner:8099/aarch64/") and ua.endswith("/Image")
    for url, data in ((ua, b"rt kernel"), (ub, b"dynamic kernel")):
        assert (served / url.removeprefix("http://runner:8099/")).read_bytes() == data
    assert Artifacts(tmp_path / "out2", "http://runner:8099", served).url(a, "aarch64") == ua
    assert not (tmp_path / "out" / "artifacts").exists()


def test_loads_without_a_lava_form_are_listed_not_dropped(tmp_path):
    """Loads run inside the job where they can; a host side (network) or
    memory scaling on a board without a memory figure cannot: listed, with
    the reason."""
    f = tmp_path / "c.yaml"
    f.write_text(textwrap.dedent(f"""
        name: loads
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-x86_64]
        variants: [rt]
        suites:
          - name: cyclictest
            loads: [idle, cpu, stress, network]
            params: {{duration_s: 5}}
    """))
    idx = render_campaign(load_campaign(f), tmp_path / "o", lab_boards=True)
    mine = ("qemu-x86_64", "rk3568-rock-3a")
    assert sorted((j["board"], j["suite"]) for j in idx["jobs"] if j["board"] in mine) == [
        ("qemu-x86_64", "cyclictest@cpu"), ("qemu-x86_64", "cyclictest@idle"), ("qemu-x86_64", "cyclictest@stress"),
        ("rk3568-rock-3a", "cyclictest@cpu"), ("rk3568-rock-3a", "cyclictest@idle")]
    why = {(n["board"], n["suite"]): n["reason"] for n in idx["not_rendered"] if n["board"] in mine}
    assert set(why) == {("qemu-x86_64", "cyclictest@network"), ("rk3568-rock-3a", "cyclictest@network"),
                        ("rk3568-rock-3a", "cyclictest@stress")}
    assert "host side" in why[("qemu-x86_64", "cyclictest@network")]
    assert "memory" in why[("rk3568-rock-3a", "cyclictest@stress")] and "rk3568-rock-3a" in why[
        ("rk3568-rock-3a", "cyclictest@stress")]


def test_a_load_runs_inside_the_job_around_the_tool(tmp_path):
    """The load's own cmd.sh (the labgrid path's script), its start before
    the tool, its end and raw files after, a declared start case, and the
    scaling from the board description in the spec."""
    from rtlab.loads import LOADS
    from rtlab.lava import loads as lava_loads
    f = tmp_path / "c.yaml"
    f.write_text(textwrap.dedent(f"""
        name: loads
        budgets: {ROOT}/budgets/default.yaml
        boards: [qemu-aarch64]
        variants: [rt-iso]
        suites:
          - name: cyclictest
            loads: [stress]
            params: {{duration_s: 5, load_opts: {{stress: {{settle_s: 2}}}}}}
    """))
    idx = render_campaign(load_campaign(f), tmp_path / "o", lab_boards=False)
    (entry,) = idx["jobs"]
    job = yaml.safe_load((tmp_path / "o" / entry["file"]).read_text())
    spec = json.loads(job["metadata"]["rtlab.spec"])
    (part,) = spec["loads"]
    # rt-iso isolates CPU 1 of 2: the load runs on the housekeeping CPU only
    assert part["cpus"] == [0] and part["isolated"] == [1] and part["opts"]["settle_s"] == 2
    assert part["mem_total_kb"] == 1024 * 1024 and "mem_avail_kb" in part["estimated"]
    assert "--vm-bytes" in part["settings"]["command"]
    steps = job["actions"][2]["test"]["definitions"][1]["repository"]["run"]["steps"]
    text = "\n".join(steps)
    tool = next(i for i, s in enumerate(steps) if s.startswith("{ cyclictest"))
    start = next(i for i, s in enumerate(steps) if s.startswith(f"sh {lava_loads.SCRIPT_PATH} start"))
    end = next(i for i, s in enumerate(steps) if s.startswith(f"sh {lava_loads.SCRIPT_PATH} end"))
    assert start < tool < end
    assert "lava-test-case load-stress-start --result pass" in steps[start]
    # the same cmd.sh the labgrid path launches, from the same load object
    load = LOADS["stress"]
    assert "taskset -c 0 stress-ng" in text and "echo $$ > sid" in text
    assert f"rtlab_emit cyclictest@stress load-stress-samples.txt {part['dir']}/samples.txt" in text
    assert "load-stress-stress-ng.yaml" in text and load.stop_signals in steps[end]
    assert f"{spec['definitions']['suite']}/load-stress-start" in spec["expected"]
    assert job["metadata"]["rtlab.load"] == "stress"


def test_rtla_suites_render_as_lava_jobs(tmp_path):
    """campaigns/rtla.yaml: timerlat and osnoise become LAVA jobs that pass
    LAVA's schema and run the suite's own rtla command in the tool wrapper."""
    campaign = load_campaign("rtla", boards=["qemu-aarch64", "qemu-x86_64"], variants=["rt"])
    index = render_campaign(campaign, tmp_path, lab_boards=False)
    jobs = jobs_of(tmp_path, index)
    assert {(b, s) for b, _, s in jobs} == {(b, f"{t}@{l}") for b in ("qemu-aarch64", "qemu-x86_64")
                                           for t, l in (("timerlat", "idle"), ("timerlat", "hackbench"),
                                                        ("osnoise", "idle"))}
    verdicts, _ = validate_texts([(p.name, p.read_text()) for p, _, _ in jobs.values()])
    assert verdicts and all(v is None for v in verdicts.values()), verdicts
    for (board, variant, suite_id), (_, job, spec) in jobs.items():
        steps = job["actions"][2]["test"]["definitions"][1]["repository"]["run"]["steps"]
        assert spec["command"].startswith(f"rtla {suite_id.split('@')[0]} hist ")
        run = next(r for j in campaign.jobs() if (j.board.name, j.variant.name) == (board, variant)
                   for r in j.suites if r.id == suite_id)
        # the tool in its wrapper, behind the tracer check (not available otherwise)
        assert any(s.startswith("if why=$(") and tool_wrapper(SUITES[run.suite].command(run)) in s for s in steps)
        # TCG boards: the override's 100 us buckets
        if suite_id.startswith("timerlat"):
            assert " -b 100 -E 200" in spec["command"]


def test_rtla_job_on_a_kernel_without_the_tracer_says_not_available(tmp_path):
    """The LAVA form of the tracer check, run for real on this machine (whose
    kernel has neither tracer): the tool never runs, not_available.txt holds
    the reason, the exit code is 0 (not a failure; ingest records it as not
    available)."""
    import subprocess

    from rtlab.lava.render import NOT_AVAILABLE_TEXT, suite_steps
    from rtlab.suites import SuiteRun

    run = SuiteRun(id="timerlat@idle", name="timerlat", suite="timerlat", load="idle",
                   params=SUITES["timerlat"].params({}), cpus=(0,))
    steps = suite_steps(SUITES["timerlat"], run, None)
    tool = next(s for s in steps if s.startswith("if why=$("))
    assert tool_wrapper(SUITES["timerlat"].command(run)) in tool
    assert any(f"rtlab_emit timerlat@idle {NOT_AVAILABLE_TEXT} " in s for s in steps)
    p = subprocess.run(["sh", "-c", tool], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    reason = (tmp_path / NOT_AVAILABLE_TEXT).read_text()
    assert reason.startswith("the kernel has no timerlat tracer (CONFIG_TIMERLAT_TRACER): ")
    assert (tmp_path / "exit_code").read_text().strip() == "0" and not (tmp_path / "stdout.txt").exists()


def test_a_kernel_tree_renders_jobs_that_boot_its_builds(tmp_path, monkeypatch):
    """--kernel-tree: each job deploys the kernel built from the tree (its
    own checksum, not the Debian flavour's the variant would otherwise boot),
    checks that release on the board, names the commit; a variant whose
    kernel did not build gets no job but a build_failed entry. (The build is
    the kernel cache's: stubbed here at build_kernels, which the labgrid path
    shares; tests/integration/test_gitlab_ci.py builds for real.)"""
    import hashlib

    from rtlab.kernel.build import BuiltKernel
    from rtlab.lava import render as render_mod
    from rtlab.run.runner import KernelBuildFailed

    image = tmp_path / "Image"
    image.write_bytes(b"a kernel built from the commit under test")
    commit = "c0ffee" * 6 + "abcd"
    built = BuiltKernel(path=image, config=tmp_path / ".config", release="6.12.117-rtlab+",
                        build_json={"commit": commit, "describe": "v6.12.117-1-gc0ffee", "preempt": "dynamic",
                                    "uname_v": "#1 SMP PREEMPT_DYNAMIC", "fragments": [{"name": "preempt-dynamic"}]})
    seen = {}

    def fake_build(jobs, images, kernel_tree, progress):
        seen["tree"] = kernel_tree
        return {("qemu-aarch64", "preempt"): built,
                ("qemu-aarch64", "rt"): KernelBuildFailed("kernel build failed (aarch64): CONFIG_PREEMPT_RT gone")}

    monkeypatch.setattr(render_mod, "build_kernels", fake_build)
    campaign = load_campaign(boards=["qemu-aarch64"], variants=["preempt", "rt"])
    index = render_campaign(campaign, tmp_path / "jobs", lab_boards=False, kernel_tree=tmp_path, commit=commit)
    assert seen["tree"] == tmp_path
    assert {(j["board"], j["variant"]) for j in index["jobs"]} == {("qemu-aarch64", "preempt")}
    (failed,) = index["build_failed"]
    assert (failed["board"]["name"], failed["variant"]["name"]) == ("qemu-aarch64", "rt")
    assert "CONFIG_PREEMPT_RT" in failed["error"] and failed["budgets"]
    for entry in index["jobs"]:
        job, spec = load_job(tmp_path / "jobs" / entry["file"])
        kernel = job["actions"][0]["deploy"]["images"]["kernel"]
        assert kernel["url"] == image.resolve().as_uri()
        assert kernel["sha256sum"] == hashlib.sha256(image.read_bytes()).hexdigest()
        assert spec["kernel"]["commit"] == commit and spec["kernel"]["release"] == "6.12.117-rtlab+"
        assert job["job_name"].endswith(commit[:12]) and job["metadata"]["rtlab.commit"] == commit
        steps = [s for d in job["actions"][2]["test"]["definitions"] for s in d["repository"]["run"]["steps"]]
        assert any('"$(uname -r)" = 6.12.117-rtlab+' in s for s in steps)
    # the same index through `rtlab lava run`: no job to run, the failed
    # build judged as the labgrid path judges it (FAIL, exit 1, never INFRA)
    res = subprocess.run([sys.executable, "-m", "rtlab.cli", "lava", "run", str(tmp_path / "jobs"), "--variant", "rt",
                          "--results", str(tmp_path / "results")], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    run = json.loads((tmp_path / "results" / "latest" / "run.json").read_text())
    (jr,) = run["jobs"]
    assert jr["verdict"] == "fail" and "CONFIG_PREEMPT_RT" in jr["build_error"] and jr["infra_error"] is None
