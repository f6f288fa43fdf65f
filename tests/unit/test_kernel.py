"""rtlab.kernel without building: fragments, the "option survived" check,
the cache key and tree state, variants' kernel.build, the boot test's
/proc/config.gz fact. The real build is tests/integration/test_kernel_build.py."""
import hashlib
import subprocess
import textwrap

import pytest

from rtlab import kernel as K
from rtlab.kernel import build as K_build
from rtlab.kernel import cache as K_cache
from rtlab.kernel import make as K_make
from rtlab.cli import build_parser
from rtlab.errors import InputError
from rtlab.suites.board import config_preempt_model, preempt_model
from rtlab.targets.variants import load_variants

MODELS = {"preempt-none": "PREEMPT_NONE", "preempt-voluntary": "PREEMPT_VOLUNTARY",
          "preempt-full": "PREEMPT", "preempt-rt": "PREEMPT_RT"}


def frag(tmp_path, name, text):
    p = tmp_path / f"{name}.config"
    p.write_text(textwrap.dedent(text).lstrip())
    return K.load_fragment(p)


# --- parsing fragments --------------------------------------------------------

def test_parse_config_values_and_not_set():
    got = K.parse_config('CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C="x y"\nCONFIG_D=0x10\n'
                         '# a comment\n\nCONFIG_E=m\n')
    assert got == {"CONFIG_A": ("y", 1), "CONFIG_B": ("n", 2), "CONFIG_C": ('"x y"', 3),
                   "CONFIG_D": ("0x10", 4), "CONFIG_E": ("m", 7)}


@pytest.mark.parametrize("line", ["CONFIG_A = y", "PREEMPT_RT=y", "#CONFIG_A is not set", "CONFIG_A"])
def test_fragment_lines_that_are_not_assignments_name_file_and_line(tmp_path, line):
    p = tmp_path / "bad.config"
    p.write_text(f"# ok\nCONFIG_X=y\n{line}\n")
    with pytest.raises(InputError) as e:
        K.load_fragment(p)
    assert str(p) in str(e.value) and "line 3" in str(e.value)


def test_unknown_fragment_lists_the_known_ones():
    with pytest.raises(InputError) as e:
        K.load_fragment("preempt-sometimes")
    assert "preempt-sometimes.config" in str(e.value) and "preempt-rt" in str(e.value)


def test_shipped_fragments_parse_and_say_what_the_boards_need():
    names = sorted(p.stem for p in K.FRAGMENTS_DIR.glob("*.config"))
    assert {"base-qemu-x86_64", "base-qemu-aarch64", "preempt-none", "preempt-voluntary",
            "preempt-full", "preempt-dynamic", "preempt-rt", "nohz-full"} <= set(names)
    frags = {n: K.load_fragment(n) for n in names}
    for arch, console in (("x86_64", "CONFIG_SERIAL_8250_CONSOLE"), ("aarch64", "CONFIG_SERIAL_AMBA_PL011_CONSOLE")):
        opts = frags[f"base-qemu-{arch}"].options
        for need in ("CONFIG_EXPERT", "CONFIG_64BIT", "CONFIG_SMP", "CONFIG_BLK_DEV_INITRD", "CONFIG_RD_GZIP",
                     "CONFIG_DEVTMPFS", "CONFIG_TMPFS", "CONFIG_DEBUG_FS", "CONFIG_SCHED_DEBUG",
                     "CONFIG_IKCONFIG", "CONFIG_IKCONFIG_PROC", "CONFIG_BINFMT_ELF", "CONFIG_BINFMT_SCRIPT",
                     "CONFIG_FUTEX", "CONFIG_POSIX_TIMERS", "CONFIG_HIGH_RES_TIMERS", "CONFIG_POSIX_MQUEUE",
                     "CONFIG_SYSVIPC", "CONFIG_MULTIUSER", "CONFIG_PACKET", "CONFIG_INET", "CONFIG_UNIX",
                     "CONFIG_VIRTIO_NET", "CONFIG_VIRTIO_PCI", "CONFIG_SHMEM", console):
            assert opts[need][0] == "y", (arch, need)
    # every preemption fragment picks one model and turns the others off,
    # so it can follow any other fragment
    for name, model in MODELS.items():
        opts = frags[name].options
        assert opts[f"CONFIG_{model}"][0] == "y"
        assert all(opts[f"CONFIG_{m}"][0] == "n" for m in MODELS.values() if m != model), name
        assert opts["CONFIG_PREEMPT_DYNAMIC"][0] == "n", name
    assert frags["preempt-dynamic"].options["CONFIG_PREEMPT_DYNAMIC"][0] == "y"
    assert frags["preempt-rt"].options["CONFIG_EXPERT"][0] == "y"
    nohz = frags["nohz-full"].options
    assert {o: nohz[o][0] for o in ("CONFIG_NO_HZ_FULL", "CONFIG_RCU_NOCB_CPU", "CONFIG_CPU_ISOLATION",
                                     "CONFIG_NO_HZ_IDLE")} == {
        "CONFIG_NO_HZ_FULL": "y", "CONFIG_RCU_NOCB_CPU": "y", "CONFIG_CPU_ISOLATION": "y", "CONFIG_NO_HZ_IDLE": "n"}


