"""The store's PostgreSQL backend on a real PostgreSQL (started by the session fixture): migrations from the same
list as DuckDB, idempotent live records, the router registry, `open_store` by scheme, the live overlay, and a
worker's `DatabaseRecorder` through a database outage (spool, degraded, drain: nothing lost, nothing twice)."""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from advisor.errors import StoreError
from advisor.store import MIGRATIONS, LiveOverlay, LiveRecords, RouterRegistry, RunStore, Store, open_store
from advisor.store.postgres import PostgresStore, redact, translate

_names = itertools.count()


@pytest.fixture
def pg_url(postgres_server):
    """A fresh database of the session's PostgreSQL."""
    return postgres_server.new_database(f"t{next(_names)}_{int(time.time() * 1000) % 10**8}")


def _decision(i: int, **kw) -> dict:
    return {"decision_id": f"dec_{i}", "created_at": datetime(2026, 1, 1, 0, 0, i % 60), "request_hash": f"h{i}",
            "policy": "learned", "mode": "escalate", "chosen_rung": "small", "explanation_json": "{}",
            "task_class": "triage", "prompt_text": f"prompt {i}", "status": "ok", "simulated": True, "p_usable": 0.8,
            "expected_cost": 0.001, "total_cost_usd": 0.001, **kw}


def _attempt(i: int, n: int = 1, accepted: bool = True) -> dict:
    return {"decision_id": f"dec_{i}", "attempt": n, "rung": "small", "created_at": datetime(2026, 1, 1),
            "verified": True, "accepted": accepted, "failover": False, "simulated": True, "cost_usd": 0.001}


def test_migrations_run_forward_on_both_backends_from_one_list(pg_url, tmp_path):
    with open_store(pg_url) as pg, open_store(tmp_path / "s.duckdb") as duck:
        names = [name for name, _ in MIGRATIONS]
        assert pg.applied_migrations() == names == duck.applied_migrations()
        assert pg.migrate() == []  # forward only: nothing left to apply
        columns = "SELECT table_name, column_name FROM information_schema.columns WHERE table_name = ?"
        for table in ("routing_decisions", "live_outcomes", "router_promotions", "router_pointers", "runs"):
            assert {r["column_name"] for r in pg.query(columns, [table])} == \
                   {r["column_name"] for r in duck.query(columns, [table])}, table


def test_live_records_are_idempotent_and_queried_like_duckdb(pg_url, tmp_path):
    decisions = [_decision(i) for i in range(5)]
    attempts = [_attempt(i, accepted=i % 2 == 0) for i in range(5)]
    with open_store(pg_url) as pg, open_store(tmp_path / "s.duckdb") as duck:
        for store in (pg, duck):
            assert store.add_live(decisions, attempts) == (5, 5)
            assert store.add_live(decisions[:3], attempts[:3]) == (0, 0)  # a batch sent twice adds nothing
        assert pg.live_attempt_rows() == duck.live_attempt_rows()
        assert pg.live_accept_counts() == duck.live_accept_counts()
        assert pg.live_class_summary() == duck.live_class_summary()
        assert pg.live_counts() == duck.live_counts() == (5, 5)


@pytest.mark.parametrize("bad", [{"p_usable": "not a number"}, {"no_such_column": 1}])
def test_rows_either_backend_refuses_for_what_they_hold_are_records_rejected(pg_url, tmp_path, bad):
    """The ingest quarantines such records instead of retrying them for ever; both backends say so alike, and the
    batch they refused adds nothing."""
    from advisor.errors import RecordsRejected

    with open_store(pg_url) as pg, open_store(tmp_path / "s.duckdb") as duck:
        for store in (pg, duck):
            with pytest.raises(RecordsRejected):
                store.add_live([_decision(1), _decision(2, **bad)], [])
            assert store.query("SELECT count(*) AS n FROM routing_decisions")[0]["n"] == 0
            assert store.add_live([_decision(1)], []) == (1, 0), "the store goes on"


