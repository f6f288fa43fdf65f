"""Spread a campaign's board x variant jobs over places.

At most *places* jobs run at once (``rtlab run --places N``; 1 keeps the
sequential behaviour), and never two on one place:

* **remote** boards (``kind: remote``, env files with a ``RemotePlace``): each
  job reserves a place tagged ``board=<board name>`` on the coordinator and
  locks it for as long as it runs (:class:`rtlab.lab.places.PlaceLease`). The
  coordinator decides which place and queues jobs when all are busy, so two
  runners sharing a lab never collide either.
* **qemu** boards (QEMUDriver on this host): one job per board at a time.
* **local** (this machine as a board): alone, nothing else running, since any
  other job would be measured as its latency.

Jobs start in campaign order (a job waiting for exclusivity holds back the
jobs behind it). Results come back in campaign order. Leases are released
whatever happens to the job (pass, fail, timeout, cancel); if this process is
killed instead, the rack's reaper releases them (see rtlab.lab.places).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable, Optional

from ..errors import RtlabError
from ..core.model import JobResult
from .coordinator import Coordinator
from .places import PlaceError, PlaceLease, reap_stale

#: run_one(job, lease_env, label, on_spawn) -> JobResult
RunOne = Callable[..., JobResult]
#: finish(job, result, label): called as each job lands (serialised)
Finish = Callable[..., None]


def job_class(job) -> str:
    kind = job.board.kind
    if kind == "remote":
        return "remote"
    if kind == "local" or job.board.fixed_kernel:
        return "exclusive"
    return "board"


def place_tags(job) -> dict:
    """What a job for this board reserves by: the board's name (env file stem)."""
    return {"board": job.board.name}


