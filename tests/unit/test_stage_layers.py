"""The stage packages' layers (issue #28 item 3):
the package-level import graph of rtlab/ (function-level imports counted)
has no cycle, and a stage imports only its own layer and the ones below.
Bottom up: rtlab/rtlab.errors/rtlab.registry < rtlab.core < rtlab.targets/rtlab.parsers/rtlab.soak < rtlab.loads < rtlab.suites < rtlab.plan < rtlab.judge < rtlab.report < rtlab.run < rtlab.verdict < rtlab.commands/rtlab.cli."""
from test_import_layers import ALLOWED_LAZY, import_graph

LAYERS = [['rtlab', 'rtlab.errors', 'rtlab.registry'], ['rtlab.core'], ['rtlab.targets', 'rtlab.parsers', 'rtlab.soak'], ['rtlab.loads'], ['rtlab.suites'], ['rtlab.plan'], ['rtlab.judge'], ['rtlab.report'], ['rtlab.run'], ['rtlab.verdict'], ['rtlab.commands', 'rtlab.cli']]
#: (importer, imported) package edges that close a loop on purpose, each with why
ALLOWED_PACKAGE_EDGES = {
    ("rtlab.run", "rtlab.boardtests"): "the fork server imports the board tests (function-level) so a "
                                       "job's pytest starts warm; the board tests use the results path",
}


def package(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2])


def layer_of(pkg: str):
    return next((i for i, names in enumerate(LAYERS) if pkg in names), None)


def package_graph() -> dict[str, set[str]]:
    _, every = import_graph()
    graph: dict[str, set[str]] = {}
    for mod, deps in every.items():
        for dep in deps:
            if (mod, dep) in ALLOWED_LAZY:
                continue
            a, b = package(mod), package(dep)
            if a != b and (a, b) not in ALLOWED_PACKAGE_EDGES:
                graph.setdefault(a, set()).add(b)
    return graph


def test_no_two_packages_import_each_other():
    graph = package_graph()
    seen: dict[str, int] = {}

    def visit(node, stack):
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                raise AssertionError("package cycle: " + " -> ".join(stack + [node, nxt]))
            if nxt not in seen:
                visit(nxt, stack + [node])
        seen[node] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n, [])


def test_stages_import_only_downwards():
    bad = []
    for a, deps in package_graph().items():
        la = layer_of(a)
        for b in deps:
            lb = layer_of(b)
            if la is not None and lb is not None and lb > la:
                bad.append(f"{a} (layer {la}) imports {b} (layer {lb})")
    assert not bad, "\n".join(bad)


def test_the_flat_root_holds_only_the_entry_points():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "rtlab"
    assert sorted(p.stem for p in root.glob("*.py")) == ['__init__', 'cli', 'errors', 'registry']
