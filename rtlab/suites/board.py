"""Board-side mechanics shared by every suite: run a command over the board's
console (labgrid CommandProtocol), fetch files byte-exact, read kernel facts.

Raw outputs are fetched and written to the host before the exit code is
looked at, so a crashing tool still leaves what it printed on disk.
"""
from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import json
import logging
import re
import shlex
import time
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from ..core.config import parse_cpulist, seconds_setting
from ..core.rundir import EXIT_CODE, STDERR, STDOUT, MeasurementDir
from ..targets.variants import Variant

# the job's work dir on the board lives with the board (rtlab.targets.boards): loads
# and suites both use it
from ..targets.boards import job_workdir  # noqa: E402
log = logging.getLogger("rtlab.board")


from ..errors import SuiteFailure  # noqa: E402,F401 - raised here, defined below loads and suites
from .transfer import BULK_MIN_BYTES, UNTAR_ERRORS, Channel, Transfers, untar_gz, wc_sizes  # noqa: E402


#: how long a board's console may stay silent past a tool's expected end
#: before a probe asks whether the board is still there, how long the probe's
#: echo may take, and how long a fresh console may take to answer
#: (RTLAB_CONSOLE_SILENCE_S): a lost board is INFRA within the tool's
#: expected duration plus three times this (docs/lab.md)
CONSOLE_SILENCE_S = 20.0
CONSOLE_SILENCE_RANGE_S = (2.0, 600.0)


def console_silence_s() -> float:
    return seconds_setting("RTLAB_CONSOLE_SILENCE_S", CONSOLE_SILENCE_S, *CONSOLE_SILENCE_RANGE_S)


class BoardLost(SuiteFailure):
    """The board stopped answering on its console while a tool ran."""


