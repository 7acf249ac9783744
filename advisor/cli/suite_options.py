"""One meaning for ``--suite`` in every command: a suite file. A suite already in the store is picked by its
name with ``--suite-name``.

`advisor probe`, `plan`, `serve`, `judge agreement` and `triton serve` read the suite file itself; `floors`,
`report`, `policies` and `verifier measure` read the store, and take either the file (its name is read from it)
or the stored name. ``--suite NAME`` where no such file exists is a one-line error that names ``--suite-name``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

SuiteFileOpt = Annotated[Optional[Path], typer.Option(
    "--suite", dir_okay=False, help="Suite file whose stored runs are used (its name is read from it; needed when "
    "the store holds several suites).")]
SuiteNameOpt = Annotated[Optional[str], typer.Option(
    "--suite-name", help="Name of a suite in the store, instead of --suite FILE.")]


def stored_suite_name(file: Path | None, name: str | None) -> str | None:
    """The stored suite's name from ``--suite FILE`` and/or ``--suite-name NAME`` (None: the store's only one)."""
    from advisor.errors import ConfigError

    if file is None:
        return name
    if not file.is_file():
        raise ConfigError(f"--suite {file}: no such file; --suite takes a suite file in every command "
                          f"(to pick a suite in the store by its name: --suite-name {file})")
    from advisor.suite import load_suite

    from_file = load_suite(file).name
    if name is not None and name != from_file:
        raise ConfigError(f"--suite {file} is suite {from_file!r} but --suite-name says {name!r}: give one of them")
    return from_file
