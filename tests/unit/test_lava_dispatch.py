"""lava-run plumbing: distinct job ids for concurrent runs, device
dictionaries filled with the job context, progress from the log stream."""
import subprocess
import sys
import textwrap

import pytest

from rtlab.errors import InputError
from rtlab.lava.dispatch import _progress_line, allocate_job_id, prepare_device
from rtlab.lava.logs import _load_line


def test_job_ids_are_distinct_while_held_and_skip_busy_scratch_dirs(tmp_path):
    locks, scratch = tmp_path / "ids", tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "900002").mkdir()  # a lava-run of someone else, or a leftover
    a = allocate_job_id(900001, lock_dir=locks, scratch=scratch)
    b = allocate_job_id(900001, lock_dir=locks, scratch=scratch)
    assert (a.job_id, b.job_id) == (900001, 900003)
    # another process sees them taken (flock), then free once released
    probe = textwrap.dedent(f"""
        from pathlib import Path
        from rtlab.lava.dispatch import allocate_job_id
        print(allocate_job_id(900001, lock_dir=Path({str(locks)!r}), scratch=Path({str(scratch)!r})).job_id)
    """)
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "900004"
    a.release()
    other = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == "900001"
    b.release()


def test_device_dictionary_gets_the_job_context_like_a_server_renders_it(tmp_path):
    dev = tmp_path / "dev.yaml"
    dev.write_text("commands:\n- \"setenv bootargs 'console=ttyS2,1500000n8 {{ extra_kernel_args }}'\"\n")
    out = prepare_device(dev, {"context": {"extra_kernel_args": "isolcpus=3 nohz_full=3"}}, tmp_path / "o.yaml")
    assert "console=ttyS2,1500000n8 isolcpus=3 nohz_full=3'" in out.read_text()
    with pytest.raises(InputError, match="extra_kernel_args"):
        prepare_device(dev, {"context": {}}, tmp_path / "o2.yaml")
    plain = tmp_path / "plain.yaml"
    plain.write_text("commands: {}\n")
    assert prepare_device(plain, {}, tmp_path / "o3.yaml") == plain


def test_progress_shows_actions_results_and_errors_not_debug():
    lines = [
        '{"dt": "2026-11-21T06:31:04.5", "lvl": "info", "msg": "start: 1 tmpfs-deploy (timeout 00:05:00) [common]"}',
        '{"dt": "2026-11-21T06:31:04.5", "lvl": "info", "msg": "start: 1.1 download-retry (timeout 00:05:00)"}',
        '{"dt": "2026-11-21T06:31:04.5", "lvl": "debug", "msg": "noise"}',
        '{"dt": "2026-11-21T06:31:34.3", "lvl": "results", "msg": {"case": "t0-max-latency", '
        '"definition": "1_cyclictest-idle", "measurement": ! "1511531.0", "result": "pass", "units": "us"}}',
        '{"dt": "2026-11-21T06:31:35.8", "lvl": "results", "msg": {"case": "job", "definition": "lava", '
        '"error_msg": "boot timed out", "error_type": "Infrastructure", "result": "fail"}}',
        '- {"dt": "2026-11-21T06:31:35.9", "lvl": "error", "msg": "InfrastructureError"}',
    ]
    shown = [_progress_line(_load_line(l), verbose=False) for l in lines]
    assert shown == ["start: 1 tmpfs-deploy (timeout 00:05:00) [common]", None, None,
                     "1_cyclictest-idle/t0-max-latency: pass 1511531 us",
                     "lava job: fail (Infrastructure: boot timed out)", "error: InfrastructureError"]
