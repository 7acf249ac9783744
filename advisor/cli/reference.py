"""The command reference (`docs/cli.md`), generated from the CLI's own `--help` so the docs stay in step.

Regenerate with ``python -m advisor.cli.reference > docs/cli.md``; a test fails when the file is stale.
"""

from __future__ import annotations

import sys

WIDTH = "100"


def command_paths() -> list[list[str]]:
    """Every command path of the CLI (``[]`` is the top level), depth first in registration order."""
    import typer

    from advisor.cli import build_app

    def walk(cmd, prefix: list[str]) -> list[list[str]]:
        paths = [prefix]
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            paths += walk(sub, [*prefix, name])
        return paths

    return walk(typer.main.get_command(build_app()), [])


def render_reference() -> str:
    """Markdown with the `--help` text of every command."""
    from typer.testing import CliRunner

    from advisor.cli import build_app

    env = {"COLUMNS": WIDTH, "NO_COLOR": "1", "TERM": "dumb"}
    app = build_app()
    runner = CliRunner()
    parts = ["# advisor command reference", "",
             "Generated from `--help` by `python -m advisor.cli.reference > docs/cli.md`; do not edit by hand.", ""]
    for path in command_paths():
        result = runner.invoke(app, [*path, "--help"], prog_name="advisor", env=env)
        text = "\n".join(line.rstrip() for line in result.output.strip("\n").splitlines()).strip("\n")
        parts += [f"## advisor {' '.join(path)}".rstrip(), "", "```", text, "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render_reference())