class BoardShell:
    """A thin, explicit wrapper over labgrid's CommandProtocol; *bulk* a
    faster path for raw files than the console (rtlab.suites.transfer);
    *name* the board (its place on a rack) as errors name it."""

    def __init__(self, command, bulk: Optional[Channel] = None, name: str = "board"):
        self.command = command
        self.bulk = bulk
        self.name = name
        self.transfers = Transfers()
        self._scripts: dict[str, str] = {}

    @contextlib.contextmanager
    def _one_line_failures(self, cmd: str, timeout: float) -> Iterator[None]:
        """A console failure as one line (SuiteFailure); the console's expect
        dump goes to the log only. rtlab's own SuiteFailures pass as they are."""
        try:
            yield
        except SuiteFailure:
            raise
        except Exception as e:  # noqa: BLE001 - pexpect/labgrid errors carry 20-line dumps
            log.warning("console command %r failed: %r", cmd, e)
            raise SuiteFailure(f"console: `{cmd[:100]}` failed: {error_line(e, timeout)}") from None

    def run(self, cmd: str, timeout: float = 30.0) -> tuple[list[str], int]:
        """(output lines, exit code); console failures as :meth:`_one_line_failures`."""
        with self._one_line_failures(cmd, timeout):
            out, _, rc = self.command.run(cmd, timeout=timeout)
        return out, rc

    def run_watched(self, cmd: str, timeout: float, expected_s: float) -> None:
        """Run a command that should end after *expected_s* (a tool), up to
        *timeout*; BoardLost as soon as the console proves the board gone
        (RtlabShellDriver.run_watched), other console failures as :meth:`run`."""
        from ..lab.drivers import ConsoleSilent

        watched = getattr(self.command, "run_watched", None)
        if watched is None:  # a shell driver without the probe: the timeout alone
            self.run(cmd, timeout=timeout)
            return
        with self._one_line_failures(cmd, timeout):
            try:
                watched(cmd, timeout=timeout, expected_s=expected_s, silence_s=console_silence_s())
            except ConsoleSilent as e:
                raise BoardLost(str(e)) from None

    def check(self, cmd: str, timeout: float = 30.0) -> list[str]:
        out, rc = self.run(cmd, timeout)
        if rc != 0:
            raise SuiteFailure(f"`{cmd}` exited with {rc}: {' | '.join(out[-5:])}")
        return out

    def interrupt(self) -> bool:
        """Get the prompt back from a command that is still running (Ctrl-C,
        twice if need be): True when the shell answers again."""
        driver = self.command
        console = getattr(driver, "console", None)
        if console is None:
            return False
        for _ in range(2):
            try:
                console.sendcontrol("c")
                time.sleep(0.5)
                if _answers(driver):
                    return True
            except Exception as e:  # noqa: BLE001 - one more try, then the caller says why
                log.debug("console did not answer after Ctrl-C: %r", e)
        return False

    def reconnect(self, wait_s: Optional[float] = None) -> bool:
        """A fresh console where the old one is stuck: close the console
        connection and open it again (a new pty shell on the local board, a
        new ser2net/serial connection on a rack board), then wait for the
        prompt: the shell driver's login timeout and 30 s, or at most *wait_s*
        (a booted board's shell answers at once). Not on QEMU boards,
        whose console is the machine itself. True when the new console answers."""
        driver = self.command
        console = getattr(driver, "console", None)
        target = getattr(driver, "target", None)
        if console is None or target is None or type(console).__name__ == "QEMUDriver":
            return False
        login_timeout = getattr(driver, "login_timeout", None)
        try:
            if login_timeout is not None and wait_s is not None:
                driver.login_timeout = min(float(login_timeout), wait_s)
            target.deactivate(console)  # and everything above it (the shell driver)
            target.activate(driver)     # and its console again: a new connection, login
            return _answers(driver, timeout=30.0 if wait_s is None else wait_s)
        except Exception as e:  # noqa: BLE001 - the caller says, in one line, what is left where
            log.warning("a fresh console did not answer: %r", e)
            return False
        finally:
            if login_timeout is not None:
                driver.login_timeout = login_timeout

    def run_script(self, text: str, timeout: float = 60.0) -> Optional[tuple[list[str], int]]:
        """Run *text* as a shell script put on the board (in the job's work
        dir) over the bulk path, so a long batch of commands costs one short
        console line, the push included: (output lines, exit code). None
        where only the console reaches the board (typing a script costs as
        much as typing its commands) or the script did not arrive whole."""
        if self.bulk is None:
            return None
        data = text.encode()
        digest = hashlib.sha256(data).hexdigest()[:16]
        path = f"{job_workdir()}/.rtlab-{digest}.sh"
        try:
            got = self.bulk.run_script(self, path, data, on_board=digest in self._scripts, timeout=timeout)
        except SuiteFailure:
            got = None
        if got is not None:
            self._scripts[digest] = path
        return got

    def read(self, path: str, default: Optional[str] = None) -> Optional[str]:
        """A text file's content, stripped; *default* when it cannot be read.
        Read by the shell itself (its `read` builtin), not `cat`: the boot
        batch reads a dozen /proc and /sys files, and a process start costs
        ~10-20 ms on a TCG board. Not for integer sysctls (see READ_LOOP):
        read those with `cat` through :meth:`run`."""
        out, rc = self.run(f"{READ_LOOP} < {shlex.quote(path)}")
        return "\n".join(out).strip() if rc == 0 else default

    def fetch(self, path: str, timeout: float = 120.0, size: Optional[int] = None) -> Optional[bytes]:
        """The file's exact bytes (gzip+base64 over the console), None if absent;
        *size*: the board's `wc -c` of it, when the caller has just read it."""
        q = shlex.quote(path)
        if size is None:
            out, rc = self.run(f"test -f {q} && wc -c < {q}")
            if rc != 0:
                return None
            size = int(out[-1].strip())
        t0 = time.monotonic()
        if self.bulk is not None and size >= BULK_MIN_BYTES:
            fast = self.bulk.fetch(self, path, size, timeout)
            if fast is not None:
                self.transfers.note(path, self.bulk.name, size, t0)
                return fast
        lines = self.check(f"gzip -c {q} | base64", timeout=timeout)
        data = gzip.decompress(base64.b64decode("".join(line.strip() for line in lines)))
        if len(data) != size:
            raise SuiteFailure(f"fetching {path}: got {len(data)} bytes, the board has {size}")
        self.transfers.note(path, "console", size, t0)
        return data


    def fetch_dir(self, wd: str, names: Sequence[str], timeout: float = 120.0) -> dict[str, bytes]:
        """The exact bytes of each of *names* that exists in the board
        directory *wd*, in as few console round trips as it takes: one where
        the bulk path takes them all (:meth:`Channel.fetch_files`), else one
        for every size and the small files (one tar, gzip + base64), then one
        per large file over the bulk path. Anything in doubt (a name a shell
        would split, a tar that does not unpack to the sizes the board gave)
        goes the one-file-at-a-time way of :meth:`fetch`."""
        if not names or not all(_SAFE_NAME.match(n) for n in names):
            return self._fetch_each(wd, names, timeout)
        t0 = time.monotonic()
        if self.bulk is not None:  # all of them in one round trip, where the bulk path can
            fast = self.bulk.fetch_files(self, wd, names, timeout)
            if fast is not None:
                for name, data in fast.items():
                    self.transfers.note(f"{wd}/{name}", self.bulk.name, len(data), t0)
                return {n: fast[n] for n in names if n in fast}
        limit = BULK_MIN_BYTES if self.bulk is not None else None
        listed = " ".join(shlex.quote(n) for n in names)
        # one wc and one find for all files (a $(wc) per file forks twice: tens of ms each on TCG)
        small = f"-size -{limit}c" if limit else ""
        out, rc = self.run(
            f"cd {shlex.quote(wd)} && wc -c {listed} 2>/dev/null; echo RAW; "
            f"s=$(find {listed} -maxdepth 0 -type f {small} 2>/dev/null); "
            f"[ -n \"$s\" ] && tar -cf - $s 2>/dev/null | gzip -c | base64; echo END; cd /", timeout=timeout)
        lines = [line.strip() for line in out]
        if rc != 0 or "RAW" not in lines or "END" not in lines:
            return self._fetch_each(wd, names, timeout)
        sizes = wc_sizes(lines[:lines.index("RAW")], names)
        got: dict[str, bytes] = {}
        blob = "".join(lines[lines.index("RAW") + 1:lines.index("END")])
        if blob:
            try:
                got = {n: d for n, d in untar_gz(base64.b64decode(blob)).items() if n in sizes}
            except UNTAR_ERRORS as e:
                log.warning("the tar of %s did not unpack (%r): one file at a time", wd, e)
                return self._fetch_each(wd, names, timeout)
        for name, data in got.items():
            if len(data) != sizes[name]:
                log.warning("%s/%s: the tar brought %d bytes, the board has %d: one file at a time",
                            wd, name, len(data), sizes[name])
                return self._fetch_each(wd, names, timeout)
            self.transfers.note(f"{wd}/{name}", "console", len(data), t0)
        for name in names:  # the large ones (or anything the tar left out): one by one
            if name in sizes and name not in got:
                data = self.fetch(f"{wd}/{name}", timeout=timeout, size=sizes[name])
                if data is not None:
                    got[name] = data
        return {n: got[n] for n in names if n in got}

    def _fetch_each(self, wd: str, names: Sequence[str], timeout: float) -> dict[str, bytes]:
        got = {}
        for name in names:
            data = self.fetch(f"{wd}/{name}", timeout=timeout)
            if data is not None:
                got[name] = data
        return got


