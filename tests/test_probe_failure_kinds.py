"""A probe run whose model call failed keeps the failure's kind, from the backend through the turn driver to the
stored run: a rung that is too slow is stored as a ``timeout``, one that refuses the key as ``key refused``, never
both as ``down``. Against real OpenAI-compatible HTTP servers on loopback and a real DuckDB store."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import yaml

from loopback import Loopback

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"
SUITE = REPO / "suites" / "example" / "suite.yaml"


class _Upstream(Loopback):
    """An OpenAI-compatible endpoint on loopback: ``slow`` waits 30 s before answering, ``refuses`` answers 401."""

    def __init__(self, behaviour: str):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                if behaviour == "slow":
                    time.sleep(30)
                    status, body = 200, {"choices": [{"message": {"content": "late"}, "finish_reason": "stop"}]}
                else:
                    status, body = 401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up first
                    pass

        super().__init__(Handler)


def _ladder(path: Path, url: str) -> Path:
    """The demo ladder's smallest rung as an `openai` rung at `url`."""
    demo = yaml.safe_load(DEMO.read_text())
    rung = {k: v for k, v in demo["rungs"][0].items() if k != "standin"}
    rung.update(triton_model=rung["name"], backend="openai", url=url)
    path.write_text(yaml.safe_dump({"version": 1, "name": "loopback", "simulated": False, "rungs": [rung]}))
    return path


@pytest.mark.parametrize("behaviour, kind", [("slow", "timeout"), ("refuses", "key refused")])
def test_a_failed_probe_run_is_stored_with_its_failure_kind(tmp_path, behaviour, kind):
    from advisor.probe import ProbeConfig, run_probe
    from advisor.store import Store

    upstream = _Upstream(behaviour)
    try:
        run_probe(ProbeConfig(ladder_path=_ladder(tmp_path / "l.yaml", upstream.url), suite_path=SUITE,
                              store_path=tmp_path / "s.duckdb", replicas=1, conditions=("baseline",), max_runs=1,
                              tasks=["api-update-subscription"], client_timeout_s=1.0, client_retries=0))
    finally:
        upstream.close()
    with Store.open(tmp_path / "s.duckdb", read_only=True) as store:
        rows = store.query("SELECT stop_reason, failure, unscored, unscored_reason FROM runs")
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["stop_reason"] == "backend_error" and row["unscored"], row
    assert row["failure"] == kind, row
    assert row["unscored_reason"].startswith(f"backend_error ({kind}): "), row
