"""Job identities, stale-lock reaping and the scheduler's promise: at most N
jobs at once, never two on one place or board, leases always released."""
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import pytest

from rtlab.lab import places as P
from rtlab.lab import scheduler as S
from rtlab.lab.coordinator import PlaceInfo, ReservationInfo
from rtlab.core.model import JobResult


# -- identities and the reaper --------------------------------------------------------
def test_identity_names_a_live_process_and_dies_with_it():
    me = P.new_identity()
    assert P.IDENTITY_RE.match(me) and P.identity_alive(me) is True
    assert P.new_identity() != me  # one per job
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = P.new_identity(child.pid)
    child.wait()
    assert P.identity_alive(dead) is False
    pid, start = me.split("-")[1:3]
    assert P.identity_alive(f"rtlab-{pid}-{int(start) + 1}-1") is False  # pid reused
    assert P.identity_alive("alice") is None  # not ours: never touched


def test_stale_owner_is_only_a_dead_rtlab_job_of_this_host():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = P.new_identity(child.pid)
    child.wait()
    host = P.local_host()
    assert P.stale_owner(f"{host}/{dead}")
    assert not P.stale_owner(f"otherhost/{dead}")           # another lab host's job
    assert not P.stale_owner(f"{host}/{P.new_identity()}")  # alive
    assert not P.stale_owner(f"{host}/root") and not P.stale_owner(None)


class FakeCoordinator:
    def __init__(self, places, reservations):
        self._places = places
        self._res = reservations
        self.released, self.cancelled = [], []

    def places(self):
        return self._places

    def reservations(self):
        return self._res

    def release_from(self, place, owner):
        self.released.append((place, owner))

    def set_tags(self, place, tags):
        self.tags_set = getattr(self, "tags_set", []) + [(place, tags)]

    def cancel_reservation(self, token):
        self.cancelled.append(token)
        return True


def test_reaper_releases_places_and_cancels_reservations_of_dead_jobs_only():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead = f"{P.local_host()}/{P.new_identity(child.pid)}"
    child.wait()
    alive = f"{P.local_host()}/{P.new_identity()}"
    now = time.time()
    c = FakeCoordinator(
        {"a": PlaceInfo("a", acquired=dead, changed=now), "b": PlaceInfo("b", acquired=alive, changed=now),
         "c": PlaceInfo("c", acquired="h/alice"), "d": PlaceInfo("d")},
        {"T1": ReservationInfo("T1", dead, "allocated", {}, {"main": "a"}, now + 60),
         "T2": ReservationInfo("T2", alive, "waiting", {}, {}, now + 60)})
    said = []
    done = P.reap_stale(c, say=said.append, lease_s=30, now=now)
    assert c.released == [("a", dead)] and c.cancelled == ["T1"]
    assert len(done) == 2 and said == done


def _other_host_owner():
    # a live-looking identity on a host whose pids we cannot see
    return f"runner-b/{P.new_identity()}"


def test_a_lease_of_another_host_is_released_once_not_renewed_for_T():
    now = time.time()
    stale, fresh, never = _other_host_owner(), _other_host_owner(), _other_host_owner()
    c = FakeCoordinator({
        "a": PlaceInfo("a", acquired=stale, changed=now - 100,
                       tags={"board": "x", **P.lease_tags(stale, now - 100, now - 31)}),
        "b": PlaceInfo("b", acquired=fresh, changed=now - 100,
                       tags=P.lease_tags(fresh, now - 100, now - 29)),
        # locked but never renewed: the coordinator's lock time counts
        "c": PlaceInfo("c", acquired=never, changed=now - 31),
        # another owner's tags left from before do not keep this lock alive
        "d": PlaceInfo("d", acquired=never, changed=now - 40, tags=P.lease_tags(fresh, now, now)),
        # a person's lock is never the reaper's, however old
        "e": PlaceInfo("e", acquired="runner-b/alice", changed=0.0),
    }, {"W": ReservationInfo("W", stale, "waiting", {}, {}, now + 60 - 31),
        "A": ReservationInfo("A", fresh, "waiting", {}, {}, now + 60 - 5),
        "P": ReservationInfo("P", "runner-b/alice", "waiting", {}, {}, 0.0)})
    done = P.reap_stale(c, lease_s=30, now=now)
    assert sorted(c.released) == [("a", stale), ("c", never), ("d", never)]
    # the released lease's tags go with it (the next holder would yield to
    # them); tags of another owner (d's) are not the reaper's to remove
    assert c.tags_set == [("a", P.NO_LEASE)]
    assert c.cancelled == ["W"]
    assert any("lease not renewed for 31 s > T=30 s" in d for d in done)


