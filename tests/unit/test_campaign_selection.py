"""`rtlab run --board` and `--variant` (and `rtlab lava render`'s) replace
the campaign's `boards:` and `variants:`: they are not a filter of them. A
board the campaign does not name runs; the campaign's own boards do not
(docs/reference/formats.md, docs/getting-started.md)."""
import textwrap

from rtlab.cli import build_parser
from rtlab.plan.campaign import load_campaign


def jobs(campaign):
    return sorted((j.board.name, j.variant.name) for j in campaign.jobs())


def test_board_and_variant_replace_the_campaigns_lists(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text(textwrap.dedent(f"""
        name: only-aarch64
        budgets: {tmp_path / 'b.yaml'}
        boards: [qemu-aarch64]
        variants: [rt]
        suites:
          - {{suite: cyclictest, loads: [idle]}}
    """))
    (tmp_path / "b.yaml").write_text("budgets: {}\n")
    assert jobs(load_campaign(c, budgets=tmp_path / "b.yaml")) == [("qemu-aarch64", "rt")]
    # a board the campaign does not name: it alone runs
    assert jobs(load_campaign(c, boards=["qemu-x86_64"], budgets=tmp_path / "b.yaml")) == [("qemu-x86_64", "rt")]
    # a variant the campaign does not name: it alone runs; a board with a fixed kernel runs its own
    assert jobs(load_campaign(c, variants=["preempt-iso"], budgets=tmp_path / "b.yaml")) == [
        ("qemu-aarch64", "preempt-iso")]
    assert jobs(load_campaign(c, boards=["local", "qemu-aarch64"], variants=["none"],
                              budgets=tmp_path / "b.yaml")) == [("local", "host"), ("qemu-aarch64", "none")]


def test_the_options_are_repeatable_and_say_so():
    args = build_parser().parse_args(["run", "--board", "local", "-b", "qemu-aarch64", "-V", "rt"])
    assert args.board == ["local", "qemu-aarch64"] and args.variant == ["rt"]
    run = {a.dest: a.help for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions}
    assert "instead of the campaign's" in run["board"] and "instead of the campaign's" in run["variant"]
