"""The checkout's labgrid/ data folder (the lab's configuration, no
``__init__.py``) must never pass for the labgrid package: without the
package, ``import rtlab`` says so by name instead of failing later with
"No module named 'labgrid.util'"."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NO_SITE = ("import sys; sys.path[:] = [p for p in sys.path if p and 'site-packages' not in p]; "
           f"sys.path.insert(0, {str(ROOT)!r}); ")


def test_without_the_package_import_rtlab_names_the_data_folder():
    p = subprocess.run([sys.executable, "-c", NO_SITE + "import rtlab"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "the labgrid package is not installed" in p.stderr
    assert f"{ROOT / 'labgrid'}" in p.stderr


def test_with_the_package_labgrid_is_the_package():
    p = subprocess.run([sys.executable, "-c", "import rtlab, labgrid; print(labgrid.__file__)"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("labgrid/__init__.py") and str(ROOT / "labgrid") not in p.stdout
