"""`advisor import FILE`: recorded per-prompt results (long or wide; CSV, JSONL, Parquet) into the store."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.errors import DataError
from advisor.importers.recorded import DEFAULT_OUTPUT_TOKENS, ImportOptions, prepare_import, write_import
from advisor.scores import DEFAULT_BAR
from advisor.store import DEFAULT_STORE


class Shape(str, Enum):
    """Table shape."""

    long = "long"
    wide = "wide"
    auto = "auto"


def register(app: typer.Typer) -> None:
    """Add the `import` command."""
    app.command("import")(import_file)


def parse_map(items: list[str]) -> dict[str, str]:
    """``model=rung`` pairs into a dict (DataError on a malformed pair)."""
    out = {}
    for item in items:
        src, sep, rung = item.partition("=")
        if not sep or not src.strip() or not rung.strip():
            raise DataError(f"--map {item!r}: expected MODEL=RUNG")
        out[src.strip()] = rung.strip()
    return out


def import_file(
    file: Annotated[Path, typer.Argument(help="Recorded results: .csv, .jsonl or .parquet.")],
    ladder: Annotated[Path, typer.Option("--ladder", help="Ladder YAML whose rungs the models map to.")],
    suite_name: Annotated[str, typer.Option("--suite-name", help="Suite name to store the runs under.")],
    store: Annotated[Path, typer.Option("--store", help="DuckDB store file.")] = Path(DEFAULT_STORE),
    shape: Annotated[Shape, typer.Option("--shape", help="long: one row per prompt x model (prompt, task, model, "
                                         "score[, input_tokens, output_tokens, cost]); wide: RouterBench "
                                         "convention (prompt, task, one score column per model, optional "
                                         "<model>|total_cost); auto: long when 'model' and 'score' exist.")]
    = Shape.auto,
    usable_threshold: Annotated[float, typer.Option(
        "--usable-threshold", min=0, max=100, help="The bar on the 0-100 scale. Scores in [0, 1] become IF = TC = overall = "
        "score x 100, so the default 75 means a score of at least 0.75 is usable.")] = DEFAULT_BAR,
    output_tokens: Annotated[int, typer.Option(
        "--output-tokens", min=0, help="Stated output-token assumption for estimated costs (when no cost and no "
        "output tokens are recorded). Input tokens: est_prompt_tokens / input_tokens column, else chars/4. "
        "Estimated runs are flagged cost_estimated.")] = DEFAULT_OUTPUT_TOKENS,
    model_map: Annotated[Optional[list[str]], typer.Option(
        "--map", help="MODEL=RUNG: map a source model name to a ladder rung (repeatable).")] = None,
    task_column: Annotated[Optional[str], typer.Option(
        "--task-column", help="Task-class column (default: task, task_class, class, eval_name or category; "
        "'unclassified' when none).")] = None,
    prompt_column: Annotated[Optional[str], typer.Option("--prompt-column", help="Prompt column (default: prompt).")]
    = None,
    ignore: Annotated[Optional[list[str]], typer.Option(
        "--ignore", help="Wide table: a column that is not a model score (repeatable).")] = None,
    replicas: Annotated[bool, typer.Option(
        "--replicas", help="Several rows of one (prompt id, model) are intended replicas, stored as replicas "
        "0, 1, ...; without it they are an error naming the rows.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import recorded per-prompt results as runs of kind 'imported' (one transaction: all or nothing).

    Rows with a missing score are skipped and counted (never stored as 0). NaN or out-of-range scores,
    missing columns, unknown models and empty files stop the import with one message.
    """
    from advisor.ladder import load_ladder
    from advisor.store import RunStore, open_store

    opts = ImportOptions(suite_name=suite_name, shape=shape.value, bar=usable_threshold, output_tokens=output_tokens,
                         model_map=parse_map(model_map or []), task_column=task_column, prompt_column=prompt_column,
                         ignore=ignore or [], replicas=replicas)
    lad = load_ladder(ladder)
    prepared = prepare_import(file, lad, opts)  # every input problem is found before the store is touched
    with open_store(store, role=RunStore) as s:
        report = write_import(prepared, s)
    if as_json:
        typer.echo(jsonout.dumps(report.to_dict(), indent=2))
        return
    typer.echo(f"{report.file}: {report.shape} table, {report.rows} rows, {report.prompts} prompts, "
               f"{len(report.classes)} classes -> suite {report.suite_name!r} in {store}")
    typer.echo(f"  runs: {report.runs_added} added, {report.runs_already_stored} already stored; "
               f"{report.missing_scores_skipped} missing scores skipped (not counted as 0)")
    typer.echo(f"  usable when overall >= {report.bar:g} (score >= {report.bar / 100:.2f})")
    typer.echo(f"  cost: {report.cost_recorded} recorded, {report.cost_estimated} ESTIMATED "
               f"({report.assumption})")
