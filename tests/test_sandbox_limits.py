"""The run_python sandbox bounds a whole run, not just each process (issue 30, item 8): memory of all its
processes together, the size of /workspace, CPU seconds; a limit ends the call with a clear problem, keeps what
was written before it, and leaves the host alone. Every test runs real code in the real bubblewrap sandbox."""

from __future__ import annotations

import asyncio
import os

import pytest

from advisor.tools import sandbox as sb
from advisor.tools.sandbox import SandboxLimits, run_sandboxed

needs_root_bwrap = pytest.mark.skipif(
    sb.sandbox_status()[0] is None or not sb.sandbox_status()[0].as_root,
    reason="needs a working bubblewrap run as root (the workspace tmpfs and the watcher's uid)")


@pytest.fixture
def ws(tmp_path):
    with sb.private_root(tmp_path / "probe") as root:
        workspace = root / "episode"
        workspace.mkdir()
        yield workspace


def run(ws, code, limits):
    return asyncio.run(run_sandboxed(ws, "code", code, [], limits))


def _tree_bytes(folder) -> int:
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(folder) for f in files)


@needs_root_bwrap
def test_twelve_forked_children_of_450_mb_share_one_memory_bound(ws):
    """Each child stays under the per-process address space (512 MiB); together they would hold 5.4 GB. The
    watcher stops the run at 1024 MiB (total_memory_mb), so at most two children finish allocating."""
    code = """
import os, sys, time
for i in range(12):
    if os.fork() == 0:
        block = b"x" * (450 * 1024 * 1024)  # written, so resident
        print("allocated", i, flush=True)
        time.sleep(20)
        os._exit(0)
for _ in range(12):
    os.wait()
print("all done")
"""
    result = run(ws, code, SandboxLimits(timeout_s=20))
    assert result.problem and result.problem.startswith("memory limit exceeded"), (result.problem, result.stderr)
    assert "1024 MiB (total_memory_mb)" in result.problem
    held = int(result.problem.split("held ")[1].split(" MiB")[0])
    assert held < 1024 + 450, held  # stopped within one child's allocation of the bound
    assert result.stdout.count("allocated") <= 2 and "all done" not in result.stdout


@needs_root_bwrap
def test_writing_5_gb_is_bounded_and_the_host_disk_untouched(ws):
    """320 files of 16 MiB (each under the per-file limit) stop at the 256 MiB workspace (a tmpfs); the host
    workspace gets what fitted, nothing more."""
    code = """
chunk = b"y" * (16 * 1024 * 1024)
for i in range(320):
    with open(f"part-{i:03d}.bin", "wb") as fh:
        fh.write(chunk)
print("wrote 5 GB")
"""
    result = run(ws, code, SandboxLimits(timeout_s=30))
    assert result.problem and result.problem.startswith("disk space limit reached"), (result.problem, result.stderr)
    assert "256 MiB (workspace_mb)" in result.problem and "wrote 5 GB" not in result.stdout
    assert 0 < _tree_bytes(ws) <= 256 * 1024 * 1024
    assert len(list(ws.glob("part-*.bin"))) >= 10  # the files that fitted were kept


@needs_root_bwrap
def test_the_workspace_round_trip_keeps_changes_and_never_follows_links(ws, tmp_path):
    """Files written, changed and deleted in the sandbox are so on the host; a link is copied as a link."""
    (ws / "keep.txt").write_text("old")
    (ws / "gone.txt").write_text("bye")
    (ws / "sub").mkdir()
    (ws / "sub" / "x.txt").write_text("x")
    victim = tmp_path / "victim.txt"
    victim.write_text("host file")
    code = f"""
import os, shutil
open("keep.txt", "w").write("new")
os.remove("gone.txt")
shutil.rmtree("sub")
open("sub", "w").write("a file now")
os.symlink({str(victim)!r}, "link")
os.makedirs("deep/er")
open("deep/er/f.txt", "w").write("deep")
"""
    result = run(ws, code, SandboxLimits())
    assert result.returncode == 0 and result.problem is None, result.stderr
    assert (ws / "keep.txt").read_text() == "new" and not (ws / "gone.txt").exists()
    assert (ws / "sub").is_file() and (ws / "deep/er/f.txt").read_text() == "deep"
    assert (ws / "link").is_symlink() and os.readlink(ws / "link") == str(victim)
    assert victim.read_text() == "host file"


@needs_root_bwrap
@pytest.mark.parametrize("stopper, problem", [("while True:\n    pass", "time limit exceeded"),
                                              ("while True:\n    print('z' * 1000)", "output limit exceeded")])
def test_a_stopped_run_keeps_what_it_wrote(ws, stopper, problem):
    result = run(ws, "open('before.txt', 'w').write('kept')\n" + stopper, SandboxLimits(timeout_s=3))
    assert result.problem and result.problem.startswith(problem), (result.problem, result.stderr[-300:])
    assert (ws / "before.txt").read_text() == "kept"


@needs_root_bwrap
def test_cpu_seconds_are_bounded_per_process(ws):
    result = run(ws, "while True:\n    pass", SandboxLimits(timeout_s=20, cpu_s=1))
    assert result.problem and result.problem.startswith("CPU time limit exceeded"), (result.problem, result.stderr)