def test_router_registry_on_postgres(pg_url):
    with open_store(pg_url) as pg:
        assert pg.pointer() is None
        assert pg.put_artifact("abc", ".json", "v1", b'{"x": 1}') is True
        assert pg.put_artifact("abc", ".json", "v1", b'{"x": 1}') is False
        assert pg.artifact("abc") == (".json", b'{"x": 1}')
        pg.set_pointer("abc", "v1", "pro_1")
        pg.set_pointer("abc", "v2", "pro_2")
        assert (pg.pointer()["router_version"], pg.pointer()["promotion_id"]) == ("v2", "pro_2")
        pg.add_promotion({"promotion_id": "pro_1", "created_at": datetime(2026, 1, 1), "action": "initial",
                          "artifact_path": "sha256:abc", "artifact_sha256": "abc", "router_version": "v1",
                          "pointer": "p", "evidence_json": {"a": 1}})
        assert [json.loads(r["evidence_json"]) for r in pg.promotions()] == [{"a": 1}]


def test_open_store_picks_the_backend_by_scheme(pg_url, tmp_path):
    with open_store(pg_url) as pg:
        assert isinstance(pg, PostgresStore)
        assert isinstance(pg, LiveRecords) and isinstance(pg, RouterRegistry) and not isinstance(pg, RunStore)
    with open_store(f"duckdb://{tmp_path / 'x.duckdb'}") as duck:
        assert isinstance(duck, Store) and isinstance(duck, RunStore) and isinstance(duck, LiveRecords)
    assert (tmp_path / "x.duckdb").is_file()
    with pytest.raises(StoreError, match="unknown store scheme"):
        open_store("mysql://u@h/db")
    with pytest.raises(StoreError, match=r"postgresql://u:\*\*\*@127.0.0.1:1/db: cannot connect"):
        open_store("postgresql://u:secret@127.0.0.1:1/db")


def test_redact_and_translate():
    assert redact("postgresql://app:s3cr@t@db:5432/advisor") == "postgresql://app:***@db:5432/advisor"
    assert redact("postgresql://app@db/advisor") == "postgresql://app@db/advisor"
    assert translate("SELECT x FROM t WHERE a = ? AND b LIKE '5%'") == \
        "SELECT x FROM t WHERE a = %s AND b LIKE '5%%'"
    assert translate("CREATE TABLE t (a DOUBLE, b BLOB, c DOUBLE PRECISION)", with_params=False) == \
        "CREATE TABLE t (a DOUBLE PRECISION, b BYTEA, c DOUBLE PRECISION)"


def test_live_overlay_reads_runs_from_duckdb_and_live_records_from_postgres(pg_url, tmp_path):
    with open_store(pg_url) as pg:
        pg.add_live([_decision(1)], [_attempt(1)])
    with Store.open(tmp_path / "s.duckdb") as duck:
        duck.add_live([_decision(2), _decision(3)], [_attempt(2), _attempt(3)])
    with LiveOverlay(Store.open(tmp_path / "s.duckdb"), open_store(pg_url, read_only=True)) as both:
        assert [r["decision_id"] for r in both.live_attempt_rows()] == ["dec_1"]
        assert both.probe_usable_rates() == []  # a runs query: answered by DuckDB
        assert both.count_runs() == 0


