"""The lab's service units (env/systemd/), read as systemd reads them.

A real lab runs its coordinator, exporters, reaper, store and the runner's
set-up as systemd units (docs/walkthrough-real-lab.md). Where systemd is not
PID 1 (this machine, a test, the virtual rack), the same units' command lines
are what runs: :func:`Unit.exec_start` gives ExecStart= as systemd would
execute it, from the unit's ``Environment=``, its ``EnvironmentFile=`` (the
lab's /etc/rtlab/lab.env, whose values the caller gives) and the specifiers,
so the rack's coordinator and exporters are started from the shipped units
and a unit that no longer starts breaks the rack's tests.

Only what the shipped units use is understood; anything else in [Service]
that changes the command line is an error naming the unit and key, never a
guess. Paths under :data:`INSTALL_DIR` (where the units expect the rtlab
checkout) are mapped to the checkout that runs them, its ``.venv/bin`` to
the Python environment that runs them.
"""
from __future__ import annotations

import re
import shlex
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from .. import ROOT
from ..errors import InputError

UNITS_DIR = ROOT / "env" / "systemd"
#: where the units expect the rtlab checkout (its .venv holds labgrid and rtlab)
INSTALL_DIR = "/opt/rtlab"
#: the lab's settings, one file for every unit (an example: env/systemd/lab.env)
LAB_ENV = "/etc/rtlab/lab.env"

#: systemd's directory specifiers for the system manager (systemd.unit(5))
_DIRS = {"S": "/var/lib", "C": "/var/cache", "L": "/var/log", "t": "/run", "E": "/etc"}
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WORD_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Unit:
    path: Path
    #: section -> [(key, value)] in file order (keys repeat: Environment=)
    sections: dict[str, list[tuple[str, str]]]

    @property
    def name(self) -> str:
        return self.path.name

    def values(self, section: str, key: str) -> list[str]:
        return [v for k, v in self.sections.get(section, []) if k == key]

    def _specifiers(self, text: str, instance: Optional[str]) -> str:
        prefix = self.name.split("@")[0].rsplit(".", 1)[0]
        if "@" in self.name and instance is None:
            raise InputError(self.path, "a template unit: give the instance (the part after '@')")
        full = self.name.replace("@.", f"@{instance}.") if instance is not None else self.name

        def one(m: re.Match) -> str:
            c = m.group(1)
            if c == "%":
                return "%"
            if c in ("i", "I"):
                if instance is None:
                    raise InputError(self.path, f"%{c} in a unit that is not a template")
                return instance
            if c == "n":
                return full
            if c == "p":
                return prefix
            if c == "H":
                return socket.gethostname()
            if c in _DIRS:
                return _DIRS[c]
            raise InputError(self.path, f"specifier %{c} is not understood here (rtlab.lab.systemd)")

        return re.sub(r"%(.)", one, text)

    def environment(self, instance: Optional[str] = None,
                    files: Optional[Mapping[str, Mapping[str, str]]] = None) -> dict[str, str]:
        """The service's environment: ``Environment=`` in order, then each
        ``EnvironmentFile=`` (which wins, as in systemd). *files* gives each
        file's values by its path in the unit; a file given neither there nor
        on disk is an error unless the unit marks it optional (``-``)."""
        env: dict[str, str] = {}
        for raw in self.values("Service", "Environment"):
            for item in shlex.split(self._specifiers(raw, instance)):
                key, sep, value = item.partition("=")
                if not sep:
                    raise InputError(self.path, f"Environment={raw}: {item!r} is no assignment")
                env[key] = value
        for raw in self.values("Service", "EnvironmentFile"):
            optional = raw.startswith("-")
            name = self._specifiers(raw.lstrip("-"), instance)
            if files is not None and name in files:
                env.update(files[name])
            elif Path(name).is_file():
                env.update(read_environment_file(Path(name)))
            elif not optional:
                raise InputError(self.path, f"EnvironmentFile={name}: not given and not on this machine")
        return env

    def exec_start(self, instance: Optional[str] = None,
                   files: Optional[Mapping[str, Mapping[str, str]]] = None,
                   install_dir: Path = ROOT, venv_bin: Optional[Path] = None) -> list[str]:
        """ExecStart= as systemd runs it: specifiers, then ``${VAR}`` (one
        argument) and ``$VAR`` (split at whitespace) from :meth:`environment`;
        paths under INSTALL_DIR point into *install_dir*, its .venv/bin into
        *venv_bin* (default: this Python's)."""
        for key, _ in self.sections.get("Service", []):
            if key.startswith("Exec") and key != "ExecStart" and key not in ("ExecStop", "ExecReload"):
                raise InputError(self.path, f"{key}=: not understood here (rtlab.lab.systemd)")
        (line,) = self.values("Service", "ExecStart") or [None]
        if line is None:
            raise InputError(self.path, "[Service] has no ExecStart=")
        if line[:1] in "-@:+!":
            raise InputError(self.path, f"ExecStart={line}: prefixes are not understood here")
        env = self.environment(instance, files)
        argv: list[str] = []
        for word in shlex.split(self._specifiers(line, instance)):
            whole = _WORD_VAR.fullmatch(word)
            if whole:
                argv += env.get(whole.group(1), "").split()
                continue

            def value(m: re.Match) -> str:
                if m.group(0) == "$$":
                    return "$"
                if m.group(1) not in env:
                    raise InputError(self.path, f"ExecStart: ${{{m.group(1)}}} is set nowhere "
                                                f"(Environment=, EnvironmentFile=)")
                return env[m.group(1)]

            argv.append(_VAR.sub(value, word))
        venv = f"{INSTALL_DIR}/.venv/bin/"
        bin_dir = str(venv_bin or Path(sys.executable).parent)
        return [bin_dir + "/" + a[len(venv):] if a.startswith(venv)
                else str(install_dir) + a[len(INSTALL_DIR):] if a == INSTALL_DIR or a.startswith(INSTALL_DIR + "/")
                else a for a in argv]


