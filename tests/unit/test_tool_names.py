"""A suite owns every fact about its tool: no code outside rtlab/suites/
compares a value with a tool's name (``tool == "cyclictest"``, ``tool in
("signaltest", "rtbench")``, a module-level tuple of tool names). What
differs between tools is a suite attribute or hook (json_layout,
text_marker, per_operation, pairs, evidence_thresholds ...), so a new suite
never means an edit elsewhere. The names are read from the registry."""
import ast
from pathlib import Path

from rtlab.registry import SUITES

ROOT = Path(__file__).resolve().parents[2]
RTLAB = ROOT / "rtlab"


def tool_names() -> set[str]:
    return {s.tool for s in SUITES.values()} | set(SUITES)


def _names_in(node: ast.AST, names: set[str]) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names_in(e, names)]
    return []


#: methods that compare or look up by their first argument
LOOKUPS = {"get", "pop", "setdefault", "startswith", "endswith", "index", "count", "__contains__", "__eq__"}


def _unwrapped(node: ast.AST) -> ast.AST:
    """frozenset({...}), tuple([...]), set(...): the literal inside."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args and \
            node.func.id in ("frozenset", "set", "tuple", "list", "sorted"):
        node = node.args[0]
    return node


def tool_name_comparisons(path: Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    hits = []
    for node in ast.walk(tree):
        found: list[str] = []
        if isinstance(node, ast.Compare):  # ==, !=, in, not in against a tool name (or a literal of them)
            for side in [node.left, *node.comparators]:
                found += _names_in(side, names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            # a table of tools (PER_OPERATION_TOOLS = ("rtbench",)), also annotated or
            # wrapped (IPC: frozenset[str] = frozenset({"pmqtest"}))
            table = _unwrapped(node.value)
            if isinstance(table, (ast.Tuple, ast.List, ast.Set)):  # name = "hackbench" is a name, not a table
                found += _names_in(table, names)
        elif isinstance(node, ast.Dict):  # a table keyed by tool name
            found += [n for k in node.keys if k is not None for n in _names_in(k, names)]
        elif isinstance(node, ast.Call):
            # tool.startswith(("pmqtest", ...)), TABLE.get("rtbench")
            if isinstance(node.func, ast.Attribute) and node.func.attr in LOOKUPS:
                found += [n for a in node.args[:1] for n in _names_in(a, names)]
        elif isinstance(node, ast.Subscript):  # TABLE["cyclictest"]
            found += _names_in(node.slice, names)
        elif isinstance(node, ast.MatchValue):  # case "timerlat":
            found += _names_in(node.value, names)
        if found:
            hits.append(f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(sorted(set(found)))}")
    return hits


def test_no_tool_name_is_compared_outside_the_suites():
    names = tool_names()
    assert {"cyclictest", "timerlat", "rtbench", "pmqtest"} <= names
    hits = [h for p in sorted(RTLAB.rglob("*.py")) if "suites" not in p.relative_to(RTLAB).parts[:1]
            for h in tool_name_comparisons(p, names)]
    assert not hits, "tool names compared outside rtlab/suites/ (make it a suite attribute):\n" + "\n".join(hits)


def test_the_check_sees_a_tool_branch(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text('def f(tool):\n    if tool in ("signaltest", "rtbench"):\n        return 1\n'
                   'TOOLS = ("pmqtest",)\nLAYOUT = {"oslat": 1}\n'
                   'IPC: frozenset = frozenset({"ptsematest"})\n'
                   'def g(tool, table):\n'
                   '    a = table.get("sigwaittest")\n'
                   '    b = table["svsematest"]\n'
                   '    c = tool.startswith(("timerlat", "x"))\n'
                   '    d = {**{"hackbench": 1}}\n'
                   '    match tool:\n'
                   '        case "cyclicdeadline":\n'
                   '            return a, b, c, d\n'
                   '    return tool or "cyclictest"\n')  # a default is not a comparison
    hits = sorted(h.split(": ", 1)[1] for h in tool_name_comparisons_rel(bad))
    assert hits == ["cyclicdeadline", "hackbench", "oslat", "pmqtest", "ptsematest", "rtbench, signaltest",
                    "sigwaittest", "svsematest", "timerlat"]


def tool_name_comparisons_rel(path: Path) -> list[str]:
    global ROOT
    saved, ROOT = ROOT, path.parent
    try:
        return tool_name_comparisons(path, tool_names())
    finally:
        ROOT = saved
