"""Every shipped campaign, on every board it names, has a budget (or an
``unbudgeted:`` entry) for every measurement it takes: a measurement without
one is INFRA "no budget" at the gate, found otherwise only after a run of the
whole campaign (oslat on the local board: 9 INFRA measurements per programme
run). Read from the campaigns, boards, suites and budget files themselves."""
from pathlib import Path

import pytest

from rtlab.plan.budgets import load_budgets
from rtlab.plan.campaign import CAMPAIGN_DIR, load_campaign
from rtlab.suites import METRICS, SUITES

CAMPAIGNS = sorted(CAMPAIGN_DIR.glob("*.yaml"))


def unjudged(path: Path) -> list[str]:
    campaign = load_campaign(path)
    budgets = load_budgets(campaign.budgets)
    missing = []
    for job in campaign.jobs():
        cls = job.board.budget_class
        for run in job.suites:
            suite = SUITES[run.suite]
            if suite.result_kind == METRICS:  # a whole-run number: shown, never budgeted
                continue
            for name in suite.measurement_names(run.name):
                if budgets.unbudgeted(cls, name):
                    continue
                if budgets.lookup(cls, job.variant.name, name, run.load) is None:
                    missing.append(f"{job.board.name} (class {cls})/{job.variant.name}/{name}/{run.load}")
    return missing


def test_every_campaign_is_read():
    assert len(CAMPAIGNS) >= 10 and any(p.stem == "programme" for p in CAMPAIGNS)


@pytest.mark.parametrize("path", CAMPAIGNS, ids=lambda p: p.stem)
def test_every_measurement_has_a_budget_or_is_unbudgeted(path):
    missing = unjudged(path)
    assert not missing, f"{path.name}: no budget and no unbudgeted: entry in its budget file for " + \
        ", ".join(missing[:10]) + (f" (+{len(missing) - 10})" if len(missing) > 10 else "")


def test_the_check_sees_a_missing_budget(tmp_path):
    """The test above would catch the oslat hole: the same campaign against
    a budget file without oslat's entry reports it on the local board."""
    text = (CAMPAIGN_DIR / "programme.yaml").read_text()
    budgets = (CAMPAIGN_DIR.parent / "budgets" / "default.yaml").read_text()
    assert "      oslat:\n" in budgets
    cut = budgets.replace("      oslat:\n", "      oslat-renamed:\n", 1)
    (tmp_path / "b.yaml").write_text(cut)
    (tmp_path / "c.yaml").write_text(text.replace("budgets: ../budgets/default.yaml",
                                                  f"budgets: {tmp_path / 'b.yaml'}"))
    missing = unjudged(tmp_path / "c.yaml")
    assert "local (class local)/host/oslat/irq" in missing, missing[:5]
