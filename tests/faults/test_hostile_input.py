"""Campaign files come from merge requests and run as root: hostile values
are refused at load (exit 2, one line naming the file and the dotted key,
before anything boots), and a value that is allowed through reaches the
board shell only quoted. Every case checks that its marker file was never
created."""
import json
import subprocess

import pytest

from rtlab.suites import SUITES, SuiteRun
from rtlab.suites.board import shell_line

from .conftest import rtlab, rtlab_inproc

PAYLOADS = {
    "semicolon": "; touch {m}",
    "subshell": "$(touch {m})",
    "backticks": "`touch {m}`",
    "newline": "1\ntouch {m}",
}


def _suite(params="", name=None, loads=None, overrides=None):
    lines = ["suites:", "  - suite: cyclictest"]
    if name is not None:
        lines.append(f"    name: {json.dumps(name)}")
    if loads is not None:
        lines.append(f"    loads: {json.dumps(loads)}")
    lines.append(f"    params: {{duration_s: 1{', ' + params if params else ''}}}")
    if overrides is not None:
        lines.append(f"    overrides: {json.dumps(overrides)}")
    return "\n".join(lines) + "\n"


def _cases(m):
    """(what, campaign body, extra CLI args, dotted key the error must name)."""
    cases = []
    for kind, tpl in PAYLOADS.items():
        p = tpl.format(m=m)
        q = json.dumps(p)
        cases += [
            (f"extra_args string {kind}", "boards: [local]\n" + _suite(f"extra_args: {q}"), [],
             "suites[0].params.extra_args"),
            (f"priority {kind}", "boards: [local]\n" + _suite(f"priority: {q}"), [],
             "suites[0].params.priority"),
            (f"suite name {kind}", "boards: [local]\n" + _suite(name=p), [], "suites[0].name"),
            (f"load {kind}", "boards: [local]\n" + _suite(loads=[p]), [], "suites[0].loads"),
            (f"board {kind}", f"boards: [{q}]\n" + _suite(), [], "boards"),
            (f"variant {kind}", f"boards: [local]\nvariants: [{q}]\n" + _suite(), [], "variants"),
            (f"override {kind}", "boards: [local]\n" + _suite(overrides={"local": {"interval_us": p}}), [],
             "suites[0].overrides.local.interval_us"),
            (f"load option {kind}", "boards: [local]\n"
             + _suite(f"load_opts: {{network: {{peer: {q}}}}}"), [],
             "suites[0].params.load_opts.network.peer"),
        ]
    cases += [
        ("suite name ../", "boards: [local]\n" + _suite(name="../../../tmp/x"), [], "suites[0].name"),
        ("board ../ in the file", "boards: ['../../x']\n" + _suite(), [], "boards"),
        ("--board ../", "boards: [local]\n" + _suite(), ["--board", "../../x"], "boards"),
        ("--board a path", "boards: [local]\n" + _suite(), ["--board", "/etc/passwd"], "boards"),
    ]
    return cases


def test_hostile_values_are_refused_at_load_naming_file_and_key(tmp_path, write_campaign, capsys):
    marker = tmp_path / "MARKER"
    failures = []
    for i, (what, body, extra, key) in enumerate(_cases(marker)):
        path = write_campaign(body, f"c{i}.yaml")
        rc, err = rtlab_inproc("run", "--campaign", path, "--results", tmp_path / "results", "--no-publish",
                               *extra, capsys=capsys)
        err = err.strip()
        where = "--board" if extra else str(path)
        ok = (rc == 2 and len(err.splitlines()) == 1 and where in err and f"{key}:" in err
              and "Traceback" not in err and not marker.exists())
        if not ok:
            failures.append(f"{what}: rc={rc} stderr={err[-300:]!r}")
    assert not failures, "\n".join(failures)
    assert not marker.exists()
    assert not (tmp_path / "results").exists()  # refused before a run dir or a boot
    # and as a command (exit status of the process, one line, no traceback)
    path = write_campaign("boards: [local]\n" + _suite(f"extra_args: {json.dumps(f'; touch {marker}')}"))
    res = rtlab("run", "--campaign", path, "--results", tmp_path / "results", "--no-publish", timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "suites[0].params.extra_args:" in res.stderr
    assert not marker.exists()


@pytest.mark.parametrize("value,why", [
    ('"ten"', "must be an integer"), ("-5", "must be between 1 and"), ("0", "must be between 1 and"),
    ("true", "must be an integer"), (".nan", "must be an integer"), (".inf", "must be an integer"),
    ("2.5", "must be an integer"), ("[1]", "must be an integer"),
])
def test_wrong_types_and_ranges_of_duration_exit_2_naming_the_key(tmp_path, write_campaign, value, why,
                                                                  capsys):
    path = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {duration_s: %s}}\n" % value)
    rc, err = rtlab_inproc("run", "--campaign", path, "--results", tmp_path / "r", "--no-publish", capsys=capsys)
    assert rc == 2, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert f"{path}: suites[0].params.duration_s: {why}" in err


