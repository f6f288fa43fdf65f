"""The "flash" step: TFTPStagingDriver writes the boot set a board's U-Boot
(or PXE firmware) fetches; RtlabUBootStrategy binds with or without U-Boot."""
import textwrap

import pytest
from labgrid import Environment

import rtlab.lab.drivers  # noqa: F401 - registers the drivers
import rtlab.lab.uboot  # noqa: F401 - registers RtlabUBootStrategy


def _env(tmp_path, drivers: str, tftp_external: str = "") -> Environment:
    (tmp_path / "Image").write_bytes(b"K" * 1000)
    (tmp_path / "initrd").write_bytes(b"I" * 500)
    (tmp_path / "board.dtb").write_bytes(b"D" * 30)
    cfg = tmp_path / "env.yaml"
    cfg.write_text(textwrap.dedent(f"""
        targets:
          main:
            resources:
              TFTPProvider:
                internal: {tmp_path}/tftp/
                external: "{tftp_external}"
            drivers:
        """) + textwrap.indent(textwrap.dedent(drivers), "      ") + textwrap.dedent(f"""
        images:
          kernel: {tmp_path}/Image
          initrd: {tmp_path}/initrd
          dtb: {tmp_path}/board.dtb
        """))
    return Environment(str(cfg))


def test_uboot_boot_set_is_staged_with_a_uenv_u_boot_can_import(tmp_path):
    env = _env(tmp_path, """
        TFTPStagingDriver:
          bootargs: 'console=ttyAMA0,115200 isolcpus=nohz,domain,managed_irq,1 nohz_full=1'
          fdt_fallback: '${fdtcontroladdr}'
    """)
    t = env.get_target("main")
    drv = t.get_driver("TFTPStagingDriver")
    staged = drv.stage()
    tftp = tmp_path / "tftp" / "rtlab"
    assert (tftp / "kernel").read_bytes() == b"K" * 1000
    assert (tftp / "initrd").read_bytes() == b"I" * 500
    assert not (tftp / "board.dtb").exists()  # no dtb key: U-Boot hands over its own
    uenv = dict(line.split("=", 1) for line in (tftp / "uEnv.txt").read_text().splitlines())
    assert uenv["bootargs"] == "console=ttyAMA0,115200 isolcpus=nohz,domain,managed_irq,1 nohz_full=1"
    assert uenv["rtlab_kernel"] == "rtlab/kernel" and uenv["rtlab_initrd"] == "rtlab/initrd"
    assert uenv["rtlab_boot"] == (
        "tftpboot ${kernel_addr_r} ${rtlab_kernel} && tftpboot ${ramdisk_addr_r} ${rtlab_initrd} && "
        "setenv rtlab_initrd_size ${filesize} && "
        "booti ${kernel_addr_r} ${ramdisk_addr_r}:${rtlab_initrd_size} ${fdtcontroladdr}")
    assert drv.uboot_commands() == ["tftpboot ${scriptaddr} rtlab/uEnv.txt",
                                    "env import -t ${scriptaddr} ${filesize}"]
    assert staged["kernel"]["size"] == 1000 and staged["uEnv.txt"]["source"] == "generated"
    assert not list(tftp.glob("*.part"))
    t.cleanup()


def test_dtb_and_bootz_for_a_32_bit_board_under_a_shared_tftp_root(tmp_path):
    env = _env(tmp_path, """
        TFTPStagingDriver:
          dtb: dtb
          boot_cmd: bootz
          bootargs: 'console=ttymxc0,115200'
    """, tftp_external="imx6q-1/")
    t = env.get_target("main")
    drv = t.get_driver("TFTPStagingDriver")
    drv.stage()
    tftp = tmp_path / "tftp" / "rtlab"
    assert (tftp / "board.dtb").read_bytes() == b"D" * 30
    text = (tftp / "uEnv.txt").read_text()
    assert "rtlab_kernel=imx6q-1/rtlab/kernel" in text and "rtlab_fdt=imx6q-1/rtlab/board.dtb" in text
    assert text.rstrip().endswith("bootz ${kernel_addr_r} ${ramdisk_addr_r}:${rtlab_initrd_size} ${rtlab_fdt_addr}")
    assert drv.uenv_path() == "imx6q-1/rtlab/uEnv.txt"
    t.cleanup()


def test_dtb_beside_the_kernel_needs_no_variable_of_its_own(tmp_path):
    """env/twin-imx6q.yaml names its device tree by file name: rtlab keeps a
    kernel package's dtbs beside the kernel image."""
    (tmp_path / "imx6q-sabrelite.dtb").write_bytes(b"S" * 40)
    env = _env(tmp_path, """
        TFTPStagingDriver:
          dtb_beside_kernel: imx6q-sabrelite.dtb
          boot_cmd: bootz
    """)
    t = env.get_target("main")
    drv = t.get_driver("TFTPStagingDriver")
    drv.stage()
    tftp = tmp_path / "tftp" / "rtlab"
    assert (tftp / "board.dtb").read_bytes() == b"S" * 40
    assert "rtlab_fdt=rtlab/board.dtb" in (tftp / "uEnv.txt").read_text()
    (tmp_path / "imx6q-sabrelite.dtb").unlink()
    with pytest.raises(Exception, match="device tree 'imx6q-sabrelite.dtb' is not beside the kernel"):
        drv.stage()
    t.cleanup()


