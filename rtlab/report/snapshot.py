"""A system snapshot with every job: what the board was set up like while it
measured, so a changed latency can be told from a changed system.

Taken over the board's console (labgrid CommandProtocol or this machine as a
board) right after the boot test, and the interrupt counters again after the
last suite: ``snapshot.json`` in the job dir::

    {"kernel": {"release", "version", "config_sha256", "config_source"},
     "cmdline": "...",
     "clocksource": {"current", "available"},
     "irq_affinity": {"42": "0-1", ...},        # /proc/irq/N/smp_affinity_list
     "interrupts": {"42": {"name": "virtio0", "counts": [..per CPU..]}, ...},
     "softirqs": {"TIMER": [..per CPU..], ...},
     "cpufreq": {"0": {"governor", "driver", "cur_khz"}, ...},
     "idle": {"0": [{"name", "disable", "latency_us"}], ...},
     "rt_throttling": {"sched_rt_runtime_us", "sched_rt_period_us"},
     "modules": ["virtio_net", ...],
     "dmesg_tail": ["..."],
     "after": {"interrupts": {...}, "softirqs": {...}},
     "delta": {"interrupts": {"42": [..per CPU..]}, "softirqs": {"TIMER": [...]}},
     "host_noise": {"<suite id>": {...}}}       # the host's steal and stalls (rtlab.core.hostnoise)

:func:`diff_snapshots` names what changed between two snapshots in lines
people read ("clocksource tsc -> hpet", "irq 42 (eth0) moved from CPU 0-1 to
CPU 1"); ``rtlab compare`` prints them for baseline vs candidate.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Optional

from ..suites.board import READ_LOOP, run_batch

SNAPSHOT_FILE = "snapshot.json"
DMESG_LINES = 40
#: an interrupt's count during the measurement must change by this factor
#: (and by MIN_DELTA) to be named as a difference
RATE_FACTOR = 10
MIN_DELTA = 1000

# no command substitution: on a TCG board every fork costs tens of ms
_CONFIG_CMD = ("if [ -r /proc/config.gz ]; then echo /proc/config.gz; zcat /proc/config.gz | sha256sum; "
               "else read r < /proc/sys/kernel/osrelease; if [ -r /boot/config-$r ]; then echo /boot/config-$r; "
               "sha256sum < /boot/config-$r; else echo none; fi; fi")


def parse_interrupts(lines: list[str]) -> dict[str, dict[str, Any]]:
    """/proc/interrupts: {irq: {"name", "counts": [per CPU]}} (named lines
    like NMI/LOC keep their per-CPU counts too)."""
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        toks = rest.split()
        counts = []
        for t in toks[:ncpu]:
            if not t.isdigit():
                break
            counts.append(int(t))
        if not counts:
            continue
        name = " ".join(toks[len(counts):])
        out[head.strip()] = {"name": name, "counts": counts}
    return out


def parse_softirqs(lines: list[str]) -> dict[str, list[int]]:
    out = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        vals = [int(t) for t in rest.split() if t.isdigit()]
        if head.strip():
            out[head.strip()] = vals
    return out


def counters(sh) -> dict[str, Any]:
    secs = _sections(sh, {"interrupts": "cat /proc/interrupts", "softirqs": "cat /proc/softirqs"})
    return {"interrupts": parse_interrupts(secs["interrupts"]), "softirqs": parse_softirqs(secs["softirqs"])}


_CS = "/sys/devices/system/clocksource/clocksource0"
_CPU = "/sys/devices/system/cpu/cpu[0-9]*"
#: section -> shell command; all run in ONE console round trip (a TCG
#: board's console answers a command in ~0.05 s)
COMMANDS = {
    # one-line files read by the shell's own `read` (READ_LOOP): a process
    # start costs ~10-20 ms on a TCG board; the larger tables stay `cat`s
    # (`read` takes a byte per system call, which integer sysctls do not
    # answer past the first: tests/unit/test_board_batch.py)
    "release": f"{READ_LOOP} < /proc/sys/kernel/osrelease",
    "version": f"{READ_LOOP} < /proc/sys/kernel/version",
    "config": _CONFIG_CMD,
    "cmdline": f"{READ_LOOP} < /proc/cmdline",
    "clocksource": f"for f in {_CS}/current_clocksource {_CS}/available_clocksource; do {READ_LOOP} < $f; done",
    # one grep each, "path:value" lines (a loop of $(cat) forked per IRQ, per CPU, per state)
    "affinity": "grep -H . /proc/irq/[0-9]*/smp_affinity_list",
    "interrupts": "cat /proc/interrupts",
    "softirqs": "cat /proc/softirqs",
    "cpufreq": " ".join(["grep -H ."] + [f"{_CPU}/cpufreq/{f}" for f in ("scaling_governor", "scaling_driver",
                                                                      "scaling_cur_freq")]),
    "idle": " ".join(["grep -H ."] + [f"{_CPU}/cpuidle/state*/{f}" for f in ("name", "disable", "latency")]),
    # `cat`: an integer sysctl answers only a read at offset 0, and `read` takes a byte at a time
    "rt": "cat /proc/sys/kernel/sched_rt_runtime_us /proc/sys/kernel/sched_rt_period_us",
    "modules": "cat /proc/modules",
    "dmesg": f"dmesg | tail -n {DMESG_LINES}",
}
#: longest console line a batch sends where the board takes no script (rtlab.suites.board)
MAX_LINE = 800


def batch_commands(commands: dict[str, str]) -> list[str]:
    """The commands as a console batch runs them (rtlab.suites.board.run_batch),
    errors dropped: a file a board lacks is an empty section."""
    return [f"{{ {cmd} ; }} 2>/dev/null" for cmd in commands.values()]


def _sections(sh, commands: dict[str, str]) -> dict[str, list[str]]:
    """Every section's lines, in one console round trip where the board
    takes a script over its bulk path (a TCG board's console takes ~1 ms per
    character typed), else as few as short console lines allow."""
    answers = run_batch(sh, batch_commands(commands))
    return {name: answers.get(cmd, ([], 1))[0] for name, cmd in zip(commands, batch_commands(commands))}


def _path_values(lines: list[str]) -> list[tuple[str, str]]:
    """`grep -H . FILES` lines: (path, value)."""
    out = []
    for line in lines:
        path, sep, value = line.partition(":")
        if sep and path.startswith("/"):
            out.append((path, value))
    return out


def _cpu_of(path: str) -> Optional[str]:
    m = re.search(r"/cpu(\d+)/", path)
    return m.group(1) if m else None


def _state_no(state: str) -> int:
    return int(state[5:]) if state[5:].isdigit() else 0


def take(sh) -> dict[str, Any]:
    """Everything but the after-measurement counters."""
    sec = _sections(sh, COMMANDS)
    snap: dict[str, Any] = {}
    cfg = sec["config"]
    snap["kernel"] = {
        "release": " ".join(sec["release"]).strip(),
        "version": " ".join(sec["version"]).strip(),
        "config_source": cfg[0] if cfg else "none",
        "config_sha256": cfg[1].split()[0] if len(cfg) > 1 and cfg[1].split() else None,
    }
    snap["cmdline"] = " ".join(sec["cmdline"]).strip()
    cs = sec["clocksource"]
    snap["clocksource"] = {"current": cs[0].strip() if cs else "", "available": cs[1].split() if len(cs) > 1 else []}
    aff = {}
    for path, value in _path_values(sec["affinity"]):  # /proc/irq/N/smp_affinity_list:CPUS
        irq = path.split("/")[3] if path.count("/") >= 4 else ""
        if irq.isdigit():
            aff[irq] = value.strip()
    snap["irq_affinity"] = dict(sorted(aff.items(), key=lambda kv: int(kv[0])))
    snap["interrupts"] = parse_interrupts(sec["interrupts"])
    snap["softirqs"] = parse_softirqs(sec["softirqs"])
    freq: dict[str, dict[str, Any]] = {}
    for path, value in _path_values(sec["cpufreq"]):  # .../cpuN/cpufreq/scaling_X:value
        cpu, field = _cpu_of(path), path.rsplit("/", 1)[-1]
        if cpu is None:
            continue
        f = freq.setdefault(cpu, {"governor": None, "driver": None, "cur_khz": None})
        if field == "scaling_governor":
            f["governor"] = value.strip()
        elif field == "scaling_driver":
            f["driver"] = value.strip()
        elif field == "scaling_cur_freq":
            f["cur_khz"] = int(value) if value.strip().isdigit() else None
    snap["cpufreq"] = freq
    states: dict[tuple[str, str], dict[str, Any]] = {}
    for path, value in _path_values(sec["idle"]):  # .../cpuN/cpuidle/stateM/field:value
        cpu, parts = _cpu_of(path), path.split("/")
        if cpu is None or len(parts) < 3:
            continue
        st = states.setdefault((cpu, parts[-2]), {"name": None, "disable": False, "latency_us": None})
        v = value.strip()
        if parts[-1] == "name":
            st["name"] = v
        elif parts[-1] == "disable":
            st["disable"] = v == "1"
        elif parts[-1] == "latency":
            st["latency_us"] = int(v) if v.isdigit() else None
    idle: dict[str, list[dict[str, Any]]] = {}
    for (cpu, _state), st in sorted(states.items(), key=lambda kv: (int(kv[0][0]), _state_no(kv[0][1]))):
        idle.setdefault(cpu, []).append(st)
    snap["idle"] = idle
    rt = [l.strip() for l in sec["rt"]]
    snap["rt_throttling"] = {k: int(rt[i]) if len(rt) > i and re.fullmatch(r"-?\d+", rt[i]) else None
                             for i, k in enumerate(("sched_rt_runtime_us", "sched_rt_period_us"))}
    snap["modules"] = sorted(l.split()[0] for l in sec["modules"] if l.split())
    snap["dmesg_tail"] = sec["dmesg"]
    return snap


def config_from_staged(snap: dict[str, Any], kernel: dict[str, Any]) -> dict[str, Any]:
    """A kernel without /proc/config.gz or /boot/config (Debian's in the
    initramfs): the config staged beside the kernel image on the host, once
    the boot test proved the running kernel is the staged one."""
    import hashlib

    k = snap.get("kernel", {})
    path = kernel.get("path")
    if k.get("config_sha256") or not path:
        return snap
    img = Path(path)
    for cand in (img.parent / f"config-{kernel.get('release') or k.get('release')}", img.parent / ".config",
                 img.parent / "config"):
        if cand.is_file():
            k["config_sha256"] = hashlib.sha256(cand.read_bytes()).hexdigest()
            k["config_source"] = f"staged {cand.name} (host)"
            break
    return snap


def finish(snap: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The snapshot with the after-measurement counters and the per-CPU delta."""
    snap = dict(snap)
    snap["after"] = after
    irq_delta = {}
    for irq, a in after.get("interrupts", {}).items():
        b = snap.get("interrupts", {}).get(irq)
        if b is not None and len(b["counts"]) == len(a["counts"]):
            irq_delta[irq] = [x - y for x, y in zip(a["counts"], b["counts"])]
    soft_delta = {}
    for name, a in after.get("softirqs", {}).items():
        b = snap.get("softirqs", {}).get(name)
        if b is not None and len(a) == len(b):
            soft_delta[name] = [x - y for x, y in zip(a, b)]
    snap["delta"] = {"interrupts": irq_delta, "softirqs": soft_delta}
    return snap


