"""A LAVA job file comes back from the server (`lavacli jobs definition ID`):
whoever submits a job there writes its embedded rtlab spec. Ingesting it must
never write, delete or copy outside the results root."""
import hashlib
import json
import textwrap
from pathlib import Path

import pytest
import yaml

from rtlab.lava.render import render_campaign
from rtlab.plan.campaign import load_campaign

from .conftest import ROOT, rtlab

SAMPLE_RESULTS = ROOT / "lava" / "samples" / "lavacli-results.yaml"


@pytest.fixture(scope="module")
def job_file(tmp_path_factory):
    """A real rendered job (qemu-x86_64, rt, cyclictest)."""
    out = tmp_path_factory.mktemp("jobs")
    c = tmp_path_factory.mktemp("c") / "c.yaml"
    c.write_text(textwrap.dedent("""
        name: lava-faults
        boards: [qemu-x86_64]
        variants: [rt]
        suites:
          - name: cyclictest
            params: {duration_s: 1}
    """))
    index = render_campaign(load_campaign(c), out, lab_boards=False)
    return out / index["jobs"][0]["file"]


def hostile_record(job_file: Path, where: Path, **change) -> Path:
    """A record directory whose job.yaml carries the rendered spec with
    *change* applied (dotted keys), and the server's results."""
    definition = yaml.safe_load(job_file.read_text())
    spec = json.loads(definition["metadata"]["rtlab.spec"])
    for key, value in change.items():
        d = spec
        *parents, leaf = key.split(".")
        for p in parents:
            d = d[p]
        d[leaf] = value
    definition["metadata"]["rtlab.spec"] = json.dumps(spec)
    rec = where / "record"
    rec.mkdir()
    (rec / "job.yaml").write_text(yaml.safe_dump(definition))
    (rec / "results.yaml").write_text(SAMPLE_RESULTS.read_text())
    (rec / "job.json").write_text(json.dumps({"id": 4242, "health": "Complete"}))
    return rec


def tree(root: Path) -> dict[str, str]:
    """Every path under *root* with its content's digest (directories: "dir")."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))}


CASES = {
    "campaign_file /etc/shadow": ({"campaign_file": "/etc/shadow"}, "campaign_file"),
    "campaign_file ../ out of the lab": ({"campaign_file": "../../../../../etc/passwd"}, "campaign_file"),
    "budgets /etc/shadow": ({"budgets": "/etc/shadow"}, "budgets"),
    "budgets a lab file outside budgets/": ({"budgets": "campaigns/default.yaml"}, "budgets"),
    "board out of the results root": ({"board.name": "../../canary/x"}, "board.name"),
    "board and variant onto a directory beside": ({"board.name": "../../canary", "variant.name": "victim"},
                                                  "board.name"),
    "variant with a slash": ({"variant.name": "a/../../../canary"}, "variant.name"),
    "suite id with ../": ({"suite.id": "../../../../canary/s"}, "suite.id"),
    "suite load ../": ({"suite.load": "../../canary", "suite.id": "cyclictest@../../canary"}, "suite.load"),
    "campaign name a path": ({"campaign": "../../canary"}, "campaign"),
}


@pytest.mark.parametrize("change,key", CASES.values(), ids=CASES.keys())
def test_hostile_spec_in_a_lava_job_file_is_refused_and_nothing_outside_is_touched(job_file, tmp_path, change, key):
    canary = tmp_path / "canary"
    (canary / "victim").mkdir(parents=True)
    (canary / "victim" / "keep.txt").write_text("mine\n")
    results = tmp_path / "results"
    rec = hostile_record(job_file, tmp_path, **change)
    before = {k: v for k, v in tree(tmp_path).items() if not k.startswith("results")}
    p = rtlab("lava", "ingest", rec, "--results", results, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"rtlab.spec.{key}" in p.stderr and "job.yaml" in p.stderr, p.stderr
    assert p.stderr.count("\n") <= 2, p.stderr  # one line, no traceback
    after = {k: v for k, v in tree(tmp_path).items() if not k.startswith("results")}
    assert after == before  # canary unchanged, nothing new beside the results
    assert not results.exists() or not any(results.iterdir())  # refused before a run dir is made
    assert "root:" not in p.stdout + p.stderr  # no content of a copied file echoed


def test_a_render_index_build_failure_entry_is_checked_like_a_job(job_file, tmp_path):
    """`lava submit` hands the render index's build failures to ingest: the
    same names become job directories."""
    from rtlab.errors import InputError
    from rtlab.lava.ingest import ingest_records

    spec = json.loads(yaml.safe_load(job_file.read_text())["metadata"]["rtlab.spec"])
    entry = {"board": {**spec["board"], "name": "../../canary"}, "variant": {**spec["variant"], "name": "victim"},
             "error": "no kernel", "campaign": "x", "campaign_file": "", "budgets": "budgets/default.yaml"}
    (tmp_path / "canary" / "victim").mkdir(parents=True)
    with pytest.raises(InputError, match=r"rtlab\.spec\.board\.name"):
        ingest_records([], tmp_path / "results", build_failed=[entry])
    assert (tmp_path / "canary" / "victim").is_dir()
    assert not (tmp_path / "results").exists()
