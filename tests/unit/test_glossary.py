"""docs/reference/glossary.md defines the words rtlab uses in a sense of its
own, and every page of docs/ and the README links each of them to its
entry where it first uses it: in prose (code, headings and the text of
other links are not uses), the first occurrence must be a link to the
glossary's entry."""
import re
from pathlib import Path

import pytest

from test_docs_links import CODE_SPAN, FENCE, anchors

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "docs" / "reference" / "glossary.md"
#: the pages checked: a reader's pages; the generated CLI reference says what the parser says
PAGES = sorted(p for p in {ROOT / "README.md", *ROOT.glob("docs/**/*.md")}
               if p not in (GLOSSARY, ROOT / "docs" / "reference" / "cli.md"))

#: each entry's anchor -> how its term is written in prose. Where a word
#: also has its everyday (or another technical) sense, the pattern keeps to
#: the glossary's: "key" of a YAML file or a cache is not a measurement key,
#: "looks at" is not a look of the verdict
TERMS = {
    "baseline": r"(?i)\bbaselines?\b",
    "budget": r"(?i)\bbudgets?\b(?! class)",
    "budget-class": r"(?i)\bbudget class(?:es)?\b",
    "campaign": r"(?i)\bcampaigns?\b",
    "checkpoint": r"(?i)\bcheckpoint(?:s|ed)?\b",
    "coordinator": r"(?i)\bcoordinators?\b",
    "evidence": r"(?i)\bevidence\b",
    "exporter": r"(?i)\bexporters?\b",
    "infra": r"\bINFRA\b|\binfra\b",
    "isolated-cpu": r"\bisolated CPUs?\b|\bCPU isolation\b|\bisolcpus\b|\bnohz_full\b|\brcu_nocbs\b",
    "kernel-variant": r"(?i)\bvariants?\b",
    "key": r"(?i)(?<!dotted )(?<!cache )(?<!images' )(?<!file and )(?<!file and the )(?<!hosts' )(?<!policy )"
           r"(?<!\| )(?<!budgets )\bkeys?\b(?! given)(?! of its budgets)(?! position)(?! or value)",
    "lease": r"(?i)\bleases?\b",
    "local-board": r"(?i)\blocal board\b",
    "look": r"(?i)\b(?:first|last|next|each|every|one|its|key's|the looks') looks?\b|\blooks:",
    "paired-boots": r"(?i)\bpaired boots?\b",
    "place": r"(?i)(?<!in )(?<!take )(?<!takes )(?<!taken )\bplaces?\b",
    "pwcet": r"\bpWCET\b",
    "preempt_dynamic": r"\bPREEMPT_DYNAMIC\b",
    "rack": r"(?i)\bracks?\b",
    "repeat": r"(?i)\brepeats?\b",
    "run-directory": r"(?i)\brun dir(?:ector(?:y|ies)|s)?\b",
    "session": r"(?i)(?<!process )\bsessions?\b(?! fixture)",
    "shown": r"\bSHOWN\b",
    "soak": r"(?i)(?<!lab )\bsoaks?\b",  # the lab soak is a stress of the rack
    "store": r"(?i)(?<!to )\bstore\b(?! the)",
    "tcg": r"\bTCG\b",
    "twin": r"(?i)\btwins?\b",
    "undecided": r"\bUNDECIDED\b",
}

HEADING_LINE = re.compile(r"^#{1,6}\s.*$", re.M)
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose(text: str) -> str:
    """The page's running text: no code, no headings (a link in a heading is
    not where a reader meets a word first)."""
    text = FENCE.sub("", text)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = HEADING_LINE.sub("", text)
    return CODE_SPAN.sub("", text)


def in_a_name(text: str, start: int, end: int) -> bool:
    """A word inside a path or a name (rtlab/soak/checkpoint.py, rack-twins,
    nightly-soak) is not the term."""
    before, after = text[start - 1:start], text[end:end + 2]
    return before in ("/", ".", "-", "_") or after[:1] in ("/", "-", "_") or re.match(r"\.\w", after) is not None


def glossary_target(page: Path, target: str):
    """The glossary anchor a link target reaches, or None."""
    path, _, frag = target.partition("#")
    if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path, re.I):
        return None
    return frag if (page.parent / path).resolve() == GLOSSARY else None


def first_uses(page: Path, text: str, terms=None) -> dict[str, str]:
    """Per term used on the page: "linked" when its first use links its
    glossary entry, else the first use's line, unlinked."""
    terms = terms or TERMS
    body = prose(text)
    segments = []  # (text, glossary anchor or None, is link)
    pos = 0
    for m in LINK.finditer(body):
        segments.append((body[pos:m.start()], None, False))
        segments.append((m.group(1), glossary_target(page, m.group(2)), True))
        pos = m.end()
    segments.append((body[pos:], None, False))
    out = {}
    for anchor, pattern in terms.items():
        rx = re.compile(pattern)
        for seg, target, is_link in segments:
            m = next((m for m in rx.finditer(seg) if not in_a_name(seg, *m.span())), None)
            if not m:
                continue
            if is_link and target is None:
                continue  # the text of a link elsewhere: a use, but it cannot carry the glossary's link
            if is_link:
                out[anchor] = "linked" if target == anchor else f"linked to #{target}, not #{anchor}"
            else:
                start = seg.rfind("\n", 0, m.start()) + 1
                end = seg.find("\n", m.end())
                out[anchor] = seg[start:end if end >= 0 else None].strip()[:160]
            break
    return out


def test_every_entry_has_its_pattern_and_every_pattern_its_entry():
    entries = "\n".join(re.findall(r"^### .*$", GLOSSARY.read_text(), re.M))
    assert anchors(entries) == set(TERMS)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_each_term_is_linked_to_the_glossary_at_its_first_use(page):
    unlinked = {a: line for a, line in first_uses(page, page.read_text()).items() if line != "linked"}
    assert unlinked == {}, f"{page.relative_to(ROOT)}: link these to reference/glossary.md#<entry> at their first use"


def test_the_check_finds_an_unlinked_first_use(tmp_path):
    docs = tmp_path / "docs"
    (docs / "reference").mkdir(parents=True)
    (docs / "reference" / "glossary.md").write_text("### TCG\n\n### soak\n")
    page = docs / "page.md"
    text = ("# Under TCG\n\nA `TCG` board. [TCG](reference/glossary.md#tcg) boards, under TCG.\n\n"
            "See [soaks](design.md) and a soak.\n")
    import test_glossary as g
    saved = g.GLOSSARY
    g.GLOSSARY = docs / "reference" / "glossary.md"
    try:
        uses = first_uses(page, text, {"tcg": TERMS["tcg"], "soak": TERMS["soak"], "rack": TERMS["rack"]})
    finally:
        g.GLOSSARY = saved
    # the heading and the code span are not uses; the first prose use is linked
    assert uses["tcg"] == "linked"
    # a link elsewhere cannot carry it: the next use must
    assert uses["soak"] == "and a soak."
    assert "rack" not in uses
