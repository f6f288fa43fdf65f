"""Campaign -> LAVA job definitions, one per board × variant × suite × load.

A job boots the board's kernel for the variant (the same kernel, initramfs
and command line the labgrid path stages: :func:`rtlab.run.runner.stage_kernel`)
and runs two inline test definitions:

``0_rtlab-boot``
    silences the console like RtlabStrategy does (``dmesg -n 1``), prints
    the output of every command :func:`rtlab.suites.board.read_kernel_facts` runs
    (recorded at render time, replayed through the real function at ingest),
    and cheap on-board checks for LAVA users (kernel release, boot args).
``1_<suite>-<load>``
    runs ``Suite.command(run)`` in the wrapper of
    :func:`rtlab.suites.board.run_tool`, prints the raw outputs byte-exact and
    reports every measurement with ``lava-test-case`` (:mod:`.onboard`);
    under a load, the load's start and end steps bracket the tool
    (:mod:`.loads`: same scripts and health check as the labgrid path).

The job declares the cases it must produce in ``metadata`` (``rtlab.expected``,
and the whole job spec as JSON in ``rtlab.spec``): LAVA 2023.01's schema
rejects ``expected``, and ingest checks them itself.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import yaml

from .. import ROOT
from ..targets.arch import get_or_none
from ..targets.boards import BOARD_WORKDIR, Board
from ..plan.campaign import BUDGETS_DIR, Campaign, Job
from ..core.config import format_cpulist, load_yaml, shown
from ..errors import InputError, RtlabError
from ..core.fsutil import atomic_write, sha256_file
from ..core.rundir import EXIT_CODE, STDERR, STDOUT
from ..images.apt import AptSource
from ..images.build import ensure_images
from ..images.cache import DEFAULT_CACHE, DebCache
from ..images.console import PROMPT_RE
from ..images.imageset import ImageSet
from ..run.runner import BOOT_ALLOWANCE_S, KernelBuildFailed, build_kernels, stage_kernel, unavailable
from ..suites import SUITES, Suite, SuiteRun
from ..suites.board import fact_commands, shell_line
from ..targets.variants import Variant
from . import loads as lava_loads
from . import onboard
from .boards import LavaBoard, load_lava_boards
from .specs import check_spec, lab_relative

FORMAT = 1
#: what a board that cannot run a suite (rtla without the tracer) writes: the reason
NOT_AVAILABLE_TEXT = "not_available.txt"
BOOT_DEFINITION = "rtlab-boot"
#: lava-test-case names of the boot definition
CASE_FACTS = "kernel-facts"
CASE_RELEASE = "kernel-release"
CASE_BOOT_ARGS = "boot-args"

DEPLOY_TIMEOUT_S = 300          # downloads (file:// here, HTTP in a lab) + overlay into the ramdisk
BOOT_TIMEOUT_S = BOOT_ALLOWANCE_S  # power-on to shell prompt, as the labgrid path allows
BOOT_DEFINITION_S = 120         # kernel facts over the console
TRANSFER_ALLOWANCE_S = 120      # raw outputs (base64) and lava-test-case calls
JOB_MARGIN_S = 120              # LAVA's own set-up and tear-down


def _seconds_to_timeout(seconds: float) -> dict[str, int]:
    return {"minutes": max(1, math.ceil(seconds / 60))}


def definition_name(run: SuiteRun) -> str:
    """LAVA definition names allow [-_a-zA-Z0-9.]: "cyclictest@idle" -> "cyclictest-idle"."""
    return re.sub(r"[^-_a-zA-Z0-9.]", "_", f"{run.name}-{run.load}")


def suite_steps(suite: Suite, run: SuiteRun, board: Optional[Board],
                loads: Sequence[lava_loads.LavaLoadPart] = ()) -> list[str]:
    start, stop = lava_loads.start_steps(list(loads)), lava_loads.stop_steps(list(loads), run.id)
    wd = f"{BOARD_WORKDIR}/{run.id}"
    argv = suite.command(run, board=board)
    outputs = [STDOUT, STDERR, *suite.outputs(run), EXIT_CODE]
    tool = onboard.tool_step(argv)
    check = suite.board_check()
    if check:  # a board that cannot run it says why (not_available.txt), never a failure
        outputs.append(NOT_AVAILABLE_TEXT)
        tool = (f"if why=$( {check} ); then {tool}; "
                f"else echo \"$why\" > {NOT_AVAILABLE_TEXT}; echo 0 > {EXIT_CODE}; fi")
    steps = [onboard.load_step(), f"rm -rf {shlex.quote(wd)} && mkdir -p {shlex.quote(wd)} && cd {shlex.quote(wd)}",
             *start, onboard.announce_step(run.id, shell_line(argv)), tool, *stop]
    steps += [f"rtlab_emit {shlex.quote(run.id)} {shlex.quote(f)} {shlex.quote(f)}" for f in outputs]
    steps.append(f"rtlab_exit_case {shlex.quote(suite.tool)}")
    if suite.lava_thread_cases and suite.json_file:
        steps.append(onboard.rt_cases_step(suite.json_file))
    return steps


def suite_cases(suite: Suite, run: SuiteRun) -> list[str]:
    cases = [suite.tool]
    if suite.lava_thread_cases and suite.json_file:
        cases += onboard.rt_case_names(len(run.cpus))
    return cases


def _inline(name: str, description: str, steps: list[str]) -> dict:
    return {
        "from": "inline", "name": name, "path": f"inline/{name}.yaml",
        "repository": {
            "metadata": {"format": "Lava-Test Test Definition 1.0", "name": name,
                         "description": description},
            "run": {"steps": steps},
        },
    }


class Artifacts:
    """Where jobs find kernels, ramdisks and DTBs: file:// URLs of the image
    cache by default (what lava-run on this machine reads), or `base_url`
    + `<arch>/<sha256[:16]>/<name>` with the files linked under *serve_dir*
    (default `<out>/artifacts/`) for a lab to publish over HTTP. Named by
    content: two kernels both called Image (two variants, two commits) never
    take each other's URL, and one directory can serve every job a runner
    renders (CI's RTLAB_ARTIFACTS_DIR)."""

    def __init__(self, out_dir: Path, base_url: Optional[str] = None, serve_dir: Optional[Path] = None):
        self.out_dir = Path(out_dir)
        self.base_url = base_url.rstrip("/") if base_url else None
        self.serve_dir = Path(serve_dir) if serve_dir else self.out_dir / "artifacts"
        self.published: dict[str, str] = {}

    def url(self, path: Path, arch: str, sha256: str = "") -> str:
        path = Path(path).resolve()
        if not self.base_url:
            return path.as_uri()
        rel = f"{arch}/{(sha256 or sha256_file(path))[:16]}/{path.name}"
        dest = self.serve_dir / rel
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)
            try:
                os.link(path, tmp)
            except OSError:  # another file system: the web server follows the link
                tmp.symlink_to(path)
            os.replace(tmp, dest)  # a render beside this one sees the whole file or none
        self.published[rel] = str(path)
        return f"{self.base_url}/{rel}"


