"""One way to register a thing: suites, loads, CLI commands, architectures,
boards (and, through the suites, the tools' parsers).

A :class:`Registry` is the names of one kind of thing, filled by defining the
things (labgrid's ``target_factory``, tuxrun's ``subclasses()``): a class
family registers each subclass that has a ``name`` from its base's
``__init_subclass__`` (:meth:`Registry.subclass_hook`), a command module
calls :meth:`Registry.add` with its ``register`` function, a data-defined
family (architectures, boards) calls :meth:`Registry.add` per entry. Every
list rtlab shows or checks (``--help``, "known: ..." in errors, a campaign's
``loads: all``, the tests) is read from the registry.

A registry that names a *package* imports every module of it the first time
it is read, so a new suite, load or command is one new file in its package
and nothing else. A module that fails to import, or (``each_module``) one
that registers nothing, is a :class:`RegistrationError` naming it: a unit is
never skipped in silence. Two things of one name are an error naming both.

This module imports nothing of rtlab's but errors: every layer may use it,
and a lower layer (the parsers) can read a higher layer's registry (the
suites') by name without importing it.
"""
from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Any, Callable, Generic, Iterable, Iterator, Optional, TypeVar

from .errors import RtlabError

T = TypeVar("T")


class RegistrationError(RtlabError):
    """A unit could not register (import error, registers nothing, a name twice)."""


class Registry(Generic[T]):
    """Things of one *kind* by name, in registration order."""

    def __init__(self, kind: str, package: Optional[str] = None, *, each_module: bool = False,
                 skip: tuple[str, ...] = (),
                 collect: Optional[Callable[[ModuleType], Iterable[tuple[str, Any]]]] = None):
        self.kind = kind
        #: what a module of the package registers by being there (commands:
        #: its ``register`` function), besides what it adds itself
        self.collect = collect
        #: the package whose modules register the things (imported on first read)
        self.package = package
        #: every module of the package must register at least one thing
        self.each_module = each_module
        #: modules of the package that are helpers, not units (registering nothing is fine)
        self.skip = skip
        self._items: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self._loaded = package is None
        self._loading = False

    # -- filling -----------------------------------------------------------
    def add(self, name: str, item: T, origin: str = "") -> T:
        """Register *item* as *name*; *origin* says where it was defined (errors)."""
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"{self.kind} {item!r} from {origin or '?'}: no name")
        if name in self._items:
            raise RegistrationError(f"two {self.kind}s named {name!r}: {self._origin[name] or '?'} and "
                                    f"{origin or '?'}")
        self._items[name] = item
        self._origin[name] = origin
        return item

    def subclass_hook(self, cls: type, make: Callable[[type], Any] = lambda c: c()) -> None:
        """For a base class's ``__init_subclass__``: a subclass that names
        itself (``name`` in its own body) is registered (as ``make(cls)``, an
        instance by default); shared bases without a name are not."""
        if "name" in cls.__dict__:
            self.add(cls.__dict__["name"], make(cls), f"{cls.__module__}.{cls.__qualname__}")

    def pop(self, name: str, default: Any = None) -> Any:
        """Forget *name* (tests that define a throwaway unit)."""
        self._origin.pop(name, None)
        return self._items.pop(name, default)

    def load(self) -> "Registry[T]":
        """Import every module of the package (once). Errors name the module."""
        if self._loaded or self._loading:
            return self
        self._loading = True
        try:
            pkg = importlib.import_module(str(self.package))
            for mod in pkgutil.iter_modules(pkg.__path__):
                full = f"{self.package}.{mod.name}"
                before = len(self._items)
                try:
                    module = importlib.import_module(full)
                except RegistrationError:
                    raise
                except Exception as e:  # noqa: BLE001 - any failure to import is the unit's
                    raise RegistrationError(f"{self.kind} module {full} failed to register: "
                                            f"{type(e).__name__}: {e}") from e
                if self.collect is not None and mod.name not in self.skip:
                    for name, item in self.collect(module):
                        self.add(name, item, full)
                if self.each_module and mod.name not in self.skip and len(self._items) == before:
                    raise RegistrationError(f"{self.kind} module {full} registers no {self.kind}")
            self._loaded = True
        finally:
            self._loading = False
        return self

    # -- reading (a dict's interface; reading loads the package) -------------
    def __getitem__(self, name: str) -> T:
        self.load()
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(name) from None

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self.load()
        return iter(list(self._items))

    def __len__(self) -> int:
        self.load()
        return len(self._items)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def keys(self) -> list[str]:
        return list(self)

    def values(self) -> list[T]:
        self.load()
        return list(self._items.values())

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return list(self._items.items())

    def origin(self, name: str) -> str:
        """Where *name* was defined (module.Class, file)."""
        self.load()
        return self._origin[name]

    def known(self) -> str:
        """The names, for "known: ..." in error messages."""
        return ", ".join(sorted(self))

    def __repr__(self) -> str:
        return f"<Registry of {self.kind}s: {', '.join(self._items)}>"


#: every suite (rtlab/suites/*.py; Suite.__init_subclass__). Here, not in
#: rtlab.suites, so the parsers read their tools without importing the suites
SUITES: Registry[Any] = Registry("suite", "rtlab.suites")


def _command_of(module: ModuleType) -> list[tuple[str, Any]]:
    register = getattr(module, "register", None)
    return [(module.__name__.rsplit(".", 1)[1], register)] if callable(register) else []


#: every `rtlab` sub-command: each module of rtlab/commands is one, by its
#: ``register(subparsers)`` function (a module without one is an error)
COMMANDS: Registry[Callable[[Any], None]] = Registry("command", "rtlab.commands", each_module=True,
                                                     collect=_command_of)
