"""Conventions every command follows, checked through the real CLI: flags, the version, the --suite option."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

from advisor.cli.reference import render_reference

ADVISOR = str(Path(sys.executable).parent / "advisor")


def test_version_prints_the_one_version():
    import advisor

    done = subprocess.run([ADVISOR, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == f"advisor {advisor.__version__}\n"
    assert importlib.metadata.version("advisor") == advisor.__version__  # pyproject.toml reads advisor.__version__


def test_flags_show_no_value_type_in_help():
    """An on-off flag takes no value: --help never shows it with a type such as <bool>."""
    text = render_reference()
    assert "<bool>" not in text
    assert "--json" in text and "--full-grid" in text and "--version" in text


def test_suite_means_a_file_in_every_command(tmp_path):
    """--suite takes a suite file everywhere; a stored suite's name goes with --suite-name; the old use
    (--suite NAME in floors/report/policies/verifier measure) is one line naming --suite-name."""
    import json

    import typer

    from advisor.cli import build_app
    from advisor.cli.reference import command_paths
    from advisor.store import Store
    from synthetic import make_run

    app = typer.main.get_command(build_app())
    for path in command_paths():
        cmd = app
        for part in path:
            cmd = cmd.commands[part]
        for param in cmd.params:
            if "--suite" in param.opts:
                assert "Path" in str(param.type_descriptor.annotation), path  # a file, never a name
    store = tmp_path / "s.duckdb"
    with Store.open(store) as s:
        s.add_runs_bulk([make_run("narrow", f"t{i}", "small", overall=90.0) for i in range(4)])
        name = s.query("SELECT DISTINCT suite_name FROM runs")[0]["suite_name"]
    for command in (["floors"], ["report", "--out", str(tmp_path / "r")], ["policies"]):
        done = subprocess.run([ADVISOR, *command, "--store", str(store), "--suite", name], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)
        assert done.returncode != 0 and done.stderr.count("\n") == 1, (command, done.stderr)
        assert f"--suite-name {name}" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([ADVISOR, "floors", "--store", str(store), "--suite-name", name, "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["suite"] == name
    example = Path(__file__).resolve().parent.parent / "suites" / "example" / "suite.yaml"
    done = subprocess.run([ADVISOR, "floors", "--store", str(store), "--suite", str(example)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0 and "no runs for suite 'example'" in done.stderr  # the file's name was read


def test_plan_fits_80_columns():
    import os

    done = subprocess.run([ADVISOR, "plan"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "80", "NO_COLOR": "1"})
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout and max(len(line.rstrip()) for line in done.stdout.splitlines()) <= 80
    assert "doc_retrieval" in done.stdout and "multi_step" in done.stdout  # class names whole


def test_probe_help_fits_80_columns_uncut():
    """`advisor probe --help` at 80 columns: no help text cut with an ellipsis, grouped options, a page or so."""
    from typer.testing import CliRunner

    from advisor.cli import build_app

    result = CliRunner().invoke(build_app(), ["probe", "--help"], prog_name="advisor",
                                env={"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"})
    text = result.output
    assert result.exit_code == 0 and "…" not in text and "..." not in text
    assert max(len(line.rstrip()) for line in text.splitlines()) <= 80
    assert len(text.splitlines()) <= 80 and "--more" in text and "What to probe" in text


def test_warnings_are_one_plain_line(capsys):
    """A Python warning raised under the CLI prints as `warning: ...`, without a source path or line number."""
    import warnings

    from advisor.cli import _plain_warnings

    saved = warnings.showwarning
    try:
        _plain_warnings()
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("rung 'super-120b': cross-validated AUC 0.54 < 0.55", UserWarning)
    finally:
        warnings.showwarning = saved
    err = capsys.readouterr().err
    assert err == "warning: rung 'super-120b': cross-validated AUC 0.54 < 0.55\n"


def test_no_help_text_is_cut_at_80_columns():
    """Every command's --help at 80 columns wraps its texts; none is cut with an ellipsis."""
    from typer.testing import CliRunner

    from advisor.cli import build_app
    from advisor.cli.reference import command_paths

    app, runner = build_app(), CliRunner()
    cut = [" ".join(path) for path in command_paths()
           if "…" in runner.invoke(app, [*path, "--help"], prog_name="advisor",
                                   env={"COLUMNS": "80", "NO_COLOR": "1", "TERM": "dumb"}).output]
    assert cut == []
