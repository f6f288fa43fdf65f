"""A virtual board's UART: the relay between QEMU's serial socket and the pty
the exporter's ser2net opens, without QEMU (a TCP client plays the board)."""
import os
import select
import socket
import time

import pytest

from rtlab.rack.board import BootWatcher, ConsoleRelay


def _read(fd, want: bytes, timeout=5.0) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while want not in buf and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            buf += os.read(fd, 4096)
    return buf


def _recv(sock, want: bytes, timeout=5.0) -> bytes:
    sock.settimeout(0.1)
    buf = b""
    deadline = time.monotonic() + timeout
    while want not in buf and time.monotonic() < deadline:
        try:
            buf += sock.recv(4096)
        except socket.timeout:
            pass
    return buf


@pytest.fixture
def relay(tmp_path):
    r = ConsoleRelay("t", tmp_path)
    r.start()
    yield r
    r.stop()
    r.join(5)


def _board(relay):
    """What QEMU does at power on: connect its serial chardev to the relay."""
    s = socket.create_connection(("127.0.0.1", relay.port))
    time.sleep(0.3)
    return s


def _ser2net(relay):
    fd = os.open(relay.tty_path, os.O_RDWR | os.O_NOCTTY)
    time.sleep(0.4)  # the relay notices somebody listens
    return fd


def test_bytes_flow_both_ways_and_are_logged(relay, tmp_path):
    relay.power_on(frozen=False)
    board = _board(relay)
    tty = _ser2net(relay)
    try:
        board.sendall(b"U-Boot 2023.01\r\n=> ")
        assert b"=> " in _read(tty, b"=> ")
        os.write(tty, b"dhcp\n")
        assert _recv(board, b"dhcp\n") == b"dhcp\n"
        # a burst bigger than the pty buffer arrives whole and in order
        blob = os.urandom(150_000).hex().encode() + b"END"
        board.sendall(blob)
        got = _read(tty, b"END", timeout=20)
        assert got == blob
    finally:
        os.close(tty)
        board.close()
    assert b"U-Boot 2023.01" in (tmp_path / "console.log").read_bytes()


def test_output_nobody_listens_to_is_lost_not_replayed(relay):
    relay.power_on(frozen=False)
    board = _board(relay)
    board.sendall(b"old boot log nobody read\r\n")
    time.sleep(0.5)
    relay.power_off()
    relay.power_on(frozen=False)
    board.close()
    board = _board(relay)
    tty = _ser2net(relay)
    try:
        board.sendall(b"fresh\r\n")
        got = _read(tty, b"fresh")
        assert got == b"fresh\r\n"
    finally:
        os.close(tty)
        board.close()


def test_power_off_drops_the_board_connection(relay):
    relay.power_on(frozen=False)
    board = _board(relay)
    relay.power_off()
    board.settimeout(3)
    assert board.recv(10) == b""  # closed by the relay: the UART is dead
    board.close()


def test_boot_watcher_times_milestones_across_chunk_boundaries(tmp_path):
    w = BootWatcher(tmp_path / "boots.jsonl")
    w.power_on(frozen=False)
    stream = (b"U-Boot 2023.01+dfsg\r\nHit any key to stop autoboot: 2\r\n=> tftp\r\n"
              b"Filename 'rtlab/kernel'.\r\n####\r\nBytes transferred = 31512512 (1e0d7c0 hex)\r\n"
              b"Starting kernel ...\r\n[0.0] Linux version 6.1.0\r\nrtlab# ")
    for i in range(0, len(stream), 7):  # 7-byte chunks split every token somewhere
        w.feed(stream[i:i + 7])
    import json
    (rec,) = [json.loads(line) for line in (tmp_path / "boots.jsonl").read_text().splitlines()]
    assert set(rec["t"]) == {"uboot", "autoboot", "kernel_start", "linux", "shell"}
    assert rec["tftp"] == [{"file": "rtlab/kernel", "start": rec["tftp"][0]["start"],
                            "bytes": 31512512, "end": rec["tftp"][0]["end"]}]


def test_boot_watcher_keeps_back_to_back_transfers_apart(tmp_path):
    import json
    w = BootWatcher(tmp_path / "boots.jsonl")
    w.power_on(frozen=False)
    # one read can end the kernel transfer and start the initramfs one
    w.feed(b"Filename 'rtlab/kernel'.\r\n##\r\n")
    w.feed(b"Bytes transferred = 31512512 (1e0d7c0 hex)\r\nTFTP from server 10.0.2.2\r\n"
           b"Filename 'rtlab/initrd'.\r\n##\r\nBytes transferred = 6552274 (63fad2 hex)\r\nrtlab# ")
    (rec,) = [json.loads(line) for line in (tmp_path / "boots.jsonl").read_text().splitlines()]
    assert [(t["file"], t["bytes"]) for t in rec["tftp"]] == [("rtlab/kernel", 31512512),
                                                              ("rtlab/initrd", 6552274)]
