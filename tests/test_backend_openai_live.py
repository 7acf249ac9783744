"""The `openai` backend against real local OpenAI-compatible servers: advisor's own `advisor serve` (on the
session's embedded Triton with the demo stand-ins), probed through a ladder whose rungs are `openai` rungs pointing
at it, and then served again by a second `advisor serve` whose rungs are those `openai` rungs.

The answers behind the first service come from SIMULATED stand-ins; the ladder that reaches them over the OpenAI API
is a test fixture, not a real ladder (its runs say simulated false because nothing in the OpenAI API says otherwise).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from advisor.store import Store

from test_service import DEMO, KEY, SUITE, Service, one_task_per_class

pytestmark = [pytest.mark.triton, pytest.mark.slow]

KEY_ENV = "ADVISOR_TEST_UPSTREAM_KEY"


def openai_ladder(path: Path, base: str, name: str = "via-openai") -> Path:
    """The demo ladder's rungs as `openai` rungs at `base` (the model id sent is the demo rung's name)."""
    import yaml

    demo = yaml.safe_load(DEMO.read_text())
    rungs = []
    for r in demo["rungs"]:
        r = {k: v for k, v in r.items() if k != "standin"}
        r.update(triton_model=r["name"], backend="openai", url=base + "/v1", api_key_env=KEY_ENV)
        rungs.append(r)
    path.write_text(yaml.safe_dump({"version": 1, "name": name, "simulated": False, "rungs": rungs}))
    return path


@pytest.fixture(scope="module")
def upstream(tmp_path_factory, triton_server):
    """`advisor serve` on the demo stand-ins, router trained from a small probe."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("upstream")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=tmp / "a.duckdb",
                          replicas=1, conditions=("baseline",), max_runs=12))
    (tmp / "keys.txt").write_text(f"full {KEY}\n")
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(tmp / "keys.txt"),
                   "--ingest-every", "0"], tmp / "a.duckdb")
    yield svc
    assert svc.stop() == 0, "".join(svc.lines)


def test_probe_and_service_through_the_openai_backend(upstream, tmp_path, monkeypatch):
    from advisor.probe import ProbeConfig, run_probe

    monkeypatch.setenv(KEY_ENV, KEY)
    ladder = openai_ladder(tmp_path / "via.yaml", upstream.base)
    store = tmp_path / "b.duckdb"
    run = run_probe(ProbeConfig(ladder_path=ladder, suite_path=SUITE, store_path=store, replicas=1,
                                conditions=("baseline",), tasks=one_task_per_class()[:4], client_timeout_s=30))
    assert run.served_by == upstream.base + "/v1"
    with Store.open(store, read_only=True) as s:
        rows = s.query("SELECT stop_reason, error, input_tokens, output_tokens, tokens_from_server, simulated "
                       "FROM runs")
    assert len(rows) == 12
    # the upstream checks each step: a pinned stand-in rung whose step stays broken after its retry answers 502
    # "no rung gave a well-formed step" (its calibrated slips); any other backend error is a fault of the seam
    errors = [r for r in rows if r["stop_reason"] == "backend_error"]
    assert all("well-formed step" in (r["error"] or "") for r in errors), errors
    assert len(errors) <= 3, errors
    answered = [r for r in rows if r["stop_reason"] != "backend_error"]
    assert all(r["tokens_from_server"] and r["input_tokens"] > 0 and r["output_tokens"] > 0 for r in answered)

    # a second service whose rungs are those openai rungs (router trained from the probe just stored)
    shutil.copy(store, tmp_path / "c.duckdb")
    (tmp_path / "keys.txt").write_text(f"full {KEY}\n")
    env_before = os.environ.get(KEY_ENV)
    assert env_before == KEY  # the child service inherits the key variable
    downstream = Service(["--ladder", str(ladder), "--keys", str(tmp_path / "keys.txt"), "--ingest-every", "0"],
                         tmp_path / "c.duckdb")
    try:
        client = downstream.client()
        raw = client.chat.completions.with_raw_response.create(
            model="nano-30b", messages=[{"role": "user", "content": "Say hello."}], max_tokens=64)
        reply = raw.parse()
        assert raw.headers["x-advisor-rung"] == "nano-30b"
        assert raw.headers["x-advisor-simulated"] == "false"  # as far as the OpenAI API can tell (module docstring)
        assert reply.usage.prompt_tokens > 0 and reply.choices[0].message.content
        chunks = list(client.chat.completions.create(
            model="nano-30b", messages=[{"role": "user", "content": "Say hello."}], max_tokens=64, stream=True,
            stream_options={"include_usage": True}))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text and chunks[-1].usage.completion_tokens > 0
    finally:
        assert downstream.stop() == 0, "".join(downstream.lines)


def test_a_refused_key_is_one_line_naming_rung_and_endpoint(upstream, tmp_path, monkeypatch, capsys):
    import json

    from advisor.cli import main

    monkeypatch.setenv(KEY_ENV, "sk-wrong")
    ladder = openai_ladder(tmp_path / "via.yaml", upstream.base)
    code = main(["ladder", "check", str(ladder), "--json"])
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert code != 0
    error = rows["nano-12b"]["error"]
    assert error.startswith(f"rung 'nano-12b' at {upstream.base}/v1 refused the API key (key from {KEY_ENV}): "
                            "HTTP 401"), error
    assert "\n" not in error and not rows["nano-12b"]["ok"]
