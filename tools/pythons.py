"""The Python versions rtlab supports that this machine has, each with a venv
of rtlab's dependencies, for the tests that must hold on every one of them
(tests/unit/test_cli_reference.py: the generated CLI reference).

    python3 tools/pythons.py            # list: version, interpreter, venv, ready or not
    python3 tools/pythons.py --setup    # make the venvs that are missing or stale (make pythons)

Interpreters: pyenv's (~/.pyenv/versions, or $PYENV_ROOT), `python3.N` on
PATH and this one, each version once, those pyproject.toml's requires-python
allows. Each venv holds pyproject.toml's dependencies, not rtlab itself (the
checkout is put on the path), in $RTLAB_CACHE/pythons/<X.Y> (default
~/.cache/rtlab/pythons), shared by every clone on the machine and made anew
when the dependencies change.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAMP = "rtlab-dependencies.json"


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def minimum_version() -> tuple[int, int]:
    """The lowest version requires-python allows (">=3.10")."""
    m = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", project()["requires-python"])
    if not m:
        raise SystemExit(f"pyproject.toml: requires-python {project()['requires-python']!r} is not '>=X.Y'")
    return int(m.group(1)), int(m.group(2))


def dependencies() -> list[str]:
    return list(project()["dependencies"])


def cache_dir() -> Path:
    return Path(os.environ.get("RTLAB_CACHE") or Path.home() / ".cache" / "rtlab") / "pythons"


@dataclass(frozen=True)
class Python:
    version: tuple[int, int]
    interpreter: str

    @property
    def name(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def venv(self) -> Path:
        return cache_dir() / self.name

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def ready(self) -> bool:
        """The venv exists and holds today's dependencies."""
        stamp = self.venv / STAMP
        try:
            return self.python.exists() and json.loads(stamp.read_text()) == _wanted()
        except (OSError, ValueError):
            return False


def _wanted() -> dict:
    deps = dependencies()
    return {"dependencies": deps, "hash": hashlib.sha256("\n".join(deps).encode()).hexdigest()}


def _version_of(interpreter: str):
    try:
        out = subprocess.run([interpreter, "-c", "import sys; print(*sys.version_info[:2])"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.stdout.split()
    return (int(parts[0]), int(parts[1])) if out.returncode == 0 and len(parts) == 2 else None


def candidates() -> list[str]:
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = [str(p) for p in sorted(pyenv.glob("3.*/bin/python3"))]
    found += [w for n in range(0, 40) if (w := shutil.which(f"python3.{n}"))]
    found.append(sys.executable)
    return found


def pythons() -> list[Python]:
    """One interpreter per supported version found here, oldest first."""
    lowest = minimum_version()
    by_version: dict[tuple[int, int], str] = {}
    for interpreter in candidates():
        v = _version_of(interpreter)
        if v is not None and v >= lowest and v not in by_version:
            by_version[v] = interpreter
    return [Python(v, i) for v, i in sorted(by_version.items())]


def setup(py: Python) -> None:
    import fcntl

    py.venv.parent.mkdir(parents=True, exist_ok=True)
    with open(py.venv.parent / f".{py.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another clone making the same venv: wait for it
        if not py.ready():
            _make(py)


def _make(py: Python) -> None:
    print(f"pythons: {py.name}: a venv of rtlab's dependencies in {py.venv} ({py.interpreter})", flush=True)
    shutil.rmtree(py.venv, ignore_errors=True)
    subprocess.run([py.interpreter, "-m", "venv", str(py.venv)], check=True)
    subprocess.run([str(py.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *dependencies()],
                   check=True)
    (py.venv / STAMP).write_text(json.dumps(_wanted()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tools/pythons.py", description=__doc__.splitlines()[0])
    ap.add_argument("--setup", action="store_true", help="make the venvs that are missing or stale")
    args = ap.parse_args(argv)
    found = pythons()
    for py in found:
        if args.setup:
            setup(py)
        else:
            print(f"{py.name}\t{py.interpreter}\t{py.venv}\t{'ready' if py.ready() else 'missing: make pythons'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
