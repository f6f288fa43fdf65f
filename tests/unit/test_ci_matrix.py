"""CI gates what the lab measures, from one source (docs/gating-merge-requests.md).

The build, test, test-lava and reference matrices of .gitlab-ci.yml are what
`rtlab ci matrix` generates from the campaign the pipeline names and the
env files (rtlab/run/cimatrix.py). Checked here against the campaign itself,
not against the generator: every board × variant the CI campaign names has a
test job, the *-iso variants included, and every job is one it names; the
pairs it does not run are the ones that cannot boot the commit under test;
every variant's kernel has exactly one build job, and variants that boot one
kernel share it. Adding a board to the campaign makes the checked-in file
stale until `rtlab ci matrix --write`.
"""
import itertools
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from rtlab import ROOT
from rtlab.errors import InputError
from rtlab.kernel.fragments import with_base
from rtlab.plan.campaign import load_campaign
from rtlab.run import cimatrix

PIPELINE = ROOT / ".gitlab-ci.yml"


def expand(job: dict) -> list[dict]:
    """A job's parallel:matrix as GitLab expands it: one dict per job."""
    out = []
    for row in job["parallel"]["matrix"]:
        keys = list(row)
        values = [v if isinstance(v, list) else [v] for v in row.values()]
        out += [dict(zip(keys, combo)) for combo in itertools.product(*values)]
    return out


@pytest.fixture(scope="module")
def ci():
    return yaml.safe_load(PIPELINE.read_text())


@pytest.fixture(scope="module")
def campaign(ci):
    return load_campaign(ci["variables"]["RTLAB_CAMPAIGN"])