#: a file's lines to stdout with shell builtins only (a last line without a
#: newline included); exit status non-zero when the file cannot be opened.
#: For text files read whole at any offset (seq_file, sysfs, string
#: sysctls): `read` takes one byte per system call, and an integer sysctl
#: (/proc/sys/kernel/sched_rt_*) answers only the first (`cat` for those)
READ_LOOP = "l=; while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done 2>/dev/null"


#: file names fetch_dir lists in one shell line (a suite's own output names)
#: the exit code run_tool returns when the board recorded none (a shell's
#: exit status is 0..255, so it is never a real one)
UNKNOWN_EXIT = -1


def exited(tool: str, rc: int) -> str:
    """How *tool*'s exit reads in a message: its code, or that none is known."""
    if rc == UNKNOWN_EXIT:
        return f"{tool} ended with no exit code recorded (exit unknown)"
    return f"{tool} exited with {rc}"


_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$")


def _answers(driver, timeout: float = 5.0) -> bool:
    """Does the shell answer? (labgrid's ShellDriver._check_prompt, with a
    short timeout: a stuck console is told in seconds, not in 30 s per try)."""
    from labgrid.util import gen_marker
    from pexpect import TIMEOUT

    marker = gen_marker()
    driver.console.sendline(f"echo '{marker[:4]}''{marker[4:]}'")  # the marker hidden from expect
    try:
        driver.console.expect(rf"{marker}\s+{driver.prompt}", timeout=timeout)
        return True
    except TIMEOUT:
        return False


