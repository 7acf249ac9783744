"""What every command's options get checked for, in one place, before the command does any work.

`guard(command)` walks the whole command tree once and adds a check to every parameter's callback:

- **numbers are finite**: every number option refuses ``nan``, ``inf`` and ``-inf`` (a range lets ``nan``
  through: it compares false with any bound);
- **outputs can be written**: every option or argument named in `OUTPUTS` (``--out``, ``--out-dir``,
  ``--pointer``, ``store export FOLDER``) is checked at parse time: a folder output must not be an existing file,
  a file output must not be an existing folder, and the nearest folder that exists is tried with a real temporary
  file (permission bits do not stop root; a read-only mount does), so a 30-second training never ends on a path
  it cannot write.

A problem is a usage error (`typer.BadParameter`): one line naming the option, exit 2.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Callable

import typer

#: (command name, parameter name) -> "dir" or "file": outputs checked before the command runs. A command name
#: of None matches any command.
OUTPUTS: dict[tuple[str | None, str], str] = {
    ("report", "out"): "dir",
    ("render", "out"): "dir",
    ("export", "folder"): "dir",
    ("eval", "out_dir"): "dir",
    ("train", "out"): "file",
    ("route", "out"): "file",
    ("tessl", "out"): "file",
    ("from-traffic", "out"): "dir",
    (None, "pointer"): "file",
}


def unwritable(path: Path, kind: str) -> str | None:
    """Why `path` cannot be written as a `kind` (``dir`` or ``file``) output, else None."""
    if path.exists():
        if kind == "dir" and not path.is_dir():
            return f"{path} is a file, not a folder"
        if kind == "file" and path.is_dir():
            return f"{path} is a folder, not a file"
    folder = path if kind == "dir" and path.is_dir() else path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a folder, so {path} cannot be written"
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".advisor-write-check-"):
            pass
    except OSError as exc:
        return f"{path} cannot be written: {folder}: {exc.strerror or exc}"
    return None


def guard(command):
    """`command` (the Click command Typer built) with every parameter's check added (see the module docstring)."""
    _guard(command, command.name)
    return command


def _guard(command, name: str | None) -> None:
    for param in command.params:
        kind = OUTPUTS.get((name, param.name or "")) or OUTPUTS.get((None, param.name or ""))
        param.callback = _checked(param.callback, kind)
    for sub_name, sub in (getattr(command, "commands", None) or {}).items():
        _guard(sub, sub_name)


def _checked(callback: Callable | None, kind: str | None) -> Callable:
    """The parameter's callback after its value is checked: finite when a number, writable when an output."""
    def check(ctx, param, value):
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, float) and not math.isfinite(v):
                raise typer.BadParameter(f"{v!r} is not a finite number", ctx=ctx, param=param)
        if kind is not None and value is not None:
            problem = unwritable(Path(value), kind)
            if problem is not None:
                raise typer.BadParameter(problem, ctx=ctx, param=param)
        return callback(ctx, param, value) if callback is not None else value
    return check
