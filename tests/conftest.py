"""Shared test fixtures. Keep this file light: only what many test modules need.

`triton_server` is a real tritonserver (the embedded PyTriton server) hosting the stand-ins of
`ladders/demo.yaml` on free ports, started once per test session and stopped at its end. Its stand-ins know
the bundled example suite and the probe tests' small suite, so they act as agents on those tasks.
`postgres_server` is a real PostgreSQL started the same way (once per session, in a temporary folder).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DEMO_LADDER = REPO / "ladders" / "demo.yaml"
KNOWN_SUITES = (REPO / "suites" / "example" / "suite.yaml", REPO / "tests" / "probe_data" / "suite.yaml")


@dataclass
class RunningTriton:
    """Addresses of the session's embedded Triton and the ladder it serves."""

    grpc_url: str  #: "127.0.0.1:PORT"
    http_url: str  #: "http://127.0.0.1:PORT"
    metrics_url: str  #: "http://127.0.0.1:PORT/metrics"
    ladder: object  #: the loaded demo `Ladder`
    server: object  #: the `EmbeddedTriton` itself


@pytest.fixture(scope="session")
def triton_server():
    """Start the embedded Triton for the demo ladder once per session; yield its addresses and ladder."""
    from advisor.ladder import load_ladder
    from advisor.triton.server import EmbeddedTriton

    ladder = load_ladder(DEMO_LADDER)
    server = EmbeddedTriton(ladder, suite_paths=[p for p in KNOWN_SUITES if p.exists()]).start()
    try:
        yield RunningTriton(server.grpc_url, server.http_url, server.metrics_url, ladder, server)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server():
    """A real PostgreSQL (Debian's package: initdb + pg_ctl in a temporary folder, a free port) for the session;
    yields the `LocalPostgres` (its `url`; `stop()`/`restart()` for outage tests). Skipped where PostgreSQL is
    not installed, except under CI (`.ci/run` installs it)."""
    import os

    from tests.local_postgres import LocalPostgres, postgres_bin

    if postgres_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed (CI installs Debian's postgresql package: .ci/run)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    server = LocalPostgres().start()
    try:
        yield server
    finally:
        server.close()