#: longest console line a batch sends (a console line editor mangles long lines)
MAX_LINE = 800
_RC_MARK = "==rtlab-rc=="


class CommandRecorder(BoardShell):
    """Records the commands a reader sends, answering none of them."""

    def __init__(self) -> None:
        super().__init__(None)
        self.commands: list[str] = []

    def run(self, cmd: str, timeout: float = 30.0) -> tuple[list[str], int]:
        if cmd not in self.commands:
            self.commands.append(cmd)
        return [], 1


class _Replay(BoardShell):
    """Answers from a batch's results; asks the board for anything else."""

    def __init__(self, sh: BoardShell, answers: dict[str, tuple[list[str], int]]) -> None:
        super().__init__(sh.command, sh.bulk)
        self.sh, self.answers = sh, answers

    def run(self, cmd: str, timeout: float = 30.0) -> tuple[list[str], int]:
        if cmd in self.answers:
            return self.answers[cmd]
        return self.sh.run(cmd, timeout)


def run_batch(sh: BoardShell, commands: Sequence[str], timeout: float = 60.0) -> dict[str, tuple[list[str], int]]:
    """Each command's output lines and exit code, as :meth:`BoardShell.run`
    gives them, in one console round trip where the board takes a script
    over its bulk path, else in as few as lines of MAX_LINE allow (a TCG
    board's console takes ~1 ms per character typed, ~0.1 s per round trip)."""
    known = getattr(sh, "answers", None)
    if known is not None and all(c in known for c in commands):  # a replay of a batch already run
        return {c: known[c] for c in commands}
    parts = [f"{{ {cmd} ; }}; r=$?; echo; echo \"{_RC_MARK} {i} $r\"" for i, cmd in enumerate(commands)]
    run_script = getattr(sh, "run_script", None)  # a BoardShell; a bare CommandProtocol-like shell has none
    text = "\n".join(parts) + "\n"
    # a script is one round trip, its push included, and its output leaves
    # the console: worth it where the batch would be typed as more than one
    # console line (a short one is cheaper typed: measured, the counters
    # after the suites took 0.15 s typed, 0.25-0.34 s as a script)
    ran = run_script(text, timeout=timeout) if run_script is not None and len(text) > MAX_LINE else None
    if ran is not None:
        outputs = [ran[0]]
    else:
        lines, cur = [], ""
        for p in parts:
            if cur and len(cur) + 2 + len(p) > MAX_LINE:
                lines.append(cur)
                cur = ""
            cur = f"{cur}; {p}" if cur else p
        lines.append(cur)
        outputs = [sh.run(line, timeout=timeout)[0] for line in lines]
    answers: dict[str, tuple[list[str], int]] = {}
    for output in outputs:
        section: list[str] = []
        for out in output:
            words = out.split()
            if len(words) == 3 and words[0] == _RC_MARK and words[1].isdigit() and int(words[1]) < len(commands):
                if section and not section[-1].strip():
                    section = section[:-1]  # the echo that ends a last line without a newline
                rc = words[2]
                answers[commands[int(words[1])]] = (section, int(rc) if rc.lstrip("-").isdigit() else 1)
                section = []
            else:
                section.append(out)
    # a command whose answer did not come (its line's shell ended early) is
    # not in the answers: a caller asks the board for it again on its own
    return answers


def fact_commands() -> list[str]:
    """The shell commands :func:`read_kernel_facts` runs on a board, in order."""
    rec = CommandRecorder()
    read_kernel_facts(rec)
    return rec.commands


def kernel_facts(sh: BoardShell) -> dict:
    """What the running kernel is, read off the board (recorded with every
    result): the commands of :func:`read_kernel_facts` (which LAVA jobs run
    as they are, rtlab.lava.render) in one batch."""
    return boot_batch(sh, [])[0]


