"""Progress/outcome events from the board suites to the runner (a JSONL file
in the job directory that the runner tails while pytest runs)."""
import json
import time


def emit(config, **event):
    event["t"] = round(time.time(), 3)
    with open(config.rtlab_events, "a") as f:
        f.write(json.dumps(event) + "\n")
