"""A real kernel from the real tree: Debian's linux-source-6.12 (pinned,
unpacked once into the shared cache by `rtlab kernel source`) configured from
the shipped fragments and built for aarch64 with PREEMPT_DYNAMIC, the kernel
Debian does not ship for arm64.

One build per run, into a fresh build cache; the compiler cache is the shared
one, so only the first run on a machine compiles everything (~850 files,
12-15 CPU minutes: 11-13 min on 2 shared cores), later runs take ~30 s
(858/858 ccache hits) and the whole module ~1 min. The same fresh cache then
answers the second call without make.
"""
from __future__ import annotations

import json
import re
import shutil

import pytest

from rtlab import kernel as K
from rtlab.kernel import build as K_build
from rtlab.kernel import git as K_git

# make test installs the kernel build packages (env/apt-packages.txt)
MISSING = [t for t in ("ccache", "aarch64-linux-gnu-gcc", "bison", "flex", "bc", "apt-get") if not shutil.which(t)]
assert not MISSING, f"kernel build tools missing: {MISSING} (env/apt-packages.txt)"

ARCH = "aarch64"
FRAGMENTS = K.with_base(ARCH, ["preempt-dynamic", "nohz-full"])


@pytest.fixture(scope="module")
def source():
    return K.ensure_source(progress=None)


def test_source_is_a_git_tree_with_one_commit(source):
    assert len(source.commit) == 40
    log = K_git._git(source.path, "log", "--format=%H %s").stdout.splitlines()
    assert log == [f"{source.commit} {K.SOURCE_PACKAGE} {K.SOURCE_VERSION}"]
    assert K.tree_state(source.path).dirty_hash is None
    assert (source.path / "scripts" / "kconfig" / "merge_config.sh").is_file()


def test_dropped_preempt_rt_fails_before_anything_is_compiled(source, tmp_path):
    """PREEMPT_RT without EXPERT: olddefconfig silently drops it; rtlab must not."""
    no_expert = tmp_path / "no-expert.config"
    no_expert.write_text("# CONFIG_EXPERT is not set\n")
    rt = tmp_path / "rt-alone.config"
    rt.write_text("# PREEMPT_RT alone, trusting EXPERT to come from elsewhere\nCONFIG_PREEMPT_RT=y\n"
                  "CONFIG_RTLAB_NO_SUCH_OPTION=y\n")
    cache = tmp_path / "cache"
    with pytest.raises(K.KernelConfigError) as e:
        K.build_kernel(source.path, ARCH, ["base-qemu-aarch64", no_expert, rt], cache_dir=cache, progress=None)
    by_opt = {d.option: d for d in e.value.dropped}
    d = by_opt["CONFIG_PREEMPT_RT"]
    assert (d.wanted, d.got, d.fragment, d.line) == ("y", None, "rt-alone", 2)
    assert "depends on EXPERT" in d.hint and "Kconfig.preempt" in d.hint
    assert "no `config RTLAB_NO_SUCH_OPTION`" in by_opt["CONFIG_RTLAB_NO_SUCH_OPTION"].hint
    msg = str(e.value)
    assert "CONFIG_PREEMPT_RT: rt-alone:2 asks for y, olddefconfig left it out of .config" in msg
    # the rejected .config and the log are kept and named; nothing was compiled or cached
    bdir = next((p for p in (cache / "builds" / ARCH).iterdir() if p.is_dir()), None)  # not the .lock
    assert bdir is not None and str(bdir / "build.log") in msg
    assert "# CONFIG_PREEMPT_RT is not set" not in (bdir / ".config").read_text()
    assert "CONFIG_PREEMPT_RT=y" not in (bdir / ".config").read_text()
    assert not list(cache.rglob("build.json")) and not list(cache.rglob("Image"))
    # the objects went with the failed configuration: none left in the tree
    assert not list(source.path.glob(f".rtlab-build-{bdir.name}*"))


@pytest.fixture(scope="module")
def built(source, tmp_path_factory):
    """The one real build of this module, into a fresh build cache."""
    tmp = tmp_path_factory.mktemp("kbuild")
    lines: list[str] = []
    bk = K.build_kernel(source.path, ARCH, FRAGMENTS, cache_dir=tmp / "cache", progress=lines.append,
                        out=tmp / "out")
    return tmp, bk, lines