def test_lease_tags_round_trip_and_stay_lowercase_hex_and_digits():
    owner = "runner-b/rtlab-12-34-5"
    tags = P.lease_tags(owner, 1000.7, 1010.2)
    assert all(v.isalnum() and v == v.lower() for v in tags.values())
    lease = P.read_lease(PlaceInfo("p", tags=tags, acquired=owner))
    assert lease == P.Lease(owner, 1000.0, 1010.0)
    assert P.read_lease(PlaceInfo("p", tags={P.TAG_OWNER: "zz"})) is None
    assert P.holder_since(PlaceInfo("p", tags=tags, acquired=owner)) == 1000.0


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "thirty", "7200"])
def test_lease_seconds_is_typed_and_ranged(monkeypatch, text):
    monkeypatch.setenv("RTLAB_LEASE_S", text)
    with pytest.raises(P.InputError, match="RTLAB_LEASE_S"):
        P.lease_seconds()


def test_priorities_age_so_nothing_waits_forever(monkeypatch):
    assert P.job_priority("gate") > P.job_priority("bisect") > P.job_priority("nightly")
    monkeypatch.setenv("RTLAB_JOB_PRIORITY", "gate; rm -rf /")
    with pytest.raises(P.InputError, match="RTLAB_JOB_PRIORITY"):
        P.job_priority()
    nightly, gate = P.job_priority("nightly"), P.job_priority("gate")
    # a nightly job that has waited 20 aging steps goes before a fresh gate job
    assert P.aged_priority(nightly, 0, 30) < gate < P.aged_priority(nightly, 21 * 30, 30)


# -- the scheduler -----------------------------------------------------------------------
@dataclass(frozen=True)
class B:
    name: str
    kind: str
    arch: str = "aarch64"
    budget_class: str = "x"

    @property
    def fixed_kernel(self):
        return self.kind == "local"


@dataclass(frozen=True)
class V:
    name: str


@dataclass(frozen=True)
class J:
    board: B
    variant: V

    @property
    def id(self):
        return f"{self.board.name}/{self.variant.name}"


class Recorder:
    """run_one stand-in: records what ran where and when, and overlaps."""

    def __init__(self, dwell=0.15, fail=()):
        self.lock = threading.Lock()
        self.running = {}       # id -> place/board
        self.max_parallel = 0
        self.log = []
        self.dwell = dwell
        self.fail = set(fail)

    def __call__(self, job, lease_env, label, on_spawn):
        where = (lease_env or {}).get("LG_PLACE") or job.board.name
        with self.lock:
            assert where not in self.running.values(), f"two jobs on {where}"
            if job.board.kind == "local":
                assert not self.running, "local job not alone"
            assert all(self.log_kind(o) != "local" for o in self.running), "job beside a local job"
            self.running[job.id] = where
            self.max_parallel = max(self.max_parallel, len(self.running))
            self.log.append((job.id, where))
        time.sleep(self.dwell)
        with self.lock:
            del self.running[job.id]
        if job.id in self.fail:
            raise RuntimeError(f"{job.id} blew up")
        return JobResult(board=job.board.name, variant=job.variant.name)

    @staticmethod
    def log_kind(job_id):
        return "local" if job_id.startswith("local/") else "other"