# --- the option check -----------------------------------------------------------

def test_later_fragments_win_and_the_check_names_the_last_one(tmp_path):
    base = frag(tmp_path, "base", "CONFIG_EXPERT=y\nCONFIG_NO_HZ_IDLE=y\n")
    over = frag(tmp_path, "over", "# CONFIG_EXPERT is not set\nCONFIG_PREEMPT_RT=y\n")
    req = K.requested_options([base, over])
    assert req["CONFIG_EXPERT"] == ("n", "over", 1)
    assert req["CONFIG_NO_HZ_IDLE"] == ("y", "base", 2)
    final = "# CONFIG_EXPERT is not set\nCONFIG_NO_HZ_IDLE=y\n"
    dropped = K.check_options(req, final)
    assert [(d.option, d.wanted, d.got, d.fragment, d.line) for d in dropped] == [
        ("CONFIG_PREEMPT_RT", "y", None, "over", 2)]


@pytest.mark.parametrize("wanted,final,ok", [
    ("y", "CONFIG_X=y", True),
    ("y", "# CONFIG_X is not set", False),
    ("y", "", False),                      # invisible: dependencies not met
    ("y", "CONFIG_X=m", False),
    ("m", "CONFIG_X=y", False),            # MODULES=n promotes m to y: still not what was asked
    ("n", "# CONFIG_X is not set", True),
    ("n", "", True),                       # invisible options are off
    ("n", "CONFIG_X=y", False),            # something selects it
    ('"-rtlab"', 'CONFIG_X="-rtlab"', True),
    ('"-rtlab"', 'CONFIG_X=""', False),
    ("8", "CONFIG_X=8", True),
    ("8", "CONFIG_X=64", False),
    ("0x10", "CONFIG_X=0x0010", True),
])
def test_option_survived(wanted, final, ok):
    dropped = K.check_options({"CONFIG_X": (wanted, "f", 1)}, final + "\n")
    assert (not dropped) is ok


def test_config_error_names_option_fragment_line_and_result(tmp_path):
    err = K.KernelConfigError([
        K.Dropped("CONFIG_PREEMPT_RT", "y", None, "preempt-rt", 5,
                  "Kconfig: kernel/Kconfig.preempt:70 depends on EXPERT && ARCH_SUPPORTS_RT"),
        K.Dropped("CONFIG_NR_CPUS", "8", "64", "base-qemu-x86_64", 12),
        K.Dropped("CONFIG_DEBUG_PREEMPT", "n", "y", "base-qemu-x86_64", 30),
    ], "aarch64", tmp_path / ".config", tmp_path / "build.log")
    msg = str(err)
    assert "3 requested options did not survive" in msg
    assert "CONFIG_PREEMPT_RT: preempt-rt:5 asks for y" in msg and "left it out of .config" in msg
    assert "depends on EXPERT" in msg
    assert "CONFIG_NR_CPUS: base-qemu-x86_64:12 asks for 8, olddefconfig made it 64" in msg
    assert "CONFIG_DEBUG_PREEMPT: base-qemu-x86_64:30 asks for 'is not set', olddefconfig made it y" in msg
    assert str(tmp_path / "build.log") in msg


