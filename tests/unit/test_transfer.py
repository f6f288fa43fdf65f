"""Raw files off the console: the faster channels bring the board's exact
bytes (checked against the board's wc -c and sha256sum) and anything in
doubt falls back to the console, so no raw file is lost or altered.
The shell here is this machine's `sh` (as the local board's is); the QEMU
path runs in tests/integration/test_run.py."""
import hashlib
import json
import os
import re
import shutil
import subprocess

from rtlab.suites.board import BoardShell, run_tool
from rtlab.suites.transfer import LocalChannel, TcpChannel


BUSYBOX = shutil.which("busybox")
assert BUSYBOX, "busybox is not installed (env/apt-packages.txt): the boards' nc is busybox's"


class LocalCommand:
    """labgrid CommandProtocol.run() over `sh -c`, with busybox's nc as the
    QEMU boards have it; optionally rewriting commands."""

    def __init__(self, rewrite=None):
        self.rewrite = rewrite or (lambda c: c)
        self.seen = []

    def run(self, cmd, timeout=30):
        self.seen.append(cmd)
        cmd = self.rewrite(cmd)
        cmd = re.sub(r"(^|[ |&;(])nc ", rf"\1{BUSYBOX} nc ", cmd)  # every nc: busybox's
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        return p.stdout.splitlines(), p.stderr.splitlines(), p.returncode


def blob(tmp_path, n=300_000):
    f = tmp_path / "hist.json"
    f.write_bytes(os.urandom(n))
    return f


def test_tcp_channel_brings_the_exact_bytes_without_the_console(tmp_path):
    f = blob(tmp_path)
    cmd = LocalCommand()
    sh = BoardShell(cmd, bulk=TcpChannel(host_addr="127.0.0.1"))
    assert sh.fetch(str(f)) == f.read_bytes()
    assert sh.transfers.files[str(f)]["via"] == "tcp"
    assert not any("base64" in c for c in cmd.seen)  # nothing went over the console
    assert len(cmd.seen) == 2  # its size, then its digest and its bytes: two console round trips


def test_a_short_or_refused_stream_falls_back_to_the_console(tmp_path):
    f = blob(tmp_path)
    # the board's nc sends only the first 1000 bytes of the stream
    short = LocalCommand(lambda c: c.replace(" | nc ", " | head -c 1000 | nc ", 1))
    sh = BoardShell(short, bulk=TcpChannel(host_addr="127.0.0.1"))
    assert sh.fetch(str(f)) == f.read_bytes() and sh.transfers.files[str(f)]["via"] == "console"
    # nothing listens where the board sends (another address): refused
    sh = BoardShell(LocalCommand(), bulk=TcpChannel(host_addr="127.0.0.1", bind="127.0.0.2"))
    assert sh.fetch(str(f)) == f.read_bytes() and sh.transfers.files[str(f)]["via"] == "console"


def test_local_channel_is_checked_against_the_boards_digest(tmp_path):
    f = blob(tmp_path)
    sh = BoardShell(LocalCommand(), bulk=LocalChannel())
    assert sh.fetch(str(f)) == f.read_bytes() and sh.transfers.files[str(f)]["via"] == "local"
    lying = LocalCommand(lambda c: f"echo {'0' * 64}  x" if c.startswith("sha256sum") else c)
    sh = BoardShell(lying, bulk=LocalChannel())
    assert sh.fetch(str(f)) == f.read_bytes() and sh.transfers.files[str(f)]["via"] == "console"
    small = tmp_path / "small"
    small.write_bytes(b"x" * 10)
    assert sh.fetch(str(small)) == b"x" * 10 and sh.transfers.files[str(small)]["via"] == "console"


def test_run_tool_records_which_way_each_raw_file_came(tmp_path, monkeypatch):
    monkeypatch.setenv("RTLAB_BOARD_WORKDIR", str(tmp_path / "board"))
    sh = BoardShell(LocalCommand(), bulk=TcpChannel(host_addr="127.0.0.1"))
    host = tmp_path / "host"
    rc = run_tool(sh, "t@idle", ["sh", "-c", "head -c 50000 /dev/urandom > big.bin; echo ok"], host,
                  ["big.bin"], timeout=30)
    assert rc == 0
    fetched = json.loads((host / "exit.json").read_text())["fetched"]
    assert fetched["big.bin"]["via"] == "tcp" and fetched["big.bin"]["bytes"] == 50000
    assert fetched["stdout.txt"]["via"] == "tcp"  # in the same tar as big.bin
    board_file = next((tmp_path / "board").rglob("big.bin"), None)
    if board_file is not None:  # still on the board: the host copy is byte-exact
        assert hashlib.sha256(board_file.read_bytes()).digest() == hashlib.sha256((host / "big.bin").read_bytes()).digest()


def test_a_board_whose_network_does_not_reach_the_host_falls_back_in_seconds(tmp_path):
    import time
    f = blob(tmp_path)
    sh = BoardShell(LocalCommand(), bulk=TcpChannel(host_addr="192.0.2.1"))  # TEST-NET-1: nothing answers
    t0 = time.monotonic()
    assert sh.fetch(str(f)) == f.read_bytes() and sh.transfers.files[str(f)]["via"] == "console"
    assert time.monotonic() - t0 < 30