def write(path: Path, snap: dict[str, Any]) -> Path:
    path.write_text(json.dumps(snap, indent=1) + "\n")
    return path


def load(path: Path) -> Optional[dict[str, Any]]:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def add_host_noise(path: Path, suite_id: str, noise: Optional[dict[str, Any]]) -> None:
    """The host's steal and stalls during one suite (rtlab.core.hostnoise) into
    the job's snapshot.json (``host_noise``: suite id -> summary), where there is one."""
    snap = load(path)
    if snap is None or noise is None:
        return
    snap.setdefault("host_noise", {})[suite_id] = noise
    write(path, snap)


def summary_lines(snap: dict[str, Any]) -> list[str]:
    """A few lines for the report."""
    if "error" in snap:
        return [f"no snapshot: {snap['error']}"]
    k = snap.get("kernel", {})
    out = [f"kernel {k.get('release')} (config {str(k.get('config_sha256') or 'unknown')[:12]} "
           f"from {k.get('config_source')})",
           f"cmdline: {snap.get('cmdline', '')}",
           f"clocksource: {snap.get('clocksource', {}).get('current')}",
           f"RT throttling: {snap.get('rt_throttling')}"]
    govs = sorted({f.get("governor") for f in snap.get("cpufreq", {}).values()})
    out.append(f"cpufreq governors: {', '.join(map(str, govs)) or 'none (no cpufreq)'}")
    states = {s["name"] for ss in snap.get("idle", {}).values() for s in ss if not s["disable"]}
    out.append(f"idle states enabled: {', '.join(sorted(states)) or 'none (no cpuidle)'}")
    out.append(f"modules: {len(snap.get('modules', []))} loaded")
    delta = snap.get("delta", {}).get("interrupts", {})
    top = sorted(((sum(v), irq) for irq, v in delta.items()), reverse=True)[:5]
    if top:
        names = snap.get("interrupts", {})
        out.append("interrupts during the measurement (per CPU): " + "; ".join(
            f"{irq} {names.get(irq, {}).get('name', '')}".strip() + f" {delta[irq]}" for _, irq in top))
    for suite_id, noise in (snap.get("host_noise") or {}).items():
        steal = noise.get("steal_ms") or {}
        out.append(f"host during {suite_id}: steal {sum(steal.values()):g} ms "
                   f"(at most {noise.get('burst_ms', 0):g} ms from one CPU within 0.25 s), "
                   f"longest host stall {noise.get('max_gap_ms', 0):g} ms")
    return out


