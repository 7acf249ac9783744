"""A killed embedded Triton leaves its PyTriton workspace and shared memory behind; the next start removes them."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from advisor.triton.server import clean_leaked

REPO = Path(__file__).resolve().parent.parent


def _leftovers(pid: int) -> list[Path]:
    from pytriton.constants import PYTRITON_HOME

    return [*Path(PYTRITON_HOME).glob(f"advisor-{pid}-*"), *Path("/dev/shm").glob(f"pytrtion{pid}-*")]


def test_clean_leaked_keeps_live_and_foreign_entries(tmp_path):
    home, shm = tmp_path / "home", tmp_path / "shm"
    home.mkdir()
    shm.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    (home / f"advisor-{dead_pid}-ab12").mkdir()
    (home / f"advisor-{os.getpid()}-cd34").mkdir()  # ours: alive
    (home / "workspace_x1").mkdir()  # PyTriton's default name: not ours to judge
    (shm / f"pytrtion{dead_pid}-ff-1").write_bytes(b"x")
    (shm / "psm_123").write_bytes(b"x")  # someone else's segment
    stub = home / f"advisor-{dead_pid}-ab12" / "tritonserver" / "backends" / "python" / "triton_python_backend_stub"
    stub.parent.mkdir(parents=True)
    stub.symlink_to(shutil.which("sleep"))  # a backend stub left running from the dead server's workspace
    gone = home / f"advisor-{dead_pid}-ee56" / "stub"  # its workspace already removed, the stub still running
    gone.parent.mkdir()
    gone.symlink_to(shutil.which("sleep"))
    live_stub = home / f"advisor-{os.getpid()}-cd34" / "stub"
    live_stub.symlink_to(shutil.which("sleep"))
    orphans = [subprocess.Popen([str(stub), "60"]), subprocess.Popen([str(gone), "60"])]
    alive = subprocess.Popen([str(live_stub), "60"])
    shutil.rmtree(gone.parent)
    try:
        removed = clean_leaked(home, shm)
        assert [p.wait(timeout=10) for p in orphans] == [-signal.SIGKILL] * 2, "the dead server's stubs are stopped"
        assert alive.poll() is None, "a live server's processes are left alone"
    finally:
        for proc in (*orphans, alive):
            proc.kill()
            proc.wait()
    assert sorted(p.name for p in removed) == sorted([f"advisor-{dead_pid}-ab12", f"pytrtion{dead_pid}-ff-1"])
    assert sorted(p.name for p in home.iterdir()) == sorted([f"advisor-{os.getpid()}-cd34", "workspace_x1"])
    assert [p.name for p in shm.iterdir()] == ["psm_123"]


@pytest.mark.slow
def test_killed_server_leftovers_are_removed_on_next_start():
    from advisor.ladder import load_ladder
    from advisor.triton.server import EmbeddedTriton

    code = f"from advisor.cli import main; main(['triton', 'serve', '--ladder', {str(REPO / 'ladders' / 'demo.yaml')!r}])"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            if line.startswith("ready ") or time.monotonic() > deadline:
                break
        assert _leftovers(proc.pid), "a serving embedded Triton has its workspace under PYTRITON_HOME"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(1)
    leaked = _leftovers(proc.pid)
    assert leaked, "SIGKILL leaves the workspace behind (nothing to clean otherwise)"
    server = EmbeddedTriton(load_ladder(REPO / "ladders" / "demo.yaml")).start()
    try:
        assert not any(p.exists() for p in leaked)
    finally:
        server.stop()
