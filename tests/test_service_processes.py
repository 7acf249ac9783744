"""The processes of `advisor serve`: the embedded Triton it started is restarted when it dies, a Triton given with
--url is reported and left alone, and a SIGKILL of the service (two workers) leaves no process, port or temporary
folder behind. Real `advisor serve` subprocesses with their own embedded tritonserver."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from test_service import DEMO, SUITE, Service, one_task_per_class

pytestmark = [pytest.mark.triton, pytest.mark.slow]
KEY = "sk-processes"
AUTH = {"authorization": f"Bearer {KEY}"}
CHAT = {"model": "auto", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, triton_server):
    """A store with a small probe of the demo ladder (the service trains its router from it) and a key file."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("processes")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=SUITE, url=triton_server.grpc_url, store_path=tmp / "p.duckdb",
                          replicas=1, conditions=("baseline",), tasks=one_task_per_class()))
    (tmp / "keys.txt").write_text(f"processes {KEY}\n")
    return tmp


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) if proc.name.isdigit() else None
        except (OSError, ValueError, IndexError):
            continue
        if parent is not None:
            tree.setdefault(parent, []).append(int(proc.name))
    return tree


def _descendants(root: int) -> list[int]:
    tree, found, todo = _children(), [], [root]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pids: list[int]) -> list[str]:
    """The programs of `pids` that still run (zombies are dead)."""
    alive = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(f"{pid} {_program(pid)[:100]}")
    return alive


def _wait(condition, timeout: float, what):
    """`condition()` once it is truthy; fails after `timeout` s with `what` (a callable: called then, so that it
    can say what the service printed)."""
    start = time.monotonic()
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < start + timeout, \
            f"after {time.monotonic() - start:.1f} s: {what() if callable(what) else what}"
        time.sleep(0.5)


def _ready(svc) -> bool:
    try:
        return httpx.get(svc.base + "/readyz", headers=AUTH, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _serve(store_dir: Path, tmp: Path, *args: str) -> Service:
    store = tmp / "live.duckdb"
    if not store.exists():
        shutil.copy(store_dir / "p.duckdb", store)
    return Service(["--ladder", str(DEMO), "--keys", str(store_dir / "keys.txt"), "--ingest-every", "0", *args], store)


def test_a_killed_embedded_triton_is_restarted_and_a_sigkill_leaves_nothing_behind(store_dir, tmp_path):
    from advisor.triton.server import START_TIMEOUT_S, free_port

    port = free_port()
    svc = _serve(store_dir, tmp_path, "--workers", "2", "--port", str(port))
    try:
        assert httpx.post(svc.base + "/v1/chat/completions", json=CHAT, headers=AUTH, timeout=30).status_code == 200
        # 7. the embedded Triton dies: logged once, /readyz says why, restarted, requests answered again
        triton = _wait(lambda: [p for p in _descendants(svc.proc.pid) if "tritonserver" in _program(p).split(" ")[0]],
                       10, "no tritonserver under the service")
        os.kill(triton[0], signal.SIGKILL)
        def why() -> bool:
            ready = httpx.get(svc.base + "/readyz", headers=AUTH, timeout=5)
            return ready.status_code == 503 and "embedded Triton exited" in ready.json()["detail"]

        _wait(why, 20, "/readyz did not say that Triton died")
        assert httpx.get(svc.base + "/readyz", timeout=5).json() == {"status": "not ready"}  # no key: no detail
        def printed() -> str:
            return "".join(svc.lines)

        _wait(lambda: _ready(svc), 180, lambda: f"Triton was not restarted: {printed()}")
        status = _wait(lambda: httpx.post(svc.base + "/v1/chat/completions", json=CHAT, headers=AUTH,
                                          timeout=30).status_code == 200, 60, "requests did not resume")
        assert status
        # /readyz answers once one rung is loaded; the line comes when the restart has loaded every model, which
        # on a busy machine is seconds later: it gets the bound of a start
        _wait(lambda: "embedded Triton restarted" in printed(), START_TIMEOUT_S,
              lambda: f"no line said Triton was back: {printed()}")
        assert printed().count("the embedded Triton exited") == 1, printed()
        # 1. SIGKILL of the whole service: workers, tritonserver and its stubs die with it
        tree = _descendants(svc.proc.pid)
        assert len([p for p in tree if "multiprocessing" in _program(p) or "spawn" in _program(p)]) >= 2, \
            [_program(p) for p in tree]
        folders = list(Path(tempfile.gettempdir()).glob(f"advisor-serve-{svc.proc.pid}-*"))
        assert folders, "the service's temporary folder is named after it"
        svc.proc.kill()
        svc.proc.wait(timeout=10)
        _wait(lambda: not _alive(tree), 60, f"left running after SIGKILL: {_alive(tree)}")
    finally:
        if svc.proc.poll() is None:
            svc.proc.kill()
    # a restart on the same port works (no orphan answers it), and removes the dead service's folder
    again = _serve(store_dir, tmp_path, "--port", str(port))
    try:
        assert not any(f.exists() for f in folders), folders
        assert httpx.post(again.base + "/v1/chat/completions", json=CHAT, headers=AUTH, timeout=30).status_code == 200
    finally:
        assert again.stop() == 0, "".join(again.lines)


def test_a_triton_given_with_url_is_reported_not_restarted(store_dir, tmp_path):
    with socket.socket() as holder:  # an address where nothing answers
        holder.bind(("127.0.0.1", 0))
        url = f"127.0.0.1:{holder.getsockname()[1]}"
    svc = _serve(store_dir, tmp_path, "--url", url)
    try:
        line = _wait(lambda: next((ln for ln in svc.lines if "does not answer" in ln), None), 30, "no report")
        assert url in line and "not restarted" in line
        ready = httpx.get(svc.base + "/readyz", headers=AUTH, timeout=5)
        detail = ready.json()["detail"]  # the log names the address; a client reads the rung's state, not it
        assert ready.status_code == 503 and "does not answer" in detail and url not in ready.text, detail
    finally:
        assert svc.stop() == 0, "".join(svc.lines)
