"""The board side of rtlab's LAVA test definitions, run under busybox sh/awk
(what the board image has): measurements agree with rtlab's parser, raw
outputs cross the console byte-exact."""
import shutil
import subprocess
from pathlib import Path

import pytest

from rtlab.lava import onboard
from rtlab.lava.logs import raw_blocks
from rtlab.parsers import parse_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = sorted((ROOT / "tests/fixtures/rt-tests-2.4").glob("cyclictest*.json"))
BUSYBOX = shutil.which("busybox")

# busybox-static is a host package (env/apt-packages.txt): missing is a failure, not a skip
assert BUSYBOX, "busybox (busybox-static) not installed"


@pytest.fixture
def board(tmp_path):
    """busybox sh with the helpers loaded and a stand-in lava-test-case that
    prints its arguments, as the board's LAVA overlay provides it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "lava-test-case").write_text('#!/bin/sh\necho "CASE $*"\n')
    (bindir / "lava-test-case").chmod(0o755)
    helpers = tmp_path / "helpers.sh"
    helpers.write_text(onboard.HELPER_SCRIPT.replace(f"RTLAB_WD={onboard.WORKDIR}", f"RTLAB_WD={tmp_path}"))

    def sh(script: str, cwd=None) -> subprocess.CompletedProcess:
        return subprocess.run([BUSYBOX, "sh", "-c", f". {helpers}; {script}"], capture_output=True,
                              text=True, cwd=cwd or tmp_path, timeout=60,
                              env={"PATH": f"{bindir}:/usr/bin:/bin"})
    return sh


def cases(stdout: str) -> dict[str, str]:
    out = {}
    for line in stdout.splitlines():
        if line.startswith("CASE "):
            p = line.split()
            out[p[1]] = p[p.index("--measurement") + 1] if "--measurement" in p else p[p.index("--result") + 1]
    return out


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
def test_board_measurements_equal_rtlab_parser(board, fixture):
    """Per thread min/avg/max/cycles and nearest-rank percentiles from awk are
    exactly what rtlab.core.model computes; unknowable percentiles are skipped."""
    res = board(onboard.rt_cases_step(str(fixture)))
    assert res.returncode == 0, res.stderr
    got = cases(res.stdout)
    out = parse_file(fixture)
    assert len(got) == len(onboard.rt_case_names(len(out.threads)))
    for t in out.threads:
        want = {"cycles": t.cycles, "min": t.min_us, "avg": t.avg_us, "max": t.max_us,
                **{f"p{p}": v for p, v in t.percentiles_us.items()}}
        for what, v in want.items():
            name = (f"t{t.thread}-cycles" if what == "cycles" else
                    f"t{t.thread}-{onboard.percentile_case_name(what[1:]) if what.startswith('p') else what}-latency")
            if v is None or v != v:
                assert got[name] == "skip", (name, got[name])
            else:
                assert float(got[name]) == pytest.approx(v, abs=1e-6), (name, got[name], v)
            assert onboard.split_case(name) == (t.thread, what)


def test_missing_json_reports_nothing(board):
    res = board(onboard.rt_cases_step("nonexistent.json"))
    assert res.returncode == 0 and cases(res.stdout) == {}
    assert "no measurements" in res.stdout


def test_raw_files_cross_the_console_byte_exact(board, tmp_path):
    data = bytes(range(256)) * 40 + b'"quotes" \\ and \r\n\n\nblank lines\x1b[6n'
    (tmp_path / "blob.bin").write_bytes(data)
    res = board("rtlab_emit k blob.bin blob.bin; rtlab_emit k gone.txt gone.txt; "
                "rtlab_fact 3 'echo out; echo err >&2; exit 3'")
    assert res.returncode == 0, res.stderr
    blocks = raw_blocks(res.stdout.splitlines())
    assert blocks[("k", "blob.bin")].data == data
    assert blocks[("k", "gone.txt")].absent
    fact = blocks[("facts", "cmd3")]
    assert fact.rc == 3 and fact.data == b"out\nerr\n"


def test_corrupted_or_cut_transfer_is_detected(board, tmp_path):
    (tmp_path / "f.json").write_text('{"x": 1}\n' * 500)
    lines = board("rtlab_emit k f.json f.json").stdout.splitlines()
    body = [i for i, l in enumerate(lines) if not l.startswith("RTLAB-")]
    broken = list(lines)
    broken[body[0]] = broken[body[0]][:-4] + "AAAA"
    assert "corrupted" in raw_blocks(broken)[("k", "f.json")].error \
        or "undecodable" in raw_blocks(broken)[("k", "f.json")].error
    cut = lines[:-1]  # the END marker never came
    assert "never ended" in raw_blocks(cut)[("k", "f.json")].error
    # a kernel message between two base64 lines does not matter
    noisy = lines[:body[0] + 1] + ["[   12.345678] random: crng init done"] + lines[body[0] + 1:]
    assert raw_blocks(noisy)[("k", "f.json")].data == (tmp_path / "f.json").read_bytes()


def test_exit_case_passes_only_on_exit_0(board, tmp_path):
    (tmp_path / "exit_code").write_text("127\n")
    (tmp_path / "stderr.txt").write_text("sh: cyclictest-x: not found\n")
    res = board("rtlab_exit_case cyclictest")
    assert cases(res.stdout) == {"cyclictest": "fail"} and "exited with 127" in res.stdout
    (tmp_path / "exit_code").write_text("0\n")
    assert cases(board("rtlab_exit_case cyclictest").stdout) == {"cyclictest": "pass"}


def test_cmdline_has_checks_every_argument_of_the_running_kernel(board):
    """Against this machine's /proc/cmdline: whole arguments, every one."""
    args = open("/proc/cmdline").read().split()[:2]
    assert board(f"rtlab_cmdline_has '{' '.join(args)}'").returncode == 0
    res = board(f"rtlab_cmdline_has '{args[0]} isolcpus=rtlab-nowhere'")
    assert res.returncode == 1 and "isolcpus=rtlab-nowhere missing from /proc/cmdline" in res.stdout
    prefix = args[0][:-1]  # a prefix of a real argument is not that argument
    assert board(f"rtlab_cmdline_has '{prefix}'").returncode == 1


def test_helpers_survive_lava_step_rewriting():
    # lava-dispatcher rewrites $1 in steps containing --shell/--cmd
    for step in (onboard.install_step(), onboard.rt_cases_step("cyclictest.json")):
        assert "--shell" not in step and "--cmd" not in step
    assert onboard.percentile_per_10000("99.99") == 9999
    assert onboard.percentile_case_name("99.9") == "p99_9"