class FakeLease:
    """PlaceLease stand-in: a pool of places with the coordinator's exclusivity."""
    pool_lock = threading.Lock()
    free = []
    acquired = []
    released = []

    def __init__(self, coordinator, tags, *, wait_timeout=None, cancel=None, say=None, on_lost=None):
        self.tags = tags
        self.place = None
        self.waited_s = 0.0
        self.prio = 10.0
        self.on_lost = on_lost

    def acquire(self):
        while True:
            with FakeLease.pool_lock:
                for p in FakeLease.free:
                    if p.startswith(self.tags["board"]):
                        FakeLease.free.remove(p)
                        self.place = p
                        FakeLease.acquired.append(p)
                        return {"LG_PLACE": p}
            time.sleep(0.01)

    def release(self):
        with FakeLease.pool_lock:
            FakeLease.free.append(self.place)
            FakeLease.released.append(self.place)


@pytest.fixture
def lease_pool(monkeypatch):
    monkeypatch.setattr(S, "PlaceLease", FakeLease)
    monkeypatch.setattr(S, "reap_stale", lambda *a, **k: [])
    FakeLease.free = ["rack-a/p0", "rack-a/p1"]
    FakeLease.acquired, FakeLease.released = [], []
    return FakeLease


def _jobs(spec):
    return [J(B(b, kind), V(v)) for b, kind, v in spec]


def test_remote_jobs_spread_over_places_never_two_on_one(lease_pool):
    jobs = _jobs([("rack-a", "remote", f"v{i}") for i in range(6)])
    rec = Recorder()
    done = []
    results = S.Scheduler(jobs, rec, lambda j, r, l: done.append(l), places=3,
                          coordinator="127.0.0.1:1").run()
    assert [r.variant for r in results] == [f"v{i}" for i in range(6)]  # campaign order
    assert rec.max_parallel == 2        # 3 workers, but only 2 places
    assert sorted(lease_pool.acquired) == sorted(lease_pool.released)  # every lease released
    assert {w for _, w in rec.log} == {"rack-a/p0", "rack-a/p1"}
    assert all("@rack-a/p" in l for l in done)


def test_places_1_is_sequential_and_local_boards_never_share(lease_pool):
    jobs = _jobs([("qemu-a", "qemu", "rt"), ("qemu-a", "qemu", "none"), ("qemu-b", "qemu", "rt"),
                  ("local", "local", "host"), ("rack-a", "remote", "rt")])
    rec = Recorder()
    S.Scheduler(jobs, rec, lambda *a: None, places=1, coordinator="x").run()
    assert rec.max_parallel == 1
    rec = Recorder()
    S.Scheduler(jobs, rec, lambda *a: None, places=4, coordinator="x").run()
    assert rec.max_parallel >= 2        # qemu-a, qemu-b and the rack board overlap
    # (the Recorder asserts: never one board twice, the local board alone)


def test_a_failing_job_still_releases_its_place_and_stops_the_run(lease_pool):
    jobs = _jobs([("rack-a", "remote", "v0"), ("rack-a", "remote", "v1")])
    rec = Recorder(fail={"rack-a/v0"})
    with pytest.raises(RuntimeError, match="blew up"):
        S.Scheduler(jobs, rec, lambda *a: None, places=1, coordinator="x").run()
    assert lease_pool.acquired == lease_pool.released == ["rack-a/p0"]


def test_no_coordinator_is_an_infra_error_for_rack_jobs(lease_pool):
    jobs = _jobs([("rack-a", "remote", "rt")])
    (r,) = S.Scheduler(jobs, Recorder(), lambda *a: None, places=2, coordinator=None).run()
    assert "coordinator" in r.infra_error