def extract_dtb(images: ImageSet, flavour: str, dtb: str, cache: Optional[Path] = None) -> Path:
    """The DTB `dtb` (e.g. rockchip/rk3568-rock-3a.dtb) from the kernel
    package of `flavour`, extracted once into the LAVA cache."""

    k = images.kernels[flavour]
    cache = Path(cache) if cache else ROOT / ".cache" / "lava" / "dtbs"
    dest = cache / k.release / dtb
    if dest.is_file():
        return dest
    pkg = next((p for p in images.packages if p.name == k.package and p.version == k.version), None)
    if pkg is None:
        raise RtlabError(f"{k.package} {k.version} is not in the image manifest: cannot find {dtb}")
    deb = DebCache(DEFAULT_CACHE / "debs", AptSource()).fetch([pkg], lambda m: None, "lava")[pkg.name]
    member = f"./usr/lib/linux-image-{k.release}/{dtb}"
    res = subprocess.run(f"dpkg-deb --fsys-tarfile {shlex.quote(str(deb))} | tar -xO {shlex.quote(member)}",
                         shell=True, capture_output=True)
    if res.returncode != 0 or not res.stdout:
        raise RtlabError(f"{deb.name} has no {member}: {res.stderr.decode(errors='replace').strip()}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(dest, res.stdout)
    return dest


@dataclasses.dataclass
class RenderedJob:
    file: Path
    definition: dict
    spec: dict

    def index_entry(self, out_dir: Path) -> dict:
        s = self.spec
        return {"file": str(self.file.relative_to(out_dir)), "board": s["board"]["name"],
                "variant": s["variant"]["name"], "suite": s["suite"]["id"],
                "device_type": s["lava"]["device_type"], "boot": s["lava"]["boot"],
                "device": s["lava"]["device"], "expected": s["expected"]}


def render_job(lb: LavaBoard, variant: Variant, run: SuiteRun, images: ImageSet, *,
               campaign: Campaign, artifacts: Artifacts,
               loads: Union[list[lava_loads.LavaLoadPart], str, None] = None,
               commit: str = "", built: Optional[dict] = None) -> tuple[dict, dict]:
    """One LAVA job definition and its rtlab spec (also in its metadata);
    *loads* is the run's lava_loads.plan when the caller made it already;
    *built*: kernels built from source (rtlab.run.runner.build_kernels)."""
    suite = SUITES[run.suite]
    if loads is None:
        loads = lava_loads.plan(lb, variant, run)
    if isinstance(loads, str):
        raise InputError(campaign.path, f"{run.id} on {lb.name}: {loads}")
    board = lb.board
    env, kernel = stage_kernel(Job(board=board, variant=variant, suites=(run,)), {board.arch: images}, built)
    boot_args = env["LG_RTLAB_BOOT_ARGS"]
    boot_def, suite_def = f"0_{BOOT_DEFINITION}", f"1_{definition_name(run)}"
    command = shell_line(suite.command(run, board=board))
    facts = fact_commands()
    boot_steps, boot_cases = _boot_checks(facts, kernel, boot_args)
    expected = ([f"{boot_def}/{c}" for c in boot_cases]
                + [f"{suite_def}/{c}" for c in [*lava_loads.cases(loads), *suite_cases(suite, run)]])
    test_s, job_s = _test_and_job_seconds(suite, run, loads)
    context, deploy, boot, kernel_args = _deploy_and_boot(lb, variant, images, kernel, boot_args, artifacts)
    spec = {
        "format": FORMAT,
        "campaign": campaign.name,
        "campaign_file": lab_relative(campaign.path, ROOT),
        "budgets": lab_relative(campaign.budgets, BUDGETS_DIR),
        "lava": _lava_spec(lb),
        "board": board.to_json(),
        "variant": variant.to_json(),
        "boot_args": boot_args,
        "kernel_args": kernel_args,
        "kernel": kernel,
        "suite": run.to_json(),
        "command": command,
        "definitions": {"boot": boot_def, "suite": suite_def},
        "facts": facts,
        "expected": expected,
        "loads": [p.to_json() for p in loads],
    }
    definition = {
        # what a LAVA admin reads in the job list: campaign, board, variant,
        # suite@load and the kernel commit where one is known
        "job_name": " ".join(["rtlab", campaign.name, board.name, variant.name, run.id]
                             + ([commit[:12]] if commit else [])),
        "device_type": lb.device_type,
        "visibility": "public",
        "priority": "medium",
        "timeouts": {"job": _seconds_to_timeout(job_s), "connection": {"minutes": 2}},
        "context": context,
        "metadata": {
            "rtlab.format": str(FORMAT),
            "rtlab.plan.campaign": campaign.name,
            "rtlab.board": board.name,
            "rtlab.variant": variant.name,
            "rtlab.suite": run.name,
            "rtlab.load": run.load,
            "rtlab.command": command,
            "rtlab.expected": ",".join(expected),
            "rtlab.spec": json.dumps(spec, separators=(",", ":"), sort_keys=True),
        },
        "actions": [
            {"deploy": deploy},
            {"boot": boot},
            {"test": {"timeout": _seconds_to_timeout(test_s), "definitions": [
                _inline(BOOT_DEFINITION, f"rtlab: is {board.name} running variant {variant.name}?", boot_steps),
                _inline(definition_name(run), f"rtlab: {suite.tool} ({run.id}) on {board.name}/{variant.name}",
                        suite_steps(suite, run, board, loads)),
            ]}},
        ],
    }
    if lb.runs_here:
        # boards QEMU makes share device types (`qemu`, `qemu-uboot-aarch64`:
        # the QEMU boards, the twins); the board's tag sends the job to a
        # device that is that machine (lava/README.md)
        definition["tags"] = [board.name]
    if commit:
        metadata = definition["metadata"]
        assert isinstance(metadata, dict)
        metadata["rtlab.commit"] = commit
    return definition, spec


def _boot_checks(facts: list[str], kernel: dict, boot_args: str) -> tuple[list[str], list[str]]:
    """The boot definition's steps and test cases: kernel facts, then is
    this the variant's kernel (release) booted with its arguments."""
    steps = [onboard.install_step(), "dmesg -n 1",
             *[f"rtlab_fact {i} {shlex.quote(c)}" for i, c in enumerate(facts)],
             f"lava-test-case {CASE_FACTS} --result pass"]
    cases = [CASE_FACTS]
    if kernel.get("release"):
        steps.append(f'rtlab_case {CASE_RELEASE} test "$(uname -r)" = {shlex.quote(kernel["release"])}')
        cases.append(CASE_RELEASE)
    if boot_args:
        steps.append(f"rtlab_case {CASE_BOOT_ARGS} rtlab_cmdline_has {shlex.quote(boot_args)}")
        cases.append(CASE_BOOT_ARGS)
    return steps, cases


def _test_and_job_seconds(suite: Suite, run: SuiteRun, loads: Sequence[lava_loads.LavaLoadPart]) -> tuple[float, float]:
    """(test action, whole job) timeouts in seconds."""
    suite_s = suite.duration_s(run) * 2 + 60 + TRANSFER_ALLOWANCE_S  # the runner's per-suite allowance + transfer
    # a load may take its ready timeout to get going, then settles
    suite_s += sum(p.load.ready_timeout_s + float(p.env.opts.get("settle_s") or 0) for p in loads)
    test_s = BOOT_DEFINITION_S + suite_s
    return test_s, DEPLOY_TIMEOUT_S + BOOT_TIMEOUT_S + test_s + JOB_MARGIN_S


def _deploy_and_boot(lb: LavaBoard, variant: Variant, images: ImageSet, kernel: dict, boot_args: str,
                     artifacts: Artifacts) -> tuple[dict[str, Any], dict, dict, str]:
    """(job context, deploy action, boot action, kernel command line): QEMU
    boards boot the images directly, the others over TFTP from U-Boot."""
    board = lb.board
    flavour = variant.prebuilt
    kernel_path = Path(kernel["path"])
    # a kernel built from the commit under test, or Debian's of the flavour
    prebuilt = images.kernels[flavour] if flavour and images.kernels[flavour].path == kernel_path else None
    k_sum = (prebuilt.sha256 if prebuilt else "") or sha256_file(kernel_path)
    r_sum = images.initramfs_sha256 or sha256_file(images.initramfs)
    k_url = artifacts.url(kernel_path, board.arch, k_sum)
    r_url = artifacts.url(images.initramfs, board.arch, r_sum)

    context: dict[str, Any] = {"arch": lb.lava_arch}
    if lb.boot == "qemu":
        q = lb.qemu
        kernel_args = q.kernel_args(boot_args)
        # what the server's qemu.jinja2 needs to render the options of lava/devices/<board>.yaml
        arch = get_or_none(lb.lava_arch)  # the job context's arch, what qemu.jinja2 branches on
        extra = [*(e for e in q.extra if not e.startswith("-nic")),
                 *(() if arch is not None and arch.lava_sets_machine else (f"-machine {q.machine}", f"-cpu {q.cpu}"))]
        context.update({"machine": q.machine, "cpu": q.cpu, "memory": q.memory_mb,
                        "no_kvm": True, "extra_options": extra})
        qemu_images: dict[str, dict[str, Any]] = {
            "kernel": {"url": k_url, "sha256sum": k_sum,
                       "image_arg": f'-kernel {{kernel}} -append "{kernel_args}"'},
            "ramdisk": {"url": r_url, "sha256sum": r_sum, "image_arg": "-initrd {ramdisk}",
                        "compression": "gz", "format": "cpio.newc", "overlays": {"lava": True}},
        }
        if lb.dtb:  # a twin's device tree, from the kernel package (copied beside the kernel)
            dtb = Path(kernel.get("dtb_dir") or kernel_path.parent) / lb.dtb
            if not dtb.is_file():
                raise RtlabError(f"{lb.name}: no device tree {dtb}")
            dtb_sum = sha256_file(dtb)
            qemu_images["dtb"] = {"url": artifacts.url(dtb, board.arch, dtb_sum), "sha256sum": dtb_sum,
                                  "image_arg": "-dtb {dtb}"}
        deploy = {"to": "tmpfs", "timeout": _seconds_to_timeout(DEPLOY_TIMEOUT_S), "images": qemu_images}
        boot = {"method": "qemu", "media": "tmpfs", "timeout": _seconds_to_timeout(BOOT_TIMEOUT_S),
                "prompts": [PROMPT_RE]}
    else:
        kernel_args = boot_args
        context["extra_kernel_args"] = kernel_args
        deploy = {"to": "tftp", "timeout": _seconds_to_timeout(DEPLOY_TIMEOUT_S),
                  "kernel": {"url": k_url, "sha256sum": k_sum, "type": lb.kernel_type},
                  "ramdisk": {"url": r_url, "sha256sum": r_sum, "compression": "gz"}}
        if lb.dtb:
            # a kernel built from source boots with the device tree of Debian's
            # generic package, as on the labgrid path (the DT ABI is stable)
            dtb = extract_dtb(images, flavour if prebuilt and flavour else "generic", lb.dtb)
            dtb_sum = sha256_file(dtb)
            deploy["dtb"] = {"url": artifacts.url(dtb, board.arch, dtb_sum), "sha256sum": dtb_sum}
        boot = {"method": "u-boot", "commands": "ramdisk", "timeout": _seconds_to_timeout(BOOT_TIMEOUT_S),
                "prompts": [PROMPT_RE]}
    return context, deploy, boot, kernel_args


def _lava_spec(lb: LavaBoard) -> dict[str, Any]:
    """The spec's "lava" part: which LAVA device the job is for."""
    try:
        device_rel = str(lb.device.relative_to(ROOT))
    except ValueError:
        device_rel = str(lb.device)
    return {"board": lb.name, "device_type": lb.device_type, "boot": lb.boot, "device": device_rel,
            "dispatcher": _repo_rel(lb.dispatcher) if lb.dispatcher else None, "runs_here": lb.runs_here}


def _repo_rel(path) -> str:
    p = Path(path).resolve()
    try:
        return str(p.relative_to(ROOT))
    except ValueError:
        return str(p)


class _LiteralDumper(yaml.SafeDumper):
    """Multi-line strings (the helper heredoc) as YAML literal blocks."""


def _str_presenter(dumper, data):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_LiteralDumper.add_representer(str, _str_presenter)


def dump_job(definition: dict) -> str:
    return yaml.dump(definition, Dumper=_LiteralDumper, sort_keys=False, default_flow_style=False,
                     width=1000, allow_unicode=True)


def job_file_name(board: str, variant: str, run: SuiteRun) -> str:
    return f"{board}/{variant}/{definition_name(run)}.yaml"


def render_campaign(campaign: Campaign, out_dir: Path, *, boards: Optional[list[str]] = None,
                    lab_boards: bool = True, artifacts_url: Optional[str] = None,
                    artifacts_dir: Optional[Path] = None, images: Optional[dict[str, ImageSet]] = None,
                    progress: Callable[[str], None] = lambda m: None, commit: str = "",
                    kernel_tree: Optional[Path] = None) -> dict:
    """Write every job of the campaign under `out_dir`; returns the index
    (also written as `out_dir/index.json`). *kernel_tree*: the jobs boot
    kernels built from it (the commit under test; rtlab's kernel cache, so
    the build stage's builds are reused); a variant that does not build is
    listed under ``build_failed``, for ingest to judge (FAIL, as on the
    labgrid path)."""

    out_dir = Path(out_dir)
    lava_boards = load_lava_boards()
    names = [b.name for b in campaign.boards if b.name in lava_boards and not lava_boards[b.name].lab]
    skipped = [{"board": b.name, "reason": f"not a LAVA board ({b.kind}: LAVA cannot boot it)"}
               for b in campaign.boards if b.name not in lava_boards]
    if lab_boards or boards:
        names += [n for n, lb in lava_boards.items() if lb.lab and n not in names]
    if boards:
        unknown = [b for b in boards if b not in lava_boards]
        if unknown:
            raise InputError(lava_boards and next(iter(lava_boards.values())).device.parent.parent / "boards.yaml",
                             f"no LAVA board named {', '.join(unknown)} (known: {', '.join(sorted(lava_boards))})")
        names = [n for n in names if n in boards] + [b for b in boards if b not in names]
    selected = [lava_boards[n] for n in names]
    plan = dataclasses.replace(campaign, boards=[lb.board for lb in selected])
    by_name = {lb.name: lb for lb in selected}
    images = dict(images or {})
    for arch in sorted({lb.board.arch for lb in selected}):
        if arch not in images:
            images[arch] = ensure_images(arch, progress=progress)
    artifacts = Artifacts(out_dir, artifacts_url, artifacts_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered: list[RenderedJob] = []
    not_available: list[dict] = []
    not_rendered: list[dict] = []
    build_failed: list[dict] = []
    jobs = plan.jobs()
    built = build_kernels(jobs, images, Path(kernel_tree), progress) if kernel_tree is not None else {}
    for job in jobs:
        bk = built.get((job.board.name, job.variant.name))
        if isinstance(bk, KernelBuildFailed):
            build_failed.append({"board": job.board.to_json(), "variant": job.variant.to_json(),
                                 "error": str(bk), "campaign": campaign.name,
                                 "campaign_file": lab_relative(campaign.path, ROOT),
                                 "budgets": lab_relative(campaign.budgets, BUDGETS_DIR)})
            continue
        why = unavailable(job, images, built, kernel_tree)
        if why:
            not_available.append({"board": job.board.name, "variant": job.variant.name, "reason": why})
            continue
        for run in job.suites:
            missing = [c for c in run.cpus if c >= job.board.cpus]
            if missing:  # a lab board the campaign did not name (named ones are checked at load)
                not_rendered.append({"board": job.board.name, "variant": job.variant.name, "suite": run.id,
                                     "reason": f"pinned to CPU {format_cpulist(missing)}: the board has "
                                               f"{job.board.cpus} CPU{'s' * (job.board.cpus != 1)}"})
                continue
            loads = lava_loads.plan(by_name[job.board.name], job.variant, run)
            if isinstance(loads, str):  # no LAVA form on this board: why
                not_rendered.append({"board": job.board.name, "variant": job.variant.name, "suite": run.id,
                                     "reason": loads})
                continue
            definition, spec = render_job(by_name[job.board.name], job.variant, run, images[job.board.arch],
                                          campaign=campaign, artifacts=artifacts, loads=loads, commit=commit,
                                          built=built)
            path = out_dir / job_file_name(job.board.name, job.variant.name, run)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_job_header(spec) + dump_job(definition))
            rendered.append(RenderedJob(path, definition, spec))
    index = {
        "format": FORMAT, "campaign": campaign.name, "campaign_file": lab_relative(campaign.path, ROOT),
        "budgets": lab_relative(campaign.budgets, BUDGETS_DIR), "artifacts_url": artifacts_url,
        "jobs": [r.index_entry(out_dir) for r in rendered],
        "not_available": not_available, "not_rendered": not_rendered, "skipped_boards": skipped,
        "build_failed": build_failed,
        "artifacts": artifacts.published,
    }
    (out_dir / "index.json").write_text(json.dumps(index, indent=2) + "\n")
    progress(f"lava render: {len(rendered)} jobs in {out_dir}"
             + (f", {len(not_available)} board/variant pairs not available" if not_available else "")
             + (f", boards skipped: {', '.join(s['board'] for s in skipped)}" if skipped else "")
             + (f", {len(not_rendered)} suite runs without a LAVA form" if not_rendered else "")
             + (f", {len(build_failed)} board/variant pairs whose kernel did not build" if build_failed else ""))
    return index


def _job_header(spec: dict) -> str:
    return (f"# LAVA job generated by `rtlab lava render` (campaign {spec['campaign']}):\n"
            f"# board {spec['board']['name']} ({spec['lava']['device_type']}, {spec['lava']['boot']}), "
            f"variant {spec['variant']['name']}, suite {spec['suite']['id']}.\n"
            f"# The board runs: {spec['command']}\n"
            f"# Cases it must produce: metadata rtlab.expected (checked by `rtlab lava ingest`).\n")


def load_job(path: Path) -> tuple[dict, dict]:
    """A rendered job file -> (definition, rtlab spec)."""
    definition = load_yaml(path)
    if not isinstance(definition, dict):
        raise InputError(path, "not a LAVA job definition (expected a mapping)")
    return definition, spec_of(definition, path)


def spec_of(definition: dict, where) -> dict:
    meta = definition.get("metadata") or {}
    raw = meta.get("rtlab.spec")
    if not raw:
        raise InputError(where, "not an rtlab job: no metadata rtlab.spec (render it with `rtlab lava render`)")
    try:
        spec = json.loads(raw)
    except ValueError as e:
        raise InputError(where, f"metadata rtlab.spec is not JSON: {e}") from None
    if not isinstance(spec, dict) or spec.get("format") != FORMAT:
        got = spec.get("format") if isinstance(spec, dict) else spec
        raise InputError(where, f"rtlab job format {shown(got)}, this rtlab reads {FORMAT}")
    return check_spec(spec, where)