def boot_batch(sh: BoardShell, more: Sequence[str]) -> tuple[dict, BoardShell]:
    """Kernel facts and *more* commands in one batch: (facts, a shell that
    answers *more* from the batch and asks the board for anything else)."""
    replay = _Replay(sh, run_batch(sh, [*fact_commands(), *more]))
    return read_kernel_facts(replay), replay


def read_kernel_facts(sh: BoardShell) -> dict:
    """What the running kernel is, one command at a time."""
    facts: dict[str, Any] = {
        "release": sh.read("/proc/sys/kernel/osrelease", ""),
        "version": sh.read("/proc/sys/kernel/version", ""),
        "machine": " ".join(sh.run("uname -m")[0]).strip(),
        "cmdline": sh.read("/proc/cmdline", ""),
        # the RT patch set's file; mainline PREEMPT_RT (6.12) has none: see below
        "realtime_sysfs": sh.read("/sys/kernel/realtime"),
        "isolated": sh.read("/sys/devices/system/cpu/isolated", ""),
        "nohz_full": sh.read("/sys/devices/system/cpu/nohz_full", ""),
        "online": sh.read("/sys/devices/system/cpu/online", ""),
        "preempt_dynamic": sh.read("/sys/kernel/debug/sched/preempt"),
        # the running kernel's own config (CONFIG_IKCONFIG_PROC; source-built
        # kernels have it, Debian's do not): None when unreadable
        "config_preempt": config_preempt_model(
            # (the test first: Debian's kernels have none, and a pipe is two process starts)
            sh.run(f"[ -r /proc/config.gz ] && zcat /proc/config.gz | grep -E {shlex.quote(_CONFIG_PREEMPT_GREP)}")[0]),
    }
    # realtime: /sys/kernel/realtime reads 1 (Debian's rt kernels carry the RT
    # patch that adds it); where the file is absent, the running kernel's own
    # config says (a mainline PREEMPT_RT kernel built by rtlab/kernel.py)
    sysfs = facts["realtime_sysfs"]
    facts["realtime"] = sysfs == "1" if sysfs is not None else facts["config_preempt"] == "rt"
    facts["preempt"] = preempt_model(facts)
    return facts


_CONFIG_PREEMPT_GREP = r"^CONFIG_(PREEMPT|PREEMPT_[A-Z]+|IKCONFIG)=y$"
_CONFIG_PREEMPT_RE = re.compile(r"^CONFIG_(PREEMPT|PREEMPT_[A-Z]+|IKCONFIG)=y$")


def config_preempt_model(lines) -> Optional[str]:
    """rt | dynamic | lazy | full | voluntary | none from a kernel config's
    CONFIG_PREEMPT* lines, or None when no config was read (no CONFIG_IKCONFIG=y
    line: /proc/config.gz absent). dynamic means the model is chosen at boot."""
    opts = set()
    for line in lines:
        m = _CONFIG_PREEMPT_RE.match(line.strip())
        if m:
            opts.add(m.group(1))
    if "IKCONFIG" not in opts:
        return None
    for opt, model in (("PREEMPT_RT", "rt"), ("PREEMPT_DYNAMIC", "dynamic"), ("PREEMPT_LAZY", "lazy"),
                       ("PREEMPT", "full"), ("PREEMPT_VOLUNTARY", "voluntary")):
        if opt in opts:
            return model
    return "none"


def preempt_model(facts: dict, static: Optional[str] = None) -> Optional[str]:
    """none | voluntary | full | rt, or None when nothing says.

    In order: PREEMPT_RT; the dynamic switch (debugfs, "none voluntary (full)");
    the running kernel's own config (/proc/config.gz); `static`, the model of
    the staged kernel's config, which callers pass only once they proved the
    running kernel is the staged one."""
    if facts.get("realtime") or "PREEMPT_RT" in facts.get("version", ""):
        return "rt"
    dyn = facts.get("preempt_dynamic")
    if dyn:  # "none voluntary (full)": the current model is in parentheses
        m = re.search(r"\((none|voluntary|full|lazy)\)", dyn)
        if m:
            return m.group(1)
    config = facts.get("config_preempt")
    if config and config != "dynamic":
        return config
    if static and static != "dynamic":
        return static
    return None


