"""Run Python in a sandboxed subprocess: no network, bounded wall time, memory and output, writes only
inside the workspace.

Layers, from strongest to weakest:

1. a fresh network namespace (``unshare -rn``) when the kernel allows unprivileged user namespaces, so
   there is no network interface to reach at all;
2. resource limits the child sets on itself before any code runs: address space (memory), CPU seconds,
   file size, open files, no core;
3. an audit hook installed before the code runs (``sys.addaudithook``, which code cannot remove) that
   stops the process on a socket connect/bind/DNS lookup, on starting processes or signalling others, and on
   opening, creating, renaming or deleting a file outside the workspace;
4. the parent kills the whole process group when the wall time or the output cap is exceeded.

A stopped run is reported in `SandboxResult.problem`, which tools turn into an ``ok=False`` observation.
This guards against agent mistakes; it is not a boundary against a determined attacker with native code.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VIOLATION_EXIT = 113
_MARK = "[sandbox] "

_PREAMBLE = r'''
import os, sys, resource
_ws = os.path.realpath(sys.argv[1])
_kind, _payload = sys.argv[2], sys.argv[3]
for _name, _value in zip(("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE"),
                         map(int, sys.argv[4].split(","))):
    try:
        resource.setrlimit(getattr(resource, _name), (_value, _value))
    except (ValueError, OSError):
        pass
_ok_paths = ("/dev/null",)
def _stop(what):
    os.write(2, ("\n[sandbox] " + what + "\n").encode("utf-8", "replace"))
    os._exit(113)
def _inside(p):
    if isinstance(p, int) or p is None:
        return True
    try:
        p = os.path.realpath(os.fsdecode(p))
    except Exception:
        return False
    return p == _ws or p.startswith(_ws + os.sep) or p in _ok_paths
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_NET = {"socket.connect", "socket.bind", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
        "socket.sendto", "socket.sendmsg"}
_PROC = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.kill", "os.killpg",
         "os.fork", "os.forkpty", "pty.spawn"}
_FS1 = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
        "shutil.rmtree", "os.removexattr", "os.setxattr"}
_FS2 = {"os.rename", "os.link", "os.symlink", "shutil.copyfile", "shutil.move", "shutil.copytree"}
def _hook(event, args):
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing and not _inside(path):
            _stop("write outside the workspace refused: " + str(path))
    elif event in _NET:
        _stop("network access refused (" + event + ")")
    elif event in _PROC:
        _stop("starting or signalling processes is not allowed (" + event + ")")
    elif event in _FS1:
        if args and not _inside(args[0]):
            _stop("changing a path outside the workspace refused: " + str(args[0]))
    elif event in _FS2:
        for p in args[:2]:
            if isinstance(p, (str, bytes, os.PathLike)) and not _inside(p):
                _stop("changing a path outside the workspace refused: " + str(p))
sys.addaudithook(_hook)
sys.path.insert(0, _ws)
sys.argv = [_payload if _kind == "file" else "<run_python>"] + sys.argv[5:]
if _kind == "file":
    import runpy
    runpy.run_path(_payload, run_name="__main__")
else:
    exec(compile(_payload, "<run_python>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
'''


@dataclass
class SandboxLimits:
    """Bounds of one sandboxed Python run."""

    timeout_s: float = 10.0  #: wall time, seconds
    memory_mb: int = 512  #: address space, MiB
    max_output: int = 32_000  #: characters of stdout + stderr kept; more stops the run
    max_file_mb: int = 16  #: largest file the code may write


@dataclass
class SandboxResult:
    """What a sandboxed run produced, and why it was stopped when it was."""

    returncode: int | None
    stdout: str
    stderr: str
    problem: str | None = None  #: set when the sandbox stopped the run (limit or violation)


@functools.lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """True when ``unshare -rn`` works here (unprivileged user + network namespaces)."""
    exe = shutil.which("unshare")
    if not exe:
        return False
    try:
        return subprocess.run([exe, "-rn", "true"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _rlimits(limits: SandboxLimits) -> str:
    """The resource limits the child sets on itself before running any code (no preexec_fn: the parent may
    have threads, e.g. gRPC, and forking with a Python callback is unsafe there)."""
    values = (limits.memory_mb * 1024 * 1024, int(limits.timeout_s) + 2, limits.max_file_mb * 1024 * 1024, 256, 0)
    return ",".join(str(v) for v in values)


async def _drain(stream: asyncio.StreamReader, sink: list[bytes], budget: list[int], full: asyncio.Event) -> None:
    while True:
        chunk = await stream.read(8192)
        if not chunk:
            return
        if budget[0] > 0:
            sink.append(chunk[: budget[0]])
        budget[0] -= len(chunk)
        if budget[0] < 0:
            full.set()


async def run_sandboxed(workspace: Path, kind: str, payload: str, args: list[str] | None = None,
                        limits: SandboxLimits | None = None) -> SandboxResult:
    """Run Python code (``kind="code"``) or a workspace file (``kind="file"``) in the sandbox.

    The working directory is the workspace; the environment is minimal; stdin is empty.
    """
    limits = limits or SandboxLimits()
    workspace = workspace.resolve()
    cmd = [sys.executable, "-I", "-B", "-c", _PREAMBLE, str(workspace), kind, payload, _rlimits(limits), *(args or [])]
    if network_namespace_available():
        cmd = [shutil.which("unshare") or "unshare", "-rn", *cmd]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workspace), "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=workspace, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    out: list[bytes] = []
    err: list[bytes] = []
    budget = [limits.max_output]
    full = asyncio.Event()
    readers = asyncio.gather(_drain(proc.stdout, out, budget, full), _drain(proc.stderr, err, budget, full),
                             proc.wait())
    overflow = asyncio.ensure_future(full.wait())
    problem = None
    try:
        done, _ = await asyncio.wait({readers, overflow}, timeout=limits.timeout_s,
                                     return_when=asyncio.FIRST_COMPLETED)
        if overflow in done:
            problem = f"output limit exceeded ({limits.max_output} characters); the process was stopped"
        elif readers not in done:
            problem = f"time limit exceeded ({limits.timeout_s:g} s); the process was stopped"
    finally:
        overflow.cancel()
        if proc.returncode is None:
            _kill_group(proc.pid)
        try:
            await asyncio.wait_for(readers, timeout=5)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            readers.cancel()
    stdout = b"".join(out).decode("utf-8", "replace")
    stderr = b"".join(err).decode("utf-8", "replace")
    if problem is None:
        problem = _diagnose(proc.returncode, stderr, limits)
    return SandboxResult(proc.returncode, stdout, stderr, problem)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _diagnose(returncode: int | None, stderr: str, limits: SandboxLimits) -> str | None:
    if returncode == VIOLATION_EXIT and _MARK in stderr:
        what = stderr.rsplit(_MARK, 1)[1].strip()
        return f"sandbox violation: {what}; the process was stopped"
    tail = stderr.strip().splitlines()[-1:] or [""]
    if "MemoryError" in tail[0]:
        return f"memory limit exceeded ({limits.memory_mb} MiB); the process was stopped"
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL) and not stderr.strip():
        return "CPU time limit exceeded; the process was stopped"
    if returncode == -signal.SIGXFSZ or "File too large" in tail[0]:
        return f"file size limit exceeded ({limits.max_file_mb} MiB); the process was stopped"
    return None