def test_no_matching_place_fails_fast_without_a_coordinator_call(monkeypatch):
    class C:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

        def places(self):
            return {"rack-vb0": PlaceInfo("rack-vb0", tags={"board": "rack-aarch64"})}
    monkeypatch.setattr(P, "Coordinator", C)
    lease = P.PlaceLease("127.0.0.1:1", {"board": "rk3568"})
    with pytest.raises(P.PlaceError, match="no place .* board=rk3568"):
        lease.acquire()
    assert lease.job_env()["LG_USERNAME"] == lease.identity
    assert "127.0.0.1" in lease.job_env()["no_proxy"]


def test_status_shows_holder_since_and_the_queue_in_serving_order():
    from rtlab.rack.control import lab_view
    now = 10_000.0
    owner = "runner-a/rtlab-1-2-3"
    places = {"p1": PlaceInfo("p1", acquired=owner, changed=now - 5, tags={"board": "x",
                              **P.lease_tags(owner, now - 100, now - 4)}),
              "p2": PlaceInfo("p2", tags={"board": "x"})}
    res = {"A": ReservationInfo("A", "r/rtlab-9-9-1", "waiting", {"main": {"board": "x"}}, {}, now + 60,
                                prio=0, created=now - 50),
           "B": ReservationInfo("B", "r/rtlab-9-9-2", "waiting", {"main": {"board": "x"}}, {}, now + 60,
                                prio=20, created=now - 10),
           "C": ReservationInfo("C", owner, "acquired", {"main": {"board": "x"}}, {"main": "p1"}, now + 60,
                                prio=10, created=now - 101)}
    v = lab_view(places, res, now=now)
    assert v["places"]["p1"]["holder"] == owner and v["places"]["p1"]["held_s"] == 100.0
    assert v["places"]["p1"]["lease_age_s"] == 4.0
    assert v["places"]["p1"]["tags"] == {"board": "x"}  # lease tags shown as a lease, not tags
    assert v["places"]["p2"]["holder"] is None
    assert [(q["token"], q["waited_s"]) for q in v["queue"]] == [("B", 10.0), ("A", 50.0)]


def test_a_job_that_loses_its_place_is_infra_and_runs_again_on_another(monkeypatch):
    calls = []

    class LosingLease(FakeLease):
        n = 0

        def acquire(self):
            env = super().acquire()
            LosingLease.n += 1
            if LosingLease.n == 1:  # the first lease is lost while the job runs
                threading.Timer(0.05, self.on_lost, args=("lease ran out",)).start()
            return env

    monkeypatch.setattr(S, "PlaceLease", LosingLease)
    monkeypatch.setattr(S, "reap_stale", lambda *a, **k: [])
    FakeLease.free = ["rack-a/p0", "rack-a/p1"]
    FakeLease.acquired, FakeLease.released = [], []

    def run_one(job, env, label, on_spawn):
        calls.append(env["LG_PLACE"])
        time.sleep(0.3)
        return JobResult(board=job.board.name, variant=job.variant.name, arch="x", budget_class="x")

    sched = S.Scheduler(_jobs([("rack-a", "remote", "v0")]), run_one, lambda *a: None, places=1,
                        coordinator="127.0.0.1:1", progress=lambda m: None)
    results = sched.run()
    assert len(calls) == 2 and results[0].infra_error is None
    assert [w["attempt"] for w in sched.waits] == [1, 2]
    assert sorted(FakeLease.acquired) == sorted(FakeLease.released)


class _CtxCoordinator(FakeCoordinator):
    """FakeCoordinator as ``with Coordinator(addr) as c`` (what LeaseKeeper opens)."""

    def __init__(self, places):
        super().__init__(places, {})
        self.tagged = []

    def __call__(self, *a, **kw):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def set_tags(self, place, tags):
        self.tagged.append((place, tags))

    def release_from(self, place, owner):
        self.released.append((place, owner))


