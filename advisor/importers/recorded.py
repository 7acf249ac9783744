"""Import recorded per-prompt results (long or wide tables; CSV, JSONL, Parquet) into the store.

Two table shapes are read:

- **long**: one row per prompt x model, with columns for the prompt (and optionally a prompt id), the task
  class, the model, the score, and optionally ``input_tokens``, ``output_tokens`` and ``cost``;
- **wide** (RouterBench's convention): one row per prompt with ``prompt``, a task/class column, one score
  column per model and optional ``<model>|total_cost`` columns. Known bookkeeping columns (``metric``,
  ``est_prompt_tokens``, ``prompt_key``, ``task_fold``, ``sample_id``, ``oracle_model_to_route_to``, any other
  ``<model>|...`` column) are ignored; ``ignore=`` names more.

Scores are fractions in [0, 1] and map to the 0-100 scale as IF = TC = score x 100, so overall = score x 100;
a run is usable when overall >= the stated bar (default 75, i.e. a score of at least 0.75). Where no cost is
recorded it is **estimated** from the ladder's prices: input tokens = ``est_prompt_tokens`` (or an
``input_tokens`` column, else characters / 4), output tokens = a fixed stated number (default 256), and the
run is flagged ``cost_estimated``. A missing score (empty cell, null) skips that prompt x model and is
counted, never stored as 0; NaN, non-numeric or out-of-range scores, missing columns, unknown models and empty
files are one `DataError` each, raised before anything is written. Numbers in text cells are plain decimals
(``0.75``, ``1e-3``; not ``0_75``, which Python's float() takes); a prompt is text (a JSON object is refused, not
stored as its repr); one prompt id with two prompts or classes is refused, and so are several rows of one
(prompt id, model) unless ``replicas`` (``--replicas``) says they are intended. The whole import is one transaction.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.version import __version__
from advisor.errors import DataError, did_you_mean
from advisor.importers import register_importer
from advisor.ladder import Ladder
from advisor.records import RunKind, RunRecord, StopReason, make_run_key, now, text_hash
from advisor.scores import DEFAULT_BAR, DEFAULT_NEAR_ZERO
from advisor.store import Store
from advisor.store.files import read_table  # noqa: F401  (re-exported: importers and the router read through it)

DEFAULT_OUTPUT_TOKENS = 256  #: stated output-token assumption when a table records no cost or output tokens
CHARS_PER_TOKEN = 4  #: input-token assumption when a table records none: characters / 4
MAX_TOKENS = 1e9  #: more tokens than this in one recorded answer is a unit mistake, refused
MAX_COST_USD = 1e6  #: more USD than this for one recorded answer is a unit mistake, refused

PROMPT_COLUMNS = ("prompt", "question", "query", "input")
TASK_COLUMNS = ("task", "task_class", "class", "eval_name", "category")
ID_COLUMNS = ("prompt_id", "sample_id", "prompt_key", "id")
#: Wide-table columns that are never model scores.
WIDE_IGNORED = {"metric", "est_prompt_tokens", "prompt_key", "task_fold", "sample_id", "prompt_id", "id",
                "oracle_model_to_route_to", "split", "fold"}


class ImportOptions(BaseModel):
    """How to read a recorded-results table (every default is stated in `advisor import --help`)."""

    model_config = ConfigDict(extra="forbid")

    suite_name: str = Field(min_length=1, description="Suite name the imported runs are stored under.")
    shape: Literal["long", "wide", "auto"] = Field("auto", description="Table shape; auto = long when it has "
                                                   "'model' and 'score' columns, else wide.")
    bar: float = Field(DEFAULT_BAR, ge=0, le=100, description="Usable threshold on the 0-100 scale.")
    output_tokens: int = Field(DEFAULT_OUTPUT_TOKENS, ge=0, description="Assumed output tokens per answer "
                               "when neither cost nor output tokens are recorded.")
    model_map: dict[str, str] = Field(default_factory=dict, description="Source model name -> ladder rung.")
    task_column: str | None = Field(None, description="Task-class column (default: first of task, task_class, "
                                    "class, eval_name, category).")
    prompt_column: str | None = Field(None, description="Prompt-text column (default: prompt).")
    ignore: list[str] = Field(default_factory=list, description="Extra wide-table columns that are not models.")
    replicas: bool = Field(False, description="Several rows of one (prompt id, model) are intended replicas "
                           "(stored as replicas 0, 1, ...); without it they are an error naming the rows.")


@dataclass
class ImportReport:
    """What an import read, wrote, skipped and assumed."""

    file: str
    suite_name: str
    shape: str
    rows: int
    prompts: int
    runs_read: int
    runs_added: int
    runs_already_stored: int
    missing_scores_skipped: int
    missing_by_model: dict[str, int] = field(default_factory=dict)
    cost_recorded: int = 0
    cost_estimated: int = 0
    models: dict[str, str] = field(default_factory=dict)  #: source model -> rung
    classes: dict[str, int] = field(default_factory=dict)  #: prompts per task class
    bar: float = DEFAULT_BAR
    assumption: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report as a plain dict (for --json)."""
        return asdict(self)


