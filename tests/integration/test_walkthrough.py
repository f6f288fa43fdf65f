"""docs/walkthrough-real-lab.md, followed as written on the virtual lab.

Every block marked ```sh walkthrough <hosts>``` runs in bash, as root, on
those hosts of `rtlab rack up --hosts 2` (network namespaces), each host
with a private /etc/rtlab, /etc/labgrid, /etc/systemd/system, /var/lib and
/opt/rtlab (an overlay of this checkout: what the page writes there stays
in the host's directory here), with the page's own `systemctl` stand-in
(the block ```sh walkthrough-stand-in```) and the substitutions the page
names: BOARD (the RK356x twin), COORD and EXP (the hosts' addresses) and the
twin's wiring. Then the GitLab job the page ends with runs on runner1
(gitlab-ci-local, shell executor): it must reserve the page's place through
the page's coordinator, boot the twin and pass.

make test-long: make test proves the parts: the units' command lines in
the multi-host lab (tests/integration/test_rack_multihost.py::
test_rtlab_run_on_a_runner_host_stages_over_ssh_and_boots_boards_of_both_exporter_hosts:
coordinator and exporters started from them, the reaper unit, the store
unit a runner publishes to), a run from a runner host through the lab's
coordinator (the same test), the generated matrix in a pipeline
(tests/integration/test_gitlab_ci.py::test_kernel_push_gets_the_verdict_against_its_branch)
and the exporter wiring of real resources (tests/integration/test_rack_lab.py).
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from rtlab.core.procutil import processes_in_dir
from rtlab.rack.control import rack_down, rack_up
from rtlab.rack.hosts import leftovers

pytestmark = pytest.mark.long

PAGE = ROOT / "docs" / "walkthrough-real-lab.md"
GCL = ROOT / ".cache" / "gitlab-ci-local" / "bin" / "gitlab-ci-local"
#: the mount points each host's private directories go on (created here if
#: the machine has none, removed again)
MOUNTS = ("/etc/rtlab", "/etc/labgrid", "/opt/rtlab")


def page_blocks() -> tuple[str, list[tuple[list[str], str]]]:
    text = PAGE.read_text()
    (stand_in,) = re.findall(r"^ *```sh walkthrough-stand-in\n(.*?)^ *```", text, re.S | re.M)
    runs = [(hosts.split(), body) for hosts, body in
            re.findall(r"^```sh walkthrough ([a-z0-9 ]+)\n(.*?)^```", text, re.S | re.M)]
    return stand_in, runs


def host_script(host_dir: Path, body: str, stand_in: str) -> str:
    """*body* in a mount namespace of its own, with the host's private
    directories mounted (overlays of the machine's /var/lib and the checkout)."""
    h = host_dir
    return f"""set -euo pipefail
for d in etc/rtlab etc/labgrid etc/systemd/system; do mkdir -p {h}/$d; mount --bind {h}/$d /$d; done
mkdir -p {h}/opt-up {h}/opt-work {h}/var-up {h}/var-work {h}/units {h}/unit-state
mount -t overlay overlay -o lowerdir={ROOT},upperdir={h}/opt-up,workdir={h}/opt-work /opt/rtlab
mount -t overlay overlay -o lowerdir=/var/lib,upperdir={h}/var-up,workdir={h}/var-work /var/lib
export RTLAB_HOME=/opt/rtlab UNIT_LOGS={h}/units UNIT_STATE={h}/unit-state
cd /
{stand_in}
{body}"""


def test_the_walkthrough_measures_a_board_through_the_shared_coordinator_by_a_gitlab_job(tmp_path):
    assert GCL.exists(), "needs gitlab-ci-local (make gitlab-ci-local)"
    stand_in, runs = page_blocks()
    assert [h for h, _ in runs][:2] == [["coord", "exp1", "runner1"], ["coord"]], runs
    made = [m for m in MOUNTS if not os.path.exists(m)]
    for m in made:
        os.makedirs(m)
    # the virtual lab: a rack config that never powers an idle board off (its
    # own coordinator never sees the page's place locked)
    cfg = tmp_path / "rack.yaml"
    cfg.write_text((ROOT / "labgrid" / "rack.yaml").read_text()
                   .replace("exporter: exporter.yaml", f"exporter: {ROOT}/labgrid/exporter.yaml")
                   .replace("places: places.yaml", f"places: {ROOT}/labgrid/places.yaml")
                   .replace("idle_power_off_s: 120", "idle_power_off_s: 0"))
    d = tmp_path / "lab"
    st = rack_up(d, hosts=2, config=cfg)
    prefix = st["netns_prefix"]
    hosts = st["hosts"]
    rtlab = Path(sys.executable).parent / "rtlab"
    try:
        exp = next(h for h in ("exp1", "exp2") if "rk356x0" in hosts[h]["boards"])
        assert exp == "exp1"  # the page's exporter host
        twin = json.loads((d / exp / "rack.json").read_text())
        board = twin["boards"]["rk356x0"]
        values = {"BOARD": "twin-rk356x", "COORD": hosts["coord"]["address"], "EXP": hosts[exp]["address"],
                  "TWIN_PDU": twin["pdu"], "TWIN_OUTLET": str(board["outlet"]), "TWIN_UART": board["tty"],
                  "TWIN_TFTP": str(d / exp / "boards" / "rk356x0" / "tftp") + "/"}
        env = {**os.environ, **values, "PYTHONUNBUFFERED": "1"}
        env.pop("CI", None)

        def on(host: str, body: str, timeout: float = 600) -> subprocess.CompletedProcess:
            script = host_script(tmp_path / "hosts" / host, body, stand_in)
            return subprocess.run([str(rtlab), "rack", "exec", "--dir", str(d), host, "--", "unshare", "--mount",
                                   "--propagation", "private", "bash", "-c", script], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=timeout)

        outputs = []
        for names, body in runs:
            for host in names:
                r = on(host, body)
                outputs.append((host, body, r.stdout + r.stderr))
                assert r.returncode == 0, f"on {host}:\n{body}\n--> {r.returncode}\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
        said = "\n".join(o for _, _, o in outputs)
        assert "place rk3568-1: declared on" in said and "the lab's store answers" in said, said[-3000:]
        assert "twin-rk356x" in said and "ok    budgets:" in said, said[-3000:]
        # the units ran on their hosts: the page's coordinator and exporter, the lab's store
        logs = {p.name: p.read_text() for p in (tmp_path / "hosts").glob("*/units/*.log")}
        assert "--listen [::]:20408" in logs["labgrid-coordinator.service.log"]
        assert f"--name lab1 --hostname {values['EXP']}" in logs["labgrid-exporter@lab1.service.log"]

        # the GitLab job: the test job of the pipeline the page generated, on runner1
        up = tmp_path / "hosts" / "runner1" / "opt-up"
        proj = tmp_path / "project"
        proj.mkdir()
        ci = yaml.safe_load((up / ".gitlab-ci.yml").read_text())
        assert ci["variables"]["RTLAB_CAMPAIGN"] == "lab"
        assert ci["test"]["parallel"]["matrix"] == [{"BOARD": "twin-rk356x", "VARIANT": ["rt", "rt-iso"]}]
        (proj / ".gitlab-ci.yml").write_text((up / ".gitlab-ci.yml").read_text())
        for args in (["init", "-q", "-b", "main"], ["add", "."],
                     ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lab"]):
            subprocess.run(["git", "-C", str(proj), *args], check=True)
        job = f"""cd {proj}
GCL_IGNORE_PREDEFINED_VARS=CI_PIPELINE_SOURCE {GCL} --force-shell-executor --no-color \\
  --variable CI_PIPELINE_SOURCE=web --variable RTLAB_HOME=/opt/rtlab \\
  --variable LG_COORDINATOR="$COORD:20408" --variable RTLAB_PUBLISH=0 \\
  --job 'test: [twin-rk356x,rt]'"""
        r = on("runner1", job, timeout=3600)
        log = next((proj / ".gitlab-ci-local" / "output").glob("test*.log")).read_text()
        assert "rtlab run exit 0" in log, r.stdout[-3000:] + r.stderr[-2000:] + log[-4000:]
        (run_json,) = [p for p in (proj / "results").glob("twin-rk356x/rt/*/run.json") if "latest" not in p.parts]
        run = json.loads(run_json.read_text())
        (j,) = run["jobs"]
        assert (j["board"], j["variant"], j["verdict"]) == ("twin-rk356x", "rt", "pass"), j
        spec = json.loads((run_json.parent / "twin-rk356x" / "rt" / "job-spec.json").read_text())
        assert spec["place"] == "rk3568-1", spec  # the page's place, on the page's coordinator
        console = (d / exp / "boards" / "rk356x0" / "console.log").read_text(errors="replace")
        assert "TFTP from server" in console and "Linux version" in console
    finally:
        kill_units(tmp_path / "hosts")
        rack_down(d)
        for m in made:
            os.rmdir(m)
    assert leftovers(prefix) == []


def kill_units(hosts: Path) -> None:
    """The units the stand-in started in the background (each in a session
    of its own, working in its host's unit-state directory)."""
    for pid in processes_in_dir(hosts):
        try:
            os.killpg(os.getpgid(pid), signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 20
    while processes_in_dir(hosts) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in processes_in_dir(hosts):
        os.kill(pid, signal.SIGKILL)