@needs_root_bwrap
def test_the_code_cannot_reach_the_host_workspace_mount(ws):
    """The host workspace is bound at /.host/workspace for the watcher only (in root's 0700 /.host), even when the host folder is 0755."""
    result = run(ws, "import os\ntry:\n    os.listdir('/.host/workspace')\nexcept OSError as e:\n"
                     "    print(type(e).__name__)\ntry:\n    open('/.host/workspace/x', 'w')\nexcept OSError as e:\n"
                     "    print(type(e).__name__)\n", SandboxLimits())
    assert result.stdout.split() == ["PermissionError", "PermissionError"], result.stdout + result.stderr
    assert not (ws / "x").exists()


async def test_write_file_respects_the_workspace_size(tmp_path):
    """write_file (on the host) is held to the same workspace_mb as code in the sandbox."""
    from advisor.tools.environment import Environment
    from test_tools import _task

    env = Environment.create(_task(), tmp_path, limits=SandboxLimits(workspace_mb=1))
    big = "z" * 600_000
    assert (await env.call("write_file", {"path": "a.txt", "content": big})).ok
    assert (await env.call("write_file", {"path": "a.txt", "content": big})).ok  # replacing it fits
    call = await env.call("write_file", {"path": "b.txt", "content": big})
    assert not call.ok and "1 MiB (workspace_mb)" in call.observation and not (env.workspace / "b.txt").exists()


@needs_root_bwrap
def test_without_bwrap_size_support_the_workspace_is_bound_and_handed_over(ws, monkeypatch):
    """bubblewrap before 0.8 has no --size: as root the workspace is bound directly and given to the run's uid."""
    from dataclasses import replace

    old = replace(sb.sandbox_status()[0], perms=False)
    monkeypatch.setattr(sb, "sandbox_status", lambda: (old, None))
    (ws / "in.txt").write_text("fixture")
    result = run(ws, "print(open('in.txt').read())\nopen('out.txt', 'w').write('y')\n", SandboxLimits())
    assert result.returncode == 0 and result.stdout.strip() == "fixture", result.stderr
    assert (ws / "out.txt").read_text() == "y"


SHM = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.restype, libc.shmat.restype = ctypes.c_int, ctypes.c_void_p
libc.shmat.argtypes, libc.shmdt.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int], [ctypes.c_void_p]
chunk = 64 * 1024 * 1024  # attached one at a time: within the per-process address space (memory_mb)
for i in range(48):  # 3 GB of System V shared memory, each segment filled, then detached: in nobody's RSS
    sid = libc.shmget(0, chunk, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
    if sid < 0:
        print("shmget failed", ctypes.get_errno(), flush=True)
        break
    at = libc.shmat(sid, None, 0)
    if at in (None, ctypes.c_void_p(-1).value):
        print("shmat failed", ctypes.get_errno(), flush=True)
        break
    ctypes.memset(at, 1, chunk)
    libc.shmdt(ctypes.c_void_p(at))
    print("segment", i, flush=True)
time.sleep(20)
print("all held")
"""

MEMFD = """
import os, time
fds = []
block = b"x" * (15 * 1024 * 1024)  # under the per-file size limit (16 MiB)
for i in range(200):  # 3 GB written into memfds, never mapped: in nobody's RSS
    fd = os.memfd_create("hold%d" % i)
    os.write(fd, block)
    fds.append(fd)
    print("memfd", i, flush=True)
time.sleep(20)
print("all held")
"""


@needs_root_bwrap
@pytest.mark.parametrize("code", [SHM, MEMFD], ids=["sysv-shm", "memfd"])
def test_memory_no_process_shows_counts_against_the_bound(ws, code):
    """System V shared memory filled then detached, and memfds written but never mapped, count toward no process's
    resident memory; the watcher adds them up, so the run stops at total_memory_mb (1024 MiB) well before 3 GB
    and before its wall time."""
    result = run(ws, code, SandboxLimits(timeout_s=20, memory_mb=256))
    assert result.problem and result.problem.startswith("memory limit exceeded"), (result.problem, result.stderr)
    held = int(result.problem.split("held ")[1].split(" MiB")[0])
    assert held < 1024 + 256 + 64, held
    assert "all held" not in result.stdout


@needs_root_bwrap
def test_copy_back_is_bounded_by_entries_and_reported_apart_from_the_time_limit(ws):
    """30,000 empty files: the copy back stops at workspace_files entries, says so (not "time limit exceeded"),
    and the host workspace gets no more than that."""
    code = "import os\nfor i in range(30000):\n    open('f%05d' % i, 'w').close()\nprint('made')\n"
    result = run(ws, code, SandboxLimits(timeout_s=20, workspace_files=5000))
    assert "made" in result.stdout
    assert result.problem and result.problem.startswith("workspace limit exceeded: it holds 30000 entries"), \
        result.problem
    assert "(workspace_files)" in result.problem and "time limit" not in result.problem
    assert 0 < len(os.listdir(ws)) <= 5000


@needs_root_bwrap
def test_a_copy_back_past_its_own_budget_is_cut_and_says_so(ws):
    code = "import os\nfor i in range(20000):\n    open('f%05d' % i, 'w').close()\nprint('made')\n"
    result = run(ws, code, SandboxLimits(timeout_s=20, workspace_files=100_000, copy_s=0.05))
    assert result.problem and result.problem.startswith("copy back cut at its own time budget"), result.problem
    assert "time limit exceeded" not in result.problem
