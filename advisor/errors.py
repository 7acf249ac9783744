"""The advisor's small error hierarchy.

Library code raises these; the CLI prints their message without a traceback and exits non-zero, and the
routing service answers 4xx/5xx with the same message. A message says what went wrong, where, and what to do.
"""

from __future__ import annotations

import difflib


class AdvisorError(Exception):
    """Base class of every error the advisor reports to a user."""

    exit_code = 1


class ConfigError(AdvisorError):
    """A ladder, suite or settings file is malformed (names the file, the key and the line)."""

    exit_code = 2


class BackendError(AdvisorError):
    """A model server could not be reached or answered outside the contract."""

    exit_code = 3


class UnknownModelError(BackendError):
    """The server does not host the model a rung names."""


class ContractError(BackendError):
    """A model's inputs/outputs do not match the vLLM-backend tensor contract."""


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message ('' when it has none): what one-line errors and logs show."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


class StoreError(AdvisorError):
    """The DuckDB store cannot be opened, migrated or queried as asked."""

    exit_code = 4


class RecordsRejected(StoreError):
    """The store refused rows for what they hold (a type, a column, a constraint), not for its own state: the same
    rows would be refused again, so a caller sets them aside instead of retrying."""


class DamagedStoreError(StoreError):
    """The store file is damaged (cut short, or a block whose checksum does not match): nothing can use it."""


class DataError(AdvisorError):
    """Imported or recorded data is malformed (missing columns, bad scores, unknown models, empty files)."""

    exit_code = 2


class RouterError(AdvisorError):
    """The router cannot decide (no artifact, wrong artifact version, no allowed rung)."""

    exit_code = 5


def did_you_mean(name: str, choices: list[str] | tuple[str, ...] | set[str]) -> str:
    """Return a ' did you mean X?' hint plus the list of available names, for unknown-name errors."""
    options = sorted(choices)
    close = difflib.get_close_matches(name, options, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"{hint} Available: {', '.join(options) if options else '(none)'}."