def read_environment_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of an EnvironmentFile= (comments '#' and ';', quotes)."""
    env = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            raise InputError(path, f"line {n}: not KEY=VALUE")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def load_unit(path: Path | str) -> Unit:
    """A unit file; a bare name is one of env/systemd/."""
    path = Path(path)
    if not path.is_absolute() and path.parent == Path("."):
        path = UNITS_DIR / path
    sections: dict[str, list[tuple[str, str]]] = {}
    current: Optional[str] = None
    pending = ""
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections.setdefault(current, [])
            continue
        key, sep, value = line.partition("=")
        if current is None or not sep:
            raise InputError(path, f"line {n}: not in a [section] or not Key=Value: {raw!r}")
        sections[current].append((key.strip(), value.strip()))
    return Unit(path=path, sections=sections)


def units() -> list[Path]:
    """Every unit the lab ships."""
    return sorted(p for p in UNITS_DIR.iterdir() if p.suffix in (".service", ".timer"))


# -- where systemd is not PID 1 ------------------------------------------------------
def find_unit(name: str, unit_dirs: tuple[Path, ...] = (Path("/etc/systemd/system"),)) -> tuple[Unit, Optional[str]]:
    """(unit, instance) for a path or a unit name (``labgrid-exporter@lab1``)."""
    if "/" in name:
        return load_unit(Path(name)), None
    if "." not in name:
        name += ".service"
    stem, _, suffix = name.rpartition(".")
    instance = None
    if "@" in stem:
        prefix, instance = stem.split("@", 1)
        name = f"{prefix}@.{suffix}"
    for d in unit_dirs:
        if (d / name).is_file():
            return load_unit(d / name), instance or None
    raise InputError(Path(unit_dirs[0]) / name, "no such unit")


def start(name: str, log_dir: Path, state_dir: Path) -> Optional[int]:
    """Start a unit as `systemctl start` would, without systemd: Type=simple
    in the background (its own session, output to *log_dir*/<unit>.log, its
    working directory under *state_dir*), Type=oneshot to the end (exit
    status returned), a timer's service once. As the caller's user: User=,
    sandboxing and Restart= are systemd's, not imitated."""
    import os
    import subprocess

    unit, instance = find_unit(name)
    if unit.path.suffix == ".timer":
        return start(str(unit.path.with_suffix(".service")), log_dir, state_dir)
    argv = unit.exec_start(instance, install_dir=Path(INSTALL_DIR), venv_bin=Path(INSTALL_DIR) / ".venv" / "bin")
    env = {**os.environ, **unit.environment(instance)}
    label = unit.name.replace("@.", f"@{instance}.") if instance else unit.name
    cwd = Path(state_dir) / label
    cwd.mkdir(parents=True, exist_ok=True)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(log_dir) / f"{label}.log", "ab") as log:
        log.write(f"--- {' '.join(argv)}\n".encode())
        log.flush()
        oneshot = (unit.values("Service", "Type") or ["simple"])[-1] == "oneshot"
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=not oneshot)
    return proc.wait() if oneshot else None


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m rtlab.lab.systemd",
                                 description="start env/systemd/ units where systemd is not PID 1")
    ap.add_argument("units", nargs="+", metavar="UNIT", help="a unit file or a name in /etc/systemd/system")
    ap.add_argument("--log-dir", type=Path, required=True)
    ap.add_argument("--state-dir", type=Path, required=True)
    args = ap.parse_args(argv)
    rc = 0
    for name in args.units:
        try:
            rc = max(rc, start(name, args.log_dir, args.state_dir) or 0)
        except InputError as e:
            print(f"systemd stand-in: {e}")
            return 2
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
