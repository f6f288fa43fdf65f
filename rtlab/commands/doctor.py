"""`rtlab doctor [--board B] [--campaign C]`: is this machine, and this board,
ready for `rtlab run`?

Checks what a new lab trips over before anything boots, each problem with
its fix (docs/adding-a-board.md walks through them):

* set-up: the checkout's set-up stamps, the board images of every arch the
  boards need (cached: doctor never builds them);
* the board: its env file loads, as rtlab reads it and as labgrid does;
* its resources: QEMU boards' emulator binary and image files, the local
  board's host tools, labgrid boards' coordinator and a place for the board
  (each network check with a timeout);
* budgets: a budget (or an ``unbudgeted:`` entry) for every suite x variant
  x load the campaign would run on the board;
* kernel variants: which ones the board can boot, and why not the others;
* the store: an InfluxDB that answers, or the local influxd and a spool;
* privileges: the build sandbox (bubblewrap and a user namespace), and for
  a user other than root what the lab grants it narrowly (docs/runner.md):
  SCHED_FIFO and mlockall for the local board, /dev/cpu_dma_latency, the
  boards' serial devices, a delegated cgroup for the job keeper.

Exit 0 when nothing is wrong, 1 when something is (each listed with its
fix), 2 for a bad command line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from .. import ROOT
from ..errors import InputError, RtlabError
from ..targets.boards import Board, find_board

#: seconds any one network check may take (coordinator, store)
NETWORK_TIMEOUT_S = 5.0
#: what a board's env file may name that rtlab fills in per job (rtlab.run.runner.stage_kernel)
_STAGED_VARS = ("LG_RTLAB_KERNEL", "LG_RTLAB_INITRD", "LG_RTLAB_BOOT_ARGS", "LG_RTLAB_DTB_DIR", "LG_PLACE")


@dataclass(frozen=True)
class Finding:
    """One thing doctor looked at: fine, or a problem with the fix for it."""
    area: str
    what: str
    fix: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.fix is None

    def lines(self) -> list[str]:
        out = [f"{'ok  ' if self.ok else 'FAIL'}  {self.area}: {self.what}"]
        if self.fix:
            out.append(f"      fix: {self.fix}")
        return out


def _problem(area: str, what: str, fix: str) -> Finding:
    return Finding(area, what, fix)


# -- set-up --------------------------------------------------------------------

#: what `make runner-setup` grants (docs/runner.md): named in every fix below
RUNNER_SETUP = "as root: make runner-setup RUNNER_USER={user} (docs/runner.md)"

def check_setup(root: Path = ROOT) -> list[Finding]:
    """The checkout's set-up stamps (`make setup`); an install outside a
    checkout (pip install) has none and is not held to them."""
    if not (root / "Makefile").is_file():
        return [Finding("setup", f"rtlab installed outside a checkout ({root}): no set-up stamps to check")]
    found = []
    for stamp, what in ((root / ".cache" / "stamps" / "host", "host packages and foreign architectures"),
                        (root / ".venv" / ".installed", "the .venv with rtlab installed")):
        if stamp.is_file():
            found.append(Finding("setup", f"{what} ({stamp.relative_to(root)})"))
        else:
            found.append(_problem("setup", f"{what} not set up ({stamp.relative_to(root)} missing)",
                                  f"cd {root} && make setup"))
    return found


def check_images(arches: list[str], lookup: Optional[Callable] = None) -> tuple[dict, list[Finding]]:
    """The cached board images per arch (never built here)."""
    from ..images import ImageError, cached_images
    from ..suites.rtbench import image_overlays

    def default_lookup(arch):
        return cached_images(arch, overlays=image_overlays(arch))
    lookup = lookup or default_lookup
    images, found = {}, []
    for arch in arches:
        try:
            iset = lookup(arch)
        except (ImageError, RtlabError) as e:
            found.append(_problem("images", f"{arch}: {e}", "make images"))
            continue
        if iset is None:
            found.append(_problem("images", f"{arch}: no board images built for the current inputs "
                                            f"(kernels + initramfs)", f"make images (or rtlab images --arch {arch})"))
        else:
            images[arch] = iset
            found.append(Finding("images", f"{arch}: kernels {', '.join(sorted(iset.kernels))} and initramfs "
                                           f"{iset.initramfs.name}"))
    return images, found


# -- the board -----------------------------------------------------------------

def check_board(name: str) -> tuple[Optional[Board], list[Finding]]:
    """The board's env file found and loaded as rtlab reads it."""
    try:
        board = find_board(name)
    except InputError as e:
        return None, [_problem("board", str(e),
                               "add env/<board>.yaml with target options arch, cpus, isolate_cpu, budget_class, "
                               "kind (docs/adding-a-board.md), or fix the key named")]
    return board, [Finding("board", f"{board.name}: {board.env_file} ({board.kind}, {board.arch}, "
                                    f"{board.cpus} CPUs, budget class {board.budget_class})")]


