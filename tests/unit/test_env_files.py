"""Every env file loads in labgrid by itself (``pytest --lg-env env/X.yaml``,
labgrid-client -c), given only the variables rtlab's runner sets for every
board (env/qemu-x86_64.yaml's LG_RTLAB_* contract) and the lease's LG_PLACE:
a file that needs a variable of its own fails there with "refers to unknown
variable" (env/twin-imx6q.yaml's LG_RTLAB_DTB_DIR did)."""
import re
from pathlib import Path

import pytest
from labgrid.config import Config

ROOT = Path(__file__).resolve().parents[2]
ENV_FILES = sorted((ROOT / "env").glob("*.yaml")) + sorted((ROOT / "env" / "boards").glob("*.yaml"))
#: what the runner exports for every board (rtlab/run/runner.py) and a lease sets
CONTRACT = {"LG_RTLAB_KERNEL": "/k/vmlinuz", "LG_RTLAB_INITRD": "/k/initrd", "LG_RTLAB_BOOT_ARGS": "quiet",
            "LG_PLACE": "place-1"}


def labgrid_env_files():
    return [p for p in ENV_FILES if re.search(r"^targets:", p.read_text(), re.M)]


def test_env_files_are_found():
    assert {p.name for p in labgrid_env_files()} >= {"twin-imx6q.yaml", "qemu-x86_64.yaml", "local.yaml"}


@pytest.mark.parametrize("path", labgrid_env_files(), ids=lambda p: p.name)
def test_loads_in_labgrid_with_the_common_variables_only(path, monkeypatch):
    import os
    for k in [k for k in os.environ if k.startswith("LG_")]:
        monkeypatch.delenv(k)
    for k, v in CONTRACT.items():
        monkeypatch.setenv(k, v)
    cfg = Config(str(path))
    assert cfg.get_targets()
    text = repr(cfg.data)
    assert "$LG_" not in text  # every template resolved
