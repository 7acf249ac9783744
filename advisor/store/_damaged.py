"""A damaged DuckDB store file (truncated, or a block whose checksum does not match) is one `DamagedStoreError`
naming the file and what to do, wherever DuckDB first reads the damaged part: on open or in any later query.

DuckDB reads blocks lazily, so a file cut short or with a flipped byte opens fine and fails in the first query
that reads the damaged block. `CheckedConnection` wraps the store's connection so every call translates those
errors; other DuckDB errors pass through unchanged.
"""

from __future__ import annotations

from typing import Any

from advisor.errors import DamagedStoreError

#: What DuckDB says (IOException or its base Error) when the file is damaged rather than busy or missing.
_DAMAGE_SIGNS = ("Corrupt database file", "Could not read enough bytes", "database has been invalidated",
                 "checksum")


def is_damage(exc: BaseException) -> bool:
    """True when a DuckDB error says the database file itself is damaged."""
    text = str(exc)
    return any(sign in text for sign in _DAMAGE_SIGNS)


def damaged(path: str, exc: BaseException) -> DamagedStoreError:
    """The one-line error for a damaged store file: which file, what DuckDB found, what to do."""
    reason = str(exc).splitlines()[0].removeprefix("IO Error: ")
    return DamagedStoreError(f"{path}: the store file is damaged ({reason}); restore it from a backup, or move it away "
                      "and rebuild it (`advisor probe` / `advisor import` write a new store)")


class CheckedConnection:
    """A DuckDB connection (or the cursor its ``execute`` returns) whose damaged-file errors become `damaged`."""

    __slots__ = ("_inner", "_path")

    def __init__(self, inner: Any, path: str):
        self._inner = inner
        self._path = path

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                out = attr(*args, **kwargs)
            except Exception as exc:  # duckdb.Error and its subclasses; others re-raised as they are
                if is_damage(exc):
                    raise damaged(self._path, exc) from None
                raise
            return CheckedConnection(out, self._path) if out is self._inner or _is_cursor(out) else out

        return checked


def _is_cursor(value: Any) -> bool:
    return type(value).__name__ == "DuckDBPyConnection"
