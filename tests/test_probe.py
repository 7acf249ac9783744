"""The probe runner: grid planning, resumable concurrent execution, unscored backend errors, guards, CLI.

Unit tests drive `execute` with an in-process client that calls the stand-in responders directly; the
end-to-end tests go through a real tritonserver (the embedded one) and a real DuckDB file.
"""

import asyncio
import json
from pathlib import Path

import pytest

from advisor.agent.fake import FakeModel
from advisor.errors import ConfigError
from advisor.ladder import load_ladder
from advisor.probe import ProbeConfig, RunSpec, execute, full_grid, run_probe, summarize
from advisor.store import Store
from advisor.suite import load_suite

DATA = Path(__file__).parent / "probe_data"
SUITE = DATA / "suite.yaml"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ladder():
    return load_ladder(REPO / "ladders" / "demo.yaml")


@pytest.fixture(scope="module")
def suite():
    return load_suite(SUITE)


def run(specs, ladder, suite, store, client, **kw):
    return asyncio.run(execute(specs, ladder=ladder, suite=suite, store=store, client_for_rung=lambda m: client,
                               **kw))


def test_full_grid_counts_and_order(ladder, suite):
    specs = full_grid(suite, ladder, replicas=2)
    # 2 tasks, one with a skill: (1 + 2) conditions x 3 rungs x 2 replicas
    assert len(specs) == 18 and len(set(specs)) == 18
    assert {s.condition for s in specs if s.task_id == "t-multi"} == {"baseline"}
    assert [s.replica for s in specs[:9]] == [0] * 9
    assert len(full_grid(suite, ladder, 1, conditions=("baseline",), rungs=["super-120b"])) == 2
    with pytest.raises(ConfigError, match="no task 'nope'"):
        full_grid(suite, ladder, 1, tasks=["nope"])
    with pytest.raises(ConfigError, match="replicas"):
        full_grid(suite, ladder, 0)


def test_run_keys_and_seeds_are_stable():
    a, b = RunSpec("t", "r", "skill", 1), RunSpec("t", "r", "skill", 2)
    assert a.run_key("s", "l") == RunSpec("t", "r", "skill", 1).run_key("s", "l") != b.run_key("s", "l")
    assert a.seed("s", "l") == a.seed("s", "l") and 0 <= a.seed("s", "l") < 2 ** 31


def test_execute_stores_every_run_and_a_rerun_skips_them(tmp_path, ladder, suite):
    specs = full_grid(suite, ladder, replicas=2)
    client = FakeModel.standin(ladder, [SUITE])
    with Store.open(tmp_path / "p.duckdb") as store:
        out = run(specs, ladder, suite, store, client, concurrency=4)
        assert out.count("done") == 18 and out.count("skipped") == 0
        rows = store.runs(kind="probe")
        assert len(rows) == 18
        assert all(r["simulated"] and not r["unscored"] and r["overall"] is not None for r in rows)
        assert all(r["turns"] == r["model_calls"] >= 1 and r["input_tokens"] > 0 for r in rows)
        assert {r["stop_reason"] for r in rows} <= {"final", "stuck", "invalid_output", "max_turns"}
        assert all(r["cost_usd"] > 0 for r in rows)
        one = rows[0]
        turns = store._con.execute("SELECT count(*) FROM turns WHERE run_key = ?", [one["run_key"]]).fetchone()[0]
        crit = store._con.execute("SELECT count(*) FROM criterion_results WHERE run_key = ?",
                                  [one["run_key"]]).fetchone()[0]
        assert turns == one["turns"] and crit == 2
        calls = len(client.calls)
        again = run(specs, ladder, suite, store, client)
        assert again.count("skipped") == 18 and again.count("done") == 0 and len(client.calls) == calls
        assert store.count_runs() == 18


def test_same_spec_gives_the_same_episode(tmp_path, ladder, suite):
    specs = full_grid(suite, ladder, replicas=1)
    a, b = (Store.open(tmp_path / f"{n}.duckdb") for n in "ab")
    with a, b:
        run(specs, ladder, suite, a, FakeModel.standin(ladder, [SUITE]))
        run(list(reversed(specs)), ladder, suite, b, FakeModel.standin(ladder, [SUITE]), concurrency=1)
        cols = ("run_key", "stop_reason", "overall", "turns", "input_tokens")
        assert [tuple(r[c] for c in cols) for r in a.runs()] == [tuple(r[c] for c in cols) for r in b.runs()]


