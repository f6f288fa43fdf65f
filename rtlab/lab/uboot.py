"""Boards that boot through U-Boot over TFTP: the rack's boot path.

``TFTPStagingDriver`` is the "flash" step: it writes the variant's kernel,
initramfs (optionally a device tree) and a U-Boot environment ``uEnv.txt``
into the board's TFTP directory (labgrid's ``TFTPProvider`` /
``RemoteTFTPProvider`` resource: ``internal`` is the directory on the
exporter host, ``external`` the path prefix the board's TFTP client uses).
On the exporter host itself (the virtual rack: 127.0.0.1) files are copied;
elsewhere labgrid's ``ManagedFile`` (rsync over SSH, as TFTPProviderDriver
does) puts them there. The board's U-Boot then only needs::

    setenv autoload no; dhcp
    tftpboot ${loadaddr} <external>rtlab/uEnv.txt; env import -t ${loadaddr} ${filesize}
    run rtlab_boot        # tftpboot kernel + initramfs [+ dtb], booti/bootz

``RtlabUBootStrategy`` (off -> uboot -> shell) stages, powers the board on
through its PowerProtocol (a PDU), interrupts U-Boot, boots, and waits for
the shell prompt. When the console stays silent or a prompt does not come
(U-Boot's, or the shell's after boot), it power-cycles the board and tries
once more (``power_cycle_retries``), as a lab technician would: a hung board
recovers by a power cycle; one that fails twice is an infra error naming the
step. Beside :class:`rtlab.lab.strategy.RtlabStrategy` (QEMUDriver boards),
it reaches the same state, so the same suites run on both.
"""
from __future__ import annotations

import enum
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import attr
from labgrid.driver.common import Driver
from labgrid.factory import target_factory
from labgrid.step import step
from labgrid.strategy.common import Strategy, StrategyError, never_retry
from pexpect import EOF, TIMEOUT

from .strategy import speed_up_console, wanted_status

LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "[::1]"}


def _is_local(host: str) -> bool:
    return host in LOCAL_HOSTS or host == socket.gethostname()


