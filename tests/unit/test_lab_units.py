"""The lab's service units (env/systemd/): systemd accepts them, and their
command lines are read as systemd reads them (rtlab.lab.systemd), which is
how the virtual rack starts its coordinator and exporters from them
(tests/integration/test_rack_multihost.py runs them in the multi-host lab).
"""
import shutil
import subprocess
from pathlib import Path

import pytest

from rtlab import ROOT
from rtlab.errors import InputError
from rtlab.lab.systemd import INSTALL_DIR, LAB_ENV, UNITS_DIR, load_unit, read_environment_file, units

SHIPPED = {"labgrid-coordinator.service", "labgrid-exporter@.service", "rtlab-reaper.service",
           "rtlab-reaper.timer", "rtlab-influxd.service", "rtlab-artifacts.service", "rtlab-runner-setup.service"}


def test_the_lab_ships_its_units():
    assert SHIPPED <= {p.name for p in units()}


def test_systemd_analyze_verifies_every_unit(tmp_path):
    """`systemd-analyze verify` (systemd 252 here, though not PID 1): known
    sections and keys, executables that exist. The units name the checkout
    as INSTALL_DIR; here it is this checkout."""
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze (Debian's systemd package) is missing"
    for unit in units():
        text = unit.read_text().replace(INSTALL_DIR, str(ROOT))
        # GitLab's runner is GitLab's package, not installed here: its unit is checked with /bin/true
        text = text.replace("ExecStart=/usr/bin/gitlab-runner ", "ExecStart=/bin/true ")
        (tmp_path / unit.name).write_text(text)
    for unit in sorted(tmp_path.iterdir()):
        r = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not r.stderr.strip() and not r.stdout.strip(), (unit.name, r.stdout + r.stderr)
    # and it would say so: a key systemd does not know, an executable that is not there
    bad = tmp_path / "bad.service"
    bad.write_text((tmp_path / "rtlab-reaper.service").read_text().replace("Type=oneshot", "Tpye=oneshot")
                   .replace(str(ROOT), "/nonexistent"))
    r = subprocess.run([analyze, "verify", str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "Unknown key 'Tpye'" in r.stderr and "is not executable" in r.stderr, r.stderr


def test_every_unit_starts_from_the_example_lab_env():
    """The example /etc/rtlab/lab.env sets what each unit needs: every
    ExecStart= resolves, each ${VAR} from the unit's Environment= or the file."""
    lab = {LAB_ENV: read_environment_file(UNITS_DIR / "lab.env")}
    venv = Path("/venv/bin")
    got = {p.name: load_unit(p).exec_start("lab1" if "@" in p.name else None, lab, Path("/co"), venv)
           for p in units() if p.suffix == ".service" and p.name in SHIPPED}
    assert got == {
        "labgrid-coordinator.service": ["/venv/bin/labgrid-coordinator", "--listen", "[::]:20408"],
        "labgrid-exporter@.service": ["/venv/bin/labgrid-exporter", "--coordinator", "coord.lab.example:20408",
                                      "--name", "lab1", "--hostname", got["labgrid-exporter@.service"][6],
                                      "/etc/labgrid/lab1.yaml"],
        "rtlab-reaper.service": ["/venv/bin/rtlab", "rack", "reap"],
        "rtlab-influxd.service": ["/venv/bin/python", "-m", "rtlab.store", "--state", "/var/lib/rtlab-store",
                                  "--bind", "127.0.0.1", "--port", "8086"],
        "rtlab-artifacts.service": ["/usr/bin/python3", "-m", "http.server", "--bind", "0.0.0.0", "--directory",
                                    "/var/lib/rtlab/.cache/rtlab/lava-artifacts", "8099"],
        "rtlab-runner-setup.service": ["/usr/bin/make", "-C", "/co", "runner-setup", "RUNNER_USER=rtlab"],
    }
    # the file wins over the unit's Environment= (systemd's order), a value with spaces stays one argument
    exporter = load_unit("labgrid-exporter@.service")
    argv = exporter.exec_start("lab1", {LAB_ENV: {"LG_COORDINATOR": "c:1", "LG_EXPORTER_HOSTNAME": "10.0.0.2",
                                                  "LG_EXPORTER_CONFIG": "/srv/my lab.yaml"}})
    assert argv[-4:] == ["lab1", "--hostname", "10.0.0.2", "/srv/my lab.yaml"], argv
    assert exporter.environment("lab1", {LAB_ENV: {"LG_COORDINATOR": "c:1"}})["PYTHONUNBUFFERED"] == "1"


def test_what_a_unit_cannot_say_is_an_error_naming_it(tmp_path):
    def unit(text: str, name="x.service"):
        (tmp_path / name).write_text(text)
        return load_unit(tmp_path / name)

    with pytest.raises(InputError, match="set nowhere"):
        unit("[Service]\nExecStart=/bin/echo ${NOPE}\n").exec_start()
    with pytest.raises(InputError, match="specifier %u is not understood"):
        unit("[Service]\nExecStart=/bin/echo %u\n").exec_start()
    with pytest.raises(InputError, match="EnvironmentFile=/nonexistent/lab.env: not given"):
        unit("[Service]\nEnvironmentFile=/nonexistent/lab.env\nExecStart=/bin/true\n").exec_start()
    with pytest.raises(InputError, match="give the instance"):
        unit("[Service]\nExecStart=/bin/echo %i\n", "t@.service").exec_start()
    with pytest.raises(InputError, match="prefixes are not understood"):
        unit("[Service]\nExecStart=-/bin/true\n").exec_start()
    # $VAR alone splits at whitespace (zero or more arguments); ${VAR} is one; $$ is $
    u = unit("[Service]\nEnvironment=\"A=x y\" B=\nExecStart=/bin/echo $A ${A} $B a$${A}\n")
    assert u.exec_start() == ["/bin/echo", "x", "y", "x y", "a${A}"]
    optional = unit("[Service]\nEnvironmentFile=-/nonexistent/lab.env\nExecStart=/bin/true\n")
    assert optional.exec_start() == ["/bin/true"]
