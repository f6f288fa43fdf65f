"""rtlab: real-time latency regression CI for kernel commits on a rack of boards."""
from pathlib import Path

__version__ = "0.1.0"

#: the checkout rtlab runs from; data (kernel-configs/, env/, budgets/…) lives here
ROOT = Path(__file__).resolve().parent.parent
