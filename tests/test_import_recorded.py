"""Import of recorded results: both shapes, every format, mappings, estimated costs, skipped rows, bad input."""

import json

import pytest

from advisor.errors import DataError
from advisor.importers.recorded import ImportOptions, import_recorded
from advisor.ladder import load_ladder
from advisor.store import Store, text_hash

LADDER = """\
version: 1
name: tiny
rungs:
  - name: small
    hf_id: x/small
    params_total_b: 1
    triton_model: small
    price: {basis: tokens, usd_per_m_input: 1.0, usd_per_m_output: 2.0, source: test, as_of: "2026-01"}
    context_length: 4096
    tool_call_format: hermes
  - name: large
    hf_id: x/large
    params_total_b: 10
    triton_model: large
    price: {basis: tokens, usd_per_m_input: 10.0, usd_per_m_output: 20.0, source: test, as_of: "2026-01"}
    context_length: 4096
    tool_call_format: hermes
    self_hosted: false
"""

WIDE = [
    {"prompt": "What is 2+2?", "task": "math", "small": 1.0, "large": 1.0, "large|total_cost": 0.003,
     "metric": "em"},
    {"prompt": "Name the capital of France.", "task": "qa", "small": 0.5, "large": None, "large|total_cost": None,
     "metric": "f1"},
    {"prompt": "Write a haiku.", "task": "writing", "small": 0.0, "large": 0.8, "large|total_cost": 0.004,
     "metric": "judge"},
]
LONG = [
    {"prompt_id": "p1", "prompt": "What is 2+2?", "task": "math", "model": "small", "score": 1.0,
     "input_tokens": 10, "output_tokens": 5},
    {"prompt_id": "p1", "prompt": "What is 2+2?", "task": "math", "model": "large", "score": 1.0, "cost": 0.5},
    {"prompt_id": "p2", "prompt": "Write a haiku.", "task": "writing", "model": "small", "score": None},
]


@pytest.fixture
def ladder(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(LADDER)
    return load_ladder(path)


def write(tmp_path, rows, fmt, name="data"):
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "csv":
        import csv

        cols = list(dict.fromkeys(k for r in rows for k in r))
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=cols)
            w.writeheader()
            w.writerows([{k: ("" if v is None else v) for k, v in r.items()} for r in rows])
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = list(dict.fromkeys(k for r in rows for k in r))
        pq.write_table(pa.table({c: [r.get(c) for r in rows] for c in cols}), path)
    return path


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_wide_every_format(tmp_path, ladder, fmt):
    path = write(tmp_path, WIDE, fmt)
    with Store.open(tmp_path / "s.duckdb") as store:
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="w"))
        assert rep.shape == "wide" and rep.prompts == 3 and rep.runs_added == 5
        assert rep.missing_scores_skipped == 1 and rep.missing_by_model == {"large": 1}
        assert rep.cost_recorded == 2 and rep.cost_estimated == 3
        runs = {(r["task_class"], r["rung"]): r for r in store.runs(kind="imported")}
        assert ("qa", "large") not in runs  # missing score: skipped, never a 0
        half = runs[("qa", "small")]
        assert half["overall"] == pytest.approx(50.0) and half["if_score"] == half["tc_score"] == 50.0
        assert half["bar"] == 75.0 and half["stop_reason"] == "imported"
        # estimated: chars/4 input tokens, 256 output tokens at the ladder price
        text = "Name the capital of France."
        assert half["cost_estimated"] and half["cost_usd"] == pytest.approx((len(text) / 4) * 1e-6 + 256 * 2e-6)
        rec = runs[("math", "large")]
        assert not rec["cost_estimated"] and rec["cost_usd"] == pytest.approx(0.003)
        assert store.prompt_texts([text_hash(text)]) == {text_hash(text): text}
        assert store.count_runs(kind="imported", suite_name="w") == 5


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_long_every_format(tmp_path, ladder, fmt):
    path = write(tmp_path, LONG, fmt)
    with Store.open(tmp_path / "s.duckdb") as store:
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="l", output_tokens=100))
        assert rep.shape == "long" and rep.runs_added == 2 and rep.missing_scores_skipped == 1
        runs = {r["rung"]: r for r in store.runs()}
        assert runs["small"]["task_id"] == "p1" and runs["small"]["cost_estimated"]
        assert runs["small"]["cost_usd"] == pytest.approx(10 * 1e-6 + 5 * 2e-6)  # recorded tokens used
        assert runs["large"]["cost_usd"] == pytest.approx(0.5) and not runs["large"]["cost_estimated"]


def test_reimport_is_idempotent_and_threshold_is_recorded(tmp_path, ladder):
    path = write(tmp_path, WIDE, "csv")
    with Store.open(tmp_path / "s.duckdb") as store:
        import_recorded(path, ladder, store, ImportOptions(suite_name="w", bar=50))
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="w", bar=50))
        assert rep.runs_added == 0 and rep.runs_already_stored == 5
        assert {r["bar"] for r in store.runs()} == {50.0}


