"""Running LAVA jobs: Debian's real dispatcher (`lava-run`) on this machine,
or a LAVA server through `lavacli`.

`lava-run` (lava-dispatcher 2023.01) runs one job without a server: as root,
with /usr/bin/python3, scratch space in /var/lib/lava/dispatcher/tmp/<job-id>
(so concurrent runs need distinct ids: :func:`allocate_job_id` hands them out
under a lock), log on stderr, one YAML record per line. `rtlab lava run`
keeps that stream verbatim as ``lava-run.log`` in a record directory (see
:mod:`.ingest`) and prints progress from it as it arrives.

`lavacli` (Debian's package, the CLI of a LAVA server's XML-RPC API) is
called as a command, not imported: `rtlab lava submit` and `rtlab lava fetch`
build its command lines (:func:`lavacli_cmd`) and write the same record
directories from its output. There is no LAVA server here: that path is
tested with a stand-in `lavacli` that checks the arguments and answers with
the server's export format.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from .. import ROOT
from ..errors import InputError, RtlabError
from .logs import _load_line
from .render import load_job

LAVA_RUN = os.environ.get("RTLAB_LAVA_RUN", "lava-run")
LAVACLI = os.environ.get("RTLAB_LAVACLI", "lavacli")
SCRATCH = Path("/var/lib/lava/dispatcher/tmp")
ID_LOCKS = Path(os.environ.get("RTLAB_LAVA_ID_DIR", "/tmp/rtlab-lava-ids"))
#: lava-run job ids rtlab uses: far from a LAVA server's own (small) ids
ID_BASE = 900000
ID_RANGE = 90000


class JobIdLease:
    """A job id no other rtlab lava-run uses while this lease is held."""

    def __init__(self, job_id: int, fd: int, path: Path):
        self.job_id, self._fd, self._path = job_id, fd, path

    def release(self) -> None:
        if self._fd >= 0:
            try:
                self._path.unlink()
            except OSError:
                pass
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def allocate_job_id(start: Optional[int] = None, lock_dir: Path = ID_LOCKS,
                    scratch: Path = SCRATCH) -> JobIdLease:
    """An id whose lock we hold (flock, released if we die) and whose scratch
    directory does not exist (a lava-run of someone else, or a leftover)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    first = start if start is not None else ID_BASE + (os.getpid() * 7919) % ID_RANGE
    for i in range(ID_RANGE):
        job_id = ID_BASE + (first - ID_BASE + i) % ID_RANGE
        path = lock_dir / f"{job_id}.lock"
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if (scratch / str(job_id)).exists():
            os.close(fd)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        return JobIdLease(job_id, fd, path)
    raise RtlabError(f"no free lava-run job id in {ID_BASE}..{ID_BASE + ID_RANGE - 1}")


def device_for(definition: dict, spec: dict, device: Optional[Path] = None) -> Path:
    """The device dictionary lava-run needs for this job."""
    if device is not None:
        return Path(device)
    path = ROOT / spec["lava"]["device"]
    if not path.is_file():
        raise InputError(path, f"no device dictionary for LAVA board {spec['lava']['board']}")
    return path


def _dispatcher_args(spec: dict) -> list[str]:
    """lava-run --dispatcher for boards that need one (e.g. their TFTP server
    address as the board sees it)."""
    rel = spec["lava"].get("dispatcher")
    return ["--dispatcher", str(ROOT / rel)] if rel else []


_CONTEXT_VAR = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def prepare_device(device: Path, definition: dict, dest: Path) -> Path:
    """A LAVA server renders the device dictionary with the job's context;
    rtlab's hand-rendered dictionaries keep `{{ var }}` where that happens
    (e.g. the U-Boot bootargs' extra_kernel_args): filled here likewise."""
    text = Path(device).read_text()
    if not _CONTEXT_VAR.search(text):
        return Path(device)
    context = definition.get("context") or {}
    missing = sorted({m.group(1) for m in _CONTEXT_VAR.finditer(text)} - set(context))
    if missing:
        raise InputError(device, f"needs job context {', '.join(missing)}, the job has none")
    dest.write_text(_CONTEXT_VAR.sub(lambda m: str(context[m.group(1)]), text))
    return dest


