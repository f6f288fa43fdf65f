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
    cut = budgets.replace("      oslat:\n", "      oslat-renamed:\n", 1)
    (tmp_path / "b.yaml").write_text(cut)
    (tmp_path / "c.yaml").write_text(text.replace("budgets: ../budgets/default.yaml",
                                                  f"budgets: {tmp_path / 'b.yaml'}"))
    check(CAMPAIGN_DIR / "programme.yaml")
    with pytest.raises(InputError, match=r"b\.yaml: budgets\.local.*oslat.*no budget for board local \(local\)"):
        check(tmp_path / "c.yaml")