def _cpus(s: str) -> str:
    return f"CPU {s}" if s else "no CPU"


def diff_snapshots(base: dict[str, Any], cand: dict[str, Any]) -> list[str]:
    """What changed from *base* to *cand*, one line each (empty: nothing)."""
    out: list[str] = []
    bk, ck = base.get("kernel", {}), cand.get("kernel", {})
    if bk.get("release") != ck.get("release"):
        out.append(f"kernel {bk.get('release')} -> {ck.get('release')}")
    if bk.get("config_sha256") and ck.get("config_sha256") and bk["config_sha256"] != ck["config_sha256"]:
        out.append(f"kernel config {bk['config_sha256'][:12]} -> {ck['config_sha256'][:12]}")
    ba, ca = base.get("cmdline", "").split(), cand.get("cmdline", "").split()
    added, removed = [a for a in ca if a not in ba], [a for a in ba if a not in ca]
    if added or removed:
        out.append("cmdline: " + ", ".join([*(f"+{a}" for a in added), *(f"-{a}" for a in removed)]))
    bc, cc = base.get("clocksource", {}).get("current"), cand.get("clocksource", {}).get("current")
    if bc != cc:
        out.append(f"clocksource {bc} -> {cc}")
    names = {**{k: v.get("name", "") for k, v in base.get("interrupts", {}).items()},
             **{k: v.get("name", "") for k, v in cand.get("interrupts", {}).items()}}

    def irq_label(irq: str) -> str:
        n = names.get(irq, "").split()
        return f"irq {irq} ({n[-1]})" if n else f"irq {irq}"
    baff, caff = base.get("irq_affinity", {}), cand.get("irq_affinity", {})
    for irq in sorted(set(baff) & set(caff), key=int):
        if baff[irq] != caff[irq]:
            out.append(f"{irq_label(irq)} moved from {_cpus(baff[irq])} to {_cpus(caff[irq])}")
    for irq in sorted(set(caff) - set(baff), key=int):
        out.append(f"{irq_label(irq)} is new (CPU {caff[irq]})")
    for irq in sorted(set(baff) - set(caff), key=int):
        out.append(f"{irq_label(irq)} is gone")
    bf, cf = base.get("cpufreq", {}), cand.get("cpufreq", {})
    for cpu in sorted(set(bf) | set(cf), key=int):
        g0, g1 = bf.get(cpu, {}).get("governor"), cf.get(cpu, {}).get("governor")
        if g0 != g1:
            out.append(f"cpufreq governor of CPU {cpu} {g0} -> {g1}")
    bi, ci = base.get("idle", {}), cand.get("idle", {})
    for cpu in sorted(set(bi) | set(ci), key=int):
        s0 = {s["name"]: s["disable"] for s in bi.get(cpu, [])}
        s1 = {s["name"]: s["disable"] for s in ci.get(cpu, [])}
        for name in sorted(set(s0) | set(s1)):
            if s0.get(name) != s1.get(name):
                def state(v):
                    return "absent" if v is None else ("disabled" if v else "enabled")
                out.append(f"idle state {name} of CPU {cpu} {state(s0.get(name))} -> {state(s1.get(name))}")
    br, cr = base.get("rt_throttling", {}), cand.get("rt_throttling", {})
    for k in sorted(set(br) | set(cr)):
        if br.get(k) != cr.get(k):
            out.append(f"{k} {br.get(k)} -> {cr.get(k)}")
    bm, cm = set(base.get("modules", [])), set(cand.get("modules", []))
    if cm - bm:
        out.append("modules loaded: " + ", ".join(sorted(cm - bm)))
    if bm - cm:
        out.append("modules gone: " + ", ".join(sorted(bm - cm)))
    # interrupt rates during the measurement, per CPU: only big changes
    bd, cd = base.get("delta", {}).get("interrupts", {}), cand.get("delta", {}).get("interrupts", {})
    for irq in sorted(set(bd) & set(cd), key=lambda s: (not s.isdigit(), int(s) if s.isdigit() else 0, s)):
        for cpu, (x, y) in enumerate(zip(bd[irq], cd[irq])):
            if abs(y - x) >= MIN_DELTA and (min(x, y) == 0 or max(x, y) / max(1, min(x, y)) >= RATE_FACTOR):
                out.append(f"{irq_label(irq)} on CPU {cpu}: {x} -> {y} interrupts during the measurement")
    return out


