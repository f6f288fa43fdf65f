"""The docs' links and commands exist: every relative Markdown link (file
and #heading) in README.md, docs/ and the READMEs beside the data, and
every `rtlab <command>` they show, which the argument parser must have."""
import re
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import cli_reference as clidoc  # noqa: E402 - tools/ is not a package
PAGES = sorted({ROOT / "README.md", *ROOT.glob("docs/**/*.md"), ROOT / "budgets" / "README.md",
                ROOT / "dashboards" / "README.md", ROOT / "labgrid" / "README.md"})

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
#: `rtlab WORD [WORD]` where a command starts: the line's start, after a
#: shell separator or `$(`, or a path ending in /rtlab (.venv/bin/rtlab)
COMMAND = re.compile(r"(?:^|&&|;|\|\||\$\(|^\$ )[ \t]*(?:\S*/)?rtlab((?:[ \t]+[a-z][a-z0-9|-]*)+)", re.M)


def prose(text: str) -> str:
    """The page without code: links in code are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered."""
    seen: dict[str, int] = {}
    out = set()
    for _, title in HEADING.findall(FENCE.sub("", text)):
        title = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text
        slug = re.sub(r"[^\w\- ]", "", title.replace("`", "").lower(), flags=re.U).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def broken_links(page: Path) -> list[str]:
    text = page.read_text()
    bad = []
    for target in LINK.findall(prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto: ...
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{page.relative_to(ROOT)}: {target}: no such file")
            continue
        if frag:
            if dest.is_dir() or dest.suffix != ".md":
                bad.append(f"{page.relative_to(ROOT)}: {target}: #{frag} in a file that is not Markdown")
            elif frag not in anchors(dest.read_text()):
                bad.append(f"{page.relative_to(ROOT)}: {target}: no heading #{frag} in {dest.relative_to(ROOT)}")
    return bad


def shown_commands(text: str) -> list[tuple[str, ...]]:
    """Every `rtlab ...` a page shows in code: spans and code blocks."""
    code = [m.group(0) for m in FENCE.finditer(text)] + [m.group(2) for m in CODE_SPAN.finditer(FENCE.sub("", text))]
    out = []
    for chunk in code:
        for m in COMMAND.finditer(chunk):
            out.append(tuple(m.group(1).split()))
    return out


def unknown_commands(text: str, tree) -> list[str]:
    bad = []
    for words in shown_commands(text):
        path: tuple[str, ...] = ()
        for word in words:
            subs = {p[-1] for p in tree if p[:-1] == path and len(p) == len(path) + 1}
            if not subs:
                break  # a command without sub-commands: the rest are its arguments
            for alt in word.split("|"):
                if alt not in subs:
                    bad.append(f"rtlab {' '.join(path + (alt,))}")
            path = path + (word.split("|")[0],)
            if path not in tree:
                break
    return bad


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_reach_a_file_and_heading(page):
    assert broken_links(page) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_rtlab_command_shown_exists(page):
    assert unknown_commands(page.read_text(), clidoc.command_tree()) == []


def test_the_checks_find_what_they_are_for(tmp_path, monkeypatch):
    """A dead link, a dead heading and a made-up command are found; their
    live forms are not."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "other.md").write_text("# Other page\n\n## The `gate` section\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md) [b](other.md#the-gate-section) [c](#here)\n\n# Here\n\n"
                    "[dead](missing.md) [dead heading](other.md#nowhere) `[not a link](x.md)`\n"
                    "```sh\nrtlab run --campaign C\n.venv/bin/rtlab rack power vb0 cycle\n"
                    "rtlab timing\nrtlab rack up|down|reboot\n```\n"
                    "Use `rtlab lava lab up` and `rtlab kernel sauce`; rtlab answers one question.\n")
    assert broken_links(page) == ["page.md: missing.md: no such file",
                                  "page.md: other.md#nowhere: no heading #nowhere in other.md"]
    assert unknown_commands(page.read_text(), clidoc.command_tree()) == ["rtlab timing", "rtlab rack reboot",
                                                                  "rtlab kernel sauce"]


def test_the_front_door_is_small_and_reaches_every_docs_page():
    """README.md at most 8 KB, its first lines the two commands, and every
    docs page reachable from it by links."""
    readme = ROOT / "README.md"
    assert readme.stat().st_size <= 8 * 1024
    head = readme.read_text().split("\n")[:8]
    assert any(line.startswith("make run") for line in head) and any(line.startswith("make test") for line in head)
    reached, todo = set(), [readme]
    while todo:
        page = todo.pop()
        for target in LINK.findall(prose(page.read_text())):
            path = target.partition("#")[0]
            if not path or re.match(r"^[a-z][a-z0-9+.-]*:", path, re.I):
                continue
            dest = (page.parent / path).resolve()
            if dest.suffix == ".md" and dest.is_file() and dest not in reached:
                reached.add(dest)
                todo.append(dest)
    unreached = [str(p.relative_to(ROOT)) for p in ROOT.glob("docs/**/*.md") if p.resolve() not in reached]
    assert unreached == []