def test_backend_errors_are_unscored_and_retried(tmp_path, ladder, suite):
    specs = full_grid(suite, ladder, replicas=1)
    with Store.open(tmp_path / "p.duckdb") as store:
        out = run(specs, ladder, suite, store, FakeModel.standin(ladder, [SUITE], fail={"standin_super_120b"}))
        assert out.backend_errors == 3
        bad = store.runs(stop_reason="backend_error")
        assert len(bad) == 3 and {r["rung"] for r in bad} == {"super-120b"}
        assert all(r["unscored"] and r["overall"] is None and r["if_score"] is None for r in bad)
        assert all("backend_error" in r["unscored_reason"] and "cannot reach" in r["error"] for r in bad)
        summary = summarize(store, suite_hash=suite.config_hash(), ladder_hash=ladder.config_hash(), ladder=ladder)
        assert summary["unscored"] == 3
        assert [r["all_baseline"]["overall"] for r in summary["rungs"]][2] is None
        # The next probe retries exactly those runs and keeps the rest.
        again = run(specs, ladder, suite, store, FakeModel.standin(ladder, [SUITE]))
        assert again.count("done") == 3 and all(r.retried for r in again.results if r.status == "done")
        assert again.count("skipped") == len(specs) - 3
        assert store.count_runs() == len(specs) and store.count_runs(stop_reason="backend_error") == 0


def test_max_runs_and_max_cost_guards(tmp_path, ladder, suite):
    specs = full_grid(suite, ladder, replicas=3)
    with Store.open(tmp_path / "p.duckdb") as store:
        out = run(specs, ladder, suite, store, FakeModel.standin(ladder, [SUITE]), max_runs=5)
        assert out.count("done") == 5 and out.stopped == "max_runs" and store.count_runs() == 5
        out = run(specs, ladder, suite, store, FakeModel.standin(ladder, [SUITE]), max_cost=0.0, concurrency=1)
        assert out.count("done") == 0 and out.stopped == "max_cost"
        out = run(specs, ladder, suite, store, FakeModel.standin(ladder, [SUITE]), max_cost=1e-9, concurrency=1)
        # one run per rung may start before the first finishes and is counted
        assert 1 <= out.count("done") <= 3 and out.stopped == "max_cost"
        assert store.count_runs() == 5 + out.count("done")


def test_concurrency_is_bounded_per_rung(tmp_path, ladder, suite):
    inflight: dict[str, int] = {}
    peak: dict[str, int] = {}

    class Slow(FakeModel):
        async def generate(self, model, prompt, **kw):
            inflight[model] = inflight.get(model, 0) + 1
            peak[model] = max(peak.get(model, 0), inflight[model])
            await asyncio.sleep(0.002)
            try:
                return await super().generate(model, prompt, **kw)
            finally:
                inflight[model] -= 1

    with Store.open(tmp_path / "p.duckdb") as store:
        run(full_grid(suite, ladder, replicas=4), ladder, suite, store, Slow.standin(ladder, [SUITE]), concurrency=2)
    assert set(peak) == {m.triton_model for m in ladder.rungs} and max(peak.values()) == 2


@pytest.mark.triton
def test_execute_against_the_real_triton(tmp_path, triton_server, suite):
    """The session's embedded Triton (its stand-ins know this suite and act through the tools) + a DuckDB file."""
    from advisor.triton.client import TritonClient

    ladder = triton_server.ladder
    specs = full_grid(suite, ladder, replicas=1)

    async def go(store):
        async with TritonClient(triton_server.grpc_url) as client:
            return await execute(specs, ladder=ladder, suite=suite, store=store, client_for_rung=lambda m: client)

    with Store.open(tmp_path / "p.duckdb") as store:
        out = asyncio.run(go(store))
        assert out.count("done") == len(specs)
        rows = store.runs()
        assert all(r["tokens_from_server"] and r["turns"] >= 1 and r["simulated"] for r in rows)
        assert all(r["overall"] is not None and not r["unscored"] for r in rows)
        assert any(r["turns"] > 1 for r in rows), "stand-ins that know the suite call tools before answering"
        assert asyncio.run(go(store)).count("skipped") == len(specs) and store.count_runs() == len(specs)


