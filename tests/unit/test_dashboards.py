"""Structural checks of the Grafana dashboards and provisioning (no Grafana
exists here: the queries themselves run against a real influxd in
tests/integration/test_store.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from rtlab.store.schema import FIELDS, IPC_TOOLS, MEASUREMENTS, TAGS, field_type

ROOT = Path(__file__).resolve().parents[2]
DASH = ROOT / "dashboards"
FILES = sorted((DASH / "json").glob("*.json"))
EXPECTED = {"regressions", "histogram", "variants", "ipc", "lab-health", "rtla", "soak"}
BUILTIN_VARS = {"timeFilter", "__interval", "__interval_ms", "__from", "__to", "__range",
                "__dashboard", "__org", "__user"}
SCHEMA_VERSION = 39


def load(path):
    return json.loads(path.read_text())


def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))


def datasource_uid():
    prov = yaml.safe_load((DASH / "provisioning" / "datasources" / "rtlab.yaml").read_text())
    (ds,) = prov["datasources"]
    return ds


def queries(dash):
    for p in panels(dash["panels"]):
        for t in p.get("targets", []):
            yield p, t["query"]
    for a in dash["annotations"]["list"]:
        if a.get("datasource", {}).get("type") == "influxdb":
            yield a, a["query"]


def test_all_dashboards_exist():
    assert {f.stem for f in FILES} == EXPECTED


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_dashboard_structure(path):
    d = load(path)
    assert d["title"].startswith("rtlab") and d["schemaVersion"] == SCHEMA_VERSION
    assert d["uid"] and len(d["uid"]) <= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", d["uid"])
    ids = [p["id"] for p in panels(d["panels"])]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) for i in ids)
    for p in panels(d["panels"]):
        g = p["gridPos"]
        assert g["x"] >= 0 and g["y"] >= 0 and g["w"] > 0 and g["h"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        if p["type"] != "row":
            assert p.get("pluginVersion") and p["title"] and p["targets"]
        for t in p.get("targets", []):
            assert t["rawQuery"] is True and t["refId"] and t["query"].strip()
            assert t["resultFormat"] in ("time_series", "table")
        if p.get("repeat"):
            assert p["repeat"] in {v["name"] for v in d["templating"]["list"]}
    refs = [(p["id"], t["refId"]) for p in panels(d["panels"]) for t in p.get("targets", [])]
    assert len(refs) == len(set(refs))


def test_uids_unique_across_dashboards():
    uids = [load(f)["uid"] for f in FILES]
    assert len(uids) == len(set(uids))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_datasource_is_the_provisioned_one(path):
    ds = datasource_uid()
    d = load(path)
    seen = 0
    for obj in [*panels(d["panels"]), *[t for p in panels(d["panels"]) for t in p.get("targets", [])],
                *d["templating"]["list"], *d["annotations"]["list"]]:
        src = obj.get("datasource")
        if src is None or src.get("type") == "grafana":
            continue
        assert src == {"type": "influxdb", "uid": ds["uid"]}
        seen += 1
    assert seen


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_variable_used_is_defined(path):
    d = load(path)
    defined = {v["name"] for v in d["templating"]["list"]}
    texts = []
    for p in panels(d["panels"]):
        texts.append(p.get("title", ""))
        for t in p.get("targets", []):
            texts += [t["query"]]
            # $tag_<key> / $col / $m are alias placeholders, not variables
            alias_vars = re.findall(r"\$(\w+)", t.get("alias", ""))
            assert all(v.startswith("tag_") or v in defined or v in ("col", "m") for v in alias_vars)
    texts += [v["query"] for v in d["templating"]["list"]]
    texts += [a.get("query", "") for a in d["annotations"]["list"]]
    used = {m.group(1) or m.group(2) for t in texts for m in re.finditer(r"\$\{(\w+)[^}]*\}|\$(\w+)", t)}
    assert used - BUILTIN_VARS <= defined, used - BUILTIN_VARS - defined
    # variables only refer to variables defined before them (Grafana resolves in order)
    before = set()
    for v in d["templating"]["list"]:
        refs = set(re.findall(r"\$(\w+)", v["query"])) - BUILTIN_VARS
        assert refs <= before, (v["name"], refs - before)
        before.add(v["name"])


def _identifiers(q):
    """Double-quoted identifiers of an InfluxQL query, minus AS aliases."""
    aliases = set(re.findall(r'\bAS\s+"([^"]+)"', q, re.I))
    return [i for i in re.findall(r'"([^"]+)"', q) if i not in aliases]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_queries_name_only_schema_tags_and_fields(path):
    d = load(path)
    for _, q in queries(d):
        (m,) = re.findall(r'\bFROM\s+"(\w+)"', q)
        assert m in MEASUREMENTS, q
        for ident in _identifiers(q):
            if ident == m:
                continue
            assert ident in TAGS[m] or field_type(m, ident) is not None, f"{ident!r} not in {m}: {q}"
        assert "$timeFilter" in q or "time = '$run'" in q, q  # never a full scan of all history
    for v in d["templating"]["list"]:
        m = re.search(r'SHOW TAG VALUES FROM "(\w+)" WITH KEY = "(\w+)"', v["query"])
        if m:
            assert m.group(2) in TAGS[m.group(1)]
        else:
            assert v["query"].startswith('SELECT "started" FROM "events"')


def test_regressions_dashboard_content():
    d = load(DASH / "json" / "regressions.json")
    qs = [q for _, q in queries(d)]
    assert any('max("max_us")' in q for q in qs) and any('max("p999_us")' in q for q in qs)
    assert any('"budget_max_us"' in q for q in qs) and any('"budget_p999_us"' in q for q in qs)
    # the budget is drawn as a dashed red line
    ts = [p for p in panels(d["panels"]) if p["type"] == "timeseries" and "per commit" in p["title"]]
    assert len(ts) == 2
    for p in ts:
        (ov,) = p["fieldConfig"]["overrides"]
        assert ov["matcher"]["id"] == "byRegexp"
        assert any(t.get("alias", "").endswith(" budget") for t in p["targets"])
        props = {x["id"]: x["value"] for x in ov["properties"]}
        assert props["custom.lineStyle"]["fill"] == "dash" and props["color"]["fixedColor"] == "red"
        assert 'GROUP BY time($__interval), "variant", "load", "suite"' in p["targets"][0]["query"]
    ann = [a for a in d["annotations"]["list"] if a["name"] == "Commits"][0]
    assert (ann["titleColumn"], ann["textColumn"], ann["tagsColumn"]) == ("title", "text", "tags")
    assert ann["target"]["query"] == ann["query"] and 'FROM "events"' in ann["query"]
    assert [v["name"] for v in d["templating"]["list"]] == ["board", "variant", "load", "suite", "pipeline"]
    assert all(v["query"].startswith("SHOW TAG VALUES") for v in d["templating"]["list"])


def test_histogram_dashboard_content():
    d = load(DASH / "json" / "histogram.json")
    bar = next(p for p in panels(d["panels"]) if p["type"] == "barchart")
    assert bar["repeat"] == "thread"  # one histogram per thread/CPU
    assert bar["fieldConfig"]["defaults"]["custom"]["scaleDistribution"] == {"type": "log", "log": 10}
    assert "time = '$run'" in bar["targets"][0]["query"] and 'GROUP BY "bucket"' in bar["targets"][0]["query"]
    assert bar["targets"][0]["alias"] == "$tag_bucket"
    heat = next(p for p in panels(d["panels"]) if p["type"] == "heatmap")
    assert heat["options"]["calculate"] is False  # pre-bucketed counts
    run = next(v for v in d["templating"]["list"] if v["name"] == "run")
    assert run["multi"] is False and run["includeAll"] is False


def test_variant_comparison_is_suites_by_variants():
    d = load(DASH / "json" / "variants.json")
    tables = [p for p in panels(d["panels"]) if p["type"] == "table"]
    assert len(tables) >= 4
    for p in tables:
        (tr,) = p["transformations"]
        assert tr["id"] == "groupingToMatrix"
        assert (tr["options"]["columnField"], tr["options"]["rowField"]) == ("variant", "suite")
        assert tr["options"]["valueField"] in {a for a in re.findall(r'AS "(\w+)"', p["targets"][0]["query"])}
        assert p["targets"][0]["resultFormat"] == "table"
        assert p["targets"][0]["query"].endswith('GROUP BY "suite", "variant"')


def test_ipc_dashboard_selects_the_ipc_tools():
    d = load(DASH / "json" / "ipc.json")
    pat = "/^(" + "|".join(IPC_TOOLS) + ")$/"
    for _, q in queries(d):
        if 'FROM "events"' not in q:
            assert f'"tool" =~ {pat}' in q
    for v in d["templating"]["list"]:
        if v["name"] != "pipeline":
            assert pat in v["query"]


def test_rtla_dashboard_selects_timerlat_and_osnoise():
    d = load(DASH / "json" / "rtla.json")
    qs = [q for p, q in queries(d) if 'FROM "events"' not in q]
    assert all(re.search(r'"tool" (= \'(timerlat|osnoise)\'|=~ /\^\(timerlat\|osnoise\)\$/)', q) for q in qs), qs
    # IRQ and thread latency are separate series: grouped by suite (timerlat-irq, timerlat-thread)
    assert any("'timerlat'" in q and '"suite"' in q.split("GROUP BY")[1] for q in qs)
    assert any("'osnoise'" in q and '"cpu"' in q.split("GROUP BY")[1] for q in qs)


def test_lab_health_counts_infra_per_board():
    d = load(DASH / "json" / "lab-health.json")
    qs = [q for _, q in queries(d)]
    assert any('sum("infra") FROM "job"' in q and '"board"' in q for q in qs)
    assert any('FROM "verdict"' in q and "'measurement'" in q for q in qs)


def test_provisioning():
    ds = datasource_uid()
    assert ds["type"] == "influxdb" and ds["uid"] == "rtlab-influxdb" and ds["access"] == "proxy"
    text = (DASH / "provisioning" / "datasources" / "rtlab.yaml").read_text()
    # every address and secret comes from the environment
    assert ds["url"] == "${INFLUX_URL}" and ds["secureJsonData"]["password"] == "${INFLUX_PASSWORD}"
    assert ds["user"] == "${INFLUX_USER}" and ds["jsonData"]["dbName"] == "${INFLUX_DB}"
    assert "password:" not in text.replace("password: ${INFLUX_PASSWORD}", "")
    prov = yaml.safe_load((DASH / "provisioning" / "dashboards" / "rtlab.yaml").read_text())
    (p,) = prov["providers"]
    assert p["type"] == "file" and prov["apiVersion"] == 1
    compose = yaml.safe_load((DASH / "docker-compose.yml").read_text())
    vols = compose["services"]["grafana"]["volumes"]
    assert f"./json:{p['options']['path']}:ro" in vols
    assert "./provisioning:/etc/grafana/provisioning:ro" in vols
    assert compose["services"]["influxdb"]["image"].startswith("influxdb:1.8")
    env = compose["services"]["grafana"]["environment"]
    assert {"INFLUX_URL", "INFLUX_DB", "INFLUX_USER", "INFLUX_PASSWORD"} <= set(env)
    # no literal secrets in the compose file: only ${VAR:?...} references
    for svc in compose["services"].values():
        for k, v in svc.get("environment", {}).items():
            if "PASSWORD" in k:
                assert str(v).startswith("${") and ":?" in str(v), k


def test_schema_doc_lists_every_tag_and_field():
    doc = (DASH / "SCHEMA.md").read_text()
    for m in MEASUREMENTS:
        assert f"### `{m}`" in doc
        for t in TAGS[m]:
            assert f"`{t}`" in doc, (m, t)
        for f in FIELDS[m]:
            if f != "*":
                assert f"`{f}`" in doc, (m, f)