class Scheduler:
    def __init__(self, jobs: list, run_one: RunOne, finish: Finish, *, places: int = 1,
                 progress: Callable[[str], None] = print, coordinator: Optional[str] = None,
                 wait_timeout: Optional[float] = None):
        if places < 1:
            raise RtlabError(f"--places must be at least 1, got {places}")
        self.jobs = list(jobs)
        self.run_one = run_one
        self.finish = finish
        self.places = places
        self.progress = progress
        self.coordinator = coordinator
        self.wait_timeout = wait_timeout
        self.cancel = threading.Event()
        self.cond = threading.Condition()
        self.pending = list(range(len(self.jobs)))
        self.running: dict[int, str] = {}      # index -> class
        self.busy_boards: set[str] = set()
        self.results: dict[int, JobResult] = {}
        self.procs: dict[int, int] = {}         # index -> pgid of the job's process
        self.finish_lock = threading.Lock()
        self.errors: list[BaseException] = []
        self.active = 0
        #: one entry per lease: job, place, waited_s, prio, attempt
        self.waits: list[dict] = []

    # -- picking ------------------------------------------------------------------
    def _startable(self, i: int) -> bool:
        job = self.jobs[i]
        cls = job_class(job)
        if "exclusive" in self.running.values():
            return False
        if cls == "exclusive":
            return not self.running
        if cls == "board":
            return job.board.name not in self.busy_boards
        return True

    def _next(self) -> Optional[int]:
        with self.cond:
            while True:
                if self.cancel.is_set() or not self.pending:
                    return None
                for i in self.pending:
                    if self._startable(i):
                        self.pending.remove(i)
                        self.running[i] = job_class(self.jobs[i])
                        if self.running[i] == "board":
                            self.busy_boards.add(self.jobs[i].board.name)
                        return i
                    if job_class(self.jobs[i]) == "exclusive":
                        break  # nothing overtakes a job waiting to run alone
                self.cond.wait(0.5)

    def _done(self, i: int) -> None:
        with self.cond:
            cls = self.running.pop(i, None)
            if cls == "board":
                self.busy_boards.discard(self.jobs[i].board.name)
            self.procs.pop(i, None)
            self.cond.notify_all()

    # -- running --------------------------------------------------------------------
    def label(self, i: int, place: Optional[str] = None) -> str:
        where = f" @{place}" if place else ""
        return f"[{i + 1}/{len(self.jobs)}] {self.jobs[i].id}{where}"

    def _infra(self, job, msg: str) -> JobResult:
        return JobResult(board=job.board.name, variant=job.variant.name, arch=job.board.arch,
                         budget_class=job.board.budget_class, infra_error=f"board {job.board.name}: {msg}",
                         repeat=getattr(job, "repeat", 0))

    def _run(self, i: int) -> None:
        job = self.jobs[i]

        def on_spawn(proc) -> None:
            with self.cond:
                self.procs[i] = proc.pid
            if self.cancel.is_set():
                _killpg(proc.pid)

        if job_class(job) != "remote":
            label = self.label(i)
            jr = self.run_one(job, None, label, on_spawn)
        else:
            if not self.coordinator:
                jr = self._infra(job, "a rack board needs a coordinator: start the rack "
                                      "(`rtlab rack up`) or set LG_COORDINATOR")
                label = self.label(i)
            else:
                jr, label = self._run_leased(i, on_spawn)
        with self.finish_lock:
            self.results[i] = jr
            self.finish(job, jr, label)

    def _run_leased(self, i: int, on_spawn) -> tuple:
        """Run job *i* on a leased place; a job whose place was lost mid-run
        (its lease ran out, someone else holds the place) is INFRA and is run
        once more on another place of the same board type."""
        job = self.jobs[i]
        avoid: list[str] = []
        for attempt in (1, 2):
            lost: list[str] = []

            def on_lost(why: str, lost=lost) -> None:
                # the job must not go on using a board that is not its own
                lost.append(why)
                self.progress(f"{self.label(i)} lost its place: {why}")
                with self.cond:
                    pgid = self.procs.get(i)
                if pgid:
                    _killpg(pgid)

            lease = PlaceLease(self.coordinator, place_tags(job), wait_timeout=self.wait_timeout,
                               cancel=self.cancel, say=self.progress, on_lost=on_lost)
            try:
                env = lease.acquire()
            except PlaceError as e:
                return self._infra(job, f"no place: {e}"), self.label(i)
            label = self.label(i, lease.place)
            try:
                if lease.waited_s >= 1:
                    self.progress(f"{label} place locked after waiting {lease.waited_s:.0f} s")
                jr = self.run_one(job, env, label, on_spawn)
            finally:
                lease.release()
            self.waits.append({"job": job.id, "place": lease.place, "waited_s": lease.waited_s,
                               "prio": lease.prio, "attempt": attempt})
            if not lost:
                return jr, label
            jr = self._infra(job, f"place {lease.place} lost mid-run: {lost[0]}")
            avoid.append(lease.place or "")
            if attempt == 1 and not self.cancel.is_set():
                self.progress(f"{label} INFRA (place lost): running it again on another "
                              f"{job.board.name} place")
        return jr, label

    def _worker(self) -> None:
        try:
            while True:
                i = self._next()
                if i is None:
                    return
                try:
                    self._run(i)
                except BaseException as e:  # noqa: BLE001 - re-raised by run()
                    self.errors.append(e)
                    self.cancel.set()
                finally:
                    self._done(i)
        finally:
            with self.cond:
                self.active -= 1
                self.cond.notify_all()

    def _wait_workers(self, timeout: Optional[float] = None) -> None:
        # not Thread.join(): a join interrupted by Ctrl-C marks the thread as
        # stopped while it still runs (CPython 3.11), and later joins return at once
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.active and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.2)

    def run(self) -> list[JobResult]:
        if any(job_class(j) == "remote" for j in self.jobs) and self.coordinator:
            try:
                with Coordinator(self.coordinator) as c:
                    reap_stale(c, say=lambda m: self.progress(f"reaper: {m}"))
            except Exception as e:  # noqa: BLE001 - the lease reports a dead coordinator
                self.progress(f"reaper: {e}")
        n = min(self.places, len(self.jobs)) or 1
        workers = [threading.Thread(target=self._worker, name=f"job-worker-{k}", daemon=True)
                   for k in range(n)]
        self.active = n
        # a cancelled CI job gets SIGTERM: treat it as Ctrl-C, so every running
        # job ends and releases its place before this process goes
        old_term = None
        if threading.current_thread() is threading.main_thread():
            old_term = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
        for w in workers:
            w.start()
        try:
            self._wait_workers()
        except BaseException:
            # Ctrl-C / SIGTERM: stop waiting for places, end running jobs (their
            # finally blocks release the places), then re-raise
            self.cancel.set()
            with self.cond:
                pgids = list(self.procs.values())
            for pgid in pgids:
                _killpg(pgid)
            self._wait_workers(timeout=60)
            raise
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
        if self.errors:
            raise self.errors[0]
        return [self.results[i] for i in range(len(self.jobs)) if i in self.results]


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_scheduled(jobs: list, run_one: RunOne, finish: Finish, *, places: int = 1,
                  progress: Callable[[str], None] = print, coordinator: Optional[str] = None,
                  wait_timeout: Optional[float] = None) -> list[JobResult]:
    # the caller finds the lab's coordinator (a real lab's $LG_COORDINATOR, or
    # the local rack's, which the run layer reads from rtlab.rack.state): the
    # lab layer knows coordinators, not where a rack keeps its state
    if coordinator is None and any(job_class(j) == "remote" for j in jobs):
        coordinator = os.environ.get("LG_COORDINATOR") or None
    return Scheduler(jobs, run_one, finish, places=places, progress=progress,
                     coordinator=coordinator, wait_timeout=wait_timeout).run()
