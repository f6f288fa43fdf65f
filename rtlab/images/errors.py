"""Errors of image building; the message names the package or file."""
from __future__ import annotations

from typing import Sequence

from ..errors import RtlabError


class ImageError(RtlabError):
    """An image could not be built; the message names the package or file."""


class MissingLibraryError(ImageError):
    """An ELF file needs a shared library that no downloaded package has."""

    def __init__(self, binary: str, library: str, package: str = "", searched: Sequence[str] = ()):
        self.binary = binary
        self.library = library
        self.package = package
        where = f" (package {package})" if package else ""
        dirs = f"; searched {', '.join('/' + d for d in searched)}" if searched else ""
        super().__init__(f"{binary}{where} needs {library}, which no downloaded package provides{dirs}")
