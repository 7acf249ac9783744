"""A full disk under the service (issue 38 case 8): store, spool and session latch on a 12 MB tmpfs.

While the disk is full the service answers 503 ``cannot_record`` (never a 500), ``/readyz`` says ``degraded``,
the log has one line when recording fails and one when it works again (no traceback), every request it answered
200 reaches the store once space returns, and it serves again. Needs root (``mount -t tmpfs``); skipped with
the reason otherwise.
"""

from __future__ import annotations

import concurrent.futures
import errno
import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from advisor.store import Store

from test_service import DEMO, KEY, SUITE, Service, one_task_per_class

pytestmark = [pytest.mark.triton, pytest.mark.slow]
AUTH = {"authorization": f"Bearer {KEY}"}


@pytest.fixture
def tmpfs(tmp_path):
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 12 MB tmpfs here (needs root): {done.stderr.strip()}")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def _fill(folder: Path) -> Path:
    """A file that takes every free byte of `folder`'s file system."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        try:
            while True:
                fh.write(b"\0" * 512)
        except OSError:
            pass
    return filler


def _chat(svc, i: int, session: bool = False) -> httpx.Response:
    headers = {**AUTH, **({"x-advisor-session": f"full-{i}"} if session else {})}
    return httpx.post(svc.base + "/v1/chat/completions", headers=headers, timeout=60,
                      json={"model": "auto", "messages": [{"role": "user", "content": f"Say hello ({i})."}]})


@pytest.fixture(scope="module")
def probed(tmp_path_factory, triton_server) -> Path:
    from advisor.probe import ProbeConfig, run_probe

    path = tmp_path_factory.mktemp("full") / "p.duckdb"
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=path,
                          replicas=1, conditions=("baseline",), tasks=one_task_per_class()))
    return path


def _status(svc) -> dict:
    return httpx.get(svc.base + "/readyz", headers=AUTH, timeout=10).json()


@pytest.mark.parametrize("sessions", [False, True], ids=["spool", "spool-and-latch"])
def test_a_full_disk_gives_503_and_degraded_loses_no_answered_record_and_recovers(tmpfs, tmp_path, triton_server,
                                                                                 probed, sessions):
    """`spool`: sessions off, the spool's writes fail; `spool-and-latch`: every request writes its session latch
    (a derived id without one) on the same disk first."""
    store = tmpfs / "live.duckdb"
    shutil.copy(probed, store)
    (tmp_path / "keys.txt").write_text(f"full {KEY}\n")
    (tmp_path / "service.yaml").write_text(f"version: 1\nsessions: {{enabled: {str(sessions).lower()}}}\n")
    svc = Service(["--url", triton_server.grpc_url, "--ladder", str(DEMO), "--keys", str(tmp_path / "keys.txt"),
                   "--config", str(tmp_path / "service.yaml"), "--ingest-every", "1"], store)
    answered: list[str] = []
    codes: list[int] = []
    try:
        for i in range(5):
            r = _chat(svc, i, session=sessions)
            assert r.status_code == 200, r.text
            answered.append(r.headers["x-advisor-decision-id"])
        filler = _fill(tmpfs)
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda i: _chat(svc, i, session=sessions and i % 2 == 0), range(100, 400)))
        for r in replies:
            codes.append(r.status_code)
            if r.status_code == 200:
                answered.append(r.headers["x-advisor-decision-id"])
            else:
                assert r.status_code == 503 and r.json()["error"]["code"] == "cannot_record", r.text
        assert 503 in codes, codes
        ready = _status(svc)
        assert ready["status"] == "degraded" and "cannot write" in ready["records_detail"], ready

        filler.unlink()  # space returns
        deadline = time.monotonic() + 30
        while True:  # the spool recovers on the app's tick; the latch on its next write
            r = _chat(svc, 600 + len(codes), session=sessions)
            codes.append(r.status_code)
            if r.status_code == 200:
                answered.append(r.headers["x-advisor-decision-id"])
                if _status(svc)["status"] == "ready":
                    break
            assert time.monotonic() < deadline, (r.text, _status(svc))
            time.sleep(0.3)
        for i in range(700, 705):
            r = _chat(svc, i, session=sessions)
            assert r.status_code == 200, r.text
            answered.append(r.headers["x-advisor-decision-id"])
    finally:
        code = svc.stop()
    log = "".join(svc.lines)
    assert code == 0, log[-3000:]
    assert "Traceback" not in log and "cannot rollback" not in log, log[-3000:]
    assert log.count("recording: cannot write records") <= 1, log[-3000:]
    with Store.open(store, read_only=True) as s:
        stored = {r["decision_id"] for r in s.query("SELECT decision_id FROM routing_decisions")}
    lost = [d for d in answered if d not in stored]
    assert not lost, f"{len(lost)} of {len(answered)} answered decisions are not in the store"
    print(json.dumps({"sessions": sessions, "answered": len(answered), "refused_503": codes.count(503),
                      "lost": len(lost)}))
