"""Generated LAVA jobs against committed reference files (as tuxrun keeps
its jobs), besides LAVA's schema (test_lava_render.py): any change in what a
job runs on a board (steps, helpers, timeouts, expected cases, kernel pins)
shows up as a diff here and is committed on purpose.

Regenerate after an intended change:

    RTLAB_UPDATE_REFERENCE=1 .venv/bin/python -m pytest tests/unit/test_lava_reference.py

or `make reference-jobs`; then review `git diff tests/reference/lava`.
"""
import difflib
import json
import os
import re
from pathlib import Path

import pytest
import yaml

from rtlab.plan.campaign import load_campaign
from rtlab.images import DEFAULT_CACHE
from rtlab.lava.render import _LiteralDumper, render_campaign

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "tests" / "reference" / "lava"
ARTIFACTS = "https://lava.example.org/rtlab-artifacts"
UPDATE = os.environ.get("RTLAB_UPDATE_REFERENCE") == "1"


def normalize_str(text: str) -> str:
    """What differs between machines, not between jobs: checkout and image
    cache paths, content digests of locally built images."""
    for path, name in ((DEFAULT_CACHE.resolve(), "@CACHE@"), (DEFAULT_CACHE, "@CACHE@"),
                       (ROOT.resolve(), "@ROOT@"), (ROOT, "@ROOT@")):
        text = text.replace(str(path), name)
    # an image manifest keeps the paths of the checkout that built the images
    # (a cache shared between checkouts names another one)
    text = re.sub(r"(?:/[^/\s'\"]+)+/\.cache/images\b", "@CACHE@", text)
    text = re.sub(r"(initramfs-[a-z0-9_]+-)[0-9a-f]{16}", r"\1@DIGEST@", text)
    # served artifacts sit under their content's digest (rtlab.lava.render.Artifacts)
    text = re.sub(r"(/rtlab-artifacts/[a-z0-9_]+/)[0-9a-f]{16}/", r"\1@DIGEST@/", text)
    return re.sub(r"\b[0-9a-f]{64}\b", "@SHA256@", text)


def _walk(x):
    if isinstance(x, dict):
        return {k: _walk(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_walk(v) for v in x]
    return normalize_str(x) if isinstance(x, str) else x


def normalize(text: str) -> str:
    """A job file as the reference keeps it: parsed, normalized value by value
    (so a longer checkout path cannot move a line break), dumped unwrapped."""
    job = _walk(yaml.safe_load(text))
    job["metadata"]["rtlab.spec"] = json.loads(job["metadata"]["rtlab.spec"])  # reviewable
    return yaml.dump(job, Dumper=_LiteralDumper, sort_keys=False, default_flow_style=False,
                     width=float("inf"), allow_unicode=True)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    index = render_campaign(load_campaign(REF / "campaign.yaml"), out, artifacts_url=ARTIFACTS)
    return {j["file"]: normalize((out / j["file"]).read_text()) for j in index["jobs"]}


def test_rendered_jobs_match_the_reference_files(rendered):
    assert len(rendered) >= 6 and any("cpu" in f for f in rendered)
    if UPDATE:
        for old in REF.rglob("*.yaml"):
            if old.name != "campaign.yaml":
                old.unlink()
        for name, text in rendered.items():
            (REF / name).parent.mkdir(parents=True, exist_ok=True)
            (REF / name).write_text(text)
    committed = {str(p.relative_to(REF)): p.read_text() for p in REF.rglob("*.yaml") if p.name != "campaign.yaml"}
    assert sorted(committed) == sorted(rendered), "jobs added or gone: regenerate (see the module docstring)"
    diffs = []
    for name, text in sorted(rendered.items()):
        if text != committed[name]:
            diffs += difflib.unified_diff(committed[name].splitlines(), text.splitlines(),
                                          f"reference/{name}", f"rendered/{name}", lineterm="", n=2)
    assert not diffs, ("rendered LAVA jobs differ from tests/reference/lava (regenerate if intended, "
                       "see the module docstring):\n" + "\n".join(diffs[:200]))


def test_normalize_keeps_what_a_job_does():
    text = f"url: {ARTIFACTS}/x86_64/initramfs-x86_64-0123456789abcdef.cpio.gz sha256sum {'ab' * 32} " \
           f"path {DEFAULT_CACHE}/x86_64/vmlinuz steps: cyclictest -a 1 -t 1"
    assert normalize_str(text) == (f"url: {ARTIFACTS}/x86_64/initramfs-x86_64-@DIGEST@.cpio.gz sha256sum @SHA256@ "
                                   "path @CACHE@/x86_64/vmlinuz steps: cyclictest -a 1 -t 1")
    assert normalize_str("path: /srv/other-checkout/.cache/images/aarch64/Image") == "path: @CACHE@/aarch64/Image"
