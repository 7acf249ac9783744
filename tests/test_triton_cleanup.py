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


def _leftovers(pid: int, home: Path) -> list[Path]:
    return [*home.glob(f"advisor-{pid}-*"), *Path("/dev/shm").glob(f"pytrtion{pid}-*")]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _program(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except OSError:
        return ""


def _stopped(pid: int, timeout: float = 10.0) -> bool:
    """Whether process `pid` ends (or is a zombie) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


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
    live = home / f"advisor-{os.getpid()}-cd34"  # a live server's workspace (this process is its owner)
    for name, program in (("stub", "sleep"), ("tritonserver", "sh"), ("orphaned_stub", "sleep")):
        (live / name).symlink_to(shutil.which(program))
    orphans = [subprocess.Popen([str(stub), "60"]), subprocess.Popen([str(gone), "60"])]
    alive = subprocess.Popen([str(live / "stub"), "60"])  # its parent is the owner
    server = subprocess.Popen([str(live / "tritonserver"), "-c", f"'{live / 'stub'}' 60; true"])  # a stub under it
    spawned = subprocess.run(["sh", "-c", f"'{live / 'orphaned_stub'}' 60 >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True)  # its parent (this sh) is gone: orphaned
    orphaned = int(spawned.stdout)
    shutil.rmtree(gone.parent)
    try:
        deadline = time.monotonic() + 5  # until every process runs its program (not a shell's fork before exec)
        while time.monotonic() < deadline and not (
                _program(orphaned) == str(live / "orphaned_stub")
                and [_program(pid) for pid in _children(server.pid)] == [str(live / "stub")]):
            time.sleep(0.05)
        under_server = _children(server.pid)
        removed = clean_leaked(home, shm)
        assert [p.wait(timeout=10) for p in orphans] == [-signal.SIGKILL] * 2, "the dead server's stubs are stopped"
        assert _stopped(orphaned), "an orphaned stub of a live owner is stopped"
        assert alive.poll() is None and server.poll() is None, "a live server's processes are left alone"
        assert under_server and not any(_stopped(pid, timeout=1.0) for pid in (alive.pid, server.pid, *under_server)), \
            "a live server's processes are still running a second later (a signal is not delivered at once)"
    finally:
        for proc in (*orphans, alive, server):
            proc.kill()
            proc.wait()
        for pid in (orphaned, *_children(server.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    assert sorted(p.name for p in removed) == sorted([f"advisor-{dead_pid}-ab12", f"pytrtion{dead_pid}-ff-1"])
    assert sorted(p.name for p in home.iterdir()) == sorted([f"advisor-{os.getpid()}-cd34", "workspace_x1"])
    assert [p.name for p in shm.iterdir()] == ["psm_123"]


@pytest.fixture
def home():
    """A PyTriton home of the test's own, with a short path (PyTriton's socket paths in it must stay under the
    kernel's 108 bytes, which pytest's tmp_path can pass)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="pt-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _serving_triton(home: Path) -> subprocess.Popen:
    """`advisor triton serve` on the demo ladder in a child process, once it printed its ready line; its PyTriton
    home is `home` (the tests' own: another test's server, starting meanwhile, cleans up after dead servers in the
    shared one)."""
    code = f"from advisor.cli import main; main(['triton', 'serve', '--ladder', {str(REPO / 'ladders' / 'demo.yaml')!r}])"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "PYTRITON_HOME": str(home)})
    deadline = time.monotonic() + 120
    for line in proc.stdout:
        if line.startswith("ready ") or time.monotonic() > deadline:
            break
    return proc


@pytest.mark.slow
def test_killed_server_leftovers_are_removed_on_next_start(home, monkeypatch):
    import pytriton.constants

    from advisor.ladder import load_ladder
    from advisor.triton.server import EmbeddedTriton

    monkeypatch.setattr(pytriton.constants, "PYTRITON_HOME", home)  # the next start below uses it too
    proc = _serving_triton(home)
    try:
        assert _leftovers(proc.pid, home), "a serving embedded Triton has its workspace under PYTRITON_HOME"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(1)
    leaked = _leftovers(proc.pid, home)
    assert leaked, "SIGKILL leaves the workspace behind (nothing to clean otherwise)"
    server = EmbeddedTriton(load_ladder(REPO / "ladders" / "demo.yaml")).start()
    try:
        assert not any(p.exists() for p in leaked)
    finally:
        server.stop()


def _model_copies(pid: int, home: Path) -> list[Path]:
    """The model copies tritonserver made in /tmp (``folderXXXXXX``) for the embedded Triton of process `pid`."""
    from advisor.triton.server import model_folders

    return [f for f, w in model_folders(home) if w.name.startswith(f"advisor-{pid}-")]


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_no_model_copy_or_shared_memory_outlives_the_server(how, home):
    """tritonserver copies every model loaded through its API into /tmp/folderXXXXXX (issue 38, case 16); the
    embedded Triton's models load from its workspace's repository at start, so it makes none. A clean SIGTERM
    leaves neither the workspace nor shared memory; after a SIGKILL they stay until the next start's clean_leaked
    (run here directly) removes them, and only them."""
    proc = _serving_triton(home)
    try:
        assert _leftovers(proc.pid, home), "a serving embedded Triton has its workspace under PYTRITON_HOME"
        assert not _model_copies(proc.pid, home), "the models load from the workspace, not from copies in /tmp"
    finally:
        proc.send_signal(how)
        proc.wait(timeout=60)
    if how == signal.SIGKILL:
        time.sleep(1)
        assert _leftovers(proc.pid, home), "SIGKILL leaves them behind (nothing to clean otherwise)"
        clean_leaked(home)
    assert not _model_copies(proc.pid, home) and not _leftovers(proc.pid, home), _leftovers(proc.pid, home)