def check_variant(variant: Variant, facts: dict, boot_args: str,
                  isolate_cpu: Optional[int], kernel: Optional[dict] = None) -> list[str]:
    """Every way the running kernel differs from the variant asked for.

    `kernel` is what was staged (release, uname_v, preempt from the image
    manifest or the build); the running kernel must be exactly that one."""
    e = variant.expect
    kernel = kernel or {}
    problems = []
    same_kernel = True
    for fact, key, what in (("release", "release", "uname -r"), ("version", "uname_v", "uname -v")):
        staged = kernel.get(key)
        if staged and facts.get(fact) != staged:
            same_kernel = False
            problems.append(f"{what} is {facts.get(fact)!r}, the staged kernel is {staged!r}")
    if e.uname_v and e.uname_v not in facts["version"]:
        problems.append(f"uname -v is {facts['version']!r}, expected it to contain {e.uname_v!r}")
    model = facts.get("preempt")
    if model is None and same_kernel:
        model = preempt_model(facts, static=kernel.get("preempt"))
    if e.preempt and model != e.preempt:
        problems.append(f"preemption model is {model!r}, expected {e.preempt!r}")
    if e.realtime is not None and facts["realtime"] != e.realtime:
        why = (f"/sys/kernel/realtime reads {facts['realtime_sysfs']!r}" if facts.get("realtime_sysfs") is not None
               else f"no /sys/kernel/realtime, /proc/config.gz model {facts.get('config_preempt')!r}")
        problems.append(f"realtime={facts['realtime']} ({why}), expected {e.realtime}")
    isolated = parse_cpulist(facts["isolated"]) if facts["isolated"] else []
    if e.isolated and isolate_cpu not in isolated:
        problems.append(f"CPU {isolate_cpu} not isolated (/sys/devices/system/cpu/isolated = {facts['isolated']!r})")
    if variant.name != "host" and not e.isolated and isolated:
        problems.append(f"CPUs {facts['isolated']} isolated, expected none")
    cmdline = facts["cmdline"].split()
    for arg in boot_args.split():
        if arg not in cmdline:
            problems.append(f"boot argument {arg!r} missing from /proc/cmdline")
    return problems


def shell_line(argv: Sequence[str]) -> str:
    """THE place a suite's argument vector becomes a board shell line: every
    argument quoted, so no campaign value is ever read by a shell as code."""
    if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"a command is a non-empty list of strings, got {argv!r}")
    return shlex.join(argv)


def tool_wrapper(argv: Sequence[str]) -> str:
    """How every tool runs on a board, labgrid console or LAVA definition:
    its outputs and exit code in files of its work dir."""
    return f"{{ {shell_line(argv)} ; }} > {STDOUT} 2> {STDERR}; echo $? > {EXIT_CODE}"


#: what pexpect puts first in its errors (the spawn object's repr): never shown
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def error_line(e: BaseException, timeout: Optional[float] = None) -> str:
    """A console error as one readable line: its type and its first line of
    words, never an object's repr (pexpect's TIMEOUT starts with one) nor the
    console dump that follows (that goes to the log)."""
    if isinstance(e, SuiteFailure):  # ours: one line already
        return str(e)
    name = type(e).__name__
    if name == "TIMEOUT":
        return f"TIMEOUT: no shell prompt within {timeout:g} s" if timeout else "TIMEOUT: no shell prompt in time"
    if name == "EOF":
        return "EOF: the console closed"
    words = [ln for ln in (_OBJECT_REPR.sub("", ln).strip() for ln in str(e).splitlines()) if ln]
    return f"{name}: {words[0][:200]}" if words else name


def _kill_in_dir(sh: BoardShell, wd: str) -> None:
    """SIGKILL every board process whose cwd is the tool's work dir (the tool
    and its children: they run there); the fresh shell's cwd is elsewhere."""
    q = shlex.quote(wd)
    try:
        sh.run(f'for p in /proc/[0-9]*; do case "$(readlink "$p/cwd" 2>/dev/null)" in {q}|{q}/*) '
               f'kill -9 "${{p#/proc/}}" 2>/dev/null;; esac; done; true', timeout=60)
    except Exception as e:  # noqa: BLE001 - the raw files still come home; the log says why
        log.warning("killing the stuck tool in %s failed: %r", wd, e)