@contextlib.contextmanager
def _staged_placeholders() -> Iterator[None]:
    """The LG_RTLAB_* a job sets, so labgrid can read the env file's templates."""
    saved = {k: os.environ.get(k) for k in _STAGED_VARS}
    for k in _STAGED_VARS:
        os.environ.setdefault(k, "/nonexistent" if k != "LG_RTLAB_BOOT_ARGS" else "")
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def check_labgrid_env(board: Board) -> list[Finding]:
    """The env file as labgrid loads it: imports, resources and drivers
    instantiate (a misspelt driver or option is found here, not at boot).
    Boards behind a coordinator bind their resources only with a lock:
    their target is checked through the coordinator instead."""
    if board.kind == "remote":
        return []
    from labgrid.environment import Environment

    with _staged_placeholders():
        try:
            env = Environment(config_file=str(board.env_file))
            target = env.get_target("main")
        except Exception as e:  # noqa: BLE001 - labgrid raises many kinds for one bad file
            return [_problem("board", f"{board.env_file.name}: labgrid cannot load it: {type(e).__name__}: {e}",
                             "fix the env file's drivers/resources (labgrid's configuration reference), "
                             "starting from a shipped board such as env/qemu-aarch64.yaml")]
        try:
            drivers = sorted(type(d).__name__ for d in target.drivers)
        finally:
            env.cleanup()
    return [Finding("board", f"{board.env_file.name} loads in labgrid: {', '.join(drivers)}")]


def _env_tools(board: Board) -> dict:
    from labgrid.util.yaml import load as lg_load
    with open(board.env_file) as f:
        data = lg_load(f) or {}
    return dict(data.get("tools") or {})


def check_resources(board: Board, programs: list[str], images: dict,
                    coordinator: Optional[str] = None,
                    places: Optional[Callable[[str], dict]] = None) -> list[Finding]:
    """What the board needs outside its env file, checked cheaply;
    *programs*: what the campaign's suites start on it (argv[0])."""
    found = []
    if board.kind == "qemu":
        tools = _env_tools(board)
        if not tools:
            found.append(_problem("resources", f"{board.name}: its env file names no QEMU binary (tools:)",
                                  "add tools: {qemu_<arch>: qemu-system-<arch>} as env/qemu-aarch64.yaml does"))
        for key, binary in sorted(tools.items()):
            path = binary if os.path.isabs(str(binary)) else shutil.which(str(binary))
            if path and os.access(path, os.X_OK):
                found.append(Finding("resources", f"{board.name}: {key} = {path}"))
            else:
                found.append(_problem("resources", f"{board.name}: {key}: {binary} not found",
                                      "make setup (installs each arch's QEMU package: "
                                      "python3 rtlab/targets/arch.py --host-packages)"))
        iset = images.get(board.arch)
        if iset is not None:
            missing = [str(p) for p in (iset.initramfs, *(k.path for k in iset.kernels.values()))
                       if not Path(p).is_file()]
            if missing:
                found.append(_problem("resources", f"{board.name}: image files missing: {', '.join(missing)}",
                                      f"rtlab images --arch {board.arch} --refresh"))
    elif board.kind == "local":
        # the console's script(1), and the program each suite's command starts
        for tool in ["script", *sorted(set(programs))]:
            path = shutil.which(tool)
            if path:
                found.append(Finding("resources", f"{board.name}: {tool} = {path}"))
            else:
                found.append(_problem("resources", f"{board.name}: {tool} not found (the local board runs it "
                                                   f"on this machine)", "make setup (env/apt-packages.txt, "
                                                   "make rtbench)"))
    else:
        found.extend(_check_place(board, coordinator, places))
    return found


def _coordinator_places(address: str) -> dict:
    from ..lab.coordinator import Coordinator

    with Coordinator(address, timeout=NETWORK_TIMEOUT_S) as c:
        c.wait_ready(NETWORK_TIMEOUT_S)
        return c.places()


