"""A small generic name registry: name -> object, registered by decorator, filled lazily, did-you-mean on misses.

Pluggable parts (checks, tools, tool-call formats, routing policies, importers) are looked up by name from
YAML or the command line. Each kind has one `Registry`; a module that defines a part registers it where it is
defined::

    POLICIES = Registry("routing policy", builtins=("advisor.router.routing.policies",))

    @POLICIES.register("cascade")
    class Cascade: ...

    POLICIES.get("cascade")      # imports the builtin modules on first use, then looks the name up
    POLICIES.get("cascde")       # UnknownNameError: unknown routing policy 'cascde'. Did you mean 'cascade'? ...

Nothing is imported when the registry is created: the `builtins` modules are imported on the first lookup, so
importing `advisor` stays light. A registry created with ``entry_points="advisor.checks"`` (say) also imports,
on that first lookup, every module an installed package declares in that entry-point group, so parts of other
packages are known to the command line too::

    # the other package's pyproject.toml
    [project.entry-points."advisor.checks"]
    word_count = "mypackage.checks"      # a module that registers its parts when imported
"""

from __future__ import annotations

import importlib.metadata
from typing import Callable, Generic, Iterable, Iterator, TypeVar

from advisor.errors import AdvisorError, did_you_mean

T = TypeVar("T")

__all__ = ["Registry", "UnknownNameError", "DuplicateNameError", "PluginError"]


class UnknownNameError(AdvisorError, KeyError):
    """A name that nothing in a registry carries; the message says which kind and what is available."""

    exit_code = 2

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(AdvisorError):
    """Two parts registered under one name in one registry."""


class PluginError(AdvisorError):
    """An installed package's entry point for a registry could not be imported."""


class Registry(Generic[T]):
    """Names of one kind of part. `kind` reads in messages ("check type", "tool", "routing policy")."""

    def __init__(self, kind: str, builtins: Iterable[str] = (), entry_points: str | None = None) -> None:
        self.kind = kind
        self._builtins = tuple(builtins)
        self._group = entry_points
        self._items: dict[str, T] = {}
        self._loaded = not self._builtins and not entry_points

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True  # before importing: a builtin module registering itself must not recurse
            for module in self._builtins:
                importlib.import_module(module)
            if self._group:
                self._load_entry_points(self._group)

    def _load_entry_points(self, group: str) -> None:
        for ep in importlib.metadata.entry_points(group=group):
            try:
                ep.load()
            except Exception as exc:  # a broken plugin is one clear line, not a traceback
                raise PluginError(f"{self.kind} plugin {ep.name!r} ({ep.value}, entry point group {group!r}) "
                                  f"failed to load: {type(exc).__name__}: {exc}; fix or uninstall the package "
                                  "that declares it") from None

    def add(self, name: str, obj: T, *, replace: bool = False) -> T:
        """Register `obj` under `name`; a second registration of one name is an error unless `replace`."""
        if not replace and name in self._items and self._items[name] is not obj:
            raise DuplicateNameError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = obj
        return obj

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """Decorator form of `add`: ``@REGISTRY.register("name")``."""

        def decorate(obj: T) -> T:
            return self.add(name, obj, replace=replace)

        return decorate

    def get(self, name: str) -> T:
        """The part called `name`; unknown names raise `UnknownNameError` with "did you mean / available"."""
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(f"unknown {self.kind} {name!r}.{did_you_mean(name, self._items)}") from None

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self._load()
        return sorted(self._items)

    def items(self) -> dict[str, T]:
        """A copy of name -> part."""
        self._load()
        return dict(self._items)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self._load()
        return len(self._items)