@pytest.mark.triton
@pytest.mark.slow
def test_advisor_probe_cli_end_to_end(tmp_path, monkeypatch, capsys):
    """`advisor probe` with its own embedded Triton whose stand-ins know the suite; a rerun adds nothing."""
    from advisor.cli import main

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "cli.duckdb"
    args = ["probe", "--suite", str(SUITE), "--store", str(db), "--replicas", "2", "--json", "--no-report", "--full-grid"]
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["outcome"]["done"] == 18 and first["summary"]["simulated"] is True
    assert first["summary"]["runs"] == 18
    by_rung = {r["rung"]: r for r in first["summary"]["rungs"]}
    # the stand-ins knew the tasks: the largest rung completes more of them than the smallest
    assert by_rung["super-120b"]["all_baseline"]["tc"] > by_rung["nano-12b"]["all_baseline"]["tc"]
    import advisor.probe.session as session

    def no_server(*args, **kwargs):
        raise AssertionError("a probe with nothing to run started a server")

    monkeypatch.setattr(session, "EmbeddedTriton", no_server)
    assert main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["outcome"]["done"] == 0 and second["outcome"]["not_run"] == 0
    assert second["outcome"]["served_by"] == session.NOT_STARTED
    with Store.open(db, read_only=True) as store:
        assert store.count_runs() == 18
        assert len({r["run_key"] for r in store.runs()}) == 18


def test_probe_needs_a_ladder_with_a_url(tmp_path):
    with pytest.raises(ConfigError, match="--url needs --ladder"):
        run_probe(ProbeConfig(url="localhost:1", suite_path=SUITE, store_path=tmp_path / "x.duckdb"))
    assert not (tmp_path / "x.duckdb").exists()


@pytest.mark.triton
@pytest.mark.slow
def test_probe_on_a_subset_of_the_example_suite(tmp_path, monkeypatch, capsys):
    """Real tools and checks on example tasks: the largest rung with the skill is often usable, the smallest never."""
    from advisor.cli import main

    monkeypatch.chdir(tmp_path)  # defaults resolve from the repository next to the package
    db = tmp_path / "ex.duckdb"
    tasks = ["api-refund-order", "extract-invoice-email", "multi-restock"]
    args = ["probe", "--store", str(db), "--replicas", "2", "--json", "--no-report", "--full-grid", "--rung", "nano-12b",
            "--rung", "super-120b", *[a for t in tasks for a in ("--task", t)]]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["outcome"]["done"] == 3 * 2 * 2 * 2 and out["summary"]["simulated"]
    with Store.open(db, read_only=True) as store:
        big = store.runs(rung="super-120b", condition="skill")
        small = store.runs(rung="nano-12b")
    assert len(big) == 6 and sum(r["overall"] >= 75 for r in big) >= 1
    assert sum(r["overall"] for r in big) / len(big) > sum(r["overall"] for r in small) / len(small)
    assert sum(r["overall"] >= 75 for r in small) == 0


@pytest.mark.triton
@pytest.mark.slow
def test_default_probe_ends_with_the_plan_answer(tmp_path, monkeypatch, capsys):
    """`advisor probe` with no arguments (adaptive, default target, embedded Triton): the output ends with one row
    per class (a plan with usable rate, interval and $ per usable result, or a next step), then the report path;
    nano-12b is in no plan; floors JSON of the report holds the plans."""
    import re

    from advisor.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["probe", "--store", str(tmp_path / "d.duckdb")]) == 0
    out = capsys.readouterr().out
    answer = out[out.index("The answer, per class [SIMULATED]"):]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^ (\w+)\s{2,}(?!plan).*$", answer, re.M)
            if m.group(1) in ("api_calls", "doc_retrieval", "code_change", "extraction", "multi_step")}
    assert len(rows) == 5, answer
    for cls, row in rows.items():
        if "none clears" in row:
            assert f"next for {cls}:" in answer
        else:
            assert re.search(r"x\d .*\d+% \[\d+-\d+\]\s+\$\d", row), row
        assert "nano-12b x" not in row
    assert answer.rstrip().splitlines()[-1].startswith("report: reports/")
    doc = json.loads(next((tmp_path / "reports").glob("*/floors.json")).read_text())
    assert {p["task_class"] for p in doc["floors"]["plans"]} == set(rows)