def _check_place(board: Board, coordinator: Optional[str], places: Optional[Callable[[str], dict]]) -> list:
    if coordinator is None:
        from ..rack.state import coordinator_address
        coordinator = coordinator_address()
    if not coordinator:
        return [_problem("resources", f"{board.name}: a labgrid board and no coordinator known",
                         "set LG_COORDINATOR=host:port (a lab's), or start the virtual rack: rtlab rack up")]
    try:
        known = (places or _coordinator_places)(coordinator)
    except Exception as e:  # noqa: BLE001 - gRPC and socket errors alike: unreachable
        return [_problem("resources", f"{board.name}: coordinator {coordinator} not reachable: {e}",
                         "start labgrid-coordinator there (docs/lab.md), or fix LG_COORDINATOR")]
    tagged = sorted(n for n, p in known.items() if p.tags.get("board") == board.name)
    if not tagged:
        return [_problem("resources", f"{board.name}: coordinator {coordinator} has no place tagged "
                                      f"board={board.name}",
                         f"add a place matching its exporter group, tagged board={board.name} "
                         f"(labgrid/lab/places.yaml; docs/adding-a-board.md)")]
    return [Finding("resources", f"{board.name}: coordinator {coordinator}, places {', '.join(tagged)}")]


# -- what the campaign would run -----------------------------------------------

def _serial_ports(board: Board) -> list[str]:
    """Device paths of the board's local serial resources (RawSerialPort, USBSerialPort with a port)."""
    from labgrid.util.yaml import load as lg_load
    try:
        with open(board.env_file) as f:
            data = lg_load(f) or {}
    except (OSError, ValueError):
        return []
    out = []
    for target in (data.get("targets") or {}).values():
        res = (target or {}).get("resources") or {}
        items = res.items() if isinstance(res, dict) else ((k, v) for r in res for k, v in dict(r).items())
        for kind, opts in items:
            port = (opts or {}).get("port") if isinstance(opts, dict) else None
            if kind in ("RawSerialPort", "USBSerialPort") and isinstance(port, str) and port.startswith("/dev/"):
                out.append(port)
    return out


CAP_IPC_LOCK = 14