def test_the_checked_in_matrices_are_what_the_lab_files_give():
    text = PIPELINE.read_text()
    assert cimatrix.rewrite(text, cimatrix.lab_matrix()) == text, \
        "the pipeline's matrices are stale: run `rtlab ci matrix --write`"
    res = subprocess.run([str(Path(sys.executable).parent / "rtlab"), "ci", "matrix", "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "is current" in res.stdout, res.stdout + res.stderr


def test_every_board_and_variant_of_the_ci_campaign_has_a_test_job_and_no_job_is_missing(ci, campaign):
    jobs = {(j["BOARD"], j["VARIANT"]) for j in expand(ci["test"])}
    named = {(b.name, v.name) for b in campaign.boards for v in campaign.variants}
    assert len(jobs) == len(expand(ci["test"])), "a board × variant has two test jobs"
    assert jobs <= named, f"test jobs the campaign does not name: {sorted(jobs - named)}"
    boards = {b.name: b for b in campaign.boards}
    for board, variant in sorted(named - jobs):
        # the only pairs left out are those that cannot boot a kernel built
        # from the commit under test: this machine as a board (its own kernel)
        b = boards[board]
        assert b.fixed_kernel or not b.boots_built_kernels or b.built_kernels_unusable \
            or (variant.endswith("-iso") and b.isolate_cpu is None), (board, variant)
    # the isolated-CPU variants are gated on every board that has a CPU to isolate
    for b in campaign.boards:
        if b.isolate_cpu is not None and not b.fixed_kernel:
            assert {v for (bb, v) in jobs if bb == b.name} == {v.name for v in campaign.variants}, b.name
            assert any(v.endswith("-iso") for (bb, v) in jobs if bb == b.name), b.name
    # the LAVA test stage and the nightly reference run the same lab
    assert {(j["BOARD"], j["VARIANT"]) for j in expand(ci["test-lava"])} == jobs
    assert {j["BOARD"] for j in expand(ci["reference"])} == {b for b, _ in jobs}


def test_each_kernel_the_test_jobs_boot_is_built_once(ci, campaign):
    from rtlab.targets.variants import load_variants

    variants = load_variants()
    boards = {b.name: b for b in campaign.boards}

    def kernel(arch, variant, board=None):
        return arch, tuple(with_base(arch, variants[variant].fragments_for(arch), board))

    built = [kernel(j["ARCH"], j["VARIANT"], j.get("BOARD")) for j in expand(ci["build"])]
    assert len(built) == len(set(built)), f"a kernel is built twice: {built}"
    booted = {kernel(boards[j["BOARD"]].arch, j["VARIANT"], j["BOARD"]) for j in expand(ci["test"])}
    assert booted == set(built), (booted, built)
    # rt and rt-iso boot one kernel, and so do the PREEMPT_DYNAMIC family's
    for arch in ("x86_64", "aarch64"):
        assert kernel(arch, "rt") == kernel(arch, "rt-iso")
        assert len({kernel(arch, v) for v in ("none", "voluntary", "preempt", "none-iso", "preempt-iso")}) == 1
    assert len(built) == 2 * len({boards[j["BOARD"]].arch for j in expand(ci["test"])})


def test_a_board_added_to_the_campaign_is_one_edit_and_a_regeneration(tmp_path):
    """The lab's campaign with another board: the checked-in file is stale
    (the check fails) until the generator rewrites it, and then has its jobs
    and its arch's kernels."""
    camp = tmp_path / "lab.yaml"
    camp.write_text((ROOT / "campaigns" / "default.yaml").read_text()
                    .replace("boards: [qemu-x86_64, qemu-aarch64, local]",
                             "boards: [qemu-x86_64, qemu-aarch64, local, twin-rk356x, twin-am335x]")
                    .replace("budgets: ../budgets/default.yaml", f"budgets: {ROOT}/budgets/default.yaml"))
    text = PIPELINE.read_text()
    m = cimatrix.ci_matrix(camp)
    new = cimatrix.rewrite(text, m)
    assert new != text
    ci = yaml.safe_load(new)
    jobs = {(j["BOARD"], j["VARIANT"]) for j in expand(ci["test"])}
    assert {("twin-rk356x", "rt-iso"), ("twin-rk356x", "none"), ("twin-am335x", "rt")} <= jobs
    # one CPU: no isolation variant on the AM335x twin, and the file says why
    assert not {v for b, v in jobs if b == "twin-am335x" and v.endswith("-iso")}
    assert "not twin-am335x/rt-iso: twin-am335x has 1 CPU and no isolate_cpu" in new
    # its kernels: armv7l has no PREEMPT_DYNAMIC, so none, voluntary and preempt are builds of their own
    assert {(j["ARCH"], j["VARIANT"]) for j in expand(ci["build"]) if j["ARCH"] == "armv7l"} == \
        {("armv7l", v) for v in ("none", "voluntary", "preempt", "rt")}
    assert cimatrix.rewrite(new, m) == new


def test_regions_must_be_whole(tmp_path):
    text = PIPELINE.read_text()
    m = cimatrix.lab_matrix()
    with pytest.raises(InputError, match="missing \\['reports'\\]"):
        cimatrix.rewrite(text.replace("# rtlab ci matrix reports:", "# reports:"), m)
    cut = text.split("# rtlab ci matrix end")
    with pytest.raises(InputError, match="has no '# rtlab ci matrix end' after it"):
        cimatrix.rewrite("# rtlab ci matrix end".join(cut[:-1]) + cut[-1], m)


def test_a_nightly_campaign_that_pins_a_cpu_a_gated_board_lacks_is_refused(tmp_path):
    """The nightly schedule runs its campaign's suites on the test job's
    boards × variants: a CPU it pins must exist on each."""
    night = tmp_path / "night.yaml"
    night.write_text((ROOT / "campaigns" / "nightly-soak.yaml").read_text()
                     .replace("      priority: 90\n", "      priority: 90\n      cpus: [3]\n")
                     .replace("boards: [qemu-x86_64, qemu-aarch64, local]", "boards: [twin-rk356x]")
                     .replace("budgets: ../budgets/default.yaml", f"budgets: {ROOT}/budgets/default.yaml"))
    assert load_campaign(night).boards[0].cpus == 4  # loads on its own board
    with pytest.raises(InputError, match="runs night.* on the test job's board qemu-x86_64: .*cpus"):
        cimatrix.ci_matrix("default", night)


def test_the_gating_page_says_what_is_gated_and_the_schedules():
    m = cimatrix.lab_matrix()
    page = (ROOT / "docs" / "gating-merge-requests.md").read_text()
    assert cimatrix.gated_table(m) in page, "docs/gating-merge-requests.md: `rtlab ci matrix --table` differs"
    assert cimatrix.schedules_table(m) in page, \
        "docs/gating-merge-requests.md: `rtlab ci matrix --schedules` differs"


def test_a_campaign_no_job_of_which_can_boot_the_commit_is_refused(tmp_path):
    camp = tmp_path / "c.yaml"
    camp.write_text(textwrap.dedent(f"""
        name: c
        budgets: {ROOT}/budgets/default.yaml
        boards: [local]
        suites: [{{name: cyclictest, params: {{duration_s: 1}}}}]
    """))
    with pytest.raises(InputError, match="local/host: boots its own kernel"):
        cimatrix.ci_matrix(camp)
