"""rtlab/targets/arch.py is the one architecture table: images, kernel builds, QEMU
boards and LAVA read it, and its facts match the tools that use them."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from rtlab.targets import arch
from rtlab import images, kernel
from rtlab.images import read_elf
from rtlab.lava.boards import lava_arch_name
from rtlab.suites.rtbench import rtbench_binary

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_reads_the_same_table():
    assert images.ARCHES is arch.ARCHES and kernel.ARCHES is arch.ARCHES
    assert {lava_arch_name(a) for a in arch.ARCHES} >= {"amd64", "arm64", "armhf"}


def test_names_and_aliases_resolve_to_one_record():
    assert arch.get("armhf") is arch.get("armv7l") is arch.get("arm")
    assert arch.get("arm64") is arch.get("aarch64")
    assert arch.canonical("armhf") == "armv7l" and arch.canonical("riscv64") == "riscv64"
    with pytest.raises(KeyError, match="unknown arch 'riscv64'.*x86_64"):
        arch.get("riscv64")


@pytest.mark.parametrize("name", sorted(arch.ARCHES))
def test_facts_match_the_toolchain_and_the_kernel_tree(name):
    a = arch.get(name)
    # the cross compiler and QEMU binary exist (env/apt-packages.txt)
    assert shutil.which(f"{a.cross}gcc"), f"{a.cross}gcc"
    assert shutil.which(a.qemu.binary), a.qemu.binary
    # the rtbench cross build (make rtbench) is an ELF of this arch's machine and class
    binary = rtbench_binary(name)
    if binary.is_file():
        info = read_elf(binary)
        assert (info.machine, info.bits) == (a.elf_machine, a.elf_bits)
    # every arch a board is built for has a base config fragment for source builds
    assert (ROOT / "kernel-configs" / "fragments" / f"base-qemu-{name}.config").is_file()
    assert a.kernel_image.startswith(f"arch/{'x86' if a.kernel_arch == 'x86_64' else a.kernel_arch}/boot/")


def test_images_yaml_pins_a_generic_and_an_rt_kernel_per_arch():
    for name in arch.ARCHES:
        cfg = images.load_config(name)
        a = arch.get(name)
        assert cfg.kernels["generic"].package.endswith(f"-{a.kernel_flavour}")
        assert cfg.kernels["rt"].package.endswith(f"-rt-{a.kernel_flavour}")
        assert cfg.kernels["rt"].preempt == "rt"


def query(*args: str) -> subprocess.CompletedProcess:
    """The registry as env/setup-host.sh and rtbench/Makefile read it: the
    system python3, isolated (no venv, no site packages, no labgrid)."""
    return subprocess.run(["/usr/bin/python3", "-I", str(ROOT / "rtlab/targets/arch.py"), *args],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_the_host_set_up_reads_the_registry_with_the_system_python():
    res = query("--host-packages", "--host", "x86_64")
    assert res.returncode == 0, res.stderr
    pkgs = res.stdout.split()
    assert pkgs == arch.host_packages("x86_64")
    # every arch's emulator; the cross toolchains of the arches that are not the host's
    for a in arch.ARCHES.values():
        assert a.qemu.package in pkgs
        assert set(a.cross_packages) <= set(pkgs) or a.name == "x86_64"
    assert "gcc-x86-64-linux-gnu" not in pkgs and "gcc-x86-64-linux-gnu" in arch.host_packages("aarch64")
    foreign = query("--foreign", "--host", "x86_64").stdout.split()
    assert foreign == [a.debian for a in arch.ARCHES.values() if a.name != "x86_64"]
    assert foreign[:2] == ["arm64", "armhf"]
    assert query("--field", "rtbench_arch").stdout.split() == [a.rtbench_arch for a in arch.ARCHES.values()]
    assert query("--arch", "armhf", "--field", "qemu.binary").stdout.strip() == "qemu-system-arm"
    bad = query("--arch", "riscv64", "--field", "cross")
    assert bad.returncode == 2 and "unknown arch 'riscv64'" in bad.stderr
    assert query("--field", "cross_prefix").returncode == 2  # a method is not a field


def test_the_named_packages_are_the_ones_that_bring_the_tools():
    """setup-host.sh installed them here: dpkg knows each package and it owns
    the QEMU binary or cross compiler the entry names."""
    for pkg in arch.host_packages():
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True)
        assert status.stdout == "install ok installed", pkg
    for a in arch.ARCHES.values():
        owner = subprocess.run(["dpkg", "-S", shutil.which(a.qemu.binary) or a.qemu.binary],
                               capture_output=True, text=True).stdout
        assert owner.split(":")[0] == a.qemu.package, (a.name, owner)
        if a.cross_prefix():
            owner = subprocess.run(["dpkg", "-S", shutil.which(f"{a.cross}gcc") or f"{a.cross}gcc"],
                                   capture_output=True, text=True).stdout
            assert owner.split(":")[0] == a.cross_packages[0], (a.name, owner)


def test_rtbench_makefile_takes_the_cross_compiler_from_the_registry():
    for a in arch.ARCHES.values():
        if not a.cross_prefix():
            continue
        res = subprocess.run(["make", "-n", "-C", str(ROOT / "rtbench"), f"ARCH={a.rtbench_arch}", "-B"],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert f"{a.cross}gcc " in res.stdout and f"build/{a.rtbench_arch}/rtbench" in res.stdout
    res = subprocess.run(["make", "-n", "-C", str(ROOT / "rtbench"), "ARCH=riscv64"], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode != 0 and "unknown ARCH=riscv64: x86_64 aarch64 armv7l" in res.stderr


def env_qemu_drivers():
    for path in sorted((ROOT / "env").glob("*.yaml")) + sorted((ROOT / "env" / "boards").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text().replace("!template", ""))
        for target in (doc or {}).get("targets", {}).values():
            drv = (target.get("drivers") or {}).get("QEMUDriver")
            if drv:
                yield path, target["options"]["arch"], drv, doc.get("tools", {})


def test_the_env_files_qemu_lines_are_their_arch_entry():
    """A QEMU board's env file must load in labgrid by itself, so its QEMU
    lines are written out; they are the arch entry's (binary, machine, CPU,
    console, NIC), or a board of another machine says so by its machine."""
    found = list(env_qemu_drivers())
    assert {a for _, a, _, _ in found} >= {"x86_64", "aarch64"}
    for path, name, drv, tools in found:
        q = arch.get(name).qemu
        assert tools[drv["qemu_bin"]] == q.binary, path.name
        assert f"console={q.console}" in drv["boot_args"], path.name
        if drv["machine"] == q.machine:
            assert drv["cpu"] == q.cpu and f"-nic {q.nic}" in drv["extra_args"], path.name