def test_kconfig_hint_finds_dependencies_or_says_there_is_no_such_option(tmp_path):
    (tmp_path / "kernel").mkdir()
    (tmp_path / "kernel" / "Kconfig.preempt").write_text(
        "config PREEMPT_RT\n\tbool \"RT\"\n\tdepends on EXPERT && ARCH_SUPPORTS_RT\n\tselect PREEMPTION\n"
        "\nconfig OTHER\n\tdepends on FOO\n")
    (tmp_path / "arch" / "arm" ).mkdir(parents=True)
    (tmp_path / "arch" / "arm" / "Kconfig").write_text("config ARMONLY\n\tbool\n")
    hint = K.kconfig_hint(tmp_path, "arm64", "CONFIG_PREEMPT_RT")
    assert hint == "Kconfig: kernel/Kconfig.preempt:1 depends on EXPERT && ARCH_SUPPORTS_RT"
    assert "no `config ARMONLY`" in K.kconfig_hint(tmp_path, "arm64", "CONFIG_ARMONLY")


# --- cache key and tree state ------------------------------------------------------

def test_cache_key_changes_with_every_input_and_only_then():
    args = ("c" * 40, None, "aarch64", "f" * 64, "gcc 12")
    key = K.cache_key(*args)
    assert key == K.cache_key(*args)
    for i, other in enumerate(("d" * 40, "dirty", "x86_64", "e" * 64, "gcc 13")):
        changed = list(args)
        changed[i] = other
        assert K.cache_key(*changed) != key, i


def test_fragments_digest_is_content_and_order(tmp_path):
    a = frag(tmp_path, "a", "CONFIG_A=y\n")
    b = frag(tmp_path, "b", "CONFIG_B=y\n")
    (tmp_path / "sub").mkdir()
    a2 = frag(tmp_path / "sub", "a-renamed", "CONFIG_A=y\n")
    assert K.fragments_digest([a, b]) != K.fragments_digest([b, a])
    assert K.fragments_digest([a, b]) == K.fragments_digest([a2, b])  # a name is not content


