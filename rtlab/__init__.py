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


def _check_labgrid() -> None:
    """labgrid is a dependency, and this checkout has a data folder of the same
    name (labgrid/: the lab's configuration) without an ``__init__.py``.
    Without the package, Python imports that folder as a namespace package
    ``labgrid`` (the checkout is on sys.path under ``python -m`` and pytest),
    and rtlab failed later with "No module named 'labgrid.util'". Say so here."""
    import importlib.util
    spec = importlib.util.find_spec("labgrid")
    if spec is not None and spec.origin is None:  # a namespace package: only data folders
        where = ", ".join(spec.submodule_search_locations or [])
        raise ImportError(f"the labgrid package is not installed: 'import labgrid' finds only the data "
                          f"folder {where} (rtlab's lab configuration, not the package); "
                          f"install rtlab's dependencies (pip install -e .)")


_check_labgrid()