@dataclass
class RunOutcome:
    record: Path
    job_id: int
    returncode: int
    wall_s: float
    health: str


def _progress_line(rec: dict, verbose: bool) -> Optional[str]:
    lvl, msg = rec.get("lvl"), rec.get("msg")
    if lvl == "results" and isinstance(msg, dict):
        if msg.get("definition") == "lava":
            if msg.get("case") == "job" or msg.get("result") != "pass":
                extra = f" ({msg.get('error_type')}: {msg.get('error_msg')})" if msg.get("error_msg") else ""
                return f"lava {msg.get('case')}: {msg.get('result')}{extra}"
            return None
        m = msg.get("measurement")
        num = (str(int(m)) if float(m).is_integer() else f"{m:g}") if isinstance(m, (int, float)) else ""
        val = f" {num} {msg.get('units', '')}".rstrip() if num else ""
        return f"{msg.get('definition')}/{msg.get('case')}: {msg.get('result')}{val}"
    if lvl == "info" and isinstance(msg, str) and msg.startswith("start:"):
        parts = msg.split()
        if len(parts) > 1 and "." not in parts[1]:  # top-level actions only
            return msg
    if lvl in ("error", "exception"):
        return f"error: {msg}"
    if verbose and lvl == "target":
        return f"| {msg}"
    return None


def run_job(job_file: Path, record_dir: Path, *, device: Optional[Path] = None,
            progress: Callable[[str], None] = print, verbose: bool = False,
            job_id: Optional[int] = None, timeout_s: Optional[float] = None) -> RunOutcome:
    """Run one rendered job with lava-run; the record directory gets
    job.yaml, lava-run.log (the stderr stream, verbatim), job.json and the
    output dir."""
    if os.geteuid() != 0:
        raise RtlabError("lava-run must run as root (it mounts, loops and owns "
                         "/var/lib/lava/dispatcher); run rtlab lava run as root")
    if shutil.which(LAVA_RUN) is None:
        raise RtlabError(f"{LAVA_RUN} not found: apt-get install --no-install-recommends lava-dispatcher")
    definition, spec = load_job(job_file)
    record_dir = Path(record_dir)
    if record_dir.exists():
        shutil.rmtree(record_dir)
    (record_dir / "output").mkdir(parents=True)
    shutil.copyfile(job_file, record_dir / "job.yaml")
    dev = prepare_device(device_for(definition, spec, device), definition, record_dir / "device.yaml")
    if dev != record_dir / "device.yaml":
        shutil.copyfile(dev, record_dir / "device.yaml")
    job_timeout = definition.get("timeouts", {}).get("job", {})
    limit = timeout_s or (job_timeout.get("minutes", 0) * 60 + job_timeout.get("seconds", 0)
                          + job_timeout.get("hours", 0) * 3600) + 120
    lease = allocate_job_id(job_id) if job_id is None else None
    jid = lease.job_id if lease else int(job_id)
    label = f"{spec['board']['name']}/{spec['variant']['name']}/{spec['suite']['id']}"
    cmd = [LAVA_RUN, "--job-id", str(jid), "--output-dir", str(record_dir / "output"),
           "--device", str(record_dir / "device.yaml"), *_dispatcher_args(spec), str(record_dir / "job.yaml")]
    t0 = time.monotonic()
    health = "Unknown"
    try:
        progress(f"{label}: lava-run job {jid} ({' '.join(cmd[:1] + cmd[1:3])} ...)")
        with open(record_dir / "lava-run.log", "w") as log, open(record_dir / "lava-run.stdout", "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, errors="replace",
                                    start_new_session=True)
            killer = threading.Timer(limit, _kill_group, (proc,))
            killer.start()
            try:
                for line in proc.stderr:
                    log.write(line)
                    log.flush()
                    rec = _load_line(line)
                    if rec is None:
                        continue
                    if rec.get("lvl") == "results" and isinstance(rec.get("msg"), dict) \
                            and rec["msg"].get("definition") == "lava" and rec["msg"].get("case") == "job":
                        health = "Complete" if rec["msg"].get("result") == "pass" else "Incomplete"
                    shown = _progress_line(rec, verbose)
                    if shown:
                        progress(f"{label}: {shown}")
                rc = proc.wait()
            except BaseException:
                # interrupted: lava-run and the QEMU it started go with us
                _kill_group(proc)
                proc.wait()
                raise
            finally:
                killer.cancel()
    finally:
        if lease:
            lease.release()
    wall = round(time.monotonic() - t0, 3)
    if health == "Unknown":
        health = "Incomplete"
    (record_dir / "job.json").write_text(json.dumps({
        "job_id": jid, "runner": "lava-run", "returncode": rc, "wall_s": wall, "device": str(dev),
        "killed_after_s": limit if rc == -signal.SIGKILL else None,
    }, indent=2) + "\n")
    progress(f"{label}: {health} in {wall:.1f} s (lava-run exit {rc})")
    return RunOutcome(record_dir, jid, rc, wall, health)