def git(tree, *args):
    subprocess.run(["git", "-C", str(tree), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(tree), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def tree(tmp_path):
    t = tmp_path / "linux"
    t.mkdir()
    (t / "Makefile").write_text("VERSION = 6\n")
    (t / "Kconfig").write_text("mainmenu \"x\"\n")
    (t / ".gitignore").write_text("*.o\n")
    git(t, "init", "-q")
    git(t, "add", "-A")
    git(t, "commit", "-q", "-m", "one")
    return t


def test_tree_state_keys_commit_and_uncommitted_changes(tree):
    clean = K.tree_state(tree)
    assert len(clean.commit) == 40 and clean.dirty_hash is None and clean.commit_time > 0
    (tree / "Makefile").write_text("VERSION = 7\n")
    d1 = K.tree_state(tree)
    assert d1.commit == clean.commit and d1.dirty_hash and d1.dirty_files == ("Makefile",)
    assert d1.describe.endswith("-dirty")
    (tree / "new.c").write_text("int x;\n")
    d2 = K.tree_state(tree)
    assert d2.dirty_hash != d1.dirty_hash and "new.c" in d2.dirty_files
    (tree / "new.c").write_text("int y;\n")
    d3 = K.tree_state(tree)
    assert d3.dirty_hash != d2.dirty_hash   # untracked content counts
    (tree / "junk.o").write_text("ignored")
    assert K.tree_state(tree).dirty_hash == d3.dirty_hash     # an ignored file changes nothing
    (tree / "new.c").unlink()
    (tree / "Makefile").write_text("VERSION = 6\n")
    assert K.tree_state(tree).dirty_hash is None              # ignored files do not count


def test_objects_go_inside_the_tree_and_leave_it_clean(tree, tmp_path):
    """O= is a direct subdirectory of the tree (Kbuild then uses srctree=..,
    so ccache hits from any clone) and does not make the tree dirty."""
    obj = K_build._object_dir(tree, "0123456789abcdef" * 4, tmp_path / "bdir")
    assert obj == tree / ".rtlab-build-0123456789abcdef"
    before = K.tree_state(tree)
    K_build._make_object_dir(obj)
    (obj / "include" / "config").mkdir(parents=True)
    (obj / ".config").write_text("CONFIG_X=y\n")
    (obj / "vmlinux.o").write_text("obj")
    after = K.tree_state(tree)
    assert after.dirty_hash is None and after.commit == before.commit


def test_a_failed_compile_keeps_log_and_config_and_removes_the_objects(tree, tmp_path, monkeypatch):
    """A compile error: the error quotes the log; log and .config stay in the
    build cache; the objects inside the tree go (a CI runner's tree would
    otherwise keep the objects of every commit that failed)."""
    monkeypatch.setattr(K_build, "_toolchain", lambda cc: "gcc-test")
    (tree / "Makefile").write_text(
        "tinyconfig:\n\tprintf 'CONFIG_X=y\\n' > $(O)/.config\n"
        "olddefconfig:\n\t@true\n"
        "Image:\n\t@echo 'kernel/time/timer.c:9:1: error: expected semicolon'; exit 2\n")
    merge = tree / "scripts" / "kconfig" / "merge_config.sh"
    merge.parent.mkdir(parents=True)
    merge.write_text('[ "$1" = -m ] && shift; [ "$1" = -O ] && { out=$2; shift 2; }\n'
                     'cat "$@" > "$out/.config.new" && mv "$out/.config.new" "$out/.config"\n')
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "fake kernel")
    f = frag(tmp_path, "base-test", "CONFIG_X=y\n")
    with pytest.raises(K.KernelError) as e:
        K.build_kernel(tree, "aarch64", [f.path], cache_dir=tmp_path / "cache", progress=None, jobs=1)
    msg = str(e.value)
    assert "error: expected semicolon" in msg and "Image" in msg and "full log" in msg
    assert not list(tree.glob(".rtlab-build-*")), "objects left in the tree"
    bdir = next(d for d in (tmp_path / "cache" / "builds" / "aarch64").iterdir() if d.is_dir())
    assert "expected semicolon" in (bdir / "build.log").read_text()
    assert "CONFIG_X=y" in (bdir / ".config").read_text()
    assert not (bdir / "build.json").exists() and K.tree_state(tree).dirty_hash is None


def test_tree_state_refuses_what_cannot_be_built_out_of_tree(tree, tmp_path):
    (tree / ".config").write_text("CONFIG_X=y\n")
    with pytest.raises(InputError, match="mrproper"):
        K.tree_state(tree)
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "Makefile").write_text("")
    (plain / "Kconfig").write_text("")
    with pytest.raises(InputError, match="not a git repository"):
        K.tree_state(plain)
    with pytest.raises(InputError, match="not a kernel source tree"):
        K.tree_state(tmp_path)


def test_cached_build_is_returned_without_running_anything(tree, tmp_path, monkeypatch):
    """A recorded build for the key is answered from build.json (make and the
    compiler never run); a damaged image is not."""
    monkeypatch.setattr(K_build, "_toolchain", lambda cc: "gcc-test")
    monkeypatch.setattr(K_build, "_Make", lambda *a, **k: pytest.fail("make must not run on a cache hit"))
    f = frag(tmp_path, "base-test", "CONFIG_X=y\n")
    state = K.tree_state(tree)
    key = K.cache_key(state.commit, None, "aarch64", K.fragments_digest([f]), "gcc-test")
    bdir = tmp_path / "cache" / "builds" / "aarch64" / key[:16]
    bdir.mkdir(parents=True)
    (bdir / "Image").write_bytes(b"kernel")
    (bdir / ".config").write_text("CONFIG_X=y\n")
    (bdir / "build.json").write_text(
        '{"release": "6.12.117-rtlab+", "preempt": "dynamic", "image": {"sha256": "%s"}}'
        % hashlib.sha256(b"kernel").hexdigest())
    got = K.build_kernel(tree, "aarch64", [f.path], cache_dir=tmp_path / "cache", progress=None,
                         out=tmp_path / "out")
    assert got.cached and got.release == "6.12.117-rtlab+" and got.preempt == "dynamic"
    assert (tmp_path / "out" / "Image").read_bytes() == b"kernel" and got.path == tmp_path / "out" / "Image"
    (bdir / "Image").write_bytes(b"truncat")
    assert K_build._load_build(bdir, "Image") is None