def test_run_tool_fetches_many_files_in_one_round_trip_byte_exact(tmp_path, monkeypatch):
    """Every raw file and the exit code come in one tar over the bulk path,
    in one console round trip."""
    monkeypatch.setenv("RTLAB_BOARD_WORKDIR", str(tmp_path / "board"))
    cmd = LocalCommand()
    sh = BoardShell(cmd, bulk=TcpChannel(host_addr="127.0.0.1"))
    host = tmp_path / "host"
    script = ("printf 'a\\nb' > a.txt; head -c 3000 /dev/urandom > b.bin; : > empty.txt; "
              "head -c 70000 /dev/urandom > big.bin; echo out; echo err >&2; exit 3")
    rc = run_tool(sh, "t@idle", ["sh", "-c", script], host, ["a.txt", "b.bin", "empty.txt", "big.bin",
                                                               "missing.json"], timeout=30)
    assert rc == 3  # the tool's own exit code, read from the fetched exit_code
    board = next((tmp_path / "board").rglob("t@idle"))
    for name in ("stdout.txt", "stderr.txt", "a.txt", "b.bin", "empty.txt", "big.bin"):
        assert (host / name).read_bytes() == (board / name).read_bytes(), name
    assert not (host / "missing.json").exists()
    fetched = json.loads((host / "exit.json").read_text())["fetched"]
    assert fetched["big.bin"]["via"] == "tcp" and fetched["a.txt"]["via"] == "tcp"
    tool = next(i for i, c in enumerate(cmd.seen) if "echo $? > exit_code" in c)
    fetches = cmd.seen[tool + 1:]
    assert len(fetches) == 1, fetches  # sizes on the console, every file in one tar over nc


def test_a_tar_stream_in_doubt_brings_the_files_the_consoles_way(tmp_path, monkeypatch):
    """A cut stream, a board that lists other sizes than the tar carries, a
    stream that never comes: the same bytes come the slow way, none lost."""
    monkeypatch.setenv("RTLAB_BOARD_WORKDIR", str(tmp_path / "board"))
    d = tmp_path / "wd"
    d.mkdir()
    want = {"a.txt": b"a" * 10, "big.bin": os.urandom(70000), "empty.txt": b""}
    for name, data in want.items():
        (d / name).write_bytes(data)
    names = [*want, "missing.json"]
    cut = LocalCommand(lambda c: c.replace("| gzip -1 |", "| gzip -1 | head -c 2000 |", 1))
    wrong_size = LocalCommand(lambda c: c.replace("wc -c", "wc() { command wc \"$@\" | awk '{print $1 + 1, $2}'; }; wc -c", 1)
                              if "==rtlab-files==" in c else c)
    for cmd, bulk in ((cut, TcpChannel(host_addr="127.0.0.1")), (wrong_size, TcpChannel(host_addr="127.0.0.1")),
                      (LocalCommand(), TcpChannel(host_addr="127.0.0.1", bind="127.0.0.2"))):
        sh = BoardShell(cmd, bulk=bulk)
        assert sh.fetch_dir(str(d), names) == want
        assert any("==rtlab-files==" in c for c in cmd.seen)  # the one-trip way was tried first
        assert sh.transfers.files[f"{d}/a.txt"]["via"] == "console"


def test_the_local_board_brings_a_suites_files_in_one_round_trip(tmp_path):
    d = tmp_path / "wd"
    d.mkdir()
    (d / "a.txt").write_bytes(b"x" * 100)
    (d / "big.bin").write_bytes(os.urandom(50000))
    cmd = LocalCommand()
    sh = BoardShell(cmd, bulk=LocalChannel())
    got = sh.fetch_dir(str(d), ["a.txt", "big.bin", "nope"])
    assert got == {"a.txt": b"x" * 100, "big.bin": (d / "big.bin").read_bytes()}
    assert len(cmd.seen) == 1 and sh.transfers.files[f"{d}/big.bin"]["via"] == "local"


def test_a_tar_that_does_not_match_the_boards_sizes_is_fetched_file_by_file(tmp_path):
    d = tmp_path / "wd"
    d.mkdir()
    (d / "a.txt").write_bytes(b"x" * 100)
    (d / "b.txt").write_bytes(b"y" * 200)
    # the board reports another size for a.txt than the tar carries
    lying = LocalCommand(lambda c: c.replace("cd ", "wc() { command wc \"$@\" | awk '{print $1 + 1, $2}'; }; cd ", 1)
                         if c.startswith("cd ") and "RAW" in c else c)
    sh = BoardShell(lying)
    assert sh.fetch_dir(str(d), ["a.txt", "b.txt", "nope"]) == {"a.txt": b"x" * 100, "b.txt": b"y" * 200}
    assert sum("base64" in c for c in lying.seen) == 3  # the tar, then each file on its own
