"""The nesting-depth bound on every JSON and YAML input the advisor reads (one place, one setting).

Deeply nested input (``[[[[...`` 100,000 levels deep) makes recursive parsers and validators fail with a
`RecursionError` and a traceback of thousands of lines. Every loader of an input file therefore checks the depth
first: JSON text with `check_json_depth` (a linear scan of the brackets outside strings, before any parsing),
YAML through `advisor.yamlio`'s loader (which counts the depth while composing). Deeper input is one error line
naming the source and the limit: at most `max_nesting()` levels, `DEFAULT_MAX_NESTING` (100) unless
``ADVISOR_MAX_NESTING`` says otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from advisor.env_limits import count_limit
from advisor.errors import AdvisorError, ConfigError

DEFAULT_MAX_NESTING = 100  #: levels of nested objects/lists an input file may have unless ADVISOR_MAX_NESTING is set
MAX_NESTING_ENV = "ADVISOR_MAX_NESTING"

#: a JSON string, escapes included (removed before brackets are counted: a prompt may hold "[[[")
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
#: bytes.translate table: an opening bracket is +1, a closing one -1 (as int8), everything else is deleted
_STEPS = bytes(1 if c in b"[{" else 255 if c in b"]}" else 0 for c in range(256))
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")


def max_nesting() -> int:
    """Levels of nesting allowed in one input (``ADVISOR_MAX_NESTING``, default `DEFAULT_MAX_NESTING`)."""
    return count_limit(MAX_NESTING_ENV, DEFAULT_MAX_NESTING, "levels")


def too_deep(source: str, what: str, limit: int) -> str:
    """The one-line message for input nested deeper than `limit`."""
    return (f"{source}: {what} nested more than {limit} levels deep (limit {MAX_NESTING_ENV}={limit}); "
            "flatten the data or raise the limit")


def json_depth(text: str | bytes) -> int:
    """The deepest nesting of objects and lists in JSON text (brackets inside strings do not count)."""
    # heavy dependency, imported on use: numpy
    import numpy as np

    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if b'\\"' in raw:  # a string holds an escaped quote (or ends with a backslash): find the strings' ends
        outside = _STRING.sub(b"", raw)
    else:  # the common case, faster: every quote starts or ends a string
        outside = b"".join(raw.split(b'"')[::2])
    brackets = outside.translate(_STEPS, _NOT_BRACKETS)
    if not brackets:
        return 0
    return int(np.cumsum(np.frombuffer(brackets, dtype=np.int8), dtype=np.int64).max())


def check_json_depth(text: str, source: str, error: type[AdvisorError] = ConfigError) -> None:
    """Raise `error` (one line naming `source` and the limit) when `text` nests deeper than `max_nesting()`."""
    limit = max_nesting()
    if json_depth(text) > limit:
        raise error(too_deep(source, "JSON", limit))


def load_json(text: str | bytes, source: str, error: type[AdvisorError] = ConfigError) -> Any:
    """`json.loads` after the depth check; invalid JSON is one `error` line naming `source`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    check_json_depth(text, source, error)
    try:
        return json.loads(text)
    except ValueError as exc:
        raise error(f"{source}: invalid JSON ({exc})") from None
