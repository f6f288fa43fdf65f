"""rtlab: real-time latency regression CI for kernel commits on a rack of boards."""
import os
import sys
from pathlib import Path

__version__ = "0.1.0"

_CHECKOUT = Path(__file__).resolve().parent.parent


def _is_checkout(path: Path) -> bool:
    return (path / "pyproject.toml").is_file() and (path / "env").is_dir()


#: where rtlab's data lives (kernel-configs/, env/, budgets/, campaigns/, lava/…):
#: $RTLAB_HOME if set; the checkout rtlab runs from; else, for `pip install .`,
#: the copy installed under <prefix>/share/rtlab (pyproject data-files)
ROOT = Path(os.environ["RTLAB_HOME"]) if os.environ.get("RTLAB_HOME") else (
    _CHECKOUT if _is_checkout(_CHECKOUT) else Path(sys.prefix) / "share" / "rtlab")
#: where runs write by default (results/): the checkout, or an installed
#: rtlab's current directory (its data directory may not be the user's)
WORKDIR = ROOT if _is_checkout(ROOT) else Path.cwd()
