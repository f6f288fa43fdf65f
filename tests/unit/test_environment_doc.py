"""docs/reference/environment.md names every environment variable rtlab
reads, and only those: the reads are found in rtlab/'s syntax trees
(os.environ.get/[]/in, os.getenv, a copy of os.environ read the same way,
the helpers that take a variable's name), each name resolved through the
module constants that hold it."""
import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reference" / "environment.md"
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
#: the system's own, read only to pass them on (PATH gains labgrid/bin)
SYSTEM = {"PATH"}


def _is_environ(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def _strings(node) -> list[str]:
    """The string constants a constant or a literal sequence holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e)]
    if isinstance(node, ast.Dict):
        return [s for e in (*node.keys, *node.values) if e is not None for s in _strings(e)]
    return []


class Module:
    def __init__(self, path: Path):
        self.path = path
        self.tree = ast.parse(path.read_text())
        self.parent = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        #: NAME = "RTLAB_X" and NAME = ("A", "B") at any level
        self.constants: dict[str, list[str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign) and _strings(node.value):
                for t in node.targets:
                    key = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
                    if key:
                        self.constants.setdefault(key, _strings(node.value))

    def function_of(self, node):
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return node
        return self.tree

    def environ_aliases(self, scope) -> set[str]:
        """Names a scope binds to os.environ or a copy of it (env = dict(os.environ) ...)."""
        out = set()
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(_is_environ(n) for n in ast.walk(node.value)):
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        return out


def helpers(modules) -> dict[str, int]:
    """Functions that read os.environ with a parameter as the name:
    {function name: that parameter's position}."""
    out = {}
    for m in modules:
        for fn in ast.walk(m.tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            params = [a.arg for a in fn.args.args]
            for node in ast.walk(fn):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                        and _is_environ(node.func.value) and node.args and isinstance(node.args[0], ast.Name)
                        and node.args[0].id in params):
                    out[fn.name] = params.index(node.args[0].id)
    return out


def environment_reads(root: Path = ROOT / "rtlab") -> tuple[dict[str, set[str]], list[str]]:
    """({variable: files reading it}, [reads whose name could not be resolved])."""
    modules = [Module(p) for p in sorted(root.rglob("*.py"))]
    shared: dict[str, list[str]] = {}
    for m in modules:
        for k, v in m.constants.items():
            shared.setdefault(k, v)
    wrappers = helpers(modules)
    reads: dict[str, set[str]] = {}
    unresolved = []
    for m in modules:
        alias_cache: dict[int, set[str]] = {}
        for node in ast.walk(m.tree):
            arg = None
            scope = m.function_of(node)
            if id(scope) not in alias_cache:
                alias_cache[id(scope)] = m.environ_aliases(scope)
            aliases = alias_cache[id(scope)]

            def environ(n):
                return _is_environ(n) or (isinstance(n, ast.Name) and n.id in aliases)
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
                if isinstance(fn, ast.Attribute) and fn.attr in ("get", "setdefault") and environ(fn.value):
                    arg = node.args[0] if node.args else None
                elif name == "getenv" and node.args:
                    arg = node.args[0]
                elif name in wrappers and len(node.args) > wrappers[name]:
                    arg = node.args[wrappers[name]]
            elif isinstance(node, ast.Subscript) and environ(node.value) and isinstance(node.ctx, ast.Load):
                arg = node.slice
            elif (isinstance(node, ast.Compare) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops)
                  and any(environ(c) for c in node.comparators)):
                arg = node.left
            if arg is None:
                continue
            if isinstance(arg, ast.Name) and isinstance(scope, ast.FunctionDef) and scope.name in wrappers and \
                    arg.id in [a.arg for a in scope.args.args]:
                continue  # a helper reading the name it is given: its callers are the reads
            names = _strings(arg)
            if not names and isinstance(arg, (ast.Name, ast.Attribute)):
                key = arg.id if isinstance(arg, ast.Name) else arg.attr
                names = m.constants.get(key) or shared.get(key) or []
                if not names and isinstance(arg, ast.Name):
                    # a loop variable: what its loop (or its function's literals) iterates over
                    for loop in ast.walk(scope):
                        target = getattr(loop, "target", None)
                        if isinstance(loop, (ast.For, ast.comprehension)) and any(
                                isinstance(t, ast.Name) and t.id == arg.id for t in ast.walk(target)):
                            it = loop.iter
                            if isinstance(it, ast.Name):
                                names += m.constants.get(it.id) or shared.get(it.id) or []
                            names += [s for n in ast.walk(it) for s in _strings(n)]
                            if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and \
                                    isinstance(it.func.value, ast.Name):  # keys.items(): the dict's literal
                                names += m.constants.get(it.func.value.id) or []
                                for a in ast.walk(scope):
                                    if isinstance(a, ast.Assign) and any(isinstance(t, ast.Name) and t.id ==
                                                                         it.func.value.id for t in a.targets):
                                        names += [s for n in ast.walk(a.value) for s in _strings(n)]
            names = [n for n in names if ENV_NAME.match(n)]
            if not names and not (isinstance(arg, ast.Constant)):
                unresolved.append(f"{m.path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(arg)}")
            for n in names:
                reads.setdefault(n, set()).add(str(m.path.relative_to(root.parent)))
    return reads, unresolved


def documented(text: str) -> set[str]:
    """Variables the page's tables name in their first column."""
    out = set()
    for line in text.splitlines():
        if line.startswith("|") and not set(line) <= set("|-: "):
            first = line.strip().strip("|").split("|")[0]
            out |= {n for n in re.findall(r"`([^`]+)`", first) if ENV_NAME.match(n)}
    return out


def test_every_read_resolves_to_a_name():
    assert environment_reads()[1] == []


def test_the_page_names_every_variable_rtlab_reads_and_no_other():
    reads = set(environment_reads()[0]) - SYSTEM
    page = documented(DOC.read_text())
    assert sorted(reads - page) == [], "read by rtlab, not in docs/reference/environment.md"
    assert sorted(page - reads) == [], "in docs/reference/environment.md, read by no module of rtlab/"


def test_the_scan_finds_each_form_of_read(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "import os\nLOCK_ENV = 'RTLAB_A'\nPAIR = ('RTLAB_P', 'RTLAB_Q')\n"
        "def f():\n    return os.environ.get(LOCK_ENV), os.environ['RTLAB_B'], 'RTLAB_C' in os.environ\n"
        "def g():\n    env = dict(os.environ)\n    return env.get('RTLAB_D')\n"
        "def setting(name, default):\n    return os.environ.get(name) or default\n"
        "def h():\n    return setting('RTLAB_E', 1), os.getenv('RTLAB_F')\n"
        "def k():\n    return {x: os.environ.get(x) for x in PAIR}\n"
        "def m():\n    keys = {'sha': 'RTLAB_G'}\n    return {k: os.environ[v] for k, v in keys.items()}\n"
        "def n(x):\n    return os.environ.get(x.lower())\n")
    reads, unresolved = environment_reads(pkg)
    assert sorted(reads) == ["RTLAB_A", "RTLAB_B", "RTLAB_C", "RTLAB_D", "RTLAB_E", "RTLAB_F", "RTLAB_G",
                             "RTLAB_P", "RTLAB_Q"]
    assert len(unresolved) == 1 and unresolved[0].endswith("x.lower()")
    assert documented("| `RTLAB_A`, `RTLAB_B` | what `RTLAB_C` |\n|---|---|\n") == {"RTLAB_A", "RTLAB_B"}
