"""docs/cli.md is the CLI's own --help output: regenerate it when a command changes."""

from pathlib import Path

from advisor.cli.reference import command_paths, render_reference

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def test_every_command_group_is_listed():
    paths = {" ".join(p) for p in command_paths()}
    assert {"probe", "floors", "report", "import", "route", "ladder check", "triton serve", "router train",
            "router eval", "suite import tessl", "store info"} <= paths


def test_docs_cli_md_is_up_to_date():
    assert DOC.read_text() == render_reference(), (
        "docs/cli.md is stale: run `python -m advisor.cli.reference > docs/cli.md`")