def _kill_group(proc: subprocess.Popen) -> None:
    """lava-run runs in a session of its own: signal that whole group."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def validate_pipeline(job_file: Path, *, device: Optional[Path] = None, workdir: Path) -> tuple[bool, str]:
    """`lava-run --validate`: LAVA builds and validates the whole pipeline
    for the device (no download, no boot). Returns (ok, log tail)."""
    definition, spec = load_job(job_file)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    dev = prepare_device(device_for(definition, spec, device), definition, workdir / "device.yaml")
    with allocate_job_id() as lease:
        res = subprocess.run([LAVA_RUN, "--validate", "--job-id", str(lease.job_id), "--output-dir",
                              str(workdir / "output"), "--device", str(dev), *_dispatcher_args(spec),
                              str(job_file)],
                             capture_output=True, text=True, timeout=600)
        # --validate prepares the TFTP tree of the job and leaves it behind
        leftover = tftp_root() / str(lease.job_id)
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
    (workdir / "lava-run.log").write_text(res.stderr)
    errors = [line for line in res.stderr.splitlines() if '"lvl": "error"' in line or '"lvl": "exception"' in line]
    return res.returncode == 0 and not errors, "\n".join((errors or res.stderr.splitlines())[-10:])


def tftp_root() -> Path:
    """lava-dispatcher's TFTP root: TFTP_DIRECTORY of /etc/default/tftpd-hpa."""
    try:
        for line in Path("/etc/default/tftpd-hpa").read_text().splitlines():
            if line.strip().startswith("TFTP_DIRECTORY="):
                return Path(line.split("=", 1)[1].strip().strip('"'))
    except OSError:
        pass
    return Path("/srv/tftp")


# --------------------------------------------------------------------------
# lavacli: a LAVA server
# --------------------------------------------------------------------------

def lavacli_cmd(*args: str, identity: Optional[str] = None, uri: Optional[str] = None) -> list[str]:
    """lavacli's command line: identity/URI options come before the command."""
    cmd = [LAVACLI]
    if uri:
        cmd += ["--uri", uri]
    elif identity:
        cmd += ["--identity", identity]
    return cmd + list(args)


def _lavacli(args: Sequence[str], *, identity=None, uri=None, timeout=600) -> str:
    cmd = lavacli_cmd(*args, identity=identity, uri=uri)
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise RtlabError(f"{LAVACLI} not found: apt-get install lavacli (or pip install lavacli)") from None
    if res.returncode != 0:
        raise RtlabError(f"`{' '.join(cmd)}` failed ({res.returncode}): "
                         f"{(res.stderr or res.stdout).strip()[-500:]}")
    return res.stdout


