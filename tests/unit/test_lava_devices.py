"""What rtlab's LAVA device dictionaries must hold for the dispatcher to see
the board's output: pexpect reads of at most half LAVA's search window.

lava_dispatcher's ShellCommand searches only the last `searchwindowsize`
(4000) bytes of its buffer, and a read brings up to `spawn_maxread` bytes
(LAVA's default 4092). A prompt in the first 92 bytes of a full read is
therefore never matched: measured on the local LAVA lab, a twin-rk356x job
timed out in auto-login although "Linux version" was in its log, because the
kernel's console burst began with it. The dictionaries read 2000 bytes."""
import re
from pathlib import Path

import jinja2
import pexpect
from pexpect import fdpexpect
import yaml

from rtlab import ROOT

SHELL_PY = Path("/usr/lib/python3/dist-packages/lava_dispatcher/shell.py")
LAVA_DEVICE_TYPES = Path("/usr/share/lava-server/device-types")


def lava_search_window() -> int:
    """The installed dispatcher's searchwindowsize (Debian's lava-dispatcher)."""
    m = re.search(r"searchwindowsize=(\d+)", SHELL_PY.read_text())
    assert m, f"no searchwindowsize in {SHELL_PY}"
    return int(m.group(1))


def serial_dictionaries() -> dict[str, dict]:
    """The shipped dictionaries whose console is a `connect` command (LAVA's
    serial connection, which reads spawn_maxread at a time)."""
    out = {}
    for f in sorted((ROOT / "lava" / "devices").glob("*.yaml")):
        d = yaml.safe_load(f.read_text())
        if (d.get("commands") or {}).get("connect"):
            out[f.name] = d
    return out


def burst_expect(tmp_path: Path, maxread: int, window: int) -> bool:
    """A console burst that starts like the kernel's, read in full reads of
    `maxread` bytes (a file: every read is full, as when the burst has piled
    up before pexpect reads; no timing involved): is "Linux version" matched?"""
    burst = tmp_path / "burst.txt"
    burst.write_text("[    0.000000] Booting Linux on physical CPU 0x0\n"
                     "[    0.000000] Linux version 6.1.0-rt-arm64 (gcc-12)\n"
                     + "".join(f"[    0.{i:06d}] more of the console's first burst\n" for i in range(300)))
    with open(burst, "rb") as f:
        child = fdpexpect.fdspawn(f.fileno(), encoding="utf-8", searchwindowsize=window, maxread=maxread,
                                  timeout=5)
        return child.expect(["Linux version [0-9]", pexpect.EOF]) == 0


def test_a_full_read_of_lavas_default_size_hides_the_kernels_first_lines(tmp_path):
    window = lava_search_window()
    assert not burst_expect(tmp_path, 4092, window), "LAVA's default read size no longer hides a prompt"
    for name, d in serial_dictionaries().items():
        assert burst_expect(tmp_path, int(d["constants"]["spawn_maxread"]), window), name


def test_every_serial_console_reads_at_most_half_the_search_window():
    window = lava_search_window()
    dicts = serial_dictionaries()
    assert {"twin-rk356x.yaml", "twin-am335x.yaml", "qemu-uboot-aarch64.yaml", "rk3568-rock-3a-01.yaml"} <= set(dicts)
    for name, d in dicts.items():
        assert int(d["constants"]["spawn_maxread"]) <= window // 2, name


def test_the_real_boards_template_renders_the_same_read_size():
    """rk3568-rock-3a.jinja2 on a server (LAVA's own base templates): what
    the shipped rendered dictionary says."""
    assert (LAVA_DEVICE_TYPES / "base-uboot.jinja2").is_file(), "Debian's lava-server is not installed"
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(
        [str(ROOT / "lava" / "devices"), str(ROOT / "lava" / "device-types"), str(LAVA_DEVICE_TYPES)]),
        autoescape=False, trim_blocks=True)
    rendered = yaml.safe_load(env.get_template("rk3568-rock-3a-01.jinja2").render())
    shipped = yaml.safe_load((ROOT / "lava" / "devices" / "rk3568-rock-3a-01.yaml").read_text())
    assert rendered["constants"]["spawn_maxread"] == shipped["constants"]["spawn_maxread"] == "2000"
