"""Every shipped campaign, on every board it names, has a budget (or an
``unbudgeted:`` entry) for every measurement it takes: a measurement without
one is INFRA "no budget" at the gate, found otherwise only after a run of the
whole campaign (oslat on the local board: 9 INFRA measurements per programme
run). Read from the campaigns, boards, suites and budget files themselves."""
from pathlib import Path

import pytest

from rtlab.errors import InputError
from rtlab.plan.budgets import load_budgets
from rtlab.plan.campaign import CAMPAIGN_DIR, load_campaign

CAMPAIGNS = sorted(CAMPAIGN_DIR.glob("*.yaml"))


def check(path: Path) -> None:
    """The check `rtlab run` makes before any boot (Budgets.check_covers),
    over every board x variant x suite x load of the campaign."""
    campaign = load_campaign(path)
    load_budgets(campaign.budgets).check_covers(campaign.jobs())


def test_every_campaign_is_read():
    assert len(CAMPAIGNS) >= 10 and any(p.stem == "programme" for p in CAMPAIGNS)


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_every_measurement_has_a_budget_or_is_unbudgeted(path):
    campaign = load_campaign(path)
    assert list(campaign.jobs()), f"{path.name}: no job"
    check(path)


def test_the_check_sees_a_missing_budget(tmp_path):
    """The test above would catch the oslat hole: the same campaign against
    a budget file without oslat's entry fails on the local board, naming the
    file, the key and the board."""
    text = (CAMPAIGN_DIR / "programme.yaml").read_text()
    budgets = (CAMPAIGN_DIR.parent / "budgets" / "default.yaml").read_text()
    assert "      oslat:\n" in budgets
    assert "  local: [oslat]\n" in budgets
    cut = budgets.replace("      oslat:\n", "      oslat-renamed:\n", 1).replace("  local: [oslat]\n", "", 1)
    (tmp_path / "b.yaml").write_text(cut)
    (tmp_path / "c.yaml").write_text(text.replace("budgets: ../budgets/default.yaml",
                                                  f"budgets: {tmp_path / 'b.yaml'}"))
    check(CAMPAIGN_DIR / "programme.yaml")
    with pytest.raises(InputError, match=r"b\.yaml: budgets\.local.*oslat.*no budget for board local \(local\)"):
        check(tmp_path / "c.yaml")


def test_local_oslat_is_judged_idle_and_shown_under_load():
    """On the local board oslat's loops run SCHED_OTHER: idle its worst gap
    is a hang check (budgeted), under a load it is the scheduler's fair
    share (177 ms to 3.2 s measured), shown and not judged; the budget wins
    over the unbudgeted list, so idle stays judged."""
    from rtlab.core.model import Measurement, MeasurementKey, ThreadResult, ToolOutput, Verdict
    from rtlab.judge.gate import judge_run
    from rtlab.core.model import JobResult, RunResult
    from rtlab.plan.budgets import load_budgets
    b = load_budgets(CAMPAIGN_DIR.parent / "budgets" / "default.yaml")
    assert b.lookup("local", "host", "oslat", "idle").max_us == 20000
    assert b.lookup("local", "host", "oslat", "cpu") is None and b.unbudgeted("local", "oslat")

    def oslat(load, max_us):
        out = ToolOutput(path="oslat.json", tool="oslat",
                         threads=[ThreadResult(thread=0, cpu=0, min_us=1, avg_us=2, max_us=max_us, cycles=1000)])
        return Measurement(MeasurementKey(board="local", variant="host", suite="oslat", load=load), out, [])
    ms = [oslat("idle", 30000), oslat("cpu", 3_200_000)]
    judge_run(RunResult("r", "", "", jobs=[JobResult(board="local", variant="host", arch="x86_64",
                                                    budget_class="local", measurements=ms)]), b)
    assert ms[0].verdict == Verdict.FAIL and ms[1].verdict == Verdict.SHOWN
    assert ms[1].reasons[0].startswith("unbudgeted by default.yaml"), ms[1].reasons