@pytest.mark.parametrize("tag_owner, renewed_ago, lost", [
    ("me", 5, False),        # a waiter locked it after a restart, before it saw our live lease: it yields
    ("me", 30 + P.COORDINATOR_SAVE_S + 5, True),  # our lease ran out: the place is the other job's
    ("other", 5, True),      # the other job's own lease is on it: we lost it
])
def test_a_holder_waits_out_a_waiter_that_locked_its_place_after_a_restart(monkeypatch, tag_owner, renewed_ago, lost):
    # the coordinator-restart race of test_rack_leases: the holder's keeper
    # saw the waiter's momentary lock and gave its place up for good
    lease = P.PlaceLease("127.0.0.1:1", {"board": "x"}, lease_s=30)
    lease.place, lease.since = "x1", time.time() - 60
    waiter = _other_host_owner()
    now = time.time()
    owner = lease.owner if tag_owner == "me" else waiter
    fake = _CtxCoordinator({"x1": PlaceInfo("x1", acquired=waiter, changed=now,
                                            tags=P.lease_tags(owner, now - 60, now - renewed_ago))})
    monkeypatch.setattr(P, "Coordinator", fake)
    keeper = P.LeaseKeeper(lease, 30, on_lost=lambda why: None)
    assert keeper.tick() is False
    assert (keeper.lost is not None) == lost
    assert fake.tagged == [] and fake.released == []  # never renews or releases a place it does not hold


def test_a_released_place_carries_no_lease_for_the_next_job_to_yield_to(monkeypatch):
    # the aging test's failure: the low job was allocated the place of the
    # job before it, found that job's lease tags and yielded it, each time
    lease = P.PlaceLease("127.0.0.1:1", {"board": "x"}, lease_s=30)
    lease.place = "x1"
    now = time.time()
    fake = _CtxCoordinator({"x1": PlaceInfo("x1", acquired=lease.owner, changed=now,
                                            tags=P.lease_tags(lease.owner, now - 5, now))})
    monkeypatch.setattr(P, "Coordinator", fake)
    lease.release()
    assert fake.tagged == [("x1", P.NO_LEASE)] and fake.released == [("x1", lease.owner)]


def test_a_coordinator_lost_between_lock_and_lease_is_a_place_error(monkeypatch):
    # seen in the soak: a coordinator restart right after `labgrid-client lock`
    # raised CoordinatorError out of acquire(), which ends a whole rtlab run
    from rtlab.lab.coordinator import CoordinatorError
    fake = _CtxCoordinator({"x1": PlaceInfo("x1", tags={"board": "x"})})
    monkeypatch.setattr(P, "Coordinator", fake)
    lease = P.PlaceLease("127.0.0.1:1", {"board": "x"}, lease_s=30)
    monkeypatch.setattr(lease, "_reserve", lambda t0: setattr(lease, "place", "x1"))
    monkeypatch.setattr(lease, "_client", lambda *a, **kw: subprocess.CompletedProcess(a, 0, "", ""))

    def gone():
        raise CoordinatorError("coordinator 127.0.0.1:1: GetPlaces: UNAVAILABLE")
    monkeypatch.setattr(lease, "_live_foreign_lease", gone)
    released = []
    monkeypatch.setattr(lease, "release", lambda: released.append(True))
    with pytest.raises(P.PlaceError, match="coordinator lost while locking place x1"):
        lease.acquire()
    assert released and lease.keeper is None


def test_a_holder_that_cannot_renew_for_T_stops_before_anyone_may_take_its_place(monkeypatch):
    from rtlab.lab.coordinator import CoordinatorError
    lease = P.PlaceLease("127.0.0.1:1", {"board": "x"}, lease_s=3)
    lease.place = "x1"
    lost = []
    keeper = P.LeaseKeeper(lease, 3, on_lost=lost.append)

    def unreachable():
        raise CoordinatorError("coordinator 127.0.0.1:1: GetPlaces: UNAVAILABLE")
    monkeypatch.setattr(keeper, "tick", unreachable)
    keeper.last_renewed = time.time() - 2.5  # still within T: keeps trying (a coordinator restart)
    keeper.start()
    keeper.join(10)
    assert not keeper.is_alive() and len(lost) == 1 and "not renewed for" in lost[0]
    assert time.time() - keeper.last_renewed > 3  # not before T