def test_with_base_puts_the_board_base_first():
    assert K.with_base("aarch64", ["preempt-dynamic"]) == ["base-qemu-aarch64", "preempt-dynamic"]
    assert K.with_base("x86_64", ["preempt-rt"], board="qemu-x86_64") == ["base-qemu-x86_64", "preempt-rt"]
    # a board with no base of its own (the rack's twins) builds on its arch's
    assert K.with_base("x86_64", ["preempt-rt"], board="twin-x86-ipc") == ["base-qemu-x86_64", "preempt-rt"]
    assert K.with_base("armhf", ["preempt-none"], board="twin-imx6q") == ["base-qemu-armv7l", "preempt-none"]
    assert K.with_base("x86_64", ["base-custom", "preempt-rt"]) == ["base-custom", "preempt-rt"]


def test_cache_root_follows_rtlab_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RTLAB_CACHE", str(tmp_path))
    assert K.kernel_cache() == tmp_path / "kernel"
    monkeypatch.delenv("RTLAB_CACHE")
    assert K.kernel_cache().parts[-3:] == (".cache", "rtlab", "kernel")


# --- variants' kernel.build ------------------------------------------------------------

def test_shipped_variants_name_existing_fragments():
    v = load_variants()
    for name in ("none", "voluntary", "preempt", "none-iso", "preempt-iso"):
        assert v[name].fragments == ("preempt-dynamic", "nohz-full"), name
        assert v[name].prebuilt == "generic"
    assert v["rt"].fragments == v["rt-iso"].fragments == ("preempt-rt", "nohz-full")
    assert v["host"].fragments == ()
    for f in v["rt"].fragments:
        K.load_fragment(f)


@pytest.mark.parametrize("build,key,what", [
    ("[preempt-sometimes]", "variants.x.kernel.build[0]", "no config fragment"),
    ("[base-qemu-x86_64, preempt-rt]", "variants.x.kernel.build[0]", "come from the board"),
    ("[preempt-rt, preempt-rt]", "variants.x.kernel.build[1]", "twice"),
    ("[fragments/preempt-rt.config]", "variants.x.kernel.build[0]", "without directory"),
    ("preempt-rt", "variants.x.kernel.build", "non-empty list"),
    ("[]", "variants.x.kernel.build", "non-empty list"),
])
def test_variant_build_errors_name_file_and_key(tmp_path, build, key, what):
    p = tmp_path / "v.yaml"
    p.write_text(textwrap.dedent(f"""
        isolation: {{suffix: "-iso", boot_args: "isolcpus={{cpu}}"}}
        variants:
          x:
            kernel: {{build: {build}}}
            expect: {{preempt: rt}}
    """))
    with pytest.raises(InputError) as e:
        load_variants(p)
    assert str(p) in str(e.value) and key in str(e.value) and what in str(e.value)


# --- the boot test's /proc/config.gz fact ----------------------------------------------

@pytest.mark.parametrize("lines,model", [
    (["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_BUILD=y", "CONFIG_PREEMPT_VOLUNTARY=y", "CONFIG_PREEMPT_DYNAMIC=y"], "dynamic"),
    (["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_RT=y"], "rt"),
    (["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_BUILD=y", "CONFIG_PREEMPT=y"], "full"),
    (["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_VOLUNTARY=y"], "voluntary"),
    (["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_NONE=y"], "none"),
    (["CONFIG_IKCONFIG=y"], "none"),
    ([], None),                 # no /proc/config.gz (Debian's kernels): unknown, not none
    (["rtlab# "], None),
])
def test_config_preempt_model(lines, model):
    assert config_preempt_model(lines) == model


def test_preempt_model_uses_the_running_config_only_without_debugfs():
    base = {"realtime": False, "version": "#1 SMP", "preempt_dynamic": None}
    assert preempt_model({**base, "config_preempt": "none"}) == "none"
    assert preempt_model({**base, "config_preempt": "full"}) == "full"
    # debugfs says what a dynamic kernel runs now
    assert preempt_model({**base, "config_preempt": "dynamic",
                          "preempt_dynamic": "none voluntary (full)"}) == "full"
    assert preempt_model({**base, "config_preempt": "dynamic"}) is None
    # Debian's prebuilt kernels: no config.gz, unchanged behaviour
    assert preempt_model({**base, "config_preempt": None}) is None
    assert preempt_model({**base, "config_preempt": None}, static="voluntary") == "voluntary"
    assert preempt_model({**base, "realtime": True, "config_preempt": "rt"}) == "rt"


