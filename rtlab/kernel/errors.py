"""Errors of kernel fetching, configuring and building."""
from __future__ import annotations

from ..errors import RtlabError


class KernelError(RtlabError):
    """A kernel could not be fetched, configured or built; says what and where."""
