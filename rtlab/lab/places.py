"""Places for jobs: reserve by tags, lock, always release; reap what dead jobs left.

A job that runs on a rack board holds a labgrid place for exactly as long as
it runs::

    labgrid-client reserve --wait --shell board=rack-aarch64   # -> LG_TOKEN
    labgrid-client -p +TOKEN lock
    ... pytest --lg-env env/rack-aarch64.yaml  (LG_PLACE, LG_TOKEN, LG_USERNAME)
    release-from + cancel-reservation                             # finally

**Identity.** Every job locks under its own labgrid user name,
``LG_USERNAME=rtlab-<pid>-<start>-<n>``: the pid and start time (clock ticks
since boot, /proc/<pid>/stat) of the process that holds the lease and a job
number. The coordinator records ``host/user`` as the owner, so a lock names
the process it belongs to, and the place survives no process it did not
belong to: :func:`reap_stale` releases every place and cancels every
reservation whose owner on this host is an rtlab identity of a process that
no longer exists (or whose pid was reused: the start time differs). The rack
service runs it every second; ``rtlab run`` runs it before reserving;
``rtlab rack reap`` runs it by hand. A job killed with SIGKILL therefore
leaves its place for at most one reaper period.

Release is ``ReleasePlace(fromuser=owner)``, the request ``labgrid-client
release-from`` sends: it releases only if that owner still holds the place,
so a late release never takes a place from the next job.

**Leases across hosts.** A pid means nothing on another host, and a runner
host that dies takes its pids with it. So a held place is also a *lease* the
job renews while it runs: every T/3 its :class:`LeaseKeeper` writes three
tags on the place (the coordinator keeps tags, in places.yaml, across its own
restarts)::

    rtlab_lease_owner    hex of "host/user" (tag values stay [0-9a-f])
    rtlab_lease_since    unix time the job locked the place
    rtlab_lease_renewed  unix time of the last renewal

A place locked by an rtlab identity whose lease was not renewed for T
(``RTLAB_LEASE_S``, default 30 s) is released by *any* reaper on *any*
host, whatever the owner's host (the same release-from). T is compared with
the renewer's clock: hosts of one lab keep NTP time, and T is chosen far
above their skew (labgrid/README.md). Places locked by people (not an
rtlab identity) are never touched. A waiting or allocated reservation of an
rtlab identity that was not polled for T (labgrid's client polls every
second while it waits) is cancelled too.

**Coordinator restarts.** labgrid's coordinator forgets locks and
reservations when it restarts but keeps tags. A job whose place is no longer
locked but still carries its live lease re-locks it (the keeper retries every
second); a job that locks a place carrying *another* owner's live lease
yields it (unlocks, waits, reserves again), so the job that was running on
the board keeps it. A job that loses its place (someone else holds it, or
its lease ran out) is told (``on_lost``) and ends INFRA.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from ..core.config import seconds_setting
from ..errors import InputError, RtlabError
from ..core.procutil import die_with_parent, labgrid_client, process_start, venv_tool  # noqa: F401 - re-exported
from .coordinator import Coordinator, CoordinatorError, PlaceInfo

IDENTITY_RE = re.compile(r"^rtlab-(?P<pid>\d+)-(?P<start>\d+)-(?P<seq>\d+)$")

TAG_OWNER = "rtlab_lease_owner"
TAG_SINCE = "rtlab_lease_since"
TAG_RENEWED = "rtlab_lease_renewed"
LEASE_TAGS = (TAG_OWNER, TAG_SINCE, TAG_RENEWED)
DEFAULT_LEASE_S = 30.0
#: the range RTLAB_LEASE_S may take: renewals every T/3 must fit several
#: coordinator round trips; an hour is far beyond any useful T
LEASE_RANGE_S = (3.0, 3600.0)
#: labgrid's reservations time out 60 s after their last poll
LABGRID_RES_TIMEOUT_S = 60.0
#: labgrid's coordinator writes places.yaml (tags included) every 15 s, so
#: after a restart a lease tag can be this much older than its last renewal
COORDINATOR_SAVE_S = 15.0
#: an allocated reservation not yet locked is cancelled after this long unpolled
ALLOCATED_GRACE_S = 30.0
#: how long a waiting job rides out an unreachable coordinator (a restart)
COORDINATOR_GRACE_S = 60.0

_seq_lock = threading.Lock()
_seq = 0


class PlaceError(RtlabError):
    """No place could be reserved or locked (an infra error for the job)."""


class CoordinatorTrouble(PlaceError):
    """The coordinator went away or forgot a reservation: worth a retry."""


# process helpers live in rtlab.core.procutil (the rack uses them too); re-exported here
def new_identity(pid: Optional[int] = None) -> str:
    """A labgrid user name for one job of this process."""
    global _seq
    pid = pid or os.getpid()
    with _seq_lock:
        _seq += 1
        n = _seq
    return f"rtlab-{pid}-{process_start(pid)}-{n}"


def identity_alive(user: str) -> Optional[bool]:
    """True/False for an rtlab job identity, None for any other user name."""
    m = IDENTITY_RE.match(user)
    if not m:
        return None
    start = process_start(int(m.group("pid")))
    return start is not None and start == int(m.group("start"))


def local_host() -> str:
    return os.environ.get("LG_HOSTNAME", socket.gethostname())


def lease_seconds(value: Optional[str] = None) -> float:
    """T: RTLAB_LEASE_S (or *value*), typed and ranged; an InputError names the key."""
    return seconds_setting("RTLAB_LEASE_S", DEFAULT_LEASE_S, *LEASE_RANGE_S, value=value)


def is_rtlab_owner(owner: Optional[str]) -> bool:
    return bool(owner) and "/" in owner and bool(IDENTITY_RE.match(owner.split("/", 1)[1]))


@dataclass(frozen=True)
class Lease:
    owner: str
    since: float
    renewed: float


def encode_owner(owner: str) -> str:
    return owner.encode().hex()


def read_lease(place: PlaceInfo) -> Optional[Lease]:
    """The lease tags of a place, or None if it has none (or they are garbled)."""
    try:
        owner = bytes.fromhex(place.tags[TAG_OWNER]).decode()
        return Lease(owner, float(place.tags[TAG_SINCE]), float(place.tags[TAG_RENEWED]))
    except (KeyError, ValueError):
        return None


def lease_tags(owner: str, since: float, renewed: float) -> dict:
    return {TAG_OWNER: encode_owner(owner), TAG_SINCE: str(int(since)), TAG_RENEWED: str(int(renewed))}


#: SetPlaceTags with empty values deletes the tags
NO_LEASE = {tag: "" for tag in LEASE_TAGS}


def end_lease(coord: Coordinator, place: PlaceInfo, owner: str) -> None:
    """Release *place* from *owner* and take its lease tags off first: tags
    left on a released place would look, to the next job that locks it, like
    the live lease of a holder whose lock a coordinator restart forgot, and
    that job would yield the place (for up to T + COORDINATOR_SAVE_S)."""
    lease = read_lease(place)
    if lease is not None and lease.owner == owner:
        coord.set_tags(place.name, NO_LEASE)
    coord.release_from(place.name, owner)


def lease_age(place: PlaceInfo, now: Optional[float] = None) -> float:
    """Seconds since the holder of *place* last renewed its lease (since it
    locked, by the coordinator's clock, if it never did)."""
    now = time.time() if now is None else now
    lease = read_lease(place)
    last = lease.renewed if lease is not None and lease.owner == place.acquired else place.changed
    return now - last


def lease_live(lease: Lease, lease_s: float, now: Optional[float] = None) -> bool:
    """Is a lease on an *unlocked* (or just re-locked) place still its
    holder's? After a coordinator restart the tags can be up to
    COORDINATOR_SAVE_S older than the holder's last renewal. The waiter that
    yields and the holder that waits for it to yield judge by this one rule."""
    now = time.time() if now is None else now
    return now - lease.renewed <= lease_s + COORDINATOR_SAVE_S


def holder_since(place: PlaceInfo) -> Optional[float]:
    lease = read_lease(place)
    if place.acquired and lease is not None and lease.owner == place.acquired:
        return lease.since
    return place.changed if place.acquired else None


def stale_owner(owner: Optional[str], host: Optional[str] = None) -> bool:
    """Is *owner* ("host/user") an rtlab job of this host that has died?"""
    if not owner or "/" not in owner:
        return False
    h, user = owner.split("/", 1)
    return h == (host or local_host()) and identity_alive(user) is False


def reap_stale(coord: Coordinator, say: Callable[[str], None] = lambda s: None,
               host: Optional[str] = None, lease_s: Optional[float] = None,
               now: Optional[float] = None) -> list[str]:
    """Release places and cancel reservations of rtlab jobs that are gone: a
    dead process of this host (at once), or any host's lease not renewed for T."""
    lease_s = lease_seconds() if lease_s is None else lease_s
    now = time.time() if now is None else now
    done = []
    released_owners = set()
    for place in coord.places().values():
        owner = place.acquired
        if not is_rtlab_owner(owner):
            continue  # free, or a person's lock: never ours to take
        if stale_owner(owner, host):
            why = "job process is gone"
        elif lease_age(place, now) > lease_s:
            why = f"lease not renewed for {lease_age(place, now):.0f} s > T={lease_s:g} s"
        else:
            continue
        end_lease(coord, place, owner)
        released_owners.add(owner)
        msg = f"released place {place.name} from {owner} ({why})"
        say(msg)
        done.append(msg)
    for res in coord.reservations().values():
        if not is_rtlab_owner(res.owner):
            continue
        if stale_owner(res.owner, host):
            why = "job process is gone"
        elif res.owner in released_owners:
            why = "its place was released"
        elif res.state in ("waiting", "allocated") and \
                now - (res.timeout - LABGRID_RES_TIMEOUT_S) > _unpolled_limit(res.state, lease_s):
            why = (f"not polled for {now - (res.timeout - LABGRID_RES_TIMEOUT_S):.0f} s > "
                   f"{_unpolled_limit(res.state, lease_s):g} s")
        else:
            continue
        if coord.cancel_reservation(res.token):
            msg = f"cancelled reservation {res.token} of {res.owner} ({why})"
            say(msg)
            done.append(msg)
    return done


def _unpolled_limit(state: str, lease_s: float) -> float:
    """A waiting job polls every second; an allocated reservation is not polled
    while its job starts `labgrid-client lock` (seconds on a loaded runner),
    so it gets at least ALLOCATED_GRACE_S (labgrid itself drops it after 60 s)."""
    return lease_s if state == "waiting" else max(lease_s, ALLOCATED_GRACE_S)


class LeaseKeeper(threading.Thread):
    """Renews a job's lease on its place every T/3 while the job runs; re-locks
    the place after a coordinator restart; calls *on_lost* once if the place
    was lost (another owner holds it, or the lease ran out unrenewed)."""

    def __init__(self, lease: "PlaceLease", lease_s: float, on_lost: Callable[[str], None]):
        super().__init__(name=f"lease-{lease.place}", daemon=True)
        self.lease = lease
        self.lease_s = lease_s
        self.on_lost = on_lost
        self.stop = threading.Event()
        self.last_renewed = time.time()
        self.lost: Optional[str] = None
        self.relocks = 0

    def run(self) -> None:
        period = self.lease_s / 3
        while not self.stop.wait(period):
            try:
                ok = self.tick()
            except CoordinatorError as e:
                ok = False
                self.lease.say(f"lease on {self.lease.place}: {e}")
            if not ok and not self.lost and time.time() - self.last_renewed > self.lease_s:
                # self-fencing: past T since our last renewal any reaper may
                # give the place to another job; stop before that job starts
                # (the soak saw two jobs on one place for 64 ms without this)
                self.lost = (f"lease on {self.lease.place} not renewed for "
                             f"{time.time() - self.last_renewed:.0f} s > T={self.lease_s:g} s")
            if self.lost:
                self.on_lost(self.lost)
                return
            # an unreachable coordinator or a failed re-lock is not a loss by
            # itself: the reapers judge the lease by T, and a job that comes
            # back to a place somebody else holds is told so above
            period = self.lease_s / 3 if ok else 1.0

    def tick(self) -> bool:
        """One renewal; True when the lease is renewed."""
        lease = self.lease
        with Coordinator(lease.coordinator, timeout=3) as coord:
            place = coord.places().get(lease.place or "")
            if place is None:
                self.lost = f"place {lease.place} no longer exists"
                return False
            if place.acquired == lease.owner:
                now = time.time()
                coord.set_tags(place.name, lease_tags(lease.owner, lease.since, now))
                self.last_renewed = now
                return True
            mine = read_lease(place)
            if place.acquired:
                if mine is not None and mine.owner == lease.owner and lease_live(mine, self.lease_s):
                    # after a coordinator restart a waiter may lock our place
                    # before it sees our live lease tags; it yields the place
                    # then (PlaceLease._live_foreign_lease, same liveness
                    # rule), so this is a moment to wait out, not a loss
                    return False
                self.lost = f"place {place.name} is held by {place.acquired} now"
                return False
            if mine is not None and mine.owner != lease.owner:
                self.lost = f"place {place.name} carries the lease of {mine.owner} now"
                return False
        # not locked (the coordinator restarted): lock it again under our name
        # while our lease is live; a waiter that locked it first yields to us
        res = lease._client("-p", lease.place, "lock", timeout=30)
        if res.returncode != 0:
            return False
        with Coordinator(lease.coordinator, timeout=3) as coord:
            place = coord.places().get(lease.place or "")
            other = read_lease(place) if place else None
            if other is not None and other.owner != lease.owner and other.renewed >= int(self.last_renewed):
                # somebody held it in between (our lease had run out): theirs now
                coord.release_from(lease.place or "", lease.owner)
                self.lost = f"place {lease.place} was held by {other.owner} while we could not renew"
                return False
        self.relocks += 1
        lease.say(f"place {lease.place} locked again after the coordinator lost the lock")
        return self.tick()


#: job priorities (labgrid reservation prio: higher first); RTLAB_JOB_PRIORITY
#: takes a name or a number. A merge request waits for the gate, so it goes
#: first; a bisection is someone waiting too; the nightly soak has all night.
PRIORITIES = {"gate": 20, "bisect": 10, "default": 10, "nightly": 0, "soak": 0}
#: aging: a waiting job gains one priority step per this many seconds, so a
#: stream of higher-priority work delays the rest but never starves it
DEFAULT_AGING_S = 30.0


def job_priority(value: Optional[str] = None) -> float:
    text = (os.environ.get("RTLAB_JOB_PRIORITY", "") if value is None else value).strip()
    if not text:
        return float(PRIORITIES["default"])
    if text in PRIORITIES:
        return float(PRIORITIES[text])
    try:
        prio = float(text)
    except ValueError:
        prio = float("nan")
    if not -100 <= prio <= 100:
        raise InputError("RTLAB_JOB_PRIORITY", f"must be one of {', '.join(PRIORITIES)} or a number in "
                                               f"[-100, 100], got {text!r}")
    return prio


def aged_priority(base: float, waited_s: float, aging_s: float) -> float:
    """One step per *aging_s* waited (steps of PRIORITIES are 10 apart)."""
    return base + (int(waited_s // aging_s) if aging_s > 0 else 0)


class PlaceLease:
    """Reserve a place by tags, lock it, keep the lease, and release it:
    ``with PlaceLease(...) as env:``.

    *env* holds LG_COORDINATOR, LG_PLACE, LG_TOKEN and LG_USERNAME for the job
    process. *cancel* (a threading.Event) aborts a wait for a place. While
    locked, a :class:`LeaseKeeper` renews the lease; *on_lost* is called (from
    its thread) if the place is lost.
    """

    def __init__(self, coordinator: str, tags: dict, *, identity: Optional[str] = None,
                 wait_timeout: Optional[float] = None, cancel: Optional[threading.Event] = None,
                 say: Callable[[str], None] = lambda s: None, prio: Optional[float] = None,
                 lease_s: Optional[float] = None, aging_s: float = DEFAULT_AGING_S,
                 on_lost: Callable[[str], None] = lambda why: None):
        self.coordinator = coordinator
        self.tags = dict(tags)
        self.identity = identity or new_identity()
        self.owner = f"{local_host()}/{self.identity}"
        self.wait_timeout = wait_timeout
        self.cancel = cancel or threading.Event()
        self.say = say
        self.prio = job_priority() if prio is None else prio
        self.lease_s = lease_seconds() if lease_s is None else lease_s
        self.aging_s = aging_s
        self.on_lost = on_lost
        self.token: Optional[str] = None
        self.place: Optional[str] = None
        self.locked = False
        self.waited_s = 0.0
        self.since = 0.0
        self.keeper: Optional[LeaseKeeper] = None
        #: places this lease yielded to a live lease of another job
        self.yielded: list[str] = []

    @property
    def filters(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.tags.items())]

    def _env(self) -> dict:
        env = {**os.environ, "LG_COORDINATOR": self.coordinator, "LG_USERNAME": self.identity}
        env.pop("LG_PLACE", None)
        if self.token:
            env["LG_TOKEN"] = self.token
        else:
            env.pop("LG_TOKEN", None)
        return env

    def job_env(self) -> dict:
        # labgrid's HTTP power backends use requests, which honours http_proxy:
        # a lab PDU (here, the rack's on loopback) is never behind the proxy
        no_proxy = ",".join(x for x in (os.environ.get("no_proxy") or os.environ.get("NO_PROXY") or "",
                                        "127.0.0.1,localhost,::1") if x)
        return {"LG_COORDINATOR": self.coordinator, "LG_PLACE": self.place or "",
                "LG_TOKEN": self.token or "", "LG_USERNAME": self.identity,
                "RTLAB_PLACE_WAIT_S": f"{self.waited_s:.3f}",
                "no_proxy": no_proxy, "NO_PROXY": no_proxy}

    def _client(self, *args, timeout: float = 60.0) -> subprocess.CompletedProcess:
        try:
            return subprocess.run([labgrid_client(), *args], env=self._env(), capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            # a labgrid-client that hangs (coordinator gone mid-call, a machine
            # under heavy load) is a failed call, never an exception that ends the run
            return subprocess.CompletedProcess(args, 124, "", f"labgrid-client {' '.join(args)} "
                                                              f"timed out after {timeout:g} s")

    def acquire(self) -> dict:
        t_try = time.monotonic()
        while True:
            try:
                with Coordinator(self.coordinator) as coord:
                    places = coord.places()
                break
            except CoordinatorError as e:
                if time.monotonic() - t_try > COORDINATOR_GRACE_S or self.cancel.wait(1.0):
                    raise PlaceError(str(e)) from None
        if not any(p.has_tags(self.tags) for p in places.values()):
            raise PlaceError(f"no place on coordinator {self.coordinator} has tags "
                             f"{' '.join(self.filters)} (places: {', '.join(sorted(places)) or 'none'})")
        t0 = time.monotonic()
        try:
            while True:
                self._reserve(t0)
                res = self._client("-p", f"+{self.token}", "lock")
                if res.returncode != 0:
                    raise PlaceError(f"lock of place {self.place} (reservation {self.token}) failed: "
                                     f"labgrid-client exit {res.returncode}: "
                                     f"{(res.stderr or res.stdout).strip()[-500:] or '(nothing printed)'}")
                self.locked = True
                other = self._live_foreign_lease()
                if other is None:
                    break
                # the coordinator restarted and forgot the lock of a job that
                # still runs on this board: it is that job's place
                self.say(f"place {self.place} still carries the live lease of {other}: yielding it")
                self.yielded.append(self.place or "")
                yielded = self.place or ""
                self.release()
                self._wait_for_holder(yielded, other)
            self.waited_s = round(time.monotonic() - t0, 3)
            self.since = time.time()
            with Coordinator(self.coordinator) as coord:
                coord.set_tags(self.place, lease_tags(self.owner, self.since, self.since))
            self.keeper = LeaseKeeper(self, self.lease_s, self.on_lost)
            self.keeper.start()
        except CoordinatorError as e:
            # the coordinator went away between lock and lease (a restart, seen
            # in the soak): this job's INFRA, never an exception that ends the run
            self.release()
            raise PlaceError(f"coordinator lost while locking place {self.place}: {e}") from None
        except BaseException:
            self.release()
            raise
        return self.job_env()

    def _wait_for_holder(self, place_name: str, holder: str) -> None:
        """After yielding: until the lease's owner has locked the place again
        or its lease ran out (else the coordinator would hand it straight back)."""
        deadline = time.monotonic() + self.lease_s + COORDINATOR_SAVE_S
        while time.monotonic() < deadline:
            if self.cancel.wait(1.0):
                raise PlaceError(f"cancelled while waiting for a place with {' '.join(self.filters)}")
            try:
                with Coordinator(self.coordinator) as coord:
                    place = coord.places().get(place_name)
            except CoordinatorError:
                continue
            if place is None or place.acquired:
                return
            lease = read_lease(place)
            if lease is None or lease.owner != holder or not lease_live(lease, self.lease_s):
                return

    def _live_foreign_lease(self) -> Optional[str]:
        with Coordinator(self.coordinator) as coord:
            place = coord.places().get(self.place or "")
        lease = read_lease(place) if place else None
        if lease is None or lease.owner == self.owner or not lease_live(lease, self.lease_s):
            return None
        return lease.owner

    def _reserve(self, t0: float) -> None:
        """Reserve and wait for an allocation; re-reserve one step higher as
        the wait ages (labgrid serves by prio, then by age)."""
        deadline = None if self.wait_timeout is None else t0 + self.wait_timeout
        trouble_since: Optional[float] = None
        while True:
            prio = aged_priority(self.prio, time.monotonic() - t0, self.aging_s)
            try:
                if self._reserve_once(prio, deadline, t0):
                    return
                trouble_since = None
            except CoordinatorTrouble as e:
                # the coordinator restarted (our reservation is gone) or is
                # down for a moment: wait and reserve again, not INFRA at once
                trouble_since = trouble_since or time.monotonic()
                if time.monotonic() - trouble_since > COORDINATOR_GRACE_S:
                    raise PlaceError(f"{e} (for {COORDINATOR_GRACE_S:g} s)") from None
                self.say(f"waiting for a place: {e}; reserving again")
                self.token = None
                if self.cancel.wait(1.0):
                    raise PlaceError(f"cancelled while waiting for a place with {' '.join(self.filters)}") from None

    def _start_reserve(self, prio: float) -> tuple:
        """``labgrid-client reserve --wait`` at *prio*: (process, token)."""
        proc = subprocess.Popen([labgrid_client(), "reserve", "--wait", "--shell", "--prio", f"{prio:g}",
                                 *self.filters],
                                env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, stdin=subprocess.DEVNULL)
        # `export LG_TOKEN=...` comes first, before the wait for allocation
        first = proc.stdout.readline().strip()
        m = re.match(r"export LG_TOKEN=(\S+)", first)
        if not m:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            err = proc.stderr.read()
            _end(proc)
            raise CoordinatorTrouble(f"labgrid-client reserve {' '.join(self.filters)} failed: "
                                     f"{(first + ' ' + err).strip()[-500:]}")
        return proc, m.group(1)

    def _reserve_once(self, prio: float, deadline: Optional[float], t0: float) -> bool:
        proc, self.token = self._start_reserve(prio)
        next_reap = time.monotonic() + self.lease_s / 3
        try:
            while proc.poll() is None:
                if self.cancel.is_set():
                    raise PlaceError(f"cancelled while waiting for a place with {' '.join(self.filters)}")
                if deadline is not None and time.monotonic() > deadline:
                    raise PlaceError(f"no place with {' '.join(self.filters)} became free "
                                     f"within {self.wait_timeout:g} s")
                if time.monotonic() >= next_reap:
                    # a waiting job is a reaper too: a dead holder on any host
                    # is released within T even with no rack service near
                    next_reap = time.monotonic() + self.lease_s / 3
                    try:
                        with Coordinator(self.coordinator, timeout=3) as coord:
                            reap_stale(coord, say=lambda m: self.say(f"reaper: {m}"), lease_s=self.lease_s)
                    except CoordinatorError:
                        pass
                aged = aged_priority(self.prio, time.monotonic() - t0, self.aging_s)
                if aged > prio:
                    # older now: reserve one step higher *before* giving up the
                    # old reservation, so the job never leaves the queue
                    new_proc, new_token = self._start_reserve(aged)
                    with Coordinator(self.coordinator) as coord:
                        old = coord.reservations().get(self.token)
                        if proc.poll() is None and old is not None and old.state == "waiting":
                            coord.cancel_reservation(self.token)
                            _end(proc)
                            proc, self.token, prio = new_proc, new_token, aged
                        else:  # the old one was allocated meanwhile: keep it
                            coord.cancel_reservation(new_token)
                            _end(new_proc)
                            break
                time.sleep(0.2)
            if proc.returncode not in (0, None, -signal.SIGKILL):
                raise CoordinatorTrouble(f"labgrid-client reserve failed ({proc.returncode}): "
                                         f"{proc.stderr.read().strip()[-500:]}")
        finally:
            _end(proc)
        try:
            with Coordinator(self.coordinator) as coord:
                res = coord.reservations().get(self.token or "")
        except CoordinatorError as e:
            raise CoordinatorTrouble(str(e)) from None
        if res is None or not res.place:
            raise CoordinatorTrouble(f"reservation {self.token} was allocated no place ({res.state if res else 'gone'})")
        self.place = res.place
        return True

    def release(self) -> None:
        """Stop renewing, unlock and cancel; safe to call twice and after a partial acquire."""
        if self.keeper is not None:
            self.keeper.stop.set()
            self.keeper = None
        try:
            with Coordinator(self.coordinator) as coord:
                if self.place:
                    place = coord.places().get(self.place)
                    if place is not None and place.acquired == self.owner:
                        end_lease(coord, place, self.owner)
                if self.token:
                    coord.cancel_reservation(self.token)
        except CoordinatorError as e:
            # the reaper will release it once this process is gone or its lease ran out
            self.say(f"releasing place {self.place}: {e}")
        self.locked = False
        self.token = None

    def __enter__(self) -> dict:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _end(proc: subprocess.Popen) -> None:
    """Kill a labgrid-client (its own session) if it still runs; close its pipes."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.stdout.close()
    proc.stderr.close()