def test_cli_has_kernel_build_and_source():
    p = build_parser()
    a = p.parse_args(["kernel", "build", "--arch", "aarch64", "--variant", "none", "--tree", "/t", "--out", "/o"])
    assert (a.arch, a.variant, a.tree, a.out, a.jobs) == ("aarch64", "none", "/t", "/o", 2)
    a = p.parse_args(["kernel", "source", "--version", "6.12.1-1"])
    assert a.version == "6.12.1-1"


def test_ccache_counts_only_source_compiles(tmp_path):
    log = tmp_path / "stats.log"
    log.write_text("# /dev/null\ndirect_cache_hit\n# \nno_input_file\n# /src/kernel/fork.c\ndirect_cache_hit\n"
                   "local_storage_hit\n# /src/mm/slub.c\ncache_miss\ndirect_cache_miss\n"
                   "# /src/arch/arm64/kernel/entry.S\npreprocessed_cache_hit\n")
    assert K_make._ccache_counts(log) == {"hits": 2, "misses": 1}
    assert K_make._ccache_counts(tmp_path / "absent") == {"hits": 0, "misses": 0}


class FakeBoard:
    """labgrid's CommandProtocol.run over a dict of files (read by the shell) and config lines (zcat)."""

    def __init__(self, files, config=None):
        self.files, self.config = files, config

    def run(self, cmd, timeout=30.0):
        from rtlab.suites.board import READ_LOOP

        if cmd.startswith(f"{READ_LOOP} < "):
            path = cmd.rsplit("< ", 1)[1].strip("'")
            return ([self.files[path]], [], 0) if path in self.files else ([], [], 1)
        if cmd.startswith("uname -m"):
            return (["aarch64"], [], 0)
        if "zcat /proc/config.gz" in cmd:
            return (list(self.config), [], 0) if self.config is not None else ([], [], 1)
        raise AssertionError(cmd)


BOARD_FILES = {"/proc/sys/kernel/osrelease": "6.12.117-rtlab+", "/proc/cmdline": "console=ttyAMA0",
               "/sys/devices/system/cpu/online": "0-1"}


@pytest.mark.parametrize("files,config,realtime,preempt", [
    # Debian's rt kernel: the RT patch's /sys/kernel/realtime, no /proc/config.gz
    ({"/sys/kernel/realtime": "1", "/proc/sys/kernel/version": "#1 SMP PREEMPT_RT Debian"}, None, True, "rt"),
    # Debian's generic kernel with preempt=none: debugfs says the model
    ({"/proc/sys/kernel/version": "#1 SMP PREEMPT_DYNAMIC Debian",
      "/sys/kernel/debug/sched/preempt": "(none) voluntary full"}, None, False, "none"),
    # mainline 6.12 PREEMPT_RT built here: no /sys/kernel/realtime, the config says rt
    ({"/proc/sys/kernel/version": "#1 SMP PREEMPT_RT"}, ["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_RT=y"], True, "rt"),
    # a fixed-model build (preempt-none.config): only the config can tell
    ({"/proc/sys/kernel/version": "#1 SMP"}, ["CONFIG_IKCONFIG=y", "CONFIG_PREEMPT_NONE=y"], False, "none"),
    # an unknown kernel without either: not realtime, model unknown (as before)
    ({"/proc/sys/kernel/version": "#1 SMP"}, None, False, None),
])
def test_kernel_facts_realtime_and_model(files, config, realtime, preempt):
    from rtlab.suites.board import BoardShell, read_kernel_facts

    facts = read_kernel_facts(BoardShell(FakeBoard({**BOARD_FILES, **files}, config)))
    assert (facts["realtime"], facts["preempt"]) == (realtime, preempt)
    assert facts["realtime_sysfs"] == files.get("/sys/kernel/realtime")