def submit(job_files: Sequence[Path], *, identity=None, uri=None) -> dict[str, str]:
    """Submit each job; {file: job id}. `lavacli jobs submit` prints the id
    (a multinode job prints one per role: the first is kept)."""
    ids = {}
    for f in job_files:
        load_job(f)  # only rtlab jobs: ingest needs their spec
        out = _lavacli(["jobs", "submit", str(f)], identity=identity, uri=uri)
        # lavacli prints the id, or "Unable to submit FILE: why" and still exits 0
        m = re.search(r"^(?:\S*/)?(\d+(?:\.\d+)?)\s*$", out, re.MULTILINE)
        if "Unable to submit" in out or not m:
            raise RtlabError(f"lavacli jobs submit {f}: no job id in its output: {out.strip()[:200]}")
        ids[str(f)] = m.group(1)
    return ids


#: LAVA job states that are over (a server's `jobs show` "state")
FINISHED = "Finished"


def wait_allowance(definition: dict, queue_s: int = 1800) -> int:
    """How long to wait for a submitted job: its own job timeout plus time
    in the queue (a health check, other jobs on the device)."""
    t = (definition.get("timeouts") or {}).get("job") or {}
    job_s = int(t.get("seconds", 0)) + 60 * int(t.get("minutes", 0)) + 3600 * int(t.get("hours", 0))
    return (job_s or 3600) + queue_s


def wait(job_id: str, *, identity=None, uri=None, timeout_s: int = 0, polling: int = 10,
         progress=lambda s: None) -> dict:
    """Poll `lavacli jobs show` until the job is Finished (whatever its
    health: Complete, Incomplete or Canceled; ingest judges that); the last
    answer. Not `lavacli jobs wait`: it holds one XML-RPC call per poll and
    gives up on the first dropped connection (measured: a loaded server's
    gunicorn dropped one and the wait ended while the job ran). A few
    failed polls in a row are tolerated; the deadline is one, overall."""
    deadline = time.monotonic() + (timeout_s or 86400)
    failures, last_state = 0, ""
    while True:
        try:
            show = json.loads(_lavacli(["jobs", "show", str(job_id), "--json"], identity=identity, uri=uri,
                                       timeout=120))
            failures = 0
        except (RtlabError, ValueError, subprocess.TimeoutExpired) as e:
            failures += 1
            if failures >= 5:
                raise RtlabError(f"LAVA job {job_id}: the server did not answer 5 polls in a row: {e}") from None
            show = {}
        state = show.get("state", "")
        if state and state != last_state:
            where = f" on {show['device']}" if show.get("device") else ""
            progress(f"LAVA job {job_id}: {state}{where}")
            last_state = state
        if state == FINISHED:
            return show
        if time.monotonic() >= deadline:
            raise RtlabError(f"LAVA job {job_id}: still {state or 'unknown'} after {timeout_s} s "
                             f"(no healthy device? `lavacli devices list`)")
        time.sleep(polling)


def fetch(job_id: str, record_dir: Path, *, identity=None, uri=None) -> Path:
    """A finished server job -> a record directory (job.yaml, log.yaml,
    results.yaml, job.json) that `rtlab lava ingest` reads."""
    record_dir = Path(record_dir)
    record_dir.mkdir(parents=True, exist_ok=True)
    show = json.loads(_lavacli(["jobs", "show", str(job_id), "--json"], identity=identity, uri=uri))
    if show.get("state") not in (None, "Finished"):
        raise RtlabError(f"LAVA job {job_id} is {show.get('state')}, not finished: wait for it first")
    (record_dir / "job.json").write_text(json.dumps(show, indent=2, default=str) + "\n")
    (record_dir / "job.yaml").write_text(_lavacli(["jobs", "definition", str(job_id)], identity=identity, uri=uri))
    (record_dir / "results.yaml").write_text(_lavacli(["results", str(job_id), "--yaml"], identity=identity, uri=uri))
    (record_dir / "log.yaml").write_text(_lavacli(["jobs", "logs", str(job_id), "--raw", "--no-follow"], identity=identity, uri=uri))
    return record_dir


def record_name(spec: dict) -> str:
    """Where a job's record goes under an output directory."""
    return f"{spec['board']['name']}/{spec['variant']['name']}/{spec['suite']['id']}"
