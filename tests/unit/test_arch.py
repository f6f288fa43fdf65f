"""rtlab/targets/arch.py is the one architecture table: images, kernel builds, QEMU
boards and LAVA read it, and its facts match the tools that use them."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rtlab.targets import arch
from rtlab import images, kernel
from rtlab.images import read_elf
from rtlab.lava.boards import lava_arch_name
from rtlab.suites.rtbench import rtbench_binary

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_reads_the_same_table():
    assert images.ARCHES is arch.ARCHES and kernel.ARCHES is arch.ARCHES
    assert {lava_arch_name(a) for a in arch.ARCHES} == {"amd64", "arm64", "armhf"}


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