def test_model_mapping(tmp_path, ladder):
    rows = [{"prompt": "a", "task": "t", "tiny-model": 1.0}]
    path = write(tmp_path, rows, "jsonl")
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match="'tiny-model' is not a rung.*--map tiny-model=RUNG"):
            import_recorded(path, ladder, store, ImportOptions(suite_name="m"))
        with pytest.raises(DataError, match="Did you mean 'small'"):
            import_recorded(path, ladder, store, ImportOptions(suite_name="m", model_map={"tiny-model": "smal"}))
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="m", model_map={"tiny-model": "small"}))
        assert rep.models == {"tiny-model": "small"} and store.runs()[0]["rung"] == "small"


def test_unknown_model_did_you_mean(tmp_path, ladder):
    path = write(tmp_path, [{"prompt": "a", "task": "t", "smal": 1.0}], "jsonl")
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match="Did you mean 'small'"):
            import_recorded(path, ladder, store, ImportOptions(suite_name="m"))


@pytest.mark.parametrize("rows,message,after_good", [
    ([{"prompt": "a", "task": "t", "small": float("nan")}], "row 4, column 'small': score is NaN", True),
    ([{"prompt": "a", "task": "t", "small": 1.5}], r"outside \[0, 1\]", True),
    ([{"prompt": "a", "task": "t", "small": "yes"}], "not a number", True),
    ([{"prompt": "a", "task": "t", "small": 1.0, "large": 1.0, "large|total_cost": -1}], "non-negative", True),
    ([{"question_text": "a", "small": 1.0}], "missing prompt column", False),
    ([{"prompt": "a", "task": "t"}], "no model score columns", False),
    ([{"prompt": "a", "model": "small"}], "has no 'score' column", False),
    ([{"prompt": "a", "task": "t", "small": None}], "every score is missing", False),
])
def test_bad_input_one_clear_error_nothing_written(tmp_path, ladder, rows, message, after_good):
    good = [{"prompt": f"ok {i}", "task": "t", "small": 1.0} for i in range(3)]
    path = write(tmp_path, good + rows if after_good else rows, "jsonl")
    shape = "long" if "model" in rows[0] else "auto"
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match=message):
            import_recorded(path, ladder, store, ImportOptions(suite_name="bad", shape=shape))
        assert store.count_runs() == 0
        assert store.query("SELECT count(*) AS n FROM prompts")[0]["n"] == 0
        assert store.query("SELECT count(*) AS n FROM suites")[0]["n"] == 0


@pytest.mark.parametrize("content,message", [("", "empty file"), ("prompt,task,small\n", "header only")])
def test_empty_csv(tmp_path, ladder, content, message):
    path = tmp_path / "e.csv"
    path.write_text(content)
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match=message):
            import_recorded(path, ladder, store, ImportOptions(suite_name="e"))


def test_empty_jsonl_and_unknown_extension(tmp_path, ladder):
    (tmp_path / "e.jsonl").write_text("\n")
    (tmp_path / "e.xlsx").write_text("x")
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match="empty file"):
            import_recorded(tmp_path / "e.jsonl", ladder, store, ImportOptions(suite_name="e"))
        with pytest.raises(DataError, match="unsupported file type"):
            import_recorded(tmp_path / "e.xlsx", ladder, store, ImportOptions(suite_name="e"))


def test_database_failure_rolls_back_everything(tmp_path, ladder, monkeypatch):
    path = write(tmp_path, WIDE, "csv")
    with Store.open(tmp_path / "s.duckdb") as store:
        real = store._bulk_insert

        def failing(table, rows, columns=None):
            if table == "runs":
                raise RuntimeError("disk full")
            return real(table, rows, columns)

        monkeypatch.setattr(store, "_bulk_insert", failing)
        with pytest.raises(RuntimeError):
            import_recorded(path, ladder, store, ImportOptions(suite_name="w"))
        for table in ("runs", "prompts", "tasks", "suites", "ladders", "rungs"):
            assert store.query(f"SELECT count(*) AS n FROM {table}")[0]["n"] == 0, table


def test_explicit_columns(tmp_path, ladder):
    rows = [{"q": "hello", "kind": "greet", "small": 1.0, "notes": 3}]
    path = write(tmp_path, rows, "jsonl")
    with Store.open(tmp_path / "s.duckdb") as store:
        with pytest.raises(DataError, match="no task column 'klass'"):
            import_recorded(path, ladder, store, ImportOptions(suite_name="x", prompt_column="q", task_column="klass"))
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="x", prompt_column="q",
                                                                 task_column="kind", ignore=["notes"]))
        assert rep.classes == {"greet": 1} and store.runs()[0]["task_class"] == "greet"
