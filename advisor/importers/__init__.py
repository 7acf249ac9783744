"""Importers of public formats, by name in `IMPORTERS`: recorded per-prompt results (``recorded``, into the
store), Tessl-style scenario folders (``tessl``, into a suite YAML) and captured live steps (``traffic``, into a
suite folder).

An importer is a function registered where it is defined with ``@register_importer(name, produces=...)``;
``produces`` says what it makes: ``"runs"`` (it adds runs to a `Store`) or ``"suite"`` (it writes a suite
file). See docs/extending.md for a worked example.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from advisor.registry import Registry

F = TypeVar("F", bound=Callable[..., Any])

PRODUCES = ("runs", "suite")


@dataclass(frozen=True)
class Importer:
    """One registered importer: its name, its function, what it produces and a one-line description."""

    name: str
    fn: Callable[..., Any]
    produces: str  #: runs | suite
    description: str = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the importer (the arguments are the function's own)."""
        return self.fn(*args, **kwargs)


#: Every importer by name; the builtin importer modules register themselves when first looked up.
IMPORTERS: Registry[Importer] = Registry("importer", builtins=("advisor.importers.recorded", "advisor.importers.tessl",
                                                               "advisor.importers.traffic"),
                                         entry_points="advisor.importers")


def register_importer(name: str, *, produces: str, description: str = "") -> Callable[[F], F]:
    """Register the decorated function as importer `name`; the description defaults to its docstring's first line."""
    if produces not in PRODUCES:
        raise ValueError(f"importer {name!r}: produces must be one of {', '.join(PRODUCES)}, not {produces!r}")

    def decorate(fn: F) -> F:
        doc_lines = (fn.__doc__ or "").strip().splitlines()
        IMPORTERS.add(name, Importer(name, fn, produces, description or (doc_lines[0] if doc_lines else "")))
        return fn

    return decorate


def get_importer(name: str) -> Importer:
    """The importer called `name`; unknown names raise `UnknownNameError` with "did you mean / available"."""
    return IMPORTERS.get(name)


__all__ = ["IMPORTERS", "Importer", "get_importer", "register_importer"]
