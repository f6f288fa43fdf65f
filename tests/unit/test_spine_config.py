"""Variants, boards, campaigns and budgets: data files in, clear errors out."""
import textwrap

import pytest

from rtlab.targets.boards import find_board, load_board, load_boards
from rtlab.plan.budgets import load_budgets
from rtlab.plan.campaign import load_campaign
from rtlab.core.config import format_cpulist, parse_cpulist
from rtlab.errors import InputError
from rtlab.targets.variants import load_variants


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_cpulist_round_trip():
    assert parse_cpulist("0-2,5,7-8") == [0, 1, 2, 5, 7, 8]
    assert format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert parse_cpulist("") == []


def test_shipped_variants_cover_every_preemption_model_with_and_without_isolation():
    v = load_variants()
    for base in ("none", "voluntary", "preempt", "rt"):
        assert base in v and f"{base}-iso" in v
        assert not v[base].isolated and v[f"{base}-iso"].isolated
    assert v["rt"].prebuilt == "rt" and v["rt"].expect.realtime is True
    assert v["none"].expect.preempt == "none" and v["none"].prebuilt == "generic"
    args = v["preempt-iso"].boot_args_for(isolate_cpu=1, cpus=4)
    assert "preempt=full" in args
    assert "isolcpus=nohz,domain,managed_irq,1" in args
    assert "nohz_full=1" in args and "rcu_nocbs=1" in args and "irqaffinity=0,2-3" in args


def test_variant_file_errors_name_file_and_key(tmp_path):
    p = write(tmp_path, "v.yaml", """
        isolation: {suffix: "-iso", boot_args: "isolcpus={cpu}"}
        variants:
          bad:
            kernel: {prebuilt: generic}
            expect: {preempt: sometimes}
    """)
    with pytest.raises(InputError) as e:
        load_variants(p)
    assert str(p) in str(e.value) and "variants.bad.expect.preempt" in str(e.value)


def test_shipped_boards_carry_their_properties():
    boards = load_boards()
    assert {"qemu-x86_64", "qemu-aarch64", "local"} <= set(boards)
    a = boards["qemu-aarch64"]
    assert (a.arch, a.cpus, a.isolate_cpu, a.budget_class, a.kind) == ("aarch64", 2, 1, "qemu-tcg", "qemu")
    assert boards["local"].fixed_kernel and boards["local"].supports("host")
    assert not a.supports("host") and a.supports("rt-iso")


def test_board_errors(tmp_path):
    with pytest.raises(InputError, match="no board named 'nope'"):
        find_board("nope")
    p = write(tmp_path, "b.yaml", """
        targets:
          main:
            options: {arch: aarch64, cpus: 2, isolate_cpu: 3, budget_class: x, kind: qemu}
    """)
    with pytest.raises(InputError, match=r"targets.main.options.isolate_cpu: CPU 3 does not exist"):
        load_board(p)


def test_default_campaign_plans_every_qemu_board_by_every_variant_plus_local():
    c = load_campaign()
    jobs = c.jobs()
    ids = [j.id for j in jobs]
    assert len([i for i in ids if i.startswith("qemu-x86_64/")]) == 8
    assert len([i for i in ids if i.startswith("qemu-aarch64/")]) == 8
    assert "local/host" in ids
    rt_iso = next(j for j in jobs if j.id == "qemu-aarch64/rt-iso")
    assert rt_iso.suites[0].cpus == (1,)  # the isolated CPU, named explicitly
    rt = next(j for j in jobs if j.id == "qemu-aarch64/rt")
    assert rt.suites[0].cpus == (0, 1)
    assert rt.suites[0].params["histogram_us"] == 20000  # the qemu-tcg override


def test_campaign_errors_name_file_and_key(tmp_path):
    p = write(tmp_path, "c.yaml", """
        boards: [local]
        suites:
          - name: cyclictest
            params: {intervall_us: 100}
    """)
    with pytest.raises(InputError) as e:
        load_campaign(p)
    assert str(p) in str(e.value) and "intervall_us" in str(e.value) and "suites[0].params" in str(e.value)
    p2 = write(tmp_path, "c2.yaml", "boards: [local]\nvariants: [rt-isolated]\nsuites: [{name: cyclictest}]\n")
    with pytest.raises(InputError, match="unknown variant 'rt-isolated'"):
        load_campaign(p2)


def test_budget_lookup_most_specific_wins(tmp_path):
    p = write(tmp_path, "b.yaml", """
        budgets:
          rk3568:
            "*":
              "*":
                "*": {max_us: 1000}
            rt-iso:
              cyclictest:
                "*": {max_us: 100, percentiles_us: {"99.9": 50}}
                hackbench: {max_us: 120}
    """)
    b = load_budgets(p)
    assert b.lookup("rk3568", "rt-iso", "cyclictest", "idle").max_us == 100
    assert b.lookup("rk3568", "rt-iso", "cyclictest", "idle").percentiles_us == {"99.9": 50}
    assert b.lookup("rk3568", "rt-iso", "cyclictest", "hackbench").max_us == 120
    assert b.lookup("rk3568", "rt", "cyclictest", "idle").max_us == 1000
    assert b.lookup("imx6", "rt", "cyclictest", "idle") is None


@pytest.mark.parametrize("body, key", [
    ('{max_us: -5}', "budgets.c.v.s.l.max_us"),
    ('{max_us: "fast"}', "budgets.c.v.s.l.max_us"),
    ('{percentiles_us: {"99.5": 10}}', "budgets.c.v.s.l.percentiles_us.99.5"),
    ('{maximum: 10}', "budgets.c.v.s.l.maximum"),
    ('{}', "budgets.c.v.s.l"),
])
def test_invalid_budget_names_file_and_key(tmp_path, body, key):
    p = write(tmp_path, "budget.yaml", f"budgets:\n  c:\n    v:\n      s:\n        l: {body}\n")
    with pytest.raises(InputError) as e:
        load_budgets(p)
    assert str(e.value).startswith(f"{p}: {key}")


def test_shipped_budgets_load():
    b = load_budgets(load_campaign().budgets)
    assert b.lookup("qemu-tcg", "rt", "cyclictest", "idle").max_us > 0
    assert b.lookup("rk3568", "rt-iso", "cyclictest", "idle").max_us == 100