# --------------------------------------------------------------------------------------------- reading
# `read_table` (CSV, JSONL, Parquet through DuckDB) lives with the rest of the SQL in advisor.store.files.


def _pick(columns: list[str], explicit: str | None, candidates: tuple[str, ...], what: str, path,
          required: bool) -> str | None:
    if explicit is not None:
        if explicit not in columns:
            raise DataError(f"{path}: no {what} column {explicit!r}.{did_you_mean(explicit, columns)}")
        return explicit
    for c in candidates:
        if c in columns:
            return c
    if required:
        raise DataError(f"{path}: missing {what} column (looked for {', '.join(candidates)}; "
                        f"columns: {', '.join(columns)}). Name it with --{what}-column.")
    return None


#: a plain decimal number as text: ASCII digits, one optional point, an optional exponent (no ``_``, ``inf``,
#: hex, and no other script's digits such as ``١`` or ``１``, which Python's float() would also take)
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _decimal(text: str) -> float:
    """The value of a plain decimal number; ValueError for anything else Python's float() would also take
    (``0_1``, ``inf``, ``nan``, ``١``; surrounding spaces inside the cell are trimmed first)."""
    text = text.strip()
    if not _DECIMAL.fullmatch(text):
        raise ValueError(text)
    return float(text)


def _score(value: Any, where: str) -> float | None:
    """A score in [0, 1], None when missing; DataError when NaN, not a plain decimal number or out of range."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        if value.strip().lower() in ("nan", "+nan", "-nan"):
            raise DataError(f"{where}: score is NaN (leave the cell empty for a missing score)")
        try:
            value = _decimal(value)
        except ValueError:
            raise DataError(f"{where}: score {value!r} is not a number (a plain decimal with ASCII digits, like "
                            "0.75)") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where}: score {value!r} is not a number")
    value = float(value)
    if math.isnan(value):
        raise DataError(f"{where}: score is NaN (leave the cell empty for a missing score)")
    if not 0.0 <= value <= 1.0:
        raise DataError(f"{where}: score {value} is outside [0, 1] (scores are fractions; 1 = fully correct)")
    return value


def _number(value: Any, where: str, column: str, limit: float, unit: str) -> float | None:
    """A finite number in [0, limit] from a cell, None when empty; one `DataError` naming row and column."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        raise DataError(f"{where}, column {column!r}: {value!r} is not a number")
    try:
        out = _decimal(value) if isinstance(value, str) and value.strip().lower() not in (
            "inf", "+inf", "-inf", "infinity", "nan") else float(value)
    except (TypeError, ValueError, OverflowError):
        raise DataError(f"{where}, column {column!r}: {value!r} is not a number") from None
    if not math.isfinite(out):
        raise DataError(f"{where}, column {column!r}: {value!r} must be a finite, non-negative number of {unit} "
                        "(leave the cell empty when it is not known)")
    if out < 0:
        raise DataError(f"{where}, column {column!r}: {value!r} must be a non-negative number of {unit}")
    if out > limit:
        raise DataError(f"{where}, column {column!r}: {value!r} is more than {limit:g} {unit} for one answer; "
                        f"check the column's unit (leave the cell empty when it is not known)")
    return out


