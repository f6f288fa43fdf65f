"""The rack's twins as rtlab boards: which variants they can run, and which
kernels are built for them (no boot here: tests/integration/test_rack_twins.py)."""
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rtlab.run import runner
from rtlab.targets.boards import ENV_DIR as ENV, find_board, load_board
from rtlab.plan.campaign import Job
from rtlab.errors import InputError
from rtlab.targets.variants import load_variants

VARIANTS = load_variants()


def _images(generic="voluntary"):
    k = lambda p: SimpleNamespace(preempt=p, package=f"linux-image-{p}", version="1")  # noqa: E731
    return {a: SimpleNamespace(kernels={"generic": k(generic), "rt": k("rt")})
            for a in ("armv7l", "aarch64", "x86_64")}


def test_armv7l_builds_each_model_on_its_own_other_arches_share_preempt_dynamic():
    assert VARIANTS["none"].fragments_for("armv7l") == ("preempt-none", "nohz-full")
    assert VARIANTS["preempt-iso"].fragments_for("armv7l") == ("preempt-full", "nohz-full")
    assert VARIANTS["none"].fragments_for("aarch64") == ("preempt-dynamic", "nohz-full")
    assert VARIANTS["rt"].fragments_for("armv7l") == ("preempt-rt", "nohz-full")


def test_a_per_arch_build_for_an_unknown_arch_names_file_and_key(tmp_path):
    f = tmp_path / "variants.yaml"
    f.write_text("isolation: {suffix: -iso, boot_args: 'isolcpus={cpu}'}\n"
                 "variants:\n  none:\n    kernel: {build: [preempt-none], build_by_arch: {riscv64: [preempt-none]}}\n"
                 "    expect: {preempt: none}\n")
    with pytest.raises(InputError, match=r"variants.yaml.*build_by_arch.*riscv64.*unknown arch"):
        load_variants(f)


def test_one_cpu_twin_has_no_isolation_variant_and_builds_nothing_for_it(monkeypatch):
    am335x, imx6q = find_board("twin-am335x"), find_board("twin-imx6q")
    assert (am335x.cpus, am335x.isolate_cpu, imx6q.cpus, imx6q.isolate_cpu) == (1, None, 4, 3)
    images = _images()
    job = lambda b, v: Job(board=b, variant=VARIANTS[v], suites=())  # noqa: E731
    why = runner.unavailable(job(am335x, "rt-iso"), images)
    assert why == "twin-am335x has 1 CPU and no isolate_cpu: isolating a CPU would leave no CPU for the system"
    assert runner.unavailable(job(imx6q, "rt-iso"), images) is None
    # Debian's armmp generic is voluntary: none is built, from the armv7l fragments
    assert "needs preemption model none" in runner.unavailable(job(am335x, "none"), images)
    asked = []
    from rtlab import kernel as kbuild
    monkeypatch.setattr(kbuild, "ensure_built_kernel",
                        lambda arch, frags, progress=None: asked.append((arch, tuple(frags))) or "K")
    built = runner.build_kernels([job(am335x, "none"), job(am335x, "none-iso"), job(imx6q, "none"),
                                  job(imx6q, "voluntary"), job(imx6q, "rt")], images, None, lambda m: None)
    assert asked == [("armv7l", ("base-qemu-armv7l", "preempt-none", "nohz-full"))]
    # the imx6q twin builds nothing: a built (6.12) kernel cannot drive its console UART
    assert set(built) == {("twin-am335x", "none")}
    # with the kernel built, the variant is available on the twin
    assert runner.unavailable(job(am335x, "none"), images, built) is None


def test_a_twin_that_cannot_run_built_kernels_says_why_per_variant():
    """QEMU 7.2's i.MX UART cannot serve Linux >= 6.4's imx driver (labgrid/
    README.md): on twin-imx6q the variants that need a source build are not
    available with that reason, Debian's prebuilt ones stay, and a
    --kernel-tree job is refused with it rather than booted to a dead console."""
    imx6q = find_board("twin-imx6q")
    assert "USR2_WAKE" in imx6q.built_kernels_unusable
    assert find_board("twin-am335x").built_kernels_unusable is None  # same kernels, other UART
    images = _images()
    job = lambda v: Job(board=imx6q, variant=VARIANTS[v], suites=())  # noqa: E731
    for v in ("none", "preempt", "none-iso", "preempt-iso"):
        why = runner.unavailable(job(v), images)
        assert "needs preemption model" in why and "cannot run on twin-imx6q: QEMU 7.2" in why, why
    for v in ("voluntary", "rt", "voluntary-iso", "rt-iso"):
        assert runner.unavailable(job(v), images) is None
    why = runner.unavailable(job("rt"), images, kernel_tree=Path("/src/linux"))
    assert why.startswith("twin-imx6q cannot run kernels built from source: QEMU 7.2")


@pytest.mark.parametrize("value", ["''", "'   '", "[a]", "{x: 1}"])
def test_built_kernels_unusable_must_be_a_reason(tmp_path, value):
    src = (ENV / "twin-imx6q.yaml").read_text()
    f = tmp_path / "b.yaml"
    f.write_text(re.sub(r"built_kernels_unusable: >-\n(?:        .*\n)+",
                        f"built_kernels_unusable: {value}\n", src))
    assert f.read_text() != src
    with pytest.raises(InputError, match=r"b\.yaml.*built_kernels_unusable"):
        load_board(f)


def test_twins_stage_the_dtb_of_the_flavour_they_boot(tmp_path):
    from rtlab.images import ImageSet, KernelImage
    kernels = {f: KernelImage(tmp_path / f / "vmlinuz", f"linux-image-{f}", "1", f"6.1-{f}", p)
               for f, p in (("generic", "voluntary"), ("rt", "rt"))}
    images = {"armv7l": ImageSet("armv7l", kernels, tmp_path / "initrd")}
    env, kernel = runner.stage_kernel(Job(find_board("twin-imx6q"), VARIANTS["rt"], ()), images)
    assert env["LG_RTLAB_DTB_DIR"] == str(tmp_path / "rt") == kernel["dtb_dir"]
    env, _ = runner.stage_kernel(Job(find_board("twin-x86-ipc"), VARIANTS["rt"], ()),
                                 {"x86_64": ImageSet("x86_64", kernels, tmp_path / "initrd")})
    assert "LG_RTLAB_DTB_DIR" not in env  # x86: no device trees