@target_factory.reg_driver
@attr.s(eq=False)
class TFTPStagingDriver(Driver):
    """Stage a boot set into the board's TFTP directory (the "flash" step).

    Args (image keys refer to the env file's ``images:``):
        kernel, initrd, dtb: image keys (dtb optional: "" uses ``fdt_fallback``)
        dtb_beside_kernel: instead of a dtb image key, the device tree's file
            name in the kernel image's directory (where rtlab puts a kernel
            package's dtbs): the env file then needs no variable of its own
        bootargs: kernel command line (written as ``bootargs`` in uEnv.txt)
        subdir: directory below the TFTP root for this board's files
        boot_cmd: ``booti`` (arm64 Image), ``bootz`` (arm zImage), ``bootm``
        fdt_addr: where a staged dtb is loaded (a U-Boot expression)
        fdt_fallback: the device tree when none is staged; on QEMU's virt
            machine U-Boot hands over the one QEMU gave it (``${fdtcontroladdr}``)
    """

    bindings = {"provider": {"TFTPProvider", "RemoteTFTPProvider"}}
    kernel = attr.ib(default="kernel", validator=attr.validators.instance_of(str))
    initrd = attr.ib(default="initrd", validator=attr.validators.instance_of(str))
    dtb = attr.ib(default="", validator=attr.validators.instance_of(str))
    dtb_beside_kernel = attr.ib(default="", validator=attr.validators.instance_of(str))
    bootargs = attr.ib(default="", validator=attr.validators.instance_of(str))
    subdir = attr.ib(default="rtlab", validator=attr.validators.instance_of(str))
    boot_cmd = attr.ib(default="booti", validator=attr.validators.in_(["booti", "bootz", "bootm"]))
    fdt_addr = attr.ib(default="${fdt_addr_r}", validator=attr.validators.instance_of(str))
    fdt_fallback = attr.ib(default="${fdtcontroladdr}", validator=attr.validators.instance_of(str))
    load_addr = attr.ib(default="${scriptaddr}", validator=attr.validators.instance_of(str))
    format = attr.ib(default="uboot", validator=attr.validators.in_(["uboot", "pxelinux", "ipxe"]))
    pxe_config = attr.ib(default="pxelinux.cfg/default", validator=attr.validators.instance_of(str))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        self.staged: dict = {}

    def uenv(self) -> str:
        ext = self.provider.external.rstrip("/")
        pre = f"{ext}/{self.subdir}/" if ext else f"{self.subdir}/"
        lines = [f"bootargs={self.bootargs}",
                 f"rtlab_kernel={pre}kernel",
                 f"rtlab_initrd={pre}initrd"]
        boot = ["tftpboot ${kernel_addr_r} ${rtlab_kernel}",
                "tftpboot ${ramdisk_addr_r} ${rtlab_initrd}",
                "setenv rtlab_initrd_size ${filesize}"]
        if self.dtb or self.dtb_beside_kernel:
            lines.append(f"rtlab_fdt={pre}board.dtb")
            lines.append(f"rtlab_fdt_addr={self.fdt_addr}")
            boot.append("tftpboot ${rtlab_fdt_addr} ${rtlab_fdt}")
            fdt = "${rtlab_fdt_addr}"
        else:
            fdt = self.fdt_fallback
        boot.append(f"{self.boot_cmd} ${{kernel_addr_r}} ${{ramdisk_addr_r}}:${{rtlab_initrd_size}} {fdt}")
        lines.append("rtlab_boot=" + " && ".join(boot))
        return "\n".join(lines) + "\n"

    def pxelinux(self) -> str:
        """A pxelinux/syslinux config for PXE firmware (x86 boards)."""
        ext = self.provider.external.rstrip("/")
        pre = f"{ext}/{self.subdir}/" if ext else f"{self.subdir}/"
        return (f"DEFAULT rtlab\nPROMPT 0\nTIMEOUT 0\nLABEL rtlab\n  KERNEL {pre}kernel\n"
                f"  INITRD {pre}initrd\n  APPEND {self.bootargs}\n")

    def ipxe(self) -> str:
        """An iPXE script (x86 boards whose PXE firmware is, or chainloads,
        iPXE: DHCP's boot file names ``<subdir>/boot.ipxe``). Relative names
        resolve against the script's own TFTP URI."""
        args = " ".join(self.bootargs.split())
        return f"#!ipxe\nkernel kernel {args}\ninitrd initrd\nboot\n"

    def uenv_path(self) -> str:
        """uEnv.txt as the board's TFTP client names it."""
        ext = self.provider.external.rstrip("/")
        return f"{ext}/{self.subdir}/uEnv.txt" if ext else f"{self.subdir}/uEnv.txt"

    def uboot_commands(self) -> list[str]:
        """What U-Boot runs (after the board's own network set-up, e.g. dhcp)
        to pick up the staged boot set; `run rtlab_boot` then boots it."""
        return [f"tftpboot {self.load_addr} {self.uenv_path()}",
                f"env import -t {self.load_addr} ${{filesize}}"]

    @Driver.check_active
    @step(title="stage", result=True)
    def stage(self) -> dict:
        """Put kernel, initramfs, [dtb,] uEnv.txt into the TFTP directory."""
        images = self.target.env.config.get_images() if self.target.env else {}
        files = {}
        for name, key in (("kernel", self.kernel), ("initrd", self.initrd), ("board.dtb", self.dtb)):
            if not key:
                continue
            path = images.get(key)
            if path is None:
                raise StrategyError(f"TFTPStagingDriver: no image '{key}' in the env file's images")
            if not os.path.isfile(path):
                raise StrategyError(f"image '{key}' does not exist: {path}")
            files[name] = path
        if self.dtb_beside_kernel and "kernel" in files:
            path = os.path.join(os.path.dirname(files["kernel"]), self.dtb_beside_kernel)
            if not os.path.isfile(path):
                raise StrategyError(f"device tree '{self.dtb_beside_kernel}' is not beside the kernel: {path}")
            files["board.dtb"] = path
        internal = self.provider.internal.rstrip("/") + "/" + self.subdir
        with tempfile.TemporaryDirectory(prefix="rtlab-uenv-") as tmp:
            if self.format == "uboot":
                cfg_name, cfg_text = "uEnv.txt", self.uenv()
            elif self.format == "ipxe":
                cfg_name, cfg_text = "boot.ipxe", self.ipxe()
            else:
                cfg_name, cfg_text = "pxelinux.cfg", self.pxelinux()
            cfg = Path(tmp) / cfg_name
            cfg.write_text(cfg_text)
            files[cfg_name] = str(cfg)
            host = getattr(self.provider, "host", "localhost")
            if _is_local(host):
                os.makedirs(internal, exist_ok=True)
                for name, src in files.items():
                    dst = self._dest(internal, name)
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    tmpdst = dst + ".part"
                    shutil.copyfile(src, tmpdst)
                    os.replace(tmpdst, dst)  # a board never reads a half-written file
            else:  # a remote exporter: labgrid's way (rsync over ssh + symlink)
                from labgrid.util.managedfile import ManagedFile
                for name, src in files.items():
                    if os.path.basename(src) != name:
                        link = Path(tmp) / "named" / name
                        link.parent.mkdir(exist_ok=True)
                        shutil.copyfile(src, link)
                        src = str(link)
                    # detect_nfs off: a file the exporter host sees at
                    # the same path (a shared /home, or this machine's lab of
                    # namespaces) would be linked where it is, and the
                    # generated uEnv.txt is in a temporary directory
                    ManagedFile(src, self.provider, detect_nfs=False).sync_to_resource(
                        symlink=self._dest(internal, name))
            self.staged = {n: {"path": self._dest(internal, n), "size": os.path.getsize(p),
                               "source": "generated" if n == cfg_name else os.path.realpath(p)}
                           for n, p in files.items()}
        self.staged[cfg_name]["bootargs"] = self.bootargs
        return self.staged

    def _dest(self, internal: str, name: str) -> str:
        if name == "pxelinux.cfg":  # where PXE firmware looks: the TFTP root of this board
            return os.path.join(self.provider.internal.rstrip("/"), self.pxe_config)
        return os.path.join(internal, name)