def _tokens(row: dict, column: str | None, where: str) -> float | None:
    return _number(row.get(column), where, column, MAX_TOKENS, "tokens") if column else None


def _cost(row: dict, column: str | None, where: str) -> float | None:
    return _number(row.get(column), where, column, MAX_COST_USD, "USD") if column else None


# --------------------------------------------------------------------------------------------- parsing
@dataclass
class _Cell:
    """One prompt x model result, parsed and validated."""

    row: int  #: row number in the file (line for CSV)
    task_id: str
    prompt: str
    task_class: str
    model: str
    score: float
    input_tokens: float | None
    output_tokens: float | None
    cost: float | None


def _rows_to_cells(rows: list[dict], opts: ImportOptions, path) -> tuple[str, list[_Cell], Counter]:
    columns = list(dict.fromkeys(k for r in rows[:50] for k in r))
    shape = opts.shape
    if shape == "auto":
        if "model" in columns and "score" not in columns:
            raise DataError(f"{path}: has a 'model' column but no 'score' column (columns: {', '.join(columns)}); "
                            "a long table needs a 'score' column with fractions in [0, 1]; rename the score "
                            "column, or pass --shape wide if every other column is a model's score")
        if "score" in columns and "model" not in columns:
            raise DataError(f"{path}: has a 'score' column but no 'model' column (columns: {', '.join(columns)}); "
                            "a long table needs a 'model' column naming each row's model, or pass --shape wide "
                            "if 'score' is a model's score column")
        shape = "long" if {"model", "score"} <= set(columns) else "wide"
    pcol = _pick(columns, opts.prompt_column, PROMPT_COLUMNS, "prompt", path, required=True)
    tcol = _pick(columns, opts.task_column, TASK_COLUMNS, "task", path, required=False)
    icol = _pick(columns, None, ID_COLUMNS, "id", path, required=False)
    missing: Counter = Counter()
    cells: list[_Cell] = []
    if shape == "long":
        for need in ("model", "score"):
            if need not in columns:
                raise DataError(f"{path}: long table has no {need!r} column (columns: {', '.join(columns)})")
        cost_col = next((c for c in ("cost", "cost_usd", "total_cost") if c in columns), None)
    else:
        skip = {pcol, tcol, icol, *WIDE_IGNORED, *opts.ignore}
        models = [c for c in columns if c not in skip and "|" not in c]
        if not models:
            raise DataError(f"{path}: wide table has no model score columns (columns: {', '.join(columns)})")
    for n, row in enumerate(rows, start=2 if str(path).endswith(".csv") else 1):
        where = f"{path}: row {n}"
        prompt = row.get(pcol)
        if prompt is not None and not isinstance(prompt, str):
            raise DataError(f"{where}: {pcol!r} is a {_kind(prompt)}, not text; a prompt must be a string")
        if prompt is None or not prompt.strip():
            raise DataError(f"{where}: empty {pcol!r}")
        task_class = _label(row, tcol, where) or "unclassified"
        task_id = _label(row, icol, where) or text_hash(prompt)[:16]
        in_col = "est_prompt_tokens" if "est_prompt_tokens" in row else ("input_tokens" if "input_tokens" in row else None)
        est_in = _tokens(row, in_col, where)
        if shape == "long":
            model = row.get("model")
            if model is None:
                raise DataError(f"{where}: empty 'model'")
            score = _score(row.get("score"), f"{where}, column 'score', model {model}")
            if score is None:
                missing[str(model)] += 1
                continue
            cells.append(_Cell(n, task_id, prompt, task_class, str(model), score, est_in,
                               _tokens(row, "output_tokens", where), _cost(row, cost_col, where)))
        else:
            for model in models:
                score = _score(row.get(model), f"{where}, column {model!r}")
                if score is None:
                    missing[model] += 1
                    continue
                cells.append(_Cell(n, task_id, prompt, task_class, model, score, est_in,
                                   _tokens(row, f"{model}|output_tokens", where),
                                   _cost(row, f"{model}|total_cost", where)))
    return shape, cells, missing