def test_prune_frees_the_build_cache_least_recently_used_first(tmp_path):
    import fcntl
    import os
    import time
    now = time.time()
    day = 86400
    cache = tmp_path / "kernel"

    def build(name, days, complete=True, mib=1, kind="builds"):
        d = cache / kind / "aarch64" / name
        d.mkdir(parents=True)
        (d / "build.log").write_bytes(os.urandom(mib << 20))
        if complete:
            (d / "Image").write_bytes(b"k")
            (d / "build.json").write_text("{}")
        for f in d.iterdir():
            os.utime(f, (now - days * day, now - days * day))
        return d

    old = build("old", 40)
    b = build("b", 10, mib=3)
    c = build("c", 5, mib=3)
    hot = build("hot", 0.005, mib=3)            # used 7 min ago: a pipeline may still boot it
    failed = build("failed", 2, complete=False)
    running = build("running", 0.001, complete=False)
    locked = build("locked", 3, complete=False)  # unfinished, but its build holds the lock
    cfg = build("cfg", 45, complete=False, kind="configs")
    with open(locked.with_name("locked.lock"), "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        res = K.prune_builds(cache, max_bytes=9 << 20, older_than_s=30 * day, now=now)
    # 9 MiB: once b (least recently used) is gone, hot 3 + running 1 + locked 1 + c 3 fit
    gone = {r["dir"].rsplit("/", 1)[-1]: r["why"] for r in res["removed"]}
    assert set(gone) == {"old", "failed", "b", "cfg"}, gone
    assert "30 days" in gone["old"] and "unfinished" in gone["failed"] and "least recently used" in gone["b"] and "9 MiB" in gone["b"]
    for d in (c, hot, running, locked):
        assert d.is_dir(), d
    for d in (old, b, failed, cfg):
        assert not d.exists(), d
    assert res["freed_bytes"] >= (1 + 3 + 1 + 1) << 20 and res["kept"] == 4


def test_a_cache_hit_counts_as_a_use(tree, tmp_path, monkeypatch):
    monkeypatch.setattr(K_build, "_toolchain", lambda cc: "gcc-test")
    bdir = tmp_path / "b"
    bdir.mkdir()
    (bdir / "Image").write_bytes(b"kernel")
    (bdir / ".config").write_text("CONFIG_X=y\n")
    (bdir / "build.json").write_text('{"image": {"sha256": "%s"}}' % hashlib.sha256(b"kernel").hexdigest())
    import os
    os.utime(bdir / "build.json", (1, 1))
    assert K_cache._last_used(bdir) == 1
    assert K_build._load_build(bdir, "Image") is not None
    assert K_cache._last_used(bdir) > 1e9


@pytest.mark.parametrize("text, size", [("500M", 500 << 20), ("2G", 2 << 30), ("1.5GiB", int(1.5 * (1 << 30))),
                                        ("4096", 4096), ("64k", 64 << 10)])
def test_prune_sizes(text, size):
    from rtlab.commands.kernel import parse_size
    assert parse_size(text) == size


def test_prune_size_errors_name_the_option():
    from rtlab.commands.kernel import parse_size
    with pytest.raises(InputError, match="--max-size.*lots"):
        parse_size("lots")


def test_kernel_tree_runs_only_boards_that_boot_the_built_kernel(tmp_path, monkeypatch):
    """With --kernel-tree, only QEMU boards boot the commit under test; a rack
    board (Debian's kernels) or the local board (its own) would credit another
    kernel's latency to the commit, so they are not available, and nothing is
    built for them."""
    from rtlab.run import runner
    from rtlab.targets.boards import find_board
    from rtlab.plan.campaign import Job
    from rtlab.targets.variants import load_variants
    v = load_variants()
    qemu, rack, local = (find_board(b) for b in ("qemu-aarch64", "rack-aarch64", "local"))
    jobs = [Job(qemu, v["rt"], ()), Job(rack, v["rt"], ()), Job(local, v["host"], ())]
    built_for = []
    monkeypatch.setattr(K, "build_kernel", lambda tree, arch, frags, **kw: built_for.append((arch, frags)) or "bk")
    built = runner.build_kernels(jobs, {}, tmp_path, progress=lambda m: None)
    assert built == {("qemu-aarch64", "rt"): "bk"}
    assert built_for == [("aarch64", K.with_base("aarch64", list(v["rt"].fragments), "qemu-aarch64"))]
    assert runner.unavailable(jobs[0], {}, built, tmp_path) is None
    assert "Debian kernels, not the commit under test" in runner.unavailable(jobs[1], {}, built, tmp_path)
    assert "its own kernel, not the commit under test" in runner.unavailable(jobs[2], {}, built, tmp_path)
    assert runner.unavailable(jobs[2], {}, built) is None  # without a tree: the host variant, as always
