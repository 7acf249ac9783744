"""The `advisor` command line: a thin shell that parses, calls the library, and renders.

Each command group lives in its own module with a ``register(app)`` function. Errors from the library
(`AdvisorError`) are printed as one line without a traceback and turn into a non-zero exit code.
"""

from __future__ import annotations

import importlib
import sys

import typer
import typer.core

#: Command modules, each exposing ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = [
    "advisor.cli.ladder_cmd",
    "advisor.cli.triton_cmd",
    "advisor.cli.suite_cmd",
    "advisor.cli.probe_cmd",
    "advisor.cli.floors_cmd",
    "advisor.cli.savings_cmd",
    "advisor.cli.policies_cmd",
    "advisor.cli.report_cmd",
    "advisor.cli.import_cmd",
    "advisor.cli.router_cmd",
    "advisor.cli.store_cmd",
    "advisor.cli.judge_cmd",
    "advisor.cli.verifier_cmd",
    "advisor.cli.plan_cmd",
    "advisor.cli.serve_cmd",
]


class _Root(typer.core.TyperGroup):
    """The root group: on-off flags take no value, so ``--help`` shows none for them (no ``<bool>``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _flags_without_type(self)


def _flags_without_type(cmd) -> None:
    """Blank the type column of every flag (and of ``--help``) of `cmd` and its subcommands."""
    from types import SimpleNamespace

    help_option = cmd.get_help_option(SimpleNamespace(help_option_names=["--help"]))  # cached by the command
    for param in [*cmd.params, *([help_option] if help_option is not None else [])]:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
    for sub in (getattr(cmd, "commands", None) or {}).values():
        _flags_without_type(sub)


def _version(value: bool) -> None:
    if value:
        from advisor import __version__

        typer.echo(f"advisor {__version__}")
        raise typer.Exit()


def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                       help="Print advisor's version and exit.")) -> None:
    """Find the smallest usable agent per task class on a Triton-served ladder, report it, and route live
    requests to the cheapest rung expected to pass the quality bar."""


def build_app() -> typer.Typer:
    """The Typer application with every command group registered."""
    app = typer.Typer(
        name="advisor",
        cls=_Root,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(_root)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    """Console entry point: run the CLI, turning advisor errors into one-line messages and exit codes."""
    from pydantic import ValidationError

    from advisor.cli.guards import guard
    from advisor.errors import AdvisorError

    _plain_warnings()
    command = guard(typer.main.get_command(build_app()))
    try:
        code = command.main(args=argv, prog_name="advisor", standalone_mode=False)
        return code if isinstance(code, int) else 0
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except typer.TyperException as exc:  # a usage mistake: one line (the help, when no command was given)
        if type(exc).__name__ == "NoArgsIsHelpError" and getattr(exc, "ctx", None) is not None:
            print(exc.ctx.get_help(), file=sys.stderr)
        else:
            where = getattr(getattr(exc, "ctx", None), "command_path", "advisor")
            print(f"error: {where}: {' '.join(exc.format_message().split())} (see {where} --help)", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except AdvisorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValidationError as exc:  # an option's value that a settings model refused: one line per problem
        for e in exc.errors():
            where = ".".join(str(p) for p in e.get("loc", ())) or exc.title
            print(f"error: {where}: {e.get('msg')}", file=sys.stderr)
        return 2
    return 0


def _plain_warnings() -> None:
    """Print Python warnings as one plain line (`warning: rung 'super-120b': ...`), without the source path and
    line that Python's default format adds."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"warning: {message}", file=file or sys.stderr)

    warnings.showwarning = show


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def console() -> None:
    """The `advisor` console script."""
    sys.exit(main())
