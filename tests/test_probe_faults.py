"""Faults: the probe process killed with SIGKILL mid-probe, and the Triton server killed mid-probe.

Both use a real embedded tritonserver whose stand-ins know the test suite and answer with a simulated
latency (so that a probe is still running when it is killed), and a real DuckDB file.
"""

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from advisor.ladder import load_ladder
from advisor.probe import ProbeConfig, execute, full_grid, run_probe
from advisor.store import Store
from advisor.suite import load_suite

pytestmark = [pytest.mark.triton, pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
SUITE = Path(__file__).parent / "probe_data" / "suite.yaml"
LATENCY_MS = 60


@pytest.fixture
def slow_ladder(tmp_path):
    """The demo ladder with a simulated latency per generation."""
    data = yaml.safe_load((REPO / "ladders" / "demo.yaml").read_text())
    for model in [*data["rungs"], data["roles"]["orchestrator"]]:
        model["standin"]["latency_ms"] = LATENCY_MS
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Counter:
    """Counts generations served by wrapping the stand-in responders the embedded server builds."""

    def __init__(self, monkeypatch):
        import advisor.triton.server as server

        self.n = 0
        self.lock = threading.Lock()
        real = server.standin_responder  # what the embedded server binds each stand-in rung to

        def counting(model, suite_paths=()):
            respond = real(model, suite_paths)

            def wrapped(prompt, sampling):
                with self.lock:
                    self.n += 1
                return respond(prompt, sampling)

            return wrapped

        monkeypatch.setattr(server, "standin_responder", counting)

    def wait_for(self, n, proc=None, timeout=60.0):
        end = time.monotonic() + timeout
        while self.n < n:
            assert time.monotonic() < end, f"only {self.n} generations served"
            assert proc is None or proc.poll() is None, f"the probe exited early ({proc.returncode})"
            time.sleep(0.02)


def _server(ladder_path):
    from advisor.triton.server import EmbeddedTriton

    return EmbeddedTriton(load_ladder(ladder_path), suite_paths=(str(SUITE),)).start()


def _tritonserver_pid(port: int) -> int:
    """The tritonserver process listening on `port` (found by its command line)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "tritonserver" in cmd and str(port) in cmd and "--grpc-port" in cmd:
            return int(entry.name)
    raise AssertionError(f"no tritonserver process with port {port}")


def _snapshot(db: Path) -> dict[str, tuple]:
    with Store.open(db, read_only=True) as store:
        return {r["run_key"]: (r["finished_at"], r["stop_reason"], r["overall"]) for r in store.runs()}


def test_probe_killed_mid_probe_resumes_without_losing_or_duplicating(tmp_path, slow_ladder, monkeypatch):
    counter = Counter(monkeypatch)
    server = _server(slow_ladder)
    db = tmp_path / "probe.duckdb"
    replicas = 8
    planned = len(full_grid(load_suite(SUITE), load_ladder(slow_ladder), replicas))
    try:
        cmd = [str(Path(sys.executable).parent / "advisor"), "probe", "--full-grid", "--url", server.grpc_url, "--ladder", str(slow_ladder),
               "--suite", str(SUITE), "--store", str(db), "--replicas", str(replicas), "--concurrency", "2"]
        log = open(tmp_path / "probe.log", "wb")
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=log)
        try:
            counter.wait_for(80, proc)  # about 20 episodes into a 72-episode probe
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        before = _snapshot(db)
        assert 0 < len(before) < planned, f"{len(before)} of {planned} stored when killed"
        result = run_probe(ProbeConfig(url=server.grpc_url, ladder_path=slow_ladder, suite_path=SUITE,
                                       store_path=db, replicas=replicas, concurrency=4))
    finally:
        server.stop()
    out = result.outcome
    assert result.already_stored == len(before) and out.count("done") == planned - len(before)
    after = _snapshot(db)
    assert len(after) == planned  # every run once (run_key is the primary key: no duplicates possible)
    assert all(after[k] == v for k, v in before.items())  # finished runs kept as they were
    with Store.open(db, read_only=True) as store:
        assert store.count_runs(stop_reason="backend_error") == 0
        assert store._con.execute("SELECT count(*) FROM turns WHERE run_key NOT IN (SELECT run_key FROM runs)"
                                  ).fetchone()[0] == 0


def test_triton_killed_mid_probe_gives_unscored_backend_errors_then_a_rerun_completes(
        tmp_path, slow_ladder, monkeypatch):
    from advisor.triton.client import TritonClient

    Counter(monkeypatch)
    ladder, suite = load_ladder(slow_ladder), load_suite(SUITE)
    specs = full_grid(suite, ladder, replicas=4)
    db = tmp_path / "probe.duckdb"

    async def probe(url, store, kill_after=None):
        killed = []

        def on_result(result):
            if kill_after is not None and not killed and sum(r.status == "done" for r in done) >= kill_after:
                os.kill(_tritonserver_pid(int(url.rsplit(":", 1)[1])), signal.SIGKILL)
                killed.append(time.monotonic())
            done.append(result)

        done = []
        async with TritonClient(url, timeout_s=10, retries=1) as client:
            out = await execute(specs, ladder=ladder, suite=suite, store=store, client_for_rung=lambda m: client,
                                concurrency=2, on_result=on_result)
        return out, killed

    server = _server(slow_ladder)
    try:
        with Store.open(db) as store:
            out, killed = asyncio.run(probe(server.grpc_url, store, kill_after=6))
    finally:
        server.stop()
    assert killed, "the server was never killed"
    assert out.count("done") == len(specs)  # every run ended and was stored, the failed ones as backend_error
    with Store.open(db, read_only=True) as store:
        bad = store.runs(stop_reason="backend_error")
        good = [r for r in store.runs() if r["stop_reason"] != "backend_error"]
    assert bad and len(good) >= 6
    assert all(r["unscored"] and r["overall"] is None and r["tc_score"] is None for r in bad)
    assert all(r["error"] for r in bad)
    assert all(not r["unscored"] and r["overall"] is not None for r in good)

    server = _server(slow_ladder)  # restarted (on new ports)
    try:
        with Store.open(db) as store:
            again, _ = asyncio.run(probe(server.grpc_url, store))
            assert again.count("done") == len(bad) and all(r.retried for r in again.results if r.status == "done")
            assert again.count("skipped") == len(good)
            assert store.count_runs() == len(specs) and store.count_runs(stop_reason="backend_error") == 0
            assert store.count_runs(unscored=True) == 0
    finally:
        server.stop()


def test_ctrl_c_mid_probe_leaves_the_store_consistent(tmp_path, slow_ladder, monkeypatch):
    counter = Counter(monkeypatch)
    server = _server(slow_ladder)
    db = tmp_path / "probe.duckdb"
    replicas = 8
    planned = len(full_grid(load_suite(SUITE), load_ladder(slow_ladder), replicas))
    try:
        cmd = [str(Path(sys.executable).parent / "advisor"), "probe", "--full-grid", "--url", server.grpc_url, "--ladder",
               str(slow_ladder), "--suite", str(SUITE), "--store", str(db), "--replicas", str(replicas),
               "--no-report"]
        log = open(tmp_path / "probe.log", "wb")
        proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=log)
        try:
            counter.wait_for(60, proc)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        assert proc.returncode == 130, (tmp_path / "probe.log").read_text()
        before = _snapshot(db)
        assert 0 < len(before) < planned
        with Store.open(db, read_only=True) as store:
            orphans = store._con.execute("SELECT count(*) FROM turns WHERE run_key NOT IN (SELECT run_key FROM runs)"
                                         ).fetchone()[0]
            assert orphans == 0
        result = run_probe(ProbeConfig(url=server.grpc_url, ladder_path=slow_ladder, suite_path=SUITE,
                                       store_path=db, replicas=replicas, concurrency=8))
    finally:
        server.stop()
    assert result.outcome.count("done") == planned - len(before)
    assert len(_snapshot(db)) == planned


#: A target this small suite decides at 3 replicas (the default 0.8 leaves every class undecided).
FLOOR_TARGET = 0.5


def _recommendations(db: Path) -> dict[tuple[str, str], tuple[str | None, str | None, tuple[str, ...]]]:
    """Per class and condition: floor, recommended rung and every rung's verdict (clears / below / undecided)."""
    from advisor.floors import FloorSettings, find_floors

    with Store.open(db, read_only=True) as store:
        return {(c.task_class, c.condition): (c.floor, c.recommended, tuple(v.status for v in c.rungs))
                for c in find_floors(store, settings=FloorSettings(target=FLOOR_TARGET)).classes}


def test_adaptive_probe_stops_when_triton_dies_and_one_rerun_completes_it(tmp_path, slow_ladder, monkeypatch):
    """The adaptive default: tritonserver SIGKILLed mid-probe -> the probe stops starting runs within 5 s with one
    line; one rerun against a restarted server leaves no backend_error run and recommends what a clean probe does."""
    from advisor.floors import FloorSettings
    from advisor.probe.planners import AdaptivePlanner

    def adaptive():
        return AdaptivePlanner(settings=FloorSettings(target=FLOOR_TARGET))

    Counter(monkeypatch)
    db, clean_db = tmp_path / "probe.duckdb", tmp_path / "clean.duckdb"
    killed: list[float] = []

    def config(url, store_path):
        return ProbeConfig(url=url, ladder_path=slow_ladder, suite_path=SUITE, store_path=store_path, replicas=3,
                           concurrency=2, client_timeout_s=10, client_retries=1)

    server = _server(slow_ladder)
    try:
        url = server.grpc_url

        def kill_after_six(result):
            if not killed and result.status == "done" and len(done) >= 6:
                os.kill(_tritonserver_pid(int(url.rsplit(":", 1)[1])), signal.SIGKILL)
                killed.append(time.monotonic())
            done.append(result)

        done: list = []
        first = run_probe(config(url, db), adaptive(), on_result=kill_after_six)
        stopped_in = time.monotonic() - killed[0]
    finally:
        server.stop()
    assert killed, "the server was never killed"
    assert first.outcome.stopped == "server_down"
    assert stopped_in < 5.0, f"the probe ran on for {stopped_in:.1f} s after the server died"
    lines = [n for n in first.notes if "not ready" in n]
    assert len(lines) == 1 and "\n" not in lines[0] and url.rsplit(":", 1)[1] in lines[0], first.notes
    assert not re.search(r"\d+ not run", lines[0]), lines[0]  # counted once, on the probe line (not "about N")
    assert first.outcome.count("not_run") > 0  # runs not started once the server was found gone
    with Store.open(db, read_only=True) as store:
        bad = store.runs(stop_reason="backend_error")
    assert bad and all(r["unscored"] and r["overall"] is None for r in bad)  # runs in flight: stored unscored

    server = _server(slow_ladder)  # restarted (on new ports)
    try:
        again = run_probe(config(server.grpc_url, db), adaptive())
        clean = run_probe(config(server.grpc_url, clean_db), adaptive())
    finally:
        server.stop()
    assert again.outcome.stopped is None and clean.outcome.stopped is None
    assert sum(r.retried for r in again.outcome.results) == len(bad)
    with Store.open(db, read_only=True) as store:
        assert store.count_runs(stop_reason="backend_error") == 0 and store.count_runs(unscored=True) == 0
    clean_recs = _recommendations(clean_db)
    # something to compare: decided verdicts (and, where a rung clears, floors and recommendations)
    assert any(status != "undecided" for *_, statuses in clean_recs.values() for status in statuses), clean_recs
    assert _recommendations(db) == clean_recs


@pytest.mark.triton
@pytest.mark.slow
def test_a_terminated_probe_stops_cleanly_keeps_its_runs_and_leaks_no_shared_memory(tmp_path):
    """SIGTERM (a time limit, `kill`) mid-probe: the probe stops as on Ctrl-C: one line, exit 130, every finished
    run stored, the embedded Triton closed (Python's resource tracker reports no leaked shared memory), no
    traceback; the next probe goes on from the store."""
    import subprocess
    import sys
    import time

    advisor = str(Path(sys.executable).parent / "advisor")
    # started as a shell starts `advisor probe &` in a script: SIGINT ignored (SIGTERM must still stop it)
    proc = subprocess.Popen([advisor, "probe", "--store", str(tmp_path / "t.duckdb"), "--no-report"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 240
    lines = []
    while time.monotonic() < deadline:  # wait for the second wave: some runs are stored by then
        line = proc.stderr.readline()
        lines.append(line)
        if line.startswith("probe: wave 2") or not line:
            break
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=120)
    err = "".join(lines) + rest
    assert proc.returncode == 130, err[-3000:]
    assert "probe interrupted: every finished run is stored" in err
    assert "leaked shared_memory" not in err and "Traceback" not in err, err[-3000:]
    with Store.open(tmp_path / "t.duckdb", read_only=True) as store:
        assert store.count_runs() >= 50
