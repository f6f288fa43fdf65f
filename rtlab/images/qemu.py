"""Running an image set under QEMU (boards build on this; handy for debugging)."""
from __future__ import annotations


from ..targets import arch as _arch
from .imageset import ImageSet


def qemu_command(images: ImageSet, flavour: str = "rt", *, append: str = "", smp: int = 2,
                 memory: int = 1024, accel: str = "tcg", network: bool = True) -> list[str]:
    """A plain qemu command line booting *flavour* with the initramfs, the
    serial console on stdio. TCG by default: KVM guests hang on this host."""
    q = _arch.get(images.arch).qemu
    kernel = images.kernels[flavour]
    cmd = [q.binary, "-machine", q.machine, "-cpu", q.cpu, "-accel", accel,
           "-smp", str(smp), "-m", str(memory), "-nographic", "-no-reboot",
           "-kernel", str(kernel.path), "-initrd", str(images.initramfs),
           "-append", f"console={q.console} {append}".strip()]
    cmd += ["-nic", q.nic] if network else ["-nic", "none"]
    return cmd