def run_snapshots(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """(board, variant) -> the first snapshot of that job in a run dir
    (repeats keep one job dir each; their systems are the same job's)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for p in sorted(Path(run_dir).glob(f"**/{SNAPSHOT_FILE}")):
        rel = p.relative_to(run_dir).parts
        if len(rel) < 3:
            continue
        snap = load(p)
        if snap is not None:
            out.setdefault((rel[0], rel[1]), snap)
    return out


def run_differences(base_dirs, cand_dirs) -> list[str]:
    """What changed in the systems from the baseline runs to the candidate
    runs, per board/variant ("qemu-aarch64/rt: clocksource tsc -> hpet"):
    the first snapshot of each side. Jobs snapshotted on one side only are
    said so; jobs without snapshots (older runs) are skipped."""
    base: dict[tuple[str, str], dict[str, Any]] = {}
    cand: dict[tuple[str, str], dict[str, Any]] = {}
    for d in base_dirs:
        for k, v in run_snapshots(d).items():
            base.setdefault(k, v)
    for d in cand_dirs:
        for k, v in run_snapshots(d).items():
            cand.setdefault(k, v)
    out = []
    for key in sorted(set(base) & set(cand)):
        out += [f"{key[0]}/{key[1]}: {line}" for line in diff_snapshots(base[key], cand[key])]
    return out
