"""The docs' links and commands exist: every relative Markdown link (file
and #heading) in README.md, docs/ and the READMEs beside the data and the
fault suite, every `rtlab <command>` they show, which the argument parser
must have, every option they give a command or name in prose (an option of
that command, or of rtlab at all, or a named tool's), and every `make
<target>` (a target of the Makefile)."""
import re
import sys
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import cli_reference as clidoc  # noqa: E402 - tools/ is not a package
PAGES = sorted({ROOT / "README.md", *ROOT.glob("docs/**/*.md"), ROOT / "budgets" / "README.md",
                ROOT / "dashboards" / "README.md", ROOT / "labgrid" / "README.md", ROOT / "lava" / "README.md",
                ROOT / "tests" / "faults" / "README.md"})

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


# -- options and make targets -------------------------------------------------
#: options of other programs the pages name in prose, each with a word that
#: must be in the same paragraph (the program it belongs to)
FOREIGN = {
    "--tracemark": "cyclictest", "--json": "cyclictest", "--fifo": "cyclictest", "--lg-env": "labgrid",
    "--phase": "pytest", "--durations": "pytest", "--dist": "pytest", "--collect-only": "pytest",
    "--no-loadscope-reorder": "pytest-xdist",
    "--hostname": "exporter", "--dispatcher": "lava-run", "--validate": "lava-run", "--measurement": "lava-test-case",
    "--units": "lava-test-case", "--new-commit": "bench", "--flat": "bench", "--short": "bench", "--runs": "bench",
    "--coordinator": "labgrid", "--bind": "labgrid", "--timeout": "stress-ng", "--mlockall": "cyclictest",
    "--builtin-schema": "check-jsonschema", "--check": "cli_reference", "--write": "cli_reference",
    "--non-interactive": "gitlab-runner", "--url": "gitlab-runner", "--token": "gitlab-runner",
    "--executor": "gitlab-runner", "--description": "gitlab-runner",
    "--spike": "cyclictest", "--spike-nodes": "cyclictest",
}
SHELL_END = re.compile(r"\s(?:\||;|&&|\|\||#|>|2>)\s|\)")
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")
MAKE = re.compile(r"(?:^|&&|;|\$ |\(|`)\s*make\s+((?:-[a-zA-Z]+\s+)*)([a-z][\w-]*)", re.M)
SENTENCE_END = re.compile(r"[.!?;](?:\s|$)|\|")


def options_of(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def _command_at(words: list[str], tree) -> tuple[tuple[str, ...], int]:
    """The longest command path the words start with, and how many words it took."""
    path: tuple[str, ...] = ()
    for word in words:
        nxt = path + (word.split("|")[0],)
        if nxt not in tree:
            break
        path = nxt
    return path, len(path)


def command_options(text: str, tree) -> list[str]:
    """Options given to an `rtlab COMMAND` in the page's code that COMMAND has not."""
    code = [m.group(0) for m in FENCE.finditer(text)] + [m.group(2) for m in CODE_SPAN.finditer(FENCE.sub("", text))]
    bad = []
    for chunk in code:
        for line in chunk.replace("\\\n", " ").splitlines():
            for m in re.finditer(r"(?:^|&&|;|\|\||\$\(|^\$ )[ \t]*(?:\S*/)?rtlab((?:[ \t]+\S+)*)", line):
                rest = SHELL_END.split(m.group(1), 1)[0]
                words = rest.split()
                path, n = _command_at(words, tree)
                if not path:
                    continue
                have = options_of(tree[path]) | {"-h", "--help"}
                given = set()
                for word in words[n:]:
                    for opt in OPTION.findall(word):
                        if word.startswith(("-", "[-", "[--")):
                            given.add(opt.split("=")[0])
                            if opt.split("=")[0] not in have:
                                bad.append(f"rtlab {' '.join(path)} {opt}")
                if words[n:] and not any(w in ("...", "…") for w in words[n:]):
                    # a command shown with its arguments shows the ones it cannot run without
                    for a in tree[path]._actions:
                        if a.required and a.option_strings and not given & set(a.option_strings):
                            bad.append(f"rtlab {' '.join(path)} without {a.option_strings[0]}")
    return bad


def prose_options(text: str, tree) -> list[str]:
    """`--option` spans in prose: an option of the rtlab command the sentence
    names before it, else of some rtlab command, else of a program the page
    names (FOREIGN)."""
    every = set().union(*(options_of(p) for p in tree.values()))
    bad = []
    for para in re.split(r"\n\s*\n", FENCE.sub("", text)):
        for m in CODE_SPAN.finditer(para):
            span = m.group(2).strip()
            if not span.startswith("--") or "rtlab" in span:
                continue
            opt = OPTION.match(span).group(1).split("=")[0]
            sentence = SENTENCE_END.split(para[:m.start()])[-1]
            named = re.findall(r"rtlab((?:\s+[a-z][a-z-]*)+)", sentence)
            if named:
                path, _ = _command_at(named[-1].split(), tree)
                if path:
                    below = [p for p in tree if p[:len(path)] == path]
                    if not any(opt in options_of(tree[p]) for p in below):
                        bad.append(f"{opt} (said of rtlab {' '.join(path)})")
                    continue
            if opt in every:
                continue
            tool = FOREIGN.get(opt)
            if tool is None or tool not in text:
                bad.append(f"{opt} (no rtlab command has it{f'; {tool} not named' if tool else ''})")
    return bad


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([a-z][\w-]*)\s*:(?!=)", text, re.M))


def make_targets_shown(text: str) -> list[str]:
    code = [m.group(0) for m in FENCE.finditer(text)] + ["`" + m.group(2) for m in CODE_SPAN.finditer(FENCE.sub("", text))]
    return [m.group(2) for chunk in code for m in MAKE.finditer(chunk)]


#: targets of other Makefiles the pages name (the kernel's)
OTHER_MAKE = {"olddefconfig"}


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_option_shown_or_named_exists(page):
    tree = clidoc.command_tree()
    text = page.read_text()
    assert command_options(text, tree) + prose_options(text, tree) == []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_make_target_shown_exists(page):
    missing = [t for t in make_targets_shown(page.read_text()) if t not in makefile_targets() | OTHER_MAKE]
    assert missing == []


def test_the_option_and_make_checks_find_what_they_are_for():
    tree = clidoc.command_tree()
    page = ("```sh\nrtlab run --campaign C --no-such-flag\nrtlab lava submit -i LAB DIR [--wait] | tee x --other\n"
            "rtlab baseline pin main-6.12 --branch main\n"
            "make test-long && make no-such-target\n```\n\n"
            "`rtlab run` takes `--resume`, and `rtlab gate` takes `--resume`. Then `--made-up`.\n"
            "A `--tracemark` of cyclictest; a `--lg-env` of nobody.\n")
    assert command_options(page, tree) == ["rtlab run --no-such-flag", "rtlab baseline pin without --like"]
    assert prose_options(page, tree) == ["--resume (said of rtlab gate)", "--made-up (no rtlab command has it)",
                                         "--lg-env (no rtlab command has it; labgrid not named)"]
    assert make_targets_shown(page) == ["test-long", "no-such-target"]
    assert "test-long" in makefile_targets() and "no-such-target" not in makefile_targets()
