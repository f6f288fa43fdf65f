"""The run directory's layout has one owner, rtlab/core/rundir.py: no other
module of rtlab/ spells one of its file names (``"exit.json"``,
``job_dir / "kernel.json"``, a glob ``"*/exit.json"``, a shell line's
``> stdout.txt``); it uses the constants or the RunDir / JobDir /
MeasurementDir paths, so renaming a file is one edit and the runner, LAVA
ingest, the gate, the report and the fetchers cannot disagree. Prose (error
messages, docstrings, comments) may name the files."""
import ast
import re
from pathlib import Path

from rtlab.core import rundir

ROOT = Path(__file__).resolve().parents[2]
RTLAB = ROOT / "rtlab"
OWNER = RTLAB / "core" / "rundir.py"

#: files of the same name that belong to another layout, with why
ELSEWHERE = {
    # the image cache's Debian kernel directory, not a run's job dir
    ("rtlab/images/debkernel.py", rundir.KERNEL_JSON),
    # a LAVA record directory (lavacli jobs show --json / lava-run's summary), which ingest reads
    ("rtlab/lava/dispatch.py", rundir.JOB_JSON),
    ("rtlab/lava/ingest.py", rundir.JOB_JSON),
    # the health checks' generated campaign in the render directory, not a run's copy
    ("rtlab/commands/lava.py", rundir.CAMPAIGN_COPY),
}


#: names that are also a JSON key of exit.json: a literal is one only beside a path
KEYS_TOO = {rundir.EXIT_CODE}


def _patterns(names):
    alt = "|".join(re.escape(n) for n in names)
    plain = "|".join(re.escape(n) for n in names if n not in KEYS_TOO)
    return [
        re.compile(rf"^[^\s]*(?:^|/)({plain})$"),  # the name, a path or a glob ending in it
        re.compile(rf"^[^\s]*/({alt})$"),          # a path or glob ending in it
        re.compile(rf"[<>]\s*({alt})(?![\w.-])"),  # a shell redirection to or from it
        re.compile(rf"(?:^|[\s(])(?:cat|tail|head|test -[efs]|ls)\b[^\n|;]*?\s({alt})(?![\w.-])"),  # shell reading it
    ]


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def literal_layout_names(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    docs = _docstrings(tree)
    rel = str(path.relative_to(root))
    pats = _patterns(rundir.NAMES)
    joined = {id(n.right) for n in ast.walk(tree) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div)}
    hits = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        found = {m.group(1) for p in pats for m in p.finditer(node.value)}
        if id(node) in joined and node.value in rundir.NAMES:  # d / "exit_code"
            found.add(node.value)
        found = {n for n in found if (rel, n) not in ELSEWHERE}
        if found:
            hits.append(f"{rel}:{node.lineno}: {', '.join(sorted(found))}")
    return hits


def test_no_module_spells_a_run_directory_file_name():
    hits = [h for p in sorted(RTLAB.rglob("*.py")) if p != OWNER for h in literal_layout_names(p)]
    assert not hits, ("run directory file names spelled outside rtlab/core/rundir.py "
                      "(use its constants or RunDir/JobDir/MeasurementDir):\n" + "\n".join(hits))


def test_the_check_sees_a_literal_and_leaves_prose_alone(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text(
        '"""Writes exit.json and run.json."""\n'
        'import json\n'
        'def f(d):\n'
        '    """stdout.txt is the tool\'s."""\n'
        '    (d / "exit.json").write_text("{}")\n'       # 5
        '    g = d.glob("*/kernel.json")\n'              # 6
        '    sh = f"cmd > stdout.txt 2> {d}"\n'           # 7
        '    t = "tail -n 5 stderr.txt; x=$(cat exit_code)"\n'  # 8
        '    raise ValueError("no run.json: not a results directory")\n'
        'NAMES = ["job.json", "job.yaml"]\n'             # 10
        'rc = json.loads("{}")["exit_code"]\n'
        'p = d / "exit_code"\n')                          # 12
    hits = sorted(h.split(":", 1)[1] for h in literal_layout_names(bad, tmp_path))
    assert hits == ["10: job.json", "12: exit_code", "5: exit.json", "6: kernel.json", "7: stdout.txt",
                    "8: exit_code, stderr.txt"]


def test_the_layout_names_its_paths():
    run = rundir.RunDir(Path("/r/20260101T000000Z"))
    job = run.job("qemu-x86_64", "rt", repeat=2)
    m = job.measurement("cyclictest@cpu")
    assert run.run_json == run.path / "run.json" and run.run_started.name == "run-started.json"
    assert job.path == run.path / "qemu-x86_64" / "rt" / "r2" and run.job("b", "v").path == run.path / "b" / "v"
    assert (job.job_json.name, job.job_spec.name, job.kernel_json.name) == ("job.json", "job-spec.json",
                                                                            "kernel.json")
    assert m.path == job.path / "cyclictest@cpu"
    assert [m.exit_json.name, m.stdout.name, m.stderr.name, m.command.name, m.not_available.name] == [
        "exit.json", "stdout.txt", "stderr.txt", "command.txt", "not_available.json"]
    assert len(set(rundir.NAMES)) == len(rundir.NAMES)
