"""The import structure of rtlab/: no import cycle among its modules, counting
the imports inside functions too (a function-level import that closes a
loop only hides it), except the few deliberate lazy imports listed below.

The stage packages' order (core -> targets/parsers/soak -> loads -> suites
-> plan -> judge -> report -> run -> verdict -> commands) is checked by
test_stage_layers.py.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "rtlab"

#: (importer, imported): lazy imports that would close a cycle, each with why;
#: an entry that no longer exists fails the test, so the list only shrinks
ALLOWED_LAZY: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(mod: str, is_pkg: bool, node) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if node.level:
        base = base[:len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [target] + [f"{target}.{a.name}" for a in node.names]


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> rtlab modules it imports at module level, ... anywhere);
    imports under ``if TYPE_CHECKING:`` never run and are left out."""
    files = {module_name(p): p for p in ROOT.rglob("*.py")}
    top: dict[str, set[str]] = {m: set() for m in files}
    every: dict[str, set[str]] = {m: set() for m in files}

    def targets(mod, names):  # a module and the packages above it (importing a.b.c imports a.b)
        out = set()
        for name in names:
            parts = name.split(".")
            out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        return {t for t in out if t in files and t != mod and not mod.startswith(t + ".")}

    for mod, path in files.items():
        def walk(body, at_top):
            for node in body:
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    found = targets(mod, imported(mod, path.name == "__init__.py", node))
                    every[mod] |= found
                    if at_top:
                        top[mod] |= found
                elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                else:
                    nested = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                    for field in ("body", "orelse", "finalbody", "handlers"):
                        if isinstance(getattr(node, field, None), list):
                            walk(getattr(node, field), at_top and not nested)
        walk(ast.parse(path.read_text()).body, True)
    return top, every


def find_cycle(graph: dict[str, set[str]]):
    """One cycle as a list of modules, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_no_module_level_import_cycle():
    top, _ = import_graph()
    cycle = find_cycle(top)
    assert cycle is None, "import cycle at module level: " + " -> ".join(cycle)


def test_no_cycle_hidden_in_function_level_imports():
    _, every = import_graph()
    for a, b in ALLOWED_LAZY:
        assert b in every[a], f"{a} no longer imports {b}: drop it from ALLOWED_LAZY"
        every[a] = {t for t in every[a] if not (t == b or b.startswith(t + "."))}
    cycle = find_cycle(every)
    assert cycle is None, "import cycle (counting function-level imports): " + " -> ".join(cycle)


def test_the_layers_point_down():
    _, every = import_graph()
    assert every["rtlab.core.model"] <= {"rtlab.errors"}, every["rtlab.core.model"]
    for mod, deps in every.items():
        if mod.startswith("rtlab.parsers"):
            assert not {d for d in deps if d.startswith("rtlab.suites")}, f"{mod} imports the suites"


def test_parsers_learn_their_tools_from_the_suites():
    """The inverted registry, in a fresh interpreter: importing the parsers
    imports no suite; asking for the tools reads the suites' registry
    (rtlab.registry.SUITES), which imports the suites then."""
    import subprocess
    import sys
    code = ("import sys; from rtlab.parsers import known_tools\n"
            "assert 'rtlab.suites' not in sys.modules\n"
            "assert {'cyclictest', 'rtbench'} <= set(known_tools()), known_tools()\n"
            "assert 'rtlab.suites' in sys.modules\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT.parent, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
