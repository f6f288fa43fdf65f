"""A suite's histogram holds what its budgets ask of every gated percentile
(issue 47 item 1): the range is derived from the budgets where a campaign
leaves it out; a campaign may ask for more, never for less: that is refused
at load, naming the file and the key, before anything boots."""
import textwrap

import pytest

from rtlab.cli import main
from rtlab.errors import InputError
from rtlab.plan.budgets import load_budgets, percentile_bound
from rtlab.plan.campaign import load_campaign
from rtlab.core.model import Budget

BUDGETS = """
    budgets:
      local: {"*": {"*": {"*": {max_us: 20000, percentiles_us: {"99": 300}}}}}
      qemu-tcg: {"*": {"*": {"*": {max_us: 2000000}}}}
      rk3568:
        "*":
          "*": {"*": {max_us: 150}}
          tight: {"*": {max_us: 100, percentiles_us: {"99.9": 50}}}
    regression:
      statistics: {"*": [p99, p99.9], qemu-tcg: [max]}
"""


def campaign(tmp_path, suites, boards="[local]", variants=""):
    (tmp_path / "b.yaml").write_text(textwrap.dedent(BUDGETS))
    f = tmp_path / "c.yaml"
    f.write_text(f"name: c\nbudgets: b.yaml\nboards: {boards}\n{variants}suites:\n" + textwrap.indent(
        textwrap.dedent(suites).strip() + "\n", "  "))
    return f


def ranges(path, board=None):
    c = load_campaign(path, boards=[board] if board else None)
    return {(j.id, r.name): r.params.get("histogram_us", r.params.get("entries")) for j in c.jobs() for r in j.suites}


def test_a_percentile_is_bounded_by_its_own_budget_a_higher_ones_or_the_max():
    b = Budget(max_us=100, percentiles_us={"99.9": 50})
    assert percentile_bound(b, "99") == (50, "percentiles_us.99.9")
    assert percentile_bound(b, "99.99") == (100, "max_us")
    assert percentile_bound(Budget(percentiles_us={"99": 300}), "99.9") is None


def test_the_range_is_derived_from_the_budgets_where_the_campaign_leaves_it_out(tmp_path):
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1}
    """, boards="[local, qemu-x86_64]", variants="variants: [rt]\n")
    got = ranges(f)
    # local: p99.9 gates and only the 20 ms max bounds it: a 20 ms histogram
    assert got[("local/host", "cyclictest")] == 20000
    # qemu-tcg gates the max (read exactly, never censored) and budgets no
    # percentile: the suite's own default stays
    assert got[("qemu-x86_64/rt", "cyclictest")] == 1000


def test_a_campaign_may_ask_for_more(tmp_path):
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1, histogram_us: 50000}
    """)
    assert ranges(f)[("local/host", "cyclictest")] == 50000


def test_a_campaign_asking_for_less_is_refused_naming_file_and_key(tmp_path):
    # the old campaigns/default.yaml: a 2 ms histogram on the local board,
    # whose p99.9 lay past it in 3 of 12 runs of a loaded day
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1, histogram_us: 2000}
    """)
    with pytest.raises(InputError) as e:
        load_campaign(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: suites[0].params.histogram_us: a 2000 us histogram cannot hold "), msg
    assert "p99.9 of cyclictest up to max_us 20000 us (b.yaml: local.*.*.*); give at least 20000 us" in msg
    # an override of the class is named as such
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1}
          overrides: {local: {histogram_us: 300}}
    """)
    with pytest.raises(InputError, match=r"suites\[0\]\.overrides\.local\.histogram_us: a 300 us histogram"):
        load_campaign(f)


def test_a_percentile_budget_of_a_real_board_class_is_what_the_range_must_hold(tmp_path):
    # rk3568 rt-iso-like: p99.9 budgeted at 50 us, max 100: a 40 us range
    # cannot tell a passing p99.9 from a failing one
    from rtlab.suites import SUITES
    table = load_budgets(campaign(tmp_path, "- name: tight\n  suite: cyclictest\n").parent / "b.yaml")
    assert table.histogram_needs("rk3568", "rt", ["tight"], "idle", ("p99", "p99.9"))[0] == \
        (50, "p99 of tight up to percentiles_us.99.9 50 us (b.yaml: rk3568.*.tight.*)")
    assert table.histogram_needs("rk3568", "rt", ["cyclictest"], "idle", ("p99", "p99.9"))[0][0] == 150
    assert table.histogram_needs("qemu-tcg", "rt", ["cyclictest"], "idle", ("max",)) == []
    # rtla's range is entries x bucket_us: widened by entries
    assert SUITES["timerlat"].with_histogram_range({"bucket_us": 10, "entries": 100}, 20000)["entries"] == 2000