def test_pxelinux_boot_set_for_pxe_firmware(tmp_path):
    env = _env(tmp_path, """
        TFTPStagingDriver:
          format: pxelinux
          bootargs: 'console=ttyS0,115200n8 preempt=full'
    """, tftp_external="ipc-1/")
    t = env.get_target("main")
    t.get_driver("TFTPStagingDriver").stage()
    cfg = (tmp_path / "tftp" / "pxelinux.cfg" / "default").read_text()
    assert "KERNEL ipc-1/rtlab/kernel" in cfg and "INITRD ipc-1/rtlab/initrd" in cfg
    assert "APPEND console=ttyS0,115200n8 preempt=full" in cfg
    t.cleanup()


def test_a_missing_image_is_named(tmp_path):
    env = _env(tmp_path, "TFTPStagingDriver: {}\n")
    (tmp_path / "initrd").unlink()
    t = env.get_target("main")
    with pytest.raises(Exception, match="initrd"):
        t.get_driver("TFTPStagingDriver").stage()
    t.cleanup()


def _strategy_env(tmp_path, strategy: str, with_uboot: bool) -> Environment:
    lines = [
        "targets:",
        "  main:",
        "    resources:",
        "      NetworkPowerPort: {model: simplerest, host: 'http://127.0.0.1:9/relay/{index}/{value}', index: 0}",
        "      NetworkSerialPort: {host: 127.0.0.1, port: 9, protocol: rfc2217, speed: 1500000}",
        f"      TFTPProvider: {{internal: {tmp_path}/tftp/, external: ''}}",
        "    drivers:",
        "      NetworkPowerDriver: {}",
        "      RtlabSerialDriver: {}",
        "      TFTPStagingDriver: {}",
        *(["      RtlabUBootDriver: {prompt: '=> '}"] if with_uboot else []),
        "      ShellDriver: {prompt: 'rtlab# ', login_prompt: 'login: ', username: root}",
        f"      {strategy}: {{}}",
    ]
    cfg = tmp_path / "s.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    return Environment(str(cfg))


def test_strategies_bind_power_console_uboot_shell_and_staging(tmp_path):
    t = _strategy_env(tmp_path, "RtlabUBootStrategy", True).get_target("main")
    s = t.get_driver("Strategy", activate=False)
    assert type(s.uboot).__name__ == "RtlabUBootDriver"
    assert type(s.staging).__name__ == "TFTPStagingDriver"
    assert type(s.console).__name__ == "RtlabSerialDriver" and s.console.port.speed == 1500000
    # the shell, not U-Boot, answers for CommandProtocol on a booted board
    assert type(t.get_driver("CommandProtocol", activate=False)).__name__ == "ShellDriver"
    t.cleanup()


def test_netboot_strategy_has_no_bootloader_to_drive(tmp_path):
    t = _strategy_env(tmp_path, "RtlabNetbootStrategy", False).get_target("main")
    s = t.get_driver("Strategy", activate=False)
    assert s.uboot is None and type(s.staging).__name__ == "TFTPStagingDriver"
    t.cleanup()


def test_ipxe_boot_set_for_netbooting_firmware(tmp_path):
    """The x86 IPC (and its twin): DHCP names rtlab/boot.ipxe; kernel and
    initramfs are fetched relative to it, with the variant's bootargs."""
    env = _env(tmp_path, """
        TFTPStagingDriver:
          format: ipxe
          bootargs: 'console=ttyS0,115200n8  preempt=full '
    """)
    t = env.get_target("main")
    staged = t.get_driver("TFTPStagingDriver").stage()
    script = (tmp_path / "tftp" / "rtlab" / "boot.ipxe").read_text()
    assert script == "#!ipxe\nkernel kernel console=ttyS0,115200n8 preempt=full\ninitrd initrd\nboot\n"
    assert (tmp_path / "tftp" / "rtlab" / "kernel").is_file() and (tmp_path / "tftp" / "rtlab" / "initrd").is_file()
    assert set(staged) == {"kernel", "initrd", "boot.ipxe"}
    t.cleanup()


def test_a_direct_boot_twin_boots_what_is_staged_and_nothing_else(tmp_path):
    """Rack board type `boot: direct` (the i.MX6Q twin): QEMU loads the
    staged uEnv.txt's kernel, initrd, dtb and bootargs; nothing staged, no
    kernel (a silent board the strategy power-cycles, then calls infra)."""
    from rtlab.rack.board import VirtualBoard
    from rtlab.rack.config import load_rack_config

    spec = load_rack_config().boards["imx6q0"]
    b = VirtualBoard(spec, tmp_path, say=lambda _: None)
    try:
        cmd = b.qemu_command()
        assert "-kernel" not in cmd and cmd[cmd.index("-machine") + 1] == "sabrelite"
        assert cmd[cmd.index("-smp") + 1] == "4" and cmd[cmd.index("-cpu") + 1] == "cortex-a9"
        # console on the second UART, the first unconnected; the SoC's own NIC
        assert " ".join(cmd).endswith("-serial null -serial chardev:uart0")
        assert "model=" not in cmd[cmd.index("-nic") + 1]
        staged = b.tftp_dir / "rtlab"
        staged.mkdir(parents=True)
        for f in ("kernel", "initrd", "board.dtb"):
            (staged / f).write_bytes(b"x")
        (staged / "uEnv.txt").write_text("bootargs=console=ttymxc1,115200 panic=-1 preempt=full\n"
                                         "rtlab_boot=bootz ...\n")
        cmd = b.qemu_command()
        i = cmd.index("-kernel")
        assert cmd[i:i + 8] == ["-kernel", str(staged / "kernel"), "-initrd", str(staged / "initrd"),
                                "-append", "console=ttymxc1,115200 panic=-1 preempt=full",
                                "-dtb", str(staged / "board.dtb")]
    finally:
        b.close()