def _kind(value: Any) -> str:
    return {dict: "JSON object", list: "JSON list"}.get(type(value), type(value).__name__)


def _label(row: dict, column: str | None, where: str) -> str | None:
    """A class or id cell as text (None when the column or the cell is missing); objects and lists refused."""
    value = row.get(column) if column else None
    if value is None:
        return None
    if isinstance(value, (dict, list, tuple, bytes, bool)):
        raise DataError(f"{where}: {column!r} is a {_kind(value)} ({str(value)[:40]}), not a name or id")
    return str(value)


def check_consistent(cells: list[_Cell], path, replicas: bool) -> None:
    """One `DataError` when a prompt id has two different prompts or classes (always), or when a (prompt id,
    model) pair has several rows and `replicas` was not given; the message names the rows."""
    first: dict[str, _Cell] = {}
    rows: dict[tuple[str, str], list[int]] = {}
    for c in cells:
        seen = first.setdefault(c.task_id, c)
        for what, a, b in (("prompts", seen.prompt, c.prompt), ("classes", seen.task_class, c.task_class)):
            if a != b:
                shown = "" if what == "prompts" else f" ({a!r} and {b!r})"
                raise DataError(f"{path}: rows {seen.row} and {c.row}: prompt id {c.task_id!r} has two different "
                                f"{what}{shown}; give each prompt its own id")
        rows.setdefault((c.task_id, c.model), []).append(c.row)
    if not replicas:
        for (task_id, model), where in rows.items():
            if len(where) > 1:
                shown = ", ".join(map(str, where[:5])) + (", ..." if len(where) > 5 else "")
                raise DataError(f"{path}: rows {shown}: prompt id {task_id!r} has {len(where)} results for model "
                                f"{model!r}; remove the duplicates, or pass --replicas if they are intended "
                                "replicas of one prompt")


def _map_models(names: set[str], ladder: Ladder, model_map: dict[str, str], path) -> dict[str, str]:
    rungs = [r.name for r in ladder.rungs]
    for src, rung in model_map.items():
        if rung not in rungs:
            raise DataError(f"--map {src}={rung}: ladder {ladder.name!r} has no rung {rung!r}."
                            f"{did_you_mean(rung, rungs)}")
    out = {}
    for name in sorted(names):
        rung = model_map.get(name, name)
        if rung not in rungs:
            raise DataError(f"{path}: model {name!r} is not a rung of ladder {ladder.name!r}."
                            f"{did_you_mean(name, rungs)} Map it with --map {name}=RUNG"
                            " (or --ignore it if the column is not a model).")
        out[name] = rung
    return out


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def token_assumption(output_tokens: int) -> str:
    """The stated token assumption behind estimated costs."""
    return (f"estimated cost = ladder list price x tokens; input tokens = est_prompt_tokens or input_tokens "
            f"column, else characters/{CHARS_PER_TOKEN}; output tokens = {output_tokens} per answer unless "
            "recorded")


# --------------------------------------------------------------------------------------------- import
@dataclass
class PreparedImport:
    """A recorded-results table read and validated, ready to be written (`write_import`)."""

    path: Path
    opts: ImportOptions
    ladder: Ladder
    shape: str
    rows: int
    suite_hash: str
    runs: list[RunRecord]
    tasks: dict[str, tuple]
    prompts: dict[str, str]
    missing: Counter
    mapping: dict[str, str]
    estimated: int


@register_importer("recorded", produces="runs")
def import_recorded(path: str | Path, ladder: Ladder, store: Store, opts: ImportOptions) -> ImportReport:
    """Read, validate and store a recorded-results table; nothing is written unless all of it is valid."""
    return write_import(prepare_import(path, ladder, opts), store)


