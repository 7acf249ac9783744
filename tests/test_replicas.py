"""Several replicas of `advisor serve` on one real PostgreSQL, under load (benchmarks/load_test.py's client):
one replica killed (SIGKILL) mid-load and started again on its spool, the database stopped and started mid-load;
every answered decision is stored once (0 lost, 0 duplicated). A promotion through the database is served by
every replica within its reload interval."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

import load_test  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.triton]


@pytest.fixture(scope="module")
def routers(triton_server, tmp_path_factory):
    """Two router artifacts (different seeds: different sha256) trained on a small probe of the demo ladder."""
    from advisor.router.training.fit import fit_router, training_data_from_store
    from advisor.store import Store

    folder = tmp_path_factory.mktemp("replicas")
    store = folder / "probe.duckdb"
    load_test.small_probe(triton_server.grpc_url, store)
    with Store.open(store, read_only=True) as s:
        data = training_data_from_store(s, ladder_name=triton_server.ladder.name)
    return [fit_router(data, folds=2, seed=seed, C=c).save(folder / f"router{seed}.json")
            for seed, c in ((0, 1.0), (1, 0.5))]


def _promote(url: str, artifact: Path) -> None:
    from advisor.router.feedback.promotion import promote
    from advisor.store import open_store

    with open_store(url) as store:
        assert promote(artifact, store, url, force=True)["promoted"]


class Replica:
    """One `advisor serve --store postgresql://...` process with its own spool folder."""

    def __init__(self, grpc: str, url: str, spool: Path):
        self.grpc, self.url, self.spool = grpc, url, spool
        self.start()

    def start(self) -> None:
        self.proc, self.base = load_test.start_service(self.grpc, self.url, 1, ["--spool", str(self.spool),
                                                                                "--ingest-every", "1"])

    def ready(self) -> dict:
        import httpx

        return httpx.get(self.base + "/readyz", headers={"Authorization": f"Bearer {load_test.KEY}"}, timeout=5).json()


class Balancer:
    """The load test's client behind a failover balancer: round robin over the live replicas, the next one when
    a replica does not answer. Keeps every answered decision id with its attempt count."""

    def __init__(self, replicas: list[Replica]):
        self.replicas = replicas
        self.down: set[int] = set()
        self.answered: dict[str, int] = {}
        self.failed_over = 0
        self.n = 0

    async def run(self, requests: int, concurrency: int) -> list[str]:
        import httpx

        async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {load_test.KEY}"}) as client:
            async def call():
                self.n += 1
                body = {"model": "auto", "max_tokens": 16,
                        "messages": [{"role": "user", "content": f"Request {self.n}: summarise ticket #{self.n}"}]}
                for turn in range(2 * len(self.replicas)):
                    i = (self.n + turn) % len(self.replicas)
                    if i in self.down:
                        continue
                    try:
                        resp = await client.post(self.replicas[i].base + "/v1/chat/completions", json=body)
                    except httpx.HTTPError:
                        self.failed_over += 1
                        continue
                    if resp.status_code != 200:
                        return f"HTTP {resp.status_code}: {resp.text[:120]}"
                    self.answered[resp.headers["x-advisor-decision-id"]] = int(resp.headers["x-advisor-attempts"])
                    return None
                return "no replica answered"

            _, errors = await load_test.pool(call, requests, concurrency)
        return errors


def test_two_replicas_lose_nothing_through_a_kill_and_a_database_restart(postgres_server, triton_server, routers,
                                                                          tmp_path):
    from advisor.store import open_store

    url = postgres_server.new_database("replicas_load")
    _promote(url, routers[0])
    replicas = [Replica(triton_server.grpc_url, url, tmp_path / f"spool{i}") for i in range(2)]
    balancer = Balancer(replicas)
    errors: list[str] = []
    load = threading.Thread(target=lambda: errors.extend(asyncio.run(balancer.run(2400, 16))))
    load.start()
    try:
        _wait(lambda: len(balancer.answered) >= 400)
        balancer.down.add(0)
        replicas[0].proc.send_signal(signal.SIGKILL)  # a crash: no drain, no goodbye
        replicas[0].proc.wait(30)
        killed_at = len(balancer.answered)
        _wait(lambda: len(balancer.answered) >= killed_at + 300)
        postgres_server.stop()  # the database goes away under load ...
        _wait(lambda: (h := replicas[1].ready())["status"] == "degraded" and h["records_spooled_only"] > 0)
        time.sleep(1)
        postgres_server.restart()  # ... and comes back
        replicas[0].start()  # the killed replica restarts on its spool (a container restart keeps its emptyDir)
        balancer.down.discard(0)
        load.join(300)
    finally:
        for r in replicas:
            if r.proc.poll() is None:
                assert load_test.stop(r.proc) == 0
        if not _up(url):
            postgres_server.restart()
    assert errors == []
    assert balancer.failed_over > 0  # the kill was felt by the client
    with open_store(url) as db:
        stored = {r["decision_id"]: r["n"] for r in db.query(
            "SELECT d.decision_id, count(o.attempt) AS n FROM routing_decisions d "
            "LEFT JOIN live_outcomes o USING (decision_id) GROUP BY d.decision_id")}
        rows = db.query("SELECT count(*) AS n, count(DISTINCT decision_id) AS d FROM routing_decisions")[0]
    lost = [d for d in balancer.answered if d not in stored]
    assert len(balancer.answered) == 2400
    assert lost == [], f"{len(lost)} answered decisions not stored"
    assert rows["n"] == rows["d"]  # no duplicates
    assert all(stored[d] == n for d, n in balancer.answered.items())  # every attempt of every answer, once
    assert not [p for r in replicas for p in r.spool.glob("*.*")]  # every spooled segment drained


def test_a_promotion_is_served_by_every_replica_within_its_reload_interval(postgres_server, triton_server, routers,
                                                                          tmp_path):
    from advisor.router.feedback.pointers import sha256_of
    from advisor.service.routing.reload import CHECK_EVERY_S

    url = postgres_server.new_database("replicas_promote")
    _promote(url, routers[0])
    replicas = [Replica(triton_server.grpc_url, url, tmp_path / f"spool{i}") for i in range(2)]
    try:
        old, new = sha256_of(routers[0]), sha256_of(routers[1])
        assert old != new and all(r.ready()["router_sha256"] == old for r in replicas)
        cli = subprocess.run([*load_test.ADVISOR, "router", "promote", str(routers[1]), "--store", url, "--force"],
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert "pointer postgresql://" in cli.stdout
        promoted = time.monotonic()
        for r in replicas:
            _wait(lambda r=r: r.ready()["router_sha256"] == new, timeout=10)
        took = time.monotonic() - promoted
        assert took <= CHECK_EVERY_S + 2.0, f"took {took:.1f}s"
    finally:
        for r in replicas:
            assert load_test.stop(r.proc) == 0


def _up(url: str) -> bool:
    from advisor.errors import StoreError
    from advisor.store.postgres import connect

    try:
        connect(url).close()
    except StoreError:
        return False
    return True


def _wait(cond, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_a_wrong_database_password_is_one_line_at_start_and_degraded_on_every_worker(postgres_server, triton_server,
                                                                                       routers, tmp_path):
    """A store URL whose password PostgreSQL refuses: one log line at start (password redacted), and /readyz
    "degraded" from every worker at once, whether it has handled a request or not (issue 38 case 12)."""
    import httpx
    import psycopg

    from test_service import KEY, Service

    url = postgres_server.new_database("wrong_password")
    hba = postgres_server.data / "pg_hba.conf"
    if "advisor_pw" not in hba.read_text():
        hba.write_text("host all advisor_pw 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        postgres_server._run("pg_ctl", "reload", "-D", str(postgres_server.data))
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("CREATE ROLE advisor_pw LOGIN PASSWORD 'the-right-one'")
    wrong = url.replace("postgres@", "advisor_pw:not-the-password@")
    (tmp_path / "keys.txt").write_text(f"full {KEY}\n")
    svc = Service(["--url", triton_server.grpc_url, "--router", str(routers[0]), "--keys", str(tmp_path / "keys.txt"),
                   "--spool", str(tmp_path / "spool"), "--workers", "2", "--ingest-every", "1"], wrong)
    try:
        deadline = time.monotonic() + 15
        while True:  # every worker probes the database as it starts
            states = [httpx.get(svc.base + "/readyz", headers={"authorization": f"Bearer {KEY}"}, timeout=5).json()
                      for _ in range(20)]  # a new connection each: the two workers both answer some
            if all(s["status"] == "degraded" for s in states):
                break
            assert time.monotonic() < deadline, [s["status"] for s in states]
            time.sleep(0.5)
        assert "password authentication failed" in states[0]["records_detail"]
        serving = list(svc.lines)
    finally:
        svc.stop()
    log = "".join(svc.lines)
    assert "not-the-password" not in log and "Traceback" not in log, log
    assert sum("password authentication failed" in line for line in serving) == 1, "".join(serving)