@pytest.mark.over_a_minute
def test_build_aarch64_preempt_dynamic(source, built):
    tmp, built, lines = built
    assert not built.cached
    info = built.build_json
    # the image, its config and the record of how it was made
    assert built.path == tmp / "out" / "Image" and built.path.stat().st_size > 1_000_000
    assert (built.dir / "Image").is_file() and not (built.dir / "obj").exists()
    assert info["commit"] == source.commit and info["tree"] == str(source.path)
    assert info["dirty"] is None and info["arch"] == ARCH and info["make_arch"] == "arm64"
    assert [f["name"] for f in info["fragments"]] == FRAGMENTS
    assert all(f["sha256"] == K.sha256_file(K.fragment_path(f["name"])) for f in info["fragments"])
    assert built.release == info["release"] and built.release.startswith("6.12.117-rtlab")
    assert info["preempt"] == "dynamic" and "PREEMPT_DYNAMIC" in info["uname_v"]
    assert info["image"]["sha256"] == K.sha256_file(built.path)
    assert info["ccache"] is not None and info["ccache"]["hits"] + info["ccache"]["misses"] > 100
    assert info["build_seconds"] > 0 and "aarch64-linux-gnu-gcc" in info["toolchain"]
    assert json.loads((tmp / "out" / "build.json").read_text()) == info
    config = K.parse_config(built.config.read_text())
    for opt in ("CONFIG_PREEMPT_DYNAMIC", "CONFIG_IKCONFIG_PROC", "CONFIG_NO_HZ_FULL",
                "CONFIG_SERIAL_AMBA_PL011_CONSOLE"):
        assert config[opt][0] == "y", opt
    # one progress line per step, then the build's own
    text = "\n".join(lines)
    for step in ("tinyconfig", "merge_config.sh -m", "make olddefconfig", "requested options survived",
                 "make -j2 Image", "built "):
        assert step in text, step


def test_same_inputs_are_answered_from_the_cache_without_make(source, built, monkeypatch):
    tmp, built, _ = built
    record = built.dir / "build.json"
    stamp = K.LAST_USED  # the one file a cache hit writes: when the build was last used (kernel prune)
    before = {p.name: p.stat().st_mtime_ns for p in built.dir.iterdir() if p.name != stamp}
    monkeypatch.setattr(K_build, "_Make", lambda *a, **k: pytest.fail("make ran on a cached build"))
    again = K.build_kernel(source.path, ARCH, FRAGMENTS, cache_dir=tmp / "cache", progress=None)
    assert again.cached and again.build_json == built.build_json and again.path == built.dir / "Image"
    # nothing in the build directory was rewritten (no new log, same build.json)
    assert {p.name: p.stat().st_mtime_ns for p in built.dir.iterdir() if p.name != stamp} == before
    assert (built.dir / stamp).stat().st_mtime >= (built.dir / "build.json").stat().st_mtime
    assert json.loads(record.read_text()) == built.build_json


# make test-long: a built kernel boots in every kernel pipeline of test_gitlab_ci.py
@pytest.mark.long
def test_built_kernel_boots_with_preempt_none_and_reports_its_config(built):
    """Under plain qemu TCG with the board initramfs: the PREEMPT_DYNAMIC
    kernel runs the model preempt= asks for, and /proc/config.gz says dynamic."""
    from rtlab.targets.arch import get as get_arch
    from rtlab.images import PROMPT, ensure_images
    from rtlab.suites.board import config_preempt_model

    from test_images import Console

    _, built, _ = built
    q = get_arch(ARCH).qemu
    cmd = [q.binary, "-machine", q.machine, "-cpu", q.cpu, "-accel", "tcg", "-smp", "2",
           "-m", "1024", "-nographic", "-no-reboot", "-kernel", str(built.path),
           "-initrd", str(ensure_images(ARCH, progress=None).initramfs),
           "-append", f"console={q.console} panic=-1 preempt=none", "-nic", "none"]
    con = Console(cmd)
    try:
        con.expect(re.escape(PROMPT).encode(), 180)
        release = con.run("uname -r").strip()
        preempt = con.run("cat /sys/kernel/debug/sched/preempt").strip()
        realtime = con.run("cat /sys/kernel/realtime 2>/dev/null || echo absent").strip()
        config = con.run("zcat /proc/config.gz | grep -E '^CONFIG_(PREEMPT|PREEMPT_[A-Z]+|IKCONFIG)=y$'")
        rc = con.run("cyclictest -q -D 2 -a 1 -t 1 -h 100 --json=/tmp/x.json >/dev/null; echo $?").strip()
        cycles = con.run("grep -c cycles /tmp/x.json").strip()
    except (TimeoutError, EOFError) as exc:
        pytest.fail(f"{exc}\n--- console tail ---\n{con.tail()}")
    finally:
        con.close()
    assert release == built.release
    assert preempt == "(none) voluntary full"
    assert realtime == "absent"
    assert config_preempt_model(config.splitlines()) == "dynamic"
    assert rc == "0" and cycles == "1"