def test_recorder_spools_while_the_database_is_down_and_the_drain_loses_nothing(postgres_server, tmp_path):
    from advisor.service.records.recording import ingest
    from advisor.service.records.shipping import DatabaseRecorder

    url = postgres_server.new_database(f"rec{int(time.time() * 1000) % 10**8}")
    rec = DatabaseRecorder(tmp_path / "spool", "w1", url, retry_s=0.2)
    try:
        def send(lo, hi):
            for i in range(lo, hi):
                rec.write([{"record": "decision", **_decision(i)}, {"record": "attempt", **_attempt(i)}])

        send(0, 50)
        _wait(lambda: rec.shipped == 100)
        assert rec.degraded is None
        postgres_server.stop()
        try:
            send(50, 120)
            _wait(lambda: rec.degraded is not None)
            assert "PostgreSQL unreachable" in rec.degraded and rec.health()["records"] == "degraded"
        finally:
            postgres_server.restart()
        _wait(lambda: rec.degraded is None, 10)
        send(120, 150)
        _wait(lambda: rec.queue.empty() and rec.shipped >= 160)
    finally:
        rec.close()
    with open_store(url) as pg:
        ingest(tmp_path / "spool", pg)  # the drain: what the database did not get while it was down
        ids = [r["decision_id"] for r in pg.query("SELECT decision_id FROM routing_decisions")]
        assert len(ids) == 150 and len(set(ids)) == 150
        assert pg.query("SELECT count(*) AS n FROM live_outcomes")[0]["n"] == 150
    assert not list((tmp_path / "spool").iterdir())  # shipped segments deleted, drained ones too


def _wait(cond, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_drift_and_promotions_read_postgres_from_the_cli(pg_url, tmp_path):
    from typer.testing import CliRunner

    from advisor.cli import build_app

    with open_store(pg_url) as pg:
        pg.add_live([_decision(i) for i in range(4)], [_attempt(i, accepted=i < 3) for i in range(4)])
    Store.open(tmp_path / "s.duckdb").close()  # probe runs would be here; no live records
    runner = CliRunner()
    plain = runner.invoke(build_app(), ["router", "drift", "--store", str(tmp_path / "s.duckdb"), "--json"])
    live = runner.invoke(build_app(), ["router", "drift", "--store", str(tmp_path / "s.duckdb"), "--live-store",
                                       pg_url, "--json"])
    assert plain.exit_code == 0 and live.exit_code == 0, live.output
    assert "triage" not in plain.output and "triage" in live.output  # the live rows came from PostgreSQL
    assert '"requests": 4' in live.output
    listed = runner.invoke(build_app(), ["router", "promotions", "--store", pg_url, "--json"])
    assert listed.exit_code == 0 and listed.output.strip() == "[]"


def test_serve_without_a_router_names_the_promote_command(pg_url, tmp_path):
    from advisor.errors import RouterError
    from advisor.ladder import load_ladder
    from advisor.service.launch import ServeOptions, resolve_router

    ladder = load_ladder(Path(__file__).resolve().parent.parent / "ladders" / "demo.yaml")
    options = ServeOptions(store_path=tmp_path / "none.duckdb", store_url=pg_url.replace("postgres@", "postgres:pw@"))
    with pytest.raises(RouterError, match=r"postgres:\*\*\*@.* has no promoted router yet; promote one with "
                                          r"`advisor router promote FILE --store URL`"):
        resolve_router(options, ladder, tmp_path, print)


def test_session_and_shadow_queries_answer_alike_on_both_backends(pg_url, tmp_path):
    steps = [_decision(i, session_id=f"s{i % 2}", session_step=i // 2 + 1, session_start_rung="small",
                       final_rung="small" if i < 4 else "large", escalation="stuck small->large" if i == 4 else None,
                       shadow_rung="large", shadow_version="v2") for i in range(6)]
    with open_store(pg_url) as pg, open_store(tmp_path / "s.duckdb") as duck:
        for store in (pg, duck):
            store.add_live(steps, [_attempt(i) for i in range(6)])
        assert pg.session_outcomes() == duck.session_outcomes()
        assert pg.session_outcomes()[0]["reasons"] == "stuck" and pg.session_outcomes()[0]["final_rung"] == "large"
        assert pg.shadow_decisions("v2") == duck.shadow_decisions("v2")
        assert sorted(map(str, pg.first_attempts())) == sorted(map(str, duck.first_attempts()))
