"""The DuckDB store on a real file: migrations, transactional idempotent writes, read-back."""

import duckdb
import pytest

from advisor.errors import StoreError
from advisor.ladder import load_ladder
from advisor.store import (MIGRATIONS, CriterionResult, RunRecord, Store, TurnRecord, make_run_key, now,
                           text_hash)


def _run(key="k1", **kw):
    base = dict(run_key=make_run_key(key), kind="probe", suite_name="s", suite_hash="sh", task_id="t1",
                task_class="c", ladder_name="demo", ladder_hash="lh", rung="nano-12b", rung_position=0,
                if_score=80.0, tc_score=60.0, overall=(4 * 80 + 3 * 60) / 7, started_at=now(), finished_at=now())
    base.update(kw)
    return RunRecord(**base)


def test_open_creates_and_migrates(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store.open(path) as store:
        assert store.applied_migrations() == [name for name, _ in MIGRATIONS]
    # reopening applies nothing new
    with Store.open(path) as store:
        assert store.migrate() == []


def test_add_run_is_transactional_and_idempotent(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store.open(path) as store:
        run = _run()
        assert store.add_run(run, [TurnRecord(1, "read_file"), TurnRecord(2, "final")],
                             [CriterionResult("if", "format", 50, 1.0), CriterionResult("tc", "goal", 100, None)])
        assert not store.add_run(run, [TurnRecord(1, "x")])  # same key: nothing written
        assert store.count_runs() == 1
    con = duckdb.connect(str(path), read_only=True)
    assert con.execute("SELECT count(*) FROM turns").fetchone()[0] == 2
    assert con.execute("SELECT score FROM criterion_results WHERE checklist='tc'").fetchone()[0] is None
    con.close()


def test_failed_write_leaves_nothing(tmp_path):
    with Store.open(tmp_path / "a.duckdb") as store:
        bad_turns = [TurnRecord(1, "a"), TurnRecord(1, "duplicate turn number")]
        with pytest.raises(duckdb.Error):
            store.add_run(_run(), bad_turns)
        assert store.count_runs() == 0
        assert store.query("SELECT count(*) AS n FROM turns")[0]["n"] == 0


def test_bulk_insert_skips_existing_and_unscored_stays_null(tmp_path):
    with Store.open(tmp_path / "a.duckdb") as store:
        store.add_run(_run("a"))
        added = store.add_runs_bulk([_run("a"), _run("b", if_score=None, tc_score=None, overall=None,
                                                        unscored=True, unscored_reason="backend_error")])
        assert added == 1
        rows = store.runs(unscored=True)
        assert len(rows) == 1 and rows[0]["overall"] is None and rows[0]["unscored_reason"] == "backend_error"
        assert store.run_keys(kind="probe") == {make_run_key("a"), make_run_key("b")}
        assert store.delete_runs([make_run_key("b")]) == 1
        assert store.count_runs() == 1


def test_ladder_and_prompts_recorded(tmp_path):
    ladder = load_ladder("ladders/demo.yaml")
    with Store.open(tmp_path / "a.duckdb") as store:
        h = store.record_ladder(ladder)
        assert store.record_ladder(ladder) == h
        rows = store.query("SELECT name, position, simulated FROM rungs WHERE role='rung' ORDER BY position")
        assert [r["name"] for r in rows] == ["nano-12b", "nano-30b", "super-120b"]
        assert all(r["simulated"] for r in rows)
        assert store.ladder_config(h)["name"] == "demo"
        store.record_suite("s", "sh", "file.yaml", {"a": 1}, [("t1", "c", True, text_hash("Do X"))],
                           [(text_hash("Do X"), "Do X")])
        assert store.prompt_texts([text_hash("do   x")]) == {text_hash("Do X"): "Do X"}


def test_query_is_read_only(tmp_path):
    with Store.open(tmp_path / "a.duckdb") as store:
        with pytest.raises(StoreError):
            store.query("DELETE FROM runs")


def test_newer_store_is_refused_and_missing_store_is_clear(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store.open(path) as store:
        store._con.execute("INSERT INTO _migrations VALUES (999, 'm999_future', now())")
    with pytest.raises(StoreError, match="newer advisor"):
        Store.open(path)
    with pytest.raises(StoreError, match="no store here yet"):
        Store.open(tmp_path / "missing.duckdb", read_only=True)


def test_older_store_migrates_forward(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE unrelated (x INTEGER)")  # a file from before any migration
    con.close()
    with Store.open(path) as store:
        assert store.applied_migrations() == [name for name, _ in MIGRATIONS]
        assert store.count_runs() == 0


def test_export_parquet(tmp_path):
    import pyarrow.parquet as pq

    runs = [_run("a"), _run("b", rung="nano-30b", rung_position=1, if_score=None, tc_score=None, overall=None,
                          unscored=True, unscored_reason="backend_error: gone", stop_reason="backend_error")]
    turns = [TurnRecord(turn=0, action="read_file", arguments_json='{"path": "a.txt"}', observation="hello",
                        input_tokens=12, output_tokens=3, latency_s=0.25, finish_reason="stop")]
    crit = [CriterionResult("if", "uses json", 40.0, 1.0, "ok"), CriterionResult("tc", "answer", 60.0, None, "n/a")]
    with Store.open(tmp_path / "a.duckdb") as store:
        store.record_ladder(load_ladder("ladders/demo.yaml"))
        store.add_run(runs[0], turns, crit)
        store.add_run(runs[1])
        files = store.export_parquet(tmp_path / "out")
        tables = {r["table_name"] for r in store.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'")}
        want = {t: store.query(f"SELECT * FROM {t}") for t in ("runs", "turns", "criterion_results", "rungs")}
    assert {f.stem for f in files} == tables and all(f.suffix == ".parquet" for f in files)
    for table, rows in want.items():
        got = pq.read_table(tmp_path / "out" / f"{table}.parquet").to_pylist()
        key = lambda r: tuple(str(v) for v in r.values())  # noqa: E731 - rows compared whatever their order
        assert sorted(got, key=key) == sorted(rows, key=key), table
    exported = {r["run_key"]: r for r in pq.read_table(tmp_path / "out" / "runs.parquet").to_pylist()}
    assert exported[runs[1].run_key]["overall"] is None and exported[runs[1].run_key]["unscored"] is True
    assert exported[runs[0].run_key]["overall"] == pytest.approx(runs[0].overall)