def prepare_import(path: str | Path, ladder: Ladder, opts: ImportOptions) -> PreparedImport:
    """Read and validate a recorded-results table without touching any store (every problem: one `DataError`)."""
    path = Path(path)
    rows = read_table(path)
    shape, cells, missing = _rows_to_cells(rows, opts, path)
    check_consistent(cells, path, opts.replicas)
    if not cells:
        raise DataError(f"{path}: every score is missing ({sum(missing.values())} empty cells); nothing to import")
    mapping = _map_models({c.model for c in cells} | set(missing), ladder, opts.model_map, path)
    suite_hash = hashlib.sha256(f"imported\x1f{opts.suite_name}\x1f{_file_digest(path)}".encode()).hexdigest()[:16]
    ladder_hash = ladder.config_hash()
    positions = {r.name: i for i, r in enumerate(ladder.rungs)}
    settings = json.dumps({"bar": opts.bar, "output_tokens": opts.output_tokens, "shape": shape,
                           "source": str(path), "assumption": token_assumption(opts.output_tokens)})
    runs, tasks, prompts = [], {}, {}
    seen: Counter = Counter()
    n_est = 0
    stamp = now()
    for c in cells:
        rung = ladder.rung(mapping[c.model])
        ph = text_hash(c.prompt)
        prompts[ph] = c.prompt
        tasks[c.task_id] = (c.task_id, c.task_class, False, ph)
        replica = seen[(c.task_id, rung.name)]
        seen[(c.task_id, rung.name)] += 1
        in_tok = c.input_tokens if c.input_tokens is not None else len(c.prompt) / CHARS_PER_TOKEN
        out_tok = c.output_tokens if c.output_tokens is not None else float(opts.output_tokens)
        estimated = c.cost is None
        cost = rung.attempt_cost(in_tok, out_tok) if estimated else c.cost
        n_est += estimated
        overall = c.score * 100.0
        runs.append(RunRecord(
            run_key=make_run_key(RunKind.IMPORTED, suite_hash, c.task_id, rung.name, replica),
            kind=RunKind.IMPORTED, suite_name=opts.suite_name, suite_hash=suite_hash, task_id=c.task_id,
            task_class=c.task_class, ladder_name=ladder.name, ladder_hash=ladder_hash, rung=rung.name,
            rung_position=positions[rung.name], replica=replica, prompt_hash=ph, stop_reason=StopReason.IMPORTED,
            model_calls=1, input_tokens=int(round(in_tok)), output_tokens=int(round(out_tok)),
            tokens_from_server=c.input_tokens is not None and c.output_tokens is not None,
            cost_usd=float(cost), cost_estimated=estimated, if_score=overall, tc_score=overall, overall=overall,
            bar=opts.bar, near_zero=DEFAULT_NEAR_ZERO, simulated=ladder.simulated, advisor_version=__version__,
            settings_json=settings, started_at=stamp, finished_at=stamp))
    return PreparedImport(path, opts, ladder, shape, len(rows), suite_hash, runs, tasks, prompts, missing, mapping,
                          n_est)


def write_import(prep: PreparedImport, store: Store) -> ImportReport:
    """Store a prepared import in one transaction and report what was added, skipped and assumed."""
    opts, path = prep.opts, prep.path
    config = {**opts.model_dump(), "shape": prep.shape, "file": str(path),
              "assumption": token_assumption(opts.output_tokens)}
    added = store.record_import(prep.ladder, opts.suite_name, prep.suite_hash, str(path), config,
                                list(prep.tasks.values()), list(prep.prompts.items()), prep.runs)
    classes = Counter(t[1] for t in prep.tasks.values())
    runs = prep.runs
    return ImportReport(
        file=str(path), suite_name=opts.suite_name, shape=prep.shape, rows=prep.rows, prompts=len(prep.tasks),
        runs_read=len(runs), runs_added=added, runs_already_stored=len(runs) - added,
        missing_scores_skipped=sum(prep.missing.values()), missing_by_model=dict(prep.missing),
        cost_recorded=len(runs) - prep.estimated, cost_estimated=prep.estimated, models=prep.mapping,
        classes=dict(classes), bar=opts.bar, assumption=token_assumption(opts.output_tokens))