def run_tool(sh: BoardShell, run_id: str, argv: Sequence[str], host_dir: Path,
             outputs: list[str], timeout: float, expected_s: Optional[float] = None) -> int:
    """Run a tool in its own work dir on the board; write every raw file to
    host_dir (stdout.txt, stderr.txt, the tool's own files, command.txt,
    exit.json) and return the exit code. Raw files land before any judgement.
    *timeout* bounds a tool that hangs on a board that still answers; a board
    that stops answering is lost within *expected_s* (the tool's duration)
    plus three console silence limits (:func:`console_silence_s`)."""
    host_dir.mkdir(parents=True, exist_ok=True)
    wd = f"{job_workdir()}/{run_id}"
    command = shell_line(argv)
    MeasurementDir(host_dir).command.write_text(command + "\n")
    # a console starved by a load (50 hackbench tasks per TCG CPU) may take a while
    t_prep = time.monotonic()
    sh.check(f"rm -rf {shlex.quote(wd)} && mkdir -p {shlex.quote(wd)}", timeout=120)
    t0 = time.monotonic()
    prep = t0 - t_prep
    finished = False
    failure: BaseException
    try:
        sh.run_watched(f"cd {shlex.quote(wd)} && {tool_wrapper(argv)}", timeout=timeout,
                       expected_s=timeout if expected_s is None else expected_s)
        finished = True
    except BoardLost as e:
        # a board that echoes nothing hears no Ctrl-C either: one fresh
        # console (a stuck line, not the board?) with a short wait, then INFRA
        lost = f"board {sh.name} lost while {argv[0]} ran: {e}"
        log.warning("%s", lost)
        failure = SuiteFailure(lost)
        wait_s = console_silence_s()
        if not sh.reconnect(wait_s=wait_s):
            raise SuiteFailure(f"{lost}; no shell on a fresh console within {wait_s:g} s either: "
                               f"raw files left on the board in {wd}") from None
        _kill_in_dir(sh, wd)
    except BaseException as e:
        # a hung tool, a lost console, a cancelled run: what the tool wrote so
        # far still comes home (below), and the error is one line (the
        # console's expect dump goes to the log)
        log.warning("tool run failed: %r", e)
        if isinstance(e, Exception):
            failure = SuiteFailure(f"{argv[0]}: console lost while the tool ran ({error_line(e, timeout)})")
        else:
            failure = e  # KeyboardInterrupt: the run is being cancelled
        if not sh.interrupt():
            if not sh.reconnect():
                if not isinstance(e, Exception):
                    raise
                raise SuiteFailure(f"{argv[0]}: console lost while the tool ran; neither Ctrl-C nor a fresh "
                                   f"console got a shell back: raw files left on the board in {wd}") from None
            # the tool ignored Ctrl-C and still runs: its old console closes
            # only at clean-up, so it would run beside the next suite
            _kill_in_dir(sh, wd)
    finally:
        elapsed = time.monotonic() - t0
    t_fetch = time.monotonic()
    names = [STDOUT, STDERR, *outputs]
    try:
        # every raw file and the exit code in as few round trips as it takes
        got = sh.fetch_dir(wd, [*names, EXIT_CODE])
        for name in names:
            if name in got:
                (host_dir / name).write_bytes(got[name])
    except Exception as e:  # noqa: BLE001 - one line here, the console's dump in the log
        log.warning("fetching raw files failed: %r", e)
        raise SuiteFailure(f"fetching raw files from {wd} failed: {error_line(e)}") from None
    code_text = got.get(EXIT_CODE, b"").decode(errors="replace").strip()
    rc = int(code_text) if code_text.lstrip("-").isdigit() else UNKNOWN_EXIT
    fetched = {name: sh.transfers.files[f"{wd}/{name}"] for name in [STDOUT, STDERR, *outputs]
               if f"{wd}/{name}" in sh.transfers.files}
    MeasurementDir(host_dir).exit_json.write_text(json.dumps({
        "exit_code": rc, "elapsed_s": round(elapsed, 3), "fetched": fetched,
        # rtlab's own cost around the tool (rtlab.core.timing)
        "prep_s": round(prep, 3), "fetch_s": round(time.monotonic() - t_fetch, 3)}) + "\n")
    if not finished:
        raise failure
    return rc