def _has_cap(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _can_fifo(prio: int) -> bool:
    """May this user run a thread SCHED_FIFO at *prio* (tried, in a child)?"""
    import subprocess
    r = subprocess.run([sys.executable, "-c", "import os; os.sched_setscheduler(0, os.SCHED_FIFO, "
                        f"os.sched_param({int(prio)}))"], capture_output=True, timeout=30)
    return r.returncode == 0


def check_privileges(boards: list[Board], jobs, *, euid: Optional[int] = None,
                     user: Optional[str] = None) -> list[Finding]:
    """The build sandbox, and what a user other than root needs for these
    boards' jobs, each missing grant with the fix that grants it."""
    import resource
    import pwd

    from ..kernel.sandbox import probe
    from ..run.joblife import job_cgroup

    euid = os.geteuid() if euid is None else euid
    user = user or pwd.getpwuid(euid).pw_name
    setup = RUNNER_SETUP.format(user=user)
    found = []
    why = probe()
    found.append(Finding("privileges", "kernel trees build confined (bubblewrap, a user namespace)") if why is None
                 else _problem("privileges", f"kernel trees cannot be built: {why}",
                               "apt-get install bubblewrap (make setup), and allow user namespaces"))
    if euid == 0:
        found.append(Finding("privileges", "running as root: the lab's CI jobs run as a user of their own "
                                           "(docs/runner.md)"))
        return found
    local = [b for b in boards if b.kind == "local"]
    if local:
        prio = max((int(r.params.get("priority", 0)) for j in jobs if j.board.kind == "local" for r in j.suites
                    if isinstance(r.params.get("priority", 0), int)), default=99) or 99
        if _can_fifo(prio):
            found.append(Finding("privileges", f"SCHED_FIFO up to priority {prio}"))
        else:
            found.append(_problem("privileges", f"the local board's tools run SCHED_FIFO {prio}, and {user} may "
                                                f"not (neither CAP_SYS_NICE nor RLIMIT_RTPRIO {prio})",
                                  f"{setup}; start the runner with CAP_SYS_NICE and CAP_IPC_LOCK "
                                  f"(env/systemd/gitlab-runner-rtlab.service, or env/runner-exec.sh)"))
        soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        if soft == resource.RLIM_INFINITY or _has_cap(CAP_IPC_LOCK):
            found.append(Finding("privileges", "memory locking (cyclictest -m)"))
        else:
            found.append(_problem("privileges", f"cyclictest -m locks its memory, and {user} may lock "
                                                f"{soft} bytes (RLIMIT_MEMLOCK, no CAP_IPC_LOCK)",
                                  f"{setup}; start the runner with CAP_IPC_LOCK "
                                  f"(env/systemd/gitlab-runner-rtlab.service, or env/runner-exec.sh)"))
        dma = "/dev/cpu_dma_latency"
        if os.path.exists(dma) and not os.access(dma, os.W_OK):
            found.append(_problem("privileges", f"{dma} is not writable by {user}: cyclictest cannot hold the "
                                                f"CPUs out of deep idle states (it goes on without)",
                                  f"{setup} (a udev rule: KERNEL==\"cpu_dma_latency\", GROUP=\"{user}\", "
                                  f"MODE=\"0660\")"))
    for board in boards:
        for port in _serial_ports(board):
            if not os.path.exists(port):
                continue  # not plugged in here: the board check says so where it matters
            if os.access(port, os.R_OK | os.W_OK):
                found.append(Finding("privileges", f"{board.name}: serial {port} readable and writable"))
            else:
                found.append(_problem("privileges", f"{board.name}: {user} cannot open its serial port {port}",
                                      f"{setup} (adds {user} to the port's group, dialout)"))
    token = f"doctor-{os.getpid()}"
    cg = job_cgroup(token)
    if cg is not None:
        with contextlib.suppress(OSError):
            os.rmdir(cg)
        found.append(Finding("privileges", "the job keeper can make a cgroup per job (cgroup v2, delegated)"))
    else:
        found.append(_problem("privileges", f"{user} cannot make a cgroup in its own cgroup: the job keeper falls "
                                            f"back to watching processes, and a job's double-forked process can "
                                            f"escape it",
                              f"{setup} (a cgroup v2 subtree owned by {user}); start the runner in it "
                              f"(systemd: Delegate=yes, env/systemd/gitlab-runner-rtlab.service; "
                              f"otherwise env/runner-exec.sh)"))
    return found


def check_budgets(campaign, jobs) -> list[Finding]:
    from ..plan.budgets import load_budgets
    try:
        budgets = load_budgets(campaign.budgets)
    except InputError as e:
        return [_problem("budgets", str(e), "fix the key named (docs/reference/formats.md)")]
    missing = budgets.uncovered(jobs)
    if missing:
        return [_problem("budgets", f"{budgets.path.name}: {m}",
                         f"add the entry to {budgets.path} (docs/adding-a-board.md, step budgets)") for m in missing]
    return [Finding("budgets", f"{budgets.path.name} covers every suite x variant x load of campaign "
                               f"{campaign.name} on {', '.join(sorted({j.board.name for j in jobs}))}")]


def check_variants(board: Board, jobs, images: dict) -> list[Finding]:
    """Which kernel variants the board can boot here (rtlab.run.runner.unavailable)."""
    from ..run.runner import board_cannot, unavailable

    mine = [j for j in jobs if j.board.name == board.name]
    if not board.fixed_kernel and board.arch not in images:
        return []  # the images finding says what to do
    bootable, built, na = [], [], []
    for job in mine:
        why = unavailable(job, images)
        if why is None:
            bootable.append(job.variant.name)
        elif (board_cannot(job) is None and board.boots_built_kernels and not board.built_kernels_unusable
              and job.variant.fragments_for(board.arch)):
            built.append(job.variant.name)  # rtlab.run.runner.build_kernels builds it at the first run
        else:
            na.append(f"{job.variant.name} ({why})")
    found = []
    if bootable or built:
        found.append(Finding("variants", f"{board.name} boots {', '.join(bootable) or 'none prebuilt'}"
                             + (f"; built from the pinned linux-source at the first run: {', '.join(built)}"
                                if built else "")))
    if na:
        found.append(Finding("variants", f"{board.name}: not available (reported, never judged): {'; '.join(na)}"))
    if mine and not (bootable or built):
        found.append(_problem("variants", f"{board.name} can boot none of the campaign's variants",
                              "check the board's kernels (env/images.yaml) and options (isolate_cpu), "
                              "or run a campaign with variants it has"))
    return found


# -- the store -----------------------------------------------------------------

def check_store(config_file: Optional[str] = None, env: Optional[dict] = None) -> list[Finding]:
    from ..store.base import StoreError
    from ..store.config import StoreConfig
    from ..store.influx import store_from_config
    from ..store.spool import default_spool_dir

    try:
        cfg = StoreConfig.load(config_file, env=env)
    except InputError as e:
        return [_problem("store", str(e), "fix the store configuration (docs/reference/ci-variables.md)")]
    spool = Path(cfg.spool_dir).expanduser() if cfg.spool_dir else default_spool_dir()
    found = []
    if cfg.configured:
        try:
            version = store_from_config(dataclasses.replace(cfg, timeout_s=NETWORK_TIMEOUT_S)).ping()
            found.append(Finding("store", f"{cfg.describe()}: answers ({version or 'no version header'})"))
        except (StoreError, OSError) as e:
            found.append(_problem("store", f"{cfg.describe()}: does not answer: {cfg.redact(str(e))}",
                                  "start the server or fix RTLAB_INFLUX_URL; meanwhile rtlab run spools "
                                  f"its points in {spool} (rtlab publish --replay sends them)"))
    else:
        binary = shutil.which("influxd") or ("/usr/bin/influxd" if os.access("/usr/bin/influxd", os.X_OK) else None)
        if binary:
            found.append(Finding("store", f"no store configured: rtlab starts the local influxd ({binary})"))
        else:
            found.append(_problem("store", "no store configured and no influxd to start locally",
                                  "make setup (installs influxdb), or set RTLAB_INFLUX_URL to a lab's InfluxDB"))
    probe = spool
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if os.access(probe, os.W_OK):
        found.append(Finding("store", f"spool for points the store cannot take: {spool}"))
    else:
        found.append(_problem("store", f"spool directory {spool} is not writable",
                              "set RTLAB_STATE_DIR to a writable directory"))
    return found


# -- the command ---------------------------------------------------------------

def register(sub):
    p = sub.add_parser("doctor", help="check this machine and a board as a new lab needs them, "
                                      "each problem with its fix; exit 0 ok, 1 problems")
    p.add_argument("--board", action="append", metavar="B",
                   help="the board to check (repeatable; default: every board of the campaign)")
    p.add_argument("--campaign", metavar="C",
                   help="campaign whose suites x variants the board must be ready for (default: default)")
    p.add_argument("--store-config", metavar="FILE", help="store configuration file (as rtlab publish)")
    p.add_argument("--no-store", action="store_true", help="skip the store check (a lab that does not publish)")
    p.set_defaults(func=run)


def diagnose(boards: Optional[list[str]], campaign_path: Optional[str], *, store: bool = True,
             store_config: Optional[str] = None) -> list[Finding]:
    from ..plan.campaign import load_campaign
    from ..suites import SUITES

    found = check_setup()
    loaded: list[Board] = []
    for name in boards or []:
        board, f = check_board(name)
        found += f
        if board is not None:
            loaded.append(board)
    campaign = None
    try:
        campaign = load_campaign(Path(campaign_path) if campaign_path else None,
                                 boards=[b.name for b in loaded] if boards else None)
    except InputError as e:
        found.append(_problem("campaign", str(e), "fix the key named (docs/reference/formats.md)"))
    if campaign is not None and not boards:
        loaded = campaign.boards
        found += [Finding("board", f"{b.name}: {b.env_file} ({b.kind}, budget class {b.budget_class})")
                  for b in loaded]
    images, f = check_images(sorted({b.arch for b in loaded if not b.fixed_kernel}))
    found += f
    jobs = campaign.jobs() if campaign is not None else []
    for board in loaded:
        programs = [SUITES[r.suite].command(r, board)[0] for j in jobs if j.board.name == board.name
                    for r in j.suites]
        found += check_labgrid_env(board)
        found += check_resources(board, programs, images)
        found += check_variants(board, jobs, images)
    if campaign is not None and jobs:
        found += check_budgets(campaign, jobs)
    found += check_privileges(loaded, jobs)
    if store:
        found += check_store(store_config)
    return found


def run(args) -> int:
    found = diagnose(args.board, args.campaign, store=not args.no_store, store_config=args.store_config)
    for f in found:
        for line in f.lines():
            print(line)
    problems = [f for f in found if not f.ok]
    print(f"doctor: {len(problems)} problem{'s' * (len(problems) != 1)}"
          + (" (each with its fix above)" if problems else ": ready for rtlab run"),
          file=sys.stderr if problems else sys.stdout)
    return 1 if problems else 0


__all__ = ["Finding", "check_board", "check_budgets", "check_images", "check_labgrid_env", "check_privileges",
           "check_resources", "check_setup", "check_store", "check_variants", "diagnose"]
