"""docs/reference/ci-variables.md names every variable the pipeline reads,
and only those: .gitlab-ci.yml's `variables:` blocks and every $VAR or
${VAR...} in its scripts, rules and names, and in the ci/*.sh files its jobs
source, minus GitLab's predefined CI_* variables and the jobs' own shell
variables (assigned in a script and never read with a default)."""
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "ci-variables.md"
CI_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
#: NAME=... in a script (export NAME=..., a for loop's NAME is lower case here)
ASSIGNED = re.compile(r"(?:^|[\s;({])(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=")
#: ${NAME:-default}, ${NAME-default}: read, with a fallback when unset
DEFAULTED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*):?-")
#: the shell's and the runner's own
SHELL = {"HOME", "PATH"}


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)


def _variable_blocks(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "variables" and isinstance(v, dict):
                yield from v
            else:
                yield from _variable_blocks(v)
    elif isinstance(node, list):
        for v in node:
            yield from _variable_blocks(v)


def _matrix(ci) -> set[str]:
    return {k for job in ci.values() if isinstance(job, dict)
            for entry in (job.get("parallel") or {}).get("matrix", []) if isinstance(job.get("parallel"), dict)
            for k in entry}


def pipeline_variables(ci_yaml: str, read_file=lambda p: (ROOT / p).read_text()) -> set[str]:
    ci = yaml.safe_load(ci_yaml)
    texts = list(_strings(ci))
    sourced = sorted({p for t in texts for p in re.findall(r'\. "\$RTLAB_HOME/(ci/[\w.-]+\.sh)"', t)})
    texts += [read_file(p) for p in sourced]
    declared = set(_variable_blocks(ci)) | _matrix(ci)
    refs = {m for t in texts for m in REF.findall(t)}
    defaulted = {m for t in texts for m in DEFAULTED.findall(t)}
    local = {m for t in texts for m in ASSIGNED.findall(t)} - defaulted - declared
    return {n for n in (declared | refs) - local - SHELL if CI_NAME.match(n) and not n.startswith("CI_")}


def documented(text: str) -> set[str]:
    """Variables the page's tables name in their first column."""
    out = set()
    for line in text.splitlines():
        if line.startswith("|") and not set(line) <= set("|-: "):
            first = line.strip().strip("|").split("|")[0]
            out |= {n for n in re.findall(r"`([^`]+)`", first) if CI_NAME.match(n)}
    return out


def test_the_page_names_every_variable_the_pipeline_reads_and_no_other():
    reads = pipeline_variables((ROOT / ".gitlab-ci.yml").read_text())
    page = documented(DOC.read_text())
    assert sorted(reads - page) == [], "read by .gitlab-ci.yml (or a ci/*.sh it sources), not in ci-variables.md"
    assert sorted(page - reads) == [], "in ci-variables.md, read nowhere in the pipeline"
    # the variables the issue found undocumented are among them
    assert {"RTLAB_REFERENCE", "RTLAB_REGRESSIONS_SINCE", "RTLAB_KERNEL_CACHE_MAX"} <= reads


def test_the_extraction_keeps_inputs_and_drops_the_jobs_own_variables():
    ci = """
variables: {RTLAB_A: "1"}
workflow:
  rules:
    - if: '$CI_PIPELINE_SOURCE == "push" && $RTLAB_B'
      variables: {RTLAB_C: "3"}
job:
  parallel: {matrix: [{BOARD: [x], VARIANT: [y]}]}
  rules: [{if: '$RTLAB_D != "0"'}]
  script:
    - export RTLAB="$RTLAB_HOME/bin/rtlab"; RESULTS="r/$BOARD"; rc=0
    - '"$RTLAB" x --since "${RTLAB_E:-30d}" --out "$RESULTS" || rc=$?'
    - . "$RTLAB_HOME/ci/s.sh"
"""
    sourced = {"ci/s.sh": 'TREE=${RTLAB_F:-$HOME/k}\nRTLAB_F=$TREE\nexport SET_HERE=1\n'}
    assert pipeline_variables(ci, sourced.__getitem__) == {
        "RTLAB_A", "RTLAB_B", "RTLAB_C", "RTLAB_D", "RTLAB_E", "RTLAB_F", "RTLAB_HOME", "BOARD", "VARIANT"}
    assert documented("| `RTLAB_A`, `RTLAB_B` | `NOT_THIS` |\n|---|---|\n| what | x |\n") == {"RTLAB_A", "RTLAB_B"}