def test_rtla_entries_are_derived_and_refused_alike(tmp_path):
    f = campaign(tmp_path, """
        - name: timerlat
          params: {duration_s: 1, bucket_us: 1}
    """, variants="variants: [rt]\n")
    assert ranges(f)[("local/host", "timerlat")] == 20000
    f = campaign(tmp_path, """
        - name: timerlat
          params: {duration_s: 1, bucket_us: 1, entries: 2000}
    """)
    with pytest.raises(InputError, match=r"suites\[0\]\.params\.entries: a 2000 us histogram"):
        load_campaign(f)


def test_rtlab_run_refuses_it_before_anything_runs(tmp_path, capsys):
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1, histogram_us: 2000}
    """)
    assert main(["run", "--campaign", str(f), "--results", str(tmp_path / "r"), "--no-publish"]) == 2
    err = capsys.readouterr().err
    assert "suites[0].params.histogram_us: a 2000 us histogram cannot hold" in err, err
    assert not (tmp_path / "r").exists()


def test_a_budget_beyond_any_range_the_tool_keeps_leaves_the_campaigns_range(tmp_path):
    # a 10 s max that only catches hangs: no histogram holds it (cyclictest
    # keeps 1,000,000 buckets); the campaign's range stands, and a
    # percentile past it is judged by its share of samples past the range
    (tmp_path / "b.yaml").write_text('budgets:\n  local: {"*": {"*": {"*": {max_us: 10000000}}}}\n')
    f = tmp_path / "c.yaml"
    f.write_text("name: c\nbudgets: b.yaml\nboards: [local]\nsuites:\n"
                 "  - name: cyclictest\n    params: {duration_s: 1, histogram_us: 2000}\n")
    assert ranges(f)[("local/host", "cyclictest")] == 2000


def test_a_budget_file_without_a_policy_gates_what_the_labs_policy_gates(tmp_path):
    # as the verdict reads it: qemu-tcg gates the max there (read exactly),
    # so a 200 ms max asks no 200 ms histogram of a TCG board
    (tmp_path / "b.yaml").write_text('budgets:\n  qemu-tcg: {"*": {"*": {"*": {max_us: 200000}}}}\n')
    f = tmp_path / "c.yaml"
    f.write_text("name: c\nbudgets: b.yaml\nboards: [qemu-aarch64]\nvariants: [preempt]\nsuites:\n"
                 "  - name: cyclictest\n    params: {duration_s: 1}\n    overrides: {qemu-tcg: {histogram_us: 20000}}\n")
    assert ranges(f)[("qemu-aarch64/preempt", "cyclictest")] == 20000


def test_a_max_beyond_the_tool_leaves_the_largest_need_it_can_hold(tmp_path):
    # a 10 s max (it catches hangs) bounds p99.9 beyond cyclictest's 1,000,000
    # buckets; the p99 budget of 1999 us must still be readable: a 1 ms
    # range would make every p99 past it "unknowable" (INFRA), a noisy day's
    # local board all day
    f = campaign(tmp_path, """
        - name: cyclictest
          params: {duration_s: 1}
    """)
    (tmp_path / "b.yaml").write_text(textwrap.dedent("""
        budgets:
          local: {"*": {"*": {"*": {max_us: 10000000, percentiles_us: {"99": 1999}}}}}
        regression:
          statistics: {"*": [p99, p99.9]}
    """))
    assert ranges(f)[("local/host", "cyclictest")] == 1999
    # and a campaign asking for less than that is refused
    f.write_text(f.read_text().replace("{duration_s: 1}", "{duration_s: 1, histogram_us: 1000}"))
    with pytest.raises(InputError, match=r"a 1000 us histogram cannot hold .*p99 of cyclictest up to "
                                         r"percentiles_us.99 1999 us"):
        load_campaign(f)
