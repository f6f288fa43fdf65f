"""Progress/outcome events from the board suites to the runner (a JSONL file
in the job directory that the runner tails while pytest runs)."""
import json
import time
from contextlib import contextmanager


def emit(config, **event):
    event["t"] = round(time.time(), 3)
    with open(config.rtlab_events, "a") as f:
        f.write(json.dumps(event) + "\n")


@contextmanager
def phase(config, name: str):
    """Time the block as one part of the job (rtlab.core.timing), also when it raises."""
    t0 = time.monotonic()
    try:
        yield
    finally:
        emit(config, event="phase", name=name, duration_s=round(time.monotonic() - t0, 4))
