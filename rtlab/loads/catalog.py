"""The named loads. Each runs on the load CPUs (the campaign's ``load_cpus``;
by default the housekeeping CPUs, or every CPU without isolation), scaled
to the board's CPUs and memory, and proves it ran (see
:mod:`rtlab.loads.base` and :mod:`rtlab.loads.health`).

Scaling rules (N = load CPUs, M = MemAvailable, T = free space in /tmp when
the load starts; QEMU boards have 1 GiB of RAM and their /tmp is a tmpfs in
that RAM, so T is RAM there too):

=========  ======================================================================
idle       nothing; records how busy the board was during the window
cpu        ``stress-ng --cpu N``: every load CPU busy
stress     the classic ``stress --cpu 4 --io 2 --vm 2 --vm-bytes 512M --hdd 2
           --hdd-bytes 512M`` as stress-ng: --cpu N, --io/--vm/--hdd N/2 (>= 1);
           --vm-bytes min(512M, M/4 / vm workers), --hdd-bytes min(512M,
           T/4 / hdd workers): 512M each on a big board, ~220M and ~120M on a
           QEMU board (tmpfs-safe)
hackbench  ``hackbench -P -g G -f 25 -l 200 -s 512`` in an endless shell loop
           (no gap between rounds; completed rounds are counted), G = 15 with
           4+ load CPUs, else 4 per CPU (8 on 2 CPUs: 400 tasks, 4 on 1). On
           QEMU boards G = 1 per CPU (50 tasks each): a TCG CPU is 10-50x
           slower, and 400 runnable tasks starve even the console for minutes
           (a round of -g 4 takes ~56 s there)
memory     one ``mbw -t0`` (memcpy) loop per load CPU, arrays of
           clamp(M / 8N, 8, 128) MiB each (mbw allocates two)
disk       ``stress-ng --hdd`` with 1 MiB writes, each followed by fsync
           (``--hdd-write-size 1M --hdd-opts fsync,wr-seq``), max(1, N/2)
           workers of min(256M, T/8) each, in the load directory under /tmp.
           QEMU boards have no disk: their /tmp is tmpfs, where fsync is a
           no-op, so there it loads the VFS and page cache, not a block device
network    a large-packet ICMP echo flood (8000-byte payload: IP-fragmented on
           a 1500-MTU link; busybox ``ping -A``: busybox has no ``-f``, -A sends
           the next echo as soon as the reply is back, ``ping -f``'s pace on a
           link that answers within 10 ms, without its 100/s floor) and an
           iperf3 TCP stream, both to the host: on QEMU boards the host is
           10.0.2.2 (QEMU user networking answers ICMP there itself and
           forwards TCP to the host's 127.0.0.1, where the load starts
           ``iperf3 -s`` on a free port); on the local board loopback
irq        timer interrupts: ``stress-ng --timer N --timer-freq F --timerfd N
           --timerfd-freq F`` (POSIX timers, each expiry a signal, and timerfds,
           at F Hz each, default 20 kHz; every expiry is an hrtimer interrupt).
           Not --hrtimers: it runs its timers as fast as they go, which is a
           CPU hog more than an interrupt load
=========  ======================================================================

Loads compose: ``stress+network`` starts both, on the same CPUs, and checks
each.
"""
from __future__ import annotations

import json
import shlex
import socket
import subprocess
import time
from typing import Any, Optional

from . import health
from .base import (LOAD_DEADLINE_MARGIN_S, STRESS_NG_TIMEOUT_S, BoardLoad, Load, LoadDied,  # noqa: F401
                   LoadEnv, load_deadline_s)

MiB = 1024 * 1024
#: stress-ng's --timeout for every stress-ng load: its own deadline
#: (rtlab.loads.base.load_deadline_s), besides the one every load's script
#: carries. Not ``--timeout 0`` ("forever"): the timer stressor's signal
#: handler checks every 65536 expiries whether the run is older than the
#: timeout, and 0 s always is, so under ``--timeout 0`` each --timer worker
#: ended itself after 65536 timer events (3.3 s at 20 kHz, 8.5 s on a
#: loaded board) and the irq load was reported dead in every suite that
#: outlasted it (stress-ng 0.15, stress-timer.c, stress_timer_handler)


