"""Every test module has a basename of its own: pytest imports them by
basename (rootdir-relative, no packages), so a second file of the same name
in another folder stops the whole run at collection."""
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1], names.most_common(3)
