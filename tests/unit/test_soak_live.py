"""A soak's checkpoints published as they come (rtlab.soak.live ->
rtlab.store.live): the points of a checkpoint, the publisher writing them or
spooling them when the store is down, and sinks that never break a run.
(The points read back from a real influxd by the dashboard's queries, and a
soak on the local board publishing during its run: tests/integration.)"""
import json

from rtlab.soak import checkpoint as soak
from rtlab.soak import live
from rtlab.store.base import StoreUnavailable
from rtlab.store.config import StoreConfig
from rtlab.store.live import LivePublisher
from rtlab.store.publish import Session
from rtlab.store.schema import SOAK_PROGRESS, checkpoint_points, field_type

from test_soak_unit import state_with


class R:
    id = "cyclictest-soak@idle"
    name = "cyclictest-soak"
    load = "idle"


def event(n=3, **ctx):
    ev = soak.checkpoint_event(R, state_with(n, maxes={2: 77}))
    return {**ev, "run_id": "run-1", "board": "local", "arch": "x86_64", "variant": "host", "repeat": 0, **ctx}


def test_checkpoint_points_carry_elapsed_eta_samples_and_max_per_thread():
    pts = checkpoint_points(event(), 1_700_000_000, "schedule")
    allp, (t0,) = pts[0], pts[1:]
    assert allp.measurement == t0.measurement == SOAK_PROGRESS
    assert allp.tags == {"board": "local", "arch": "x86_64", "variant": "host", "load": "idle",
                         "suite": "cyclictest-soak", "pipeline": "schedule", "thread": "all"}
    f = allp.fields
    assert (f["elapsed_s"], f["planned_s"], f["samples"], f["max_us"], f["segments"], f["segments_planned"]) == \
        (15.0, 30.0, 3000, 77.0, 3, 6)
    assert f["eta_s"] > 0 and f["done_ratio"] == 0.5 and f["run_id"] == "run-1" and f["gap_max_s"] == 0.2
    assert t0.tags["thread"] == "0" and t0.fields["samples"] == 3000 and t0.fields["max_us"] == 77.0
    for p in pts:
        assert p.time == 1_700_000_000
        for k, v in p.fields.items():
            assert isinstance(v, field_type(SOAK_PROGRESS, k)), k
    assert checkpoint_points(event(repeat=2), 1)[0].tags["rep"] == "r2"


class Recording:
    precision = "s"

    def __init__(self, fail=False):
        self.lines, self.fail, self.deadlines = [], fail, []

    def set_deadline(self, s):
        self.deadlines.append(s)

    def write(self, lines):
        if self.fail:
            raise StoreUnavailable("connection refused")
        self.lines += list(lines)
        return len(lines)


def _publisher(tmp_path, store, said):
    cfg = StoreConfig(url="http://127.0.0.1:9", spool_dir=str(tmp_path / "spool")).normalized()
    return LivePublisher(progress=said.append, session_factory=lambda: Session(cfg, store=store, progress=said.append),
                         clock=lambda: 1_700_000_123.5)


def test_publisher_writes_each_checkpoint_when_it_comes(tmp_path):
    store, said = Recording(), []
    pub = _publisher(tmp_path, store, said)
    with live.publishing(pub):
        for n in (1, 2, 3):
            live.checkpoint(soak.checkpoint_event(R, state_with(n)), run_id="run-1", board="local",
                            arch="x86_64", variant="host", repeat=0)
        live.checkpoint({"event": "booted", "duration_s": 1.0})  # not a checkpoint: nothing
    assert pub.points == 6 and len(store.lines) == 6 and not said
    assert all(ln.startswith("soak_progress,") and ln.endswith(" 1700000123") for ln in store.lines)
    assert [ln for ln in store.lines if "thread=all" in ln][2].count("segments=3i") == 1
    assert store.deadlines[-3:] == [10.0] * 3  # each write under a deadline of its own
    live.checkpoint(soak.checkpoint_event(R, state_with(4)), run_id="x")  # after the block: no sink
    assert len(store.lines) == 6


def test_store_down_spools_the_checkpoints_and_never_breaks_the_run(tmp_path):
    store, said = Recording(fail=True), []
    pub = _publisher(tmp_path, store, said)
    with live.publishing(pub):
        for n in (1, 2):
            live.checkpoint(soak.checkpoint_event(R, state_with(n)), run_id="run-1", board="local")
    assert pub.points == 0 and pub.spooled == 4
    spooled = sorted((tmp_path / "spool").glob("*.lp"))
    assert len(spooled) == 2 and all("soak_progress," in p.read_text() for p in spooled)
    assert len(said) == 1 and "connection refused" in said[0]  # said once, not per checkpoint

    def broken(ev):
        raise RuntimeError("boom")
    with live.publishing(broken):
        live.checkpoint(soak.checkpoint_event(R, state_with(1)))  # logged, not raised


def test_checkpoint_event_is_json_for_the_events_file():
    ev = soak.checkpoint_event(R, state_with(2))
    assert json.loads(json.dumps(ev)) == ev
    assert ev["suite"] == "cyclictest-soak" and ev["load"] == "idle" and ev["threads"][0]["samples"] == 2000