class Status(enum.Enum):
    unknown = 0
    off = 1
    uboot = 2
    shell = 3


#: what a hung or silent console looks like to labgrid's drivers
CONSOLE_FAILURES = (TIMEOUT, EOF, OSError)


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabUBootStrategy(Strategy):
    """off -> uboot -> shell, staging first, with one power-cycle recovery."""

    bindings = {
        "power": "PowerProtocol",
        "console": "ConsoleProtocol",
        "uboot": {"UBootDriver", None},
        "shell": "ShellDriver",
        "staging": {"TFTPStagingDriver", None},
    }

    status = attr.ib(default=Status.unknown)
    power_cycle_retries = attr.ib(default=1, validator=attr.validators.instance_of(int))

    def __attrs_post_init__(self):
        super().__attrs_post_init__()
        #: one entry per power cycle done to recover: {"step", "error"}
        self.recoveries: list[dict] = []
        self._step = ""
        #: seconds per phase of the last boot (power-on -> U-Boot prompt -> kernel -> shell)
        self.timings: dict = {}

    def _off(self) -> None:
        for drv in (self.shell, self.uboot, self.console):
            if drv is not None:
                self.target.deactivate(drv)
        self.target.activate(self.power)
        self.power.off()

    def _drain(self) -> None:
        """Discard console bytes that arrived before power-on."""
        try:
            for _ in range(50):
                if not self.console.read(size=4096, timeout=0.1):
                    break
        except Exception:  # noqa: BLE001 - CONSOLE_FAILURES, and labgrid's per-driver timeouts
            pass

    def _to_uboot(self) -> None:
        t0 = time.monotonic()
        self._step = "console"
        self.target.activate(self.console)
        speed_up_console(self.console)
        self._drain()
        self._step = "power on"
        self.power.on()
        if self.uboot is None:
            return  # firmware boots by itself (PXE)
        self._step = "U-Boot prompt"
        self.target.activate(self.uboot)  # waits for autoboot/prompt, runs init_commands
        if self.staging is not None and self.staging.format == "uboot":
            self._step = "U-Boot fetching uEnv.txt"
            for cmd in self.staging.uboot_commands():  # fetch and import uEnv.txt
                self.uboot.run_check(cmd, timeout=60)
        self.timings["power_on_to_uboot_ready_s"] = round(time.monotonic() - t0, 3)

    def _to_shell(self) -> None:
        t0 = time.monotonic()
        if self.uboot is not None:
            self._step = "kernel start (TFTP boot)"
            self.uboot.boot("")
            self.uboot.await_boot()
            self.timings["uboot_to_kernel_s"] = round(time.monotonic() - t0, 3)
        t1 = time.monotonic()
        self._step = "shell prompt"
        self.target.activate(self.shell)
        self.timings["kernel_to_shell_s"] = round(time.monotonic() - t1, 3)
        # the console is the kernel's too: late driver messages (i.MX6's
        # "deferred probe pending" at ~20 s) must not land inside command output
        self.shell.run("dmesg -n 1")

    def _boot(self, until: Status) -> None:
        if self.staging is not None:
            self.target.activate(self.staging)
            try:
                self.staging.stage()
            except StrategyError:
                raise
            except Exception as e:  # noqa: BLE001 - the flash step failed: infra, no retry
                raise StrategyError(f"staging the boot files failed: {type(e).__name__}: {e}") from e
        t0 = time.monotonic()
        errors: list[str] = []
        for attempt in range(1 + self.power_cycle_retries):
            self._step = "power off"
            self.timings = {}
            try:
                if attempt:
                    self.logger.warning("power-cycling after: %s", errors[-1])
                    self._off()
                    time.sleep(float(getattr(self.power, "delay", 1.0) or 0))
                self._to_uboot()
                if until == Status.uboot:
                    break
                self._to_shell()
                break
            except Exception as e:  # noqa: BLE001 - console failures are retried once
                if isinstance(e, StrategyError):
                    raise
                what = f"no {self._step} ({type(e).__name__}: {str(e).strip()[:300]})"
                errors.append(what)
                self.recoveries.append({"attempt": attempt + 1, "step": self._step, "error": what})
                if attempt == self.power_cycle_retries:
                    raise StrategyError(
                        f"board did not boot after {attempt} power cycle(s): " + "; ".join(errors)) from e
        self.timings["total_s"] = round(time.monotonic() - t0, 3)
        self.logger.info("boot timings: %s, recoveries: %d", self.timings, len(self.recoveries))

    @never_retry
    @step(args=["status"])
    def transition(self, status, *, step):  # pylint: disable=redefined-outer-name
        status = wanted_status(self, status, Status, step)
        if status is None:
            return
        if status == Status.off:
            try:
                self._off()
            except Exception as e:  # noqa: BLE001
                raise StrategyError(f"power off failed: {type(e).__name__}: {e}") from e
        elif status in (Status.uboot, Status.shell):
            if status == Status.uboot and self.uboot is None:
                raise StrategyError("this board has no UBootDriver (it boots by itself)")
            self.transition(Status.off)
            self._boot(status)
        else:
            raise StrategyError(f"no transition found from {self.status} to {status}")
        self.status = status

    @never_retry
    def force(self, status):
        if not isinstance(status, Status):
            status = Status[status]
        if status == Status.off:
            self.target.activate(self.power)
        elif status == Status.uboot:
            if self.uboot is None:
                raise StrategyError("this board has no UBootDriver")
            self.target.activate(self.uboot)
        elif status == Status.shell:
            self.target.activate(self.shell)
        else:
            raise StrategyError(f"can not force state {status}")
        self.status = status


@target_factory.reg_driver
@attr.s(eq=False)
class RtlabNetbootStrategy(RtlabUBootStrategy):
    """off -> stage -> power on -> shell, for firmware that netboots by itself
    (PXE: the x86 boards); the same power-cycle recovery."""

    bindings = {
        "power": "PowerProtocol",
        "console": "ConsoleProtocol",
        "shell": "ShellDriver",
        "staging": {"TFTPStagingDriver", None},
    }

    def __attrs_post_init__(self):
        self.uboot = None
        super().__attrs_post_init__()
