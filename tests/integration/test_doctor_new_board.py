"""A new board added by following docs/adding-a-board.md ("A QEMU board"):
a copy of qemu-aarch64 under a new name with a budget class of its own,
its budgets and a campaign. `rtlab doctor` names the missing budget first,
passes once it is there, and the board runs. (The board file sits in an
RTLAB_ENV_PATH directory and the budgets beside the campaign, not in the
checkout's env/ and budgets/: a test leaves the tree as it found it.)"""
import json
from pathlib import Path

from conftest import ROOT, rtlab, rtlab_retry_infra

CAMPAIGN = """\
name: big
budgets: budgets.yaml
boards: [qemu-big]
variants: [rt]
suites:
  - name: cyclictest
    loads: [idle]
    params: {duration_s: 2, interval_us: 10000, histogram_us: 20000}
"""
#: an emulated board gates its max, as qemu-tcg does (docs/adding-a-board.md):
#: gating p99.9 would ask for a histogram up to the 2 s max
BUDGET = ('budgets:\n  qemu-big:\n    "*":\n      cyclictest:\n        "*": {max_us: 2000000}\n'
          'regression:\n  statistics: {"*": [p99, p99.9], qemu-big: [max]}\n')


def test_a_new_qemu_board_from_the_docs_passes_doctor_and_runs(tmp_path):
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    board = (ROOT / "env" / "qemu-aarch64.yaml").read_text()
    assert "budget_class: qemu-tcg" in board
    (env_dir / "qemu-big.yaml").write_text(board.replace("budget_class: qemu-tcg", "budget_class: qemu-big"))
    (tmp_path / "big.yaml").write_text(CAMPAIGN)
    (tmp_path / "budgets.yaml").write_text("budgets: {}\n")
    env = {"RTLAB_ENV_PATH": str(env_dir), "RTLAB_STATE_DIR": str(tmp_path / "state")}

    # no budget class yet: doctor says which key to add, and where
    res = rtlab("doctor", "--board", "qemu-big", "--campaign", tmp_path / "big.yaml", "--no-store",
                timeout=120, env=env)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "FAIL  budgets: budgets.yaml: budgets.qemu-big: no budget for board qemu-big" in res.stdout
    assert f"fix: add the entry to {tmp_path / 'budgets.yaml'}" in res.stdout

    (tmp_path / "budgets.yaml").write_text(BUDGET)
    res = rtlab("doctor", "--board", "qemu-big", "--campaign", tmp_path / "big.yaml", timeout=120, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "FAIL" not in res.stdout
    assert "ok    variants: qemu-big boots " in res.stdout and " rt" in res.stdout
    assert "ok    resources: qemu-big: qemu_aarch64 = " in res.stdout

    res = rtlab_retry_infra("run", "--campaign", tmp_path / "big.yaml", "--results", tmp_path / "results",
                            "--no-publish", env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    run_dir = Path(res.stdout.split("results: ")[-1].split()[0])
    (job,) = json.loads((run_dir / "run.json").read_text())["jobs"]
    assert (job["board"], job["variant"], job["budget_class"], job["verdict"]) == ("qemu-big", "rt", "qemu-big", "pass")
    assert job["kernel"]["realtime"] is True
