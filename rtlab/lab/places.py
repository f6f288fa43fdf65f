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
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import threading
import time
from typing import Callable, Optional

from ..errors import RtlabError
from ..procutil import die_with_parent, labgrid_client, process_start, venv_tool  # noqa: F401 - re-exported
from .coordinator import Coordinator, CoordinatorError

IDENTITY_RE = re.compile(r"^rtlab-(?P<pid>\d+)-(?P<start>\d+)-(?P<seq>\d+)$")

_seq_lock = threading.Lock()
_seq = 0


class PlaceError(RtlabError):
    """No place could be reserved or locked (an infra error for the job)."""


# process helpers live in rtlab.procutil (the rack uses them too); re-exported here
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


def stale_owner(owner: Optional[str], host: Optional[str] = None) -> bool:
    """Is *owner* ("host/user") an rtlab job of this host that has died?"""
    if not owner or "/" not in owner:
        return False
    h, user = owner.split("/", 1)
    return h == (host or local_host()) and identity_alive(user) is False


def reap_stale(coord: Coordinator, say: Callable[[str], None] = lambda s: None,
               host: Optional[str] = None) -> list[str]:
    """Release places and cancel reservations held by dead rtlab jobs of this host."""
    done = []
    for place in coord.places().values():
        if stale_owner(place.acquired, host):
            coord.release_from(place.name, place.acquired)
            msg = f"released place {place.name} from {place.acquired} (job process is gone)"
            say(msg)
            done.append(msg)
    for res in coord.reservations().values():
        if stale_owner(res.owner, host):
            if coord.cancel_reservation(res.token):
                msg = f"cancelled reservation {res.token} of {res.owner} (job process is gone)"
                say(msg)
                done.append(msg)
    return done


class PlaceLease:
    """Reserve a place by tags, lock it, and release it: ``with PlaceLease(...) as env:``.

    *env* holds LG_COORDINATOR, LG_PLACE, LG_TOKEN and LG_USERNAME for the job
    process. *cancel* (a threading.Event) aborts a wait for a place.
    """

    def __init__(self, coordinator: str, tags: dict, *, identity: Optional[str] = None,
                 wait_timeout: Optional[float] = None, cancel: Optional[threading.Event] = None,
                 say: Callable[[str], None] = lambda s: None):
        self.coordinator = coordinator
        self.tags = dict(tags)
        self.identity = identity or new_identity()
        self.owner = f"{local_host()}/{self.identity}"
        self.wait_timeout = wait_timeout
        self.cancel = cancel or threading.Event()
        self.say = say
        self.token: Optional[str] = None
        self.place: Optional[str] = None
        self.locked = False
        self.waited_s = 0.0

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
                "no_proxy": no_proxy, "NO_PROXY": no_proxy}

    def _client(self, *args, timeout: float = 60.0) -> subprocess.CompletedProcess:
        return subprocess.run([labgrid_client(), *args], env=self._env(), capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def acquire(self) -> dict:
        with Coordinator(self.coordinator) as coord:
            try:
                places = coord.places()
            except CoordinatorError as e:
                raise PlaceError(str(e)) from None
            if not any(p.has_tags(self.tags) for p in places.values()):
                raise PlaceError(f"no place on coordinator {self.coordinator} has tags "
                                 f"{' '.join(self.filters)} (places: {', '.join(sorted(places)) or 'none'})")
        t0 = time.monotonic()
        try:
            self._reserve()
            self.waited_s = round(time.monotonic() - t0, 3)
            res = self._client("-p", f"+{self.token}", "lock")
            if res.returncode != 0:
                raise PlaceError(f"lock of place {self.place} (reservation {self.token}) failed: "
                                 f"{(res.stderr or res.stdout).strip()[-500:]}")
            self.locked = True
        except BaseException:
            self.release()
            raise
        return self.job_env()

    def _reserve(self) -> None:
        proc = subprocess.Popen([labgrid_client(), "reserve", "--wait", "--shell", *self.filters],
                                env=self._env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True, stdin=subprocess.DEVNULL)
        try:
            # `export LG_TOKEN=...` comes first, before the wait for allocation
            first = proc.stdout.readline().strip()
            m = re.match(r"export LG_TOKEN=(\S+)", first)
            if not m:
                proc.wait(timeout=10)
                raise PlaceError(f"labgrid-client reserve {' '.join(self.filters)} failed: "
                                 f"{(first + ' ' + proc.stderr.read()).strip()[-500:]}")
            self.token = m.group(1)
            deadline = None if self.wait_timeout is None else time.monotonic() + self.wait_timeout
            while proc.poll() is None:
                if self.cancel.is_set():
                    raise PlaceError(f"cancelled while waiting for a place with {' '.join(self.filters)}")
                if deadline is not None and time.monotonic() > deadline:
                    raise PlaceError(f"no place with {' '.join(self.filters)} became free "
                                     f"within {self.wait_timeout:g} s")
                time.sleep(0.2)
            if proc.returncode != 0:
                raise PlaceError(f"labgrid-client reserve failed ({proc.returncode}): "
                                 f"{proc.stderr.read().strip()[-500:]}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        with Coordinator(self.coordinator) as coord:
            res = coord.reservations().get(self.token)
        if res is None or not res.place:
            raise PlaceError(f"reservation {self.token} was allocated no place ({res.state if res else 'gone'})")
        self.place = res.place

    def release(self) -> None:
        """Unlock and cancel; safe to call twice and after a partial acquire."""
        try:
            with Coordinator(self.coordinator) as coord:
                if self.place:
                    place = coord.places().get(self.place)
                    if place is not None and place.acquired == self.owner:
                        coord.release_from(self.place, self.owner)
                if self.token:
                    coord.cancel_reservation(self.token)
        except CoordinatorError as e:
            # the reaper will release it once this process is gone
            self.say(f"releasing place {self.place}: {e}")
        self.locked = False
        self.token = None

    def __enter__(self) -> dict:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
