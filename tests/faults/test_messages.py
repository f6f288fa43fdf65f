"""Messages a person can act on (#40): an unknown exit said as unknown, a
network error in words, a long value cut, terminal escapes from a probe or a
LAVA server stripped from what reaches the CI log."""
import json
import socket
import threading
from pathlib import Path

from rtlab.core.model import JobResult, RunResult

from .conftest import rtlab


def test_an_unknown_exit_is_said_as_unknown(tmp_path):
    from rtlab.run.results import tool_exit_problem
    from rtlab.suites import SUITES
    from rtlab.suites.board import UNKNOWN_EXIT

    why = tool_exit_problem(SUITES["cyclictest"], UNKNOWN_EXIT, tmp_path)
    assert why == "cyclictest ended with no exit code recorded (exit unknown)", why
    assert "-1" not in why


def test_a_store_answering_garbage_is_said_in_words():
    """A store that answers bytes that are not HTTP ("HT..."): the error says
    so, not 'HT'."""
    from rtlab.store.base import StoreUnavailable
    from rtlab.store.influx import InfluxV1

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def answer():
        conn, _ = srv.accept()
        conn.recv(65536)
        conn.sendall(b"HT garbage\r\n\r\n")
        conn.close()
    t = threading.Thread(target=answer, daemon=True)
    t.start()
    try:
        store = InfluxV1(f"http://127.0.0.1:{port}", "db")
        try:
            store.ping()
            raise AssertionError("a store answering garbage was taken as up")
        except StoreUnavailable as e:
            msg = str(e)
        assert "not HTTP" in msg and "BadStatusLine" in msg, msg
    finally:
        srv.close()


def test_a_long_value_is_cut_in_an_error(tmp_path):
    """A 70 kB pin name is not echoed whole."""
    name = "p" * 70_000
    res = rtlab("baseline", "pin", name, tmp_path, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2, err[:500]
    assert len(err) < 1000 and "70000 characters" in err, err[:500]


def test_terminal_escapes_from_a_lava_server_never_reach_the_ci_log(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    evil = "Infrastructure: \x1b]0;owned\x07\x1b[2J\x1b[31mboot failed\x1b[0m\x08\x08"
    run = RunResult("r1", "2026-11-28T00:00:00Z", "c", {},
                    [JobResult("qemu-x86_64", "rt", "x86_64", "qemu-tcg", {}, [], infra_error=evil)])
    (d / "run.json").write_text(json.dumps(run.to_json()))
    (d / "budgets.yaml").write_text(Path(__file__).resolve().parents[2].joinpath("budgets/default.yaml").read_text())
    res = rtlab("gate", d, timeout=120)
    assert res.returncode == 2
    line = next(ln for ln in res.stdout.splitlines() if "qemu-x86_64/rt:" in ln and ln.startswith("gate: INFRA"))
    assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\x08" not in res.stdout
    assert line.endswith("Infrastructure: boot failed"), repr(line)