def test_every_suite_param_is_typed_and_ranged(tmp_path, write_campaign, capsys):
    """priority 1-99, interval > 0, histogram > 0, CPUs within the board, bools are bools."""
    bad = {
        "cyclictest": {"priority": 100, "interval_us": 0, "histogram_us": -1, "extra_args": [1]},
        "pmqtest": {"priority": 0, "distance_us": -1, "pairs": "many"},
        "rtbench": {"cap_s": float("nan"), "benchmarks": "a;b", "loops": True},
        "hackbench": {"threads": 1, "runs": 0, "groups": "10"},
        "pi_stress": {"groups": -1},
        "rt-migrate-test": {"check": "yes", "priority": 99},
        "signaltest": {"threads": 0},
        "cyclicdeadline": {"step_us": 0},
    }
    from rtlab.core.params import ParamError
    for suite, params in bad.items():
        for k, v in params.items():
            with pytest.raises(ParamError, match=rf"^{k}: "):
                SUITES[suite].params({k: v})
    for name, s in SUITES.items():  # every parameter has a spec, and the defaults pass it
        assert set(s.spec) == set(s.defaults), name
        s.params(dict(s.defaults))
    # CPUs named must exist on the board (local: this machine's CPU count)
    import os
    n = len(os.sched_getaffinity(0))
    for key, where in (("cpus", "params"), ("load_cpus", "params")):
        path = write_campaign(f"boards: [local]\nsuites:\n  - {{suite: cyclictest, params: {{{key}: [{n + 3}]}}}}\n",
                              f"{key}.yaml")
        rc, err = rtlab_inproc("run", "--campaign", path, "--results", tmp_path / "r", "--no-publish",
                               capsys=capsys)
        assert rc == 2 and f"suites[0].{where}.{key}: CPU(s) {n + 3} do not exist on board local" in err, err
    # a cpulist that names no CPU ("3-1" is descending, not "3,2,1") measures nothing: refused
    path = write_campaign("boards: [local]\nsuites:\n  - {suite: cyclictest, params: {cpus: '1-0'}}\n", "desc.yaml")
    rc, err = rtlab_inproc("run", "--campaign", path, "--results", tmp_path / "r", "--no-publish", capsys=capsys)
    assert rc == 2 and "suites[0].params.cpus: descending CPU range '1-0'" in err, err


def test_shell_line_quotes_every_argument(tmp_path):
    """The one place argv becomes a shell line: a shell reads every payload
    back as the literal argument it was, and runs none of them."""
    marker = tmp_path / "MARKER"
    args = [p.format(m=marker) for p in PAYLOADS.values()] + ["'", '"', "\\", "*", "~", "a b", ""]
    line = shell_line(["printf", "%s\\0", *args])
    out = subprocess.run(["sh", "-c", line], capture_output=True, check=True).stdout
    assert out.split(b"\0")[:-1] == [a.encode() for a in args]
    assert not marker.exists()
    with pytest.raises(TypeError):
        shell_line("cyclictest -q")  # a string is not a command


def test_svsematest_and_hackbench_scripts_take_values_as_arguments_only(tmp_path):
    """The two suites that need a shell of their own run fixed script text;
    every value is an argument of that script. Real tools, on this machine."""
    def run(suite, **params):
        r = SuiteRun(id=f"{suite}@idle", name=suite, suite=suite, load="idle",
                     params=SUITES[suite].params(params), cpus=(0,))
        return subprocess.run(["sh", "-c", shell_line(SUITES[suite].command(r))], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    marker = tmp_path / "MARKER"
    res = run("svsematest", duration_s=1, extra_args=[f"$(touch {marker})"])
    assert not marker.exists()
    # svsematest ran (its ftok() on its own full path worked) and wrote its JSON
    res = run("svsematest", duration_s=1)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "svsematest.json").read_text())["thread"]
    res = run("hackbench", runs=2, groups=1, fds=2, loops=10)
    assert res.returncode == 0, res.stderr
    assert "Time:" in (tmp_path / "hackbench-2.txt").read_text()


def test_allowed_odd_arguments_reach_the_tool_quoted_on_the_local_board(tmp_path, write_campaign):
    """extra_args is a list: each item one argument. On the local board (root
    on the runner) none of these payloads runs; command.txt shows them quoted."""
    marker = tmp_path / "MARKER"
    args = [p.format(m=marker) for k, p in PAYLOADS.items() if k != "newline"]
    path = write_campaign("boards: [local]\nsuites:\n  - suite: cyclictest\n"
                          f"    params: {{duration_s: 1, extra_args: {json.dumps(args)}}}\n")
    res = rtlab("run", "--campaign", path, "--results", tmp_path / "r", "--no-publish", timeout=300)
    assert not marker.exists()
    assert res.returncode in (0, 2), res.stdout + res.stderr  # cyclictest may refuse them; never runs them
    (cmd,) = [p for p in (tmp_path / "r").glob("*/local/host/cyclictest@idle/command.txt")
              if "latest" not in p.parts]
    assert all(shell_line([a]) in cmd.read_text() for a in args)


def test_an_unexpected_error_exits_2_with_one_line_and_the_traceback_in_a_log(tmp_path, monkeypatch, capsys):
    """Never exit 1 (CI reads it as "a budget broke") and never a traceback on
    the console: one line, the traceback in RTLAB_LOG_DIR."""
    import rtlab.commands.parse as parse_cmd

    def boom(args):
        raise ValueError("a bug deep inside\nsecond line")
    monkeypatch.setattr(parse_cmd, "run", boom)
    monkeypatch.setenv("RTLAB_LOG_DIR", str(tmp_path))
    rc, err = rtlab_inproc("parse", "x.json", capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert "rtlab: internal error: ValueError: a bug deep inside" in err
    (log,) = tmp_path.glob("rtlab-error-*.log")
    assert str(log) in err and "Traceback" in log.read_text() and "second line" in log.read_text()