class Idle(Load):
    name = "idle"
    description = "no load: the board does nothing but measure"
    measures = "how busy the board's CPUs were during the window (/proc/stat)"
    needs_board_facts = False

    def _stat(self, env: LoadEnv) -> health.Snapshot:
        out, _ = env.sh.run("grep '^cpu' /proc/stat")
        return health.Snapshot.parse(out)

    def start(self, env: LoadEnv) -> dict:
        return {}

    def begin(self, env: LoadEnv, handle) -> None:
        handle["first"] = self._stat(env)

    def end(self, env: LoadEnv, handle) -> None:
        handle["last"] = self._stat(env)

    def stop(self, env: LoadEnv, handle, measured: bool) -> list[str]:
        first, last = handle.get("first"), handle.get("last")
        summary: dict[str, Any] = {"load": self.name, "description": self.description,
                                   "measures": self.measures, "cpus": [], "problems": []}
        if first is not None and last is not None:
            summary["board_busy"] = health.cpu_busy(first.cpu, last.cpu)
        env.host_dir.mkdir(parents=True, exist_ok=True)
        (env.host_dir / f"load-{self.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
        return []


class StressNg(BoardLoad):
    """A stress-ng load: its own YAML metrics, a constant set of workers."""

    stable_procs = True
    files = ("stress-ng.log", "stress-ng.yaml")

    def stressors(self, env: LoadEnv) -> str:
        raise NotImplementedError

    def commands(self, env: LoadEnv) -> list[tuple[str, str]]:
        return [("stress-ng", f"stress-ng {self.stressors(env)} --timeout {load_deadline_s(env)} "
                              f"--metrics-brief --yaml stress-ng.yaml > stress-ng.log 2>&1")]

    def settings(self, env: LoadEnv) -> dict[str, Any]:
        return {"command": f"stress-ng {self.stressors(env)}"}

    def throughput(self, env: LoadEnv, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
        m = health.stress_ng_metrics(files.get("stress-ng.yaml", b"").decode(errors="replace"))
        log = files.get("stress-ng.log", b"").decode(errors="replace")
        bad = health.stress_ng_errors(log)
        return {"stressors": m, **health.stress_ng_rates(log)}, [f"stress-ng says: {b}" for b in bad[:3]]


class Cpu(StressNg):
    name = "cpu"
    description = "every load CPU busy (stress-ng --cpu, one worker per CPU)"
    measures = ("CPU time of the stress-ng workers over the window (/proc/<pid>/stat), every "
                "worker alive throughout; stress-ng's own bogo-ops/s")

    def stressors(self, env: LoadEnv) -> str:
        return f"--cpu {env.ncpus}"


class FifoHog(StressNg):
    """A deliberate breach, for checking the gate and the evidence chain on a
    lab: SCHED_FIFO busy bursts above the measuring threads' priority."""

    name = "fifo-hog"
    deliberate_breach = True
    realtime_threads = True
    description = ("a deliberate breach: SCHED_FIFO busy bursts (stress-ng --cpu with --cpu-load "
                   "and --cpu-load-slice) above the measuring threads' priority")
    measures = ("CPU time of the hog workers over the window, every worker alive; stress-ng's "
                "own bogo-ops/s")
    # burst_ms of busy time per slice at load_pct percent: 100 ms busy, 900 ms idle by default
    options = {**BoardLoad.options, "priority": 95, "burst_ms": 100, "load_pct": 10}

    def stressors(self, env: LoadEnv) -> str:
        o = env.opts
        return (f"--cpu {env.ncpus} --cpu-load {int(o.get('load_pct') or 10)} "
                f"--cpu-load-slice {int(o.get('burst_ms') or 100)} "
                f"--sched fifo --sched-prio {int(o.get('priority') or 95)}")


def _half(n: int) -> int:
    return max(1, n // 2)


class Stress(StressNg):
    name = "stress"
    scales_with_memory = True
    description = ("the classic mix (stress --cpu 4 --io 2 --vm 2 --vm-bytes 512M --hdd 2 "
                   "--hdd-bytes 512M) as stress-ng, scaled to the board")
    measures = ("CPU time of all stress-ng workers (cpu, io, vm, hdd) over the window, every "
                "worker alive throughout; bogo-ops/s per stressor")

    def sizes(self, env: LoadEnv) -> dict[str, int]:
        workers = _half(env.ncpus)
        vm = min(512 * MiB, env.mem_avail_kb * 1024 // 4 // workers)
        hdd = min(512 * MiB, env.tmp_avail_kb * 1024 // 4 // workers)
        return {"cpu": env.ncpus, "io": workers, "vm": workers, "hdd": workers,
                "vm_mib": max(8, vm // MiB), "hdd_mib": max(8, hdd // MiB)}

    def stressors(self, env: LoadEnv) -> str:
        s = self.sizes(env)
        return (f"--cpu {s['cpu']} --io {s['io']} --vm {s['vm']} --vm-bytes {s['vm_mib']}M "
                f"--hdd {s['hdd']} --hdd-bytes {s['hdd_mib']}M")


class Disk(StressNg):
    name = "disk"
    scales_with_memory = True
    description = "1 MiB writes, each committed with fsync (stress-ng --hdd)"
    measures = ("CPU time of the hdd workers over the window, every worker alive; stress-ng "
                "hdd bogo-ops/s (on QEMU boards /tmp is tmpfs: fsync is a no-op there)")
    options = {**BoardLoad.options, "workers": None, "mib": None}

    def stressors(self, env: LoadEnv) -> str:
        workers = int(env.opts.get("workers") or _half(env.ncpus))
        mib = int(env.opts.get("mib") or max(8, min(256, env.tmp_avail_kb // 1024 // 8 // workers)))
        return (f"--hdd {workers} --hdd-bytes {mib}M --hdd-write-size 1M "
                f"--hdd-opts fsync,wr-seq")


class Irq(StressNg):
    name = "irq"
    description = "timer interrupts: POSIX timers (a signal per expiry) and timerfds at a fixed rate"
    measures = ("CPU time of the timer workers over the window, every worker alive; timer "
                "and timerfd bogo-ops/s (expiries handled)")
    options = {**BoardLoad.options, "timer_freq": 20000}

    def stressors(self, env: LoadEnv) -> str:
        f = int(env.opts.get("timer_freq") or 20000)
        return f"--timer {env.ncpus} --timer-freq {f} --timerfd {env.ncpus} --timerfd-freq {f}"


class Hackbench(BoardLoad):
    name = "hackbench"
    description = "hackbench -P -g G -f 25 -l 200 -s 512 in an endless loop, no gaps"
    measures = ("CPU time of the hackbench processes over the window, the loop alive "
                "throughout, no failed round; completed rounds and their times")
    stop_signals = "KILL"  # nothing to say at the end: rounds are counted as they end
    files = ("hackbench.txt", "rounds")
    options = {**BoardLoad.options, "groups": None}

    def groups(self, env: LoadEnv) -> int:
        g = env.opts.get("groups")
        if g:
            return int(g)
        if env.is_qemu:  # TCG CPUs are 10-50x slower: 50 tasks per CPU
            return env.ncpus
        return 15 if env.ncpus >= 4 else 4 * env.ncpus

    def command_line(self, env: LoadEnv) -> str:
        return f"hackbench -P -g {self.groups(env)} -f 25 -l 200 -s 512"

    def commands(self, env: LoadEnv) -> list[tuple[str, str]]:
        loop = (f"while :; do if {self.command_line(env)}; then echo ok >> rounds; "
                f"else echo fail >> rounds; fi; done")
        return [("hackbench-loop", f"sh -c '{loop}' > hackbench.txt 2>&1")]

    def ready(self, env: LoadEnv, d: str) -> str:
        return "grep -q '^Running' hackbench.txt"

    def settings(self, env: LoadEnv) -> dict[str, Any]:
        return {"command": self.command_line(env), "groups": self.groups(env)}

    def throughput(self, env: LoadEnv, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
        out = health.hackbench_rounds(files.get("hackbench.txt", b"").decode(errors="replace"))
        rounds = files.get("rounds", b"").decode(errors="replace").split()
        out["failed_rounds"] = rounds.count("fail")
        problems = []
        if out["failed_rounds"]:
            tail = files.get("hackbench.txt", b"").decode(errors="replace").strip().splitlines()[-2:]
            problems.append(f"{out['failed_rounds']} hackbench round(s) failed: {' | '.join(tail)}")
        return out, problems


class Memory(BoardLoad):
    name = "memory"
    scales_with_memory = True
    description = "memcpy bandwidth: an mbw loop per load CPU"
    measures = ("CPU time of the mbw loops over the window, every loop alive; MiB/s copied "
                "(mbw's own per-run lines)")
    stop_signals = "TERM KILL"
    options = {**BoardLoad.options, "mib": None}

    def mib(self, env: LoadEnv) -> int:
        m = env.opts.get("mib")
        return int(m) if m else max(8, min(128, env.mem_avail_kb // 1024 // (8 * env.ncpus)))

    def raw_files(self, env: LoadEnv) -> tuple[str, ...]:
        return tuple(f"mbw-cpu{c}.txt" for c in env.cpus)

    def commands(self, env: LoadEnv) -> list[tuple[str, str]]:
        mib = self.mib(env)
        return [(f"mbw-cpu{c}", f"taskset -c {c} sh -c 'while :; do mbw -q -n 10 -t0 {mib}; done' "
                                f"> mbw-cpu{c}.txt 2>&1") for c in env.cpus]

    def settings(self, env: LoadEnv) -> dict[str, Any]:
        return {"command": f"mbw -q -n 10 -t0 {self.mib(env)} (loop, one per CPU)",
                "mib": self.mib(env)}

    def throughput(self, env: LoadEnv, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
        per = {n: health.mbw_runs(d.decode(errors="replace")) for n, d in files.items()
               if n.startswith("mbw-")}
        runs = sum(p["runs"] for p in per.values())
        return {"per_cpu": per, "runs": runs,
                "mib_s": round(sum(p["mib_s"] for p in per.values()), 1)}, []


class Network(BoardLoad):
    name = "network"
    host_side = True
    description = "large-packet ICMP echo flood and an iperf3 TCP stream to the host"
    measures = ("the ping and the iperf3 client alive throughout, CPU time over the window, "
                "bytes in every 1 s iperf3 interval of the window (no stalled stream); "
                "Mbit/s, echoes sent and answered")
    files = ("iperf3.txt", "ping.txt", "t_start")
    options = {**BoardLoad.options,
               # the host as the board reaches it, and where the host's iperf3
               # server listens: defaults for QEMU (10.0.2.2 -> 127.0.0.1) and the
               # local board (loopback); rack boards name the lab host's address
               "peer": None, "server_bind": "127.0.0.1",
               "ping_size": 8000, "bitrate": None}

    def peer(self, env: LoadEnv) -> str:
        if env.opts.get("peer"):
            return str(env.opts["peer"])
        kind = env.board.kind
        if kind == "qemu":
            return "10.0.2.2"  # QEMU user networking: the host
        if kind == "local":
            return "127.0.0.1"
        raise LoadDied(f"load network: board kind {kind!r} needs load_opts.network.peer "
                       f"(the host address the board reaches)")

    def host_start(self, env: LoadEnv) -> dict:
        out = env.host_dir / "load-network-iperf3-server.json"
        env.host_dir.mkdir(parents=True, exist_ok=True)
        last = ""
        for _ in range(5):
            bind = str(env.opts.get("server_bind") or "127.0.0.1")
            with socket.socket() as s:
                s.bind((bind, 0))
                port = s.getsockname()[1]
            f = open(out, "wb")
            # a deadline of its own, as the board's side has (load_deadline_s)
            proc = subprocess.Popen(["timeout", "-s", "KILL", str(load_deadline_s(env)),
                                     "iperf3", "-s", "-B", bind, "-p", str(port), "-1", "--json"],
                                    stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(0.3)
            if proc.poll() is None:
                env.port = port
                return {"proc": proc, "file": f, "port": port}
            f.close()
            last = out.read_text(errors="replace")[-300:]
        raise LoadDied(f"load network: iperf3 server would not start on the host: {last}")

    def host_stop(self, env: LoadEnv, host: Optional[dict]) -> None:
        if not host:
            return
        proc = host["proc"]
        try:
            # -1: it ends with its one client, writing its JSON; a client that
            # never came (the load did not start) leaves it waiting: no wait then
            proc.wait(timeout=3 if env.ready else 0.1)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        host["file"].close()

    def commands(self, env: LoadEnv) -> list[tuple[str, str]]:
        peer, port = self.peer(env), env.port
        # typed at load (rtlab.core.params); quoted all the same
        rate = f" -b {shlex.quote(str(env.opts['bitrate']))}" if env.opts.get("bitrate") else ""
        peer = shlex.quote(peer)
        return [
            ("ping", f"busybox ping -A -q -s {int(env.opts.get('ping_size') or 8000)} {peer} "
                     f"> ping.txt 2>&1"),
            ("iperf3", f"iperf3 -c {peer} -p {port} -t 86400 -i 1 --forceflush{rate} "
                       f"> iperf3.txt 2>&1"),
        ]

    def script(self, env: LoadEnv) -> str:
        s = super().script(env)
        # when the stream started, in board uptime: places iperf3's intervals in the window
        return s.replace("echo $$ > sid\n", "echo $$ > sid\nread -r up _ < /proc/uptime; echo $up > t_start\n", 1)

    def ready(self, env: LoadEnv, d: str) -> str:
        return "grep -q 'bits/sec' iperf3.txt"

    def settings(self, env: LoadEnv) -> dict[str, Any]:
        return {"peer": self.peer(env), "port": env.port,
                "ping_size": int(env.opts.get("ping_size") or 8000),
                "bitrate": env.opts.get("bitrate")}

    def throughput(self, env: LoadEnv, files: dict[str, bytes]) -> tuple[dict[str, Any], list[str]]:
        iv = health.iperf3_intervals(files.get("iperf3.txt", b"").decode(errors="replace"))
        out: dict[str, Any] = {"ping": health.ping_stats(files.get("ping.txt", b"").decode(errors="replace"))}
        problems = []
        try:
            t_start = float(files.get("t_start", b"").split()[0])
        except (IndexError, ValueError):
            t_start = None
        w = env.window
        inside = iv
        if t_start is not None and w:
            inside = [i for i in iv if t_start + i[0] >= w[0] - 1 and t_start + i[1] <= w[1] + 1]
        secs = sum(e - s for s, e, _ in inside)
        out["tcp_mbit_s"] = round(sum(b for _, _, b in inside) * 8 / secs / 1e6, 1) if secs else 0.0
        out["tcp_intervals"] = len(inside)
        # iperf3 ends with a stub interval when stopped mid-second: only whole ones count
        stalled = [f"{s:.0f}-{e:.0f} s" for s, e, b in inside if b == 0 and e - s >= 0.5]
        if stalled:
            problems.append(f"TCP stream stalled (0 bytes) in interval(s) {', '.join(stalled[:5])}")
        if not out["ping"].get("transmitted"):
            problems.append("ping sent no echo request (no summary in ping.txt)")
        return out, problems

    def end(self, env: LoadEnv, handle) -> None:
        super().end(env, handle)
        f, l = handle.get("first"), handle.get("last")
        if f is not None and l is not None and f.sample and l.sample:
            env.window = (f.sample.t, l.sample.t)
