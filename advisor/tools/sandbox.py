"""Run model-written Python in a bubblewrap sandbox (``bwrap``), or refuse to.

The sandbox of one run (see docs/sandbox.md):

- a fresh mount namespace whose only contents are read-only binds of ``/usr`` (and the ``/bin``, ``/lib*``
  links), the interpreter's own prefix, ``/etc/ld.so.cache``; ``/workspace``: as root a size-bounded tmpfs
  holding a copy of the episode workspace (bound at ``/.host/workspace``, out of the code's reach, and copied
  back when the run ends), otherwise the episode workspace bound read-write; a private, size-bounded tmpfs
  ``/tmp``; a fresh ``/dev`` and the ``/proc`` of its own PID namespace. The root is remounted read-only.
  No ``/etc/shadow``, no home, no other episode's workspace: they are not there;
- its own PID, network (no interface but a private loopback), IPC, UTS and cgroup namespaces: no signal,
  socket or shared memory reaches a process outside; ``--die-with-parent`` and the PID namespace end every
  child (``setsid`` ones too) when the run ends; ``--new-session`` detaches it from the terminal;
- no capabilities, ``no_new_privs``, and resource limits set before any code runs: address space, CPU
  seconds, file size, open files, no core, and a process limit (``RLIMIT_NPROC``);
- a watcher (`sandbox_init.py`, the sandbox's first program) that stops the run when all its processes
  together hold more than ``total_memory_mb``, at the wall time, or when the parent asks (output limit).

As root (CI containers) the kernel ignores ``RLIMIT_NPROC`` for uid 0, even in a user namespace, so bwrap runs
without a user namespace and the code drops to a fresh unprivileged uid of its own before it runs (the
watcher stays root, out of its reach); as any other user bwrap makes a user namespace (``--unshare-user``,
``--disable-userns`` where supported).

Where bwrap is missing or cannot build the sandbox, running code is refused with `SandboxUnavailable`, unless
the caller allowed running without it (`unsandboxed_allowed`, ``advisor probe --allow-unsandboxed``): then the
code runs as a plain subprocess with the same limits and no isolation.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from advisor.errors import AdvisorError
from advisor.tools.tree import remove_tree, walk_entries

VIOLATION_EXIT = 113
WORKSPACE = "/workspace"  #: where the episode workspace is mounted inside the sandbox
_MARK = "[sandbox] "
_UID_BASE = 1_500_000_000  #: as root, each run gets a fresh uid from here (no account has one this high)
_uids = itertools.count()

_INIT = Path(__file__).with_name("sandbox_init.py")  #: the run's first program (its source is passed with -c)
HOST_WORKSPACE = "/.host/workspace"  #: as root, where the host workspace is bound (in a root-only 0700 folder)
LIMIT_EXIT = 114  #: sandbox_init's exit code when a limit stopped the run
POLL_S = 0.02  #: how often the run's memory is added up
_COPY_BACK_S = 10.0  #: time sandbox_init may take past the limit to stop the run and copy the workspace back


class SandboxUnavailable(AdvisorError):
    """Code would have to run without the sandbox, and running unsandboxed was not allowed."""

    exit_code = 2


@dataclass
class SandboxLimits:
    """Bounds of one sandboxed Python run."""

    timeout_s: float = 10.0  #: wall time, seconds
    memory_mb: int = 512  #: address space of each process, MiB
    total_memory_mb: int = 1024  #: resident memory of all the run's processes together, MiB
    cpu_s: int | None = None  #: CPU seconds of each process (None: timeout_s + 2)
    max_output: int = 32_000  #: characters of stdout + stderr kept; more stops the run
    max_file_mb: int = 16  #: largest file the code may write
    workspace_mb: int = 256  #: size of /workspace (as root: a tmpfs copied back to the host workspace)
    workspace_files: int = 10_000  #: entries (files, folders, links) of /workspace copied back at most (as root)
    copy_s: float = 8.0  #: the copy back's own time budget, seconds (after the run; reported apart from timeout_s)
    max_processes: int = 32  #: processes (and threads) the run may have at once, its own included
    tmp_mb: int = 64  #: size of the private /tmp (and of /dev/shm)


@dataclass
class SandboxResult:
    """What a sandboxed run produced, and why it was stopped when it was."""

    returncode: int | None
    stdout: str
    stderr: str
    problem: str | None = None  #: set when the sandbox stopped the run (limit or violation)
    mode: str = "bubblewrap"  #: bubblewrap | unsandboxed


@dataclass(frozen=True)
class Bubblewrap:
    """A bwrap that works here, and how to call it."""

    exe: str
    as_root: bool  #: no user namespace; the code drops to a fresh uid itself (RLIMIT_NPROC binds only then)
    #: and /workspace is a size-bounded tmpfs copied from and back to the host workspace
    disable_userns: bool  #: bwrap knows --disable-userns (0.8+)
    perms: bool  #: bwrap knows --perms and --size (0.8+)


# ------------------------------------------------------------------------------------------- availability
_ALLOW_UNSANDBOXED: contextvars.ContextVar[bool] = contextvars.ContextVar("advisor_allow_unsandboxed",
                                                                         default=False)


@contextlib.contextmanager
def unsandboxed_allowed(allow: bool = True) -> Iterator[None]:
    """Within this block (and the asyncio tasks started in it) code may run unsandboxed where bwrap fails."""
    token = _ALLOW_UNSANDBOXED.set(allow)
    try:
        yield
    finally:
        _ALLOW_UNSANDBOXED.reset(token)


@functools.lru_cache(maxsize=1)
def sandbox_status() -> tuple[Bubblewrap | None, str | None]:
    """(the working bwrap, None), or (None, why there is none); found on PATH and tried once per process."""
    exe = shutil.which("bwrap")
    if exe is None:
        return None, "bubblewrap (bwrap) is not installed or not on PATH"
    try:
        usage = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"bubblewrap ({exe}) does not run: {exc}"
    bw = Bubblewrap(exe, as_root=os.geteuid() == 0, disable_userns="--disable-userns" in usage,
                    perms="--size" in usage and "--perms" in usage)
    with tempfile.TemporaryDirectory(prefix="advisor-sandbox-check-") as tmp:
        argv, uid = _bwrap_argv(bw, Path(tmp), SandboxLimits())
        try:
            if uid >= 0 and not _copies(bw):
                _hand_over(Path(tmp), uid)
            done = subprocess.run(argv + _python_args(SandboxLimits(), uid, _copies(bw), "code", "print('ok')", []),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
                                  start_new_session=True)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"bubblewrap ({exe}) could not start a sandbox: {exc}"
    if done.returncode != 0 or done.stdout.strip() != "ok":
        why = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return None, (f"bubblewrap ({exe}) cannot build a sandbox here ({why}; user namespaces may be disabled "
                      "in this container or kernel)")
    return bw, None


def refusal(problem: str) -> str:
    """The one-line message refusing to run code without the sandbox."""
    return (f"run_python refused: {problem}, and model-written code is never run unsandboxed by default; "
            "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) or, for a suite you trust, pass "
            "--allow-unsandboxed to `advisor probe` (docs/sandbox.md)")


def sandbox_mode(allow_unsandboxed: bool | None = None) -> str:
    """How code would run now: ``bubblewrap``, ``unsandboxed`` (allowed fallback) or ``refused``."""
    allow = _ALLOW_UNSANDBOXED.get() if allow_unsandboxed is None else allow_unsandboxed
    if sandbox_status()[0] is not None:
        return "bubblewrap"
    return "unsandboxed" if allow else "refused"


def runs_code(task) -> bool:
    """True when the task offers run_python or has a check that runs a workspace file."""
    return "run_python" in task.tools or any(c.check.type == "python" for c in task.criteria())


def suite_runs_code(suite, tasks: Iterable[str] | None = None) -> bool:
    """True when some task of the suite (of `tasks`, when given) runs code (`runs_code`)."""
    wanted = None if tasks is None else set(tasks)
    return any(runs_code(t) for t in suite.tasks if wanted is None or t.id in wanted)


def require_sandbox(suite, allow_unsandboxed: bool, tasks: Iterable[str] | None = None) -> None:
    """Before a probe: raise `SandboxUnavailable` when the suite (its `tasks`, when given) runs code, the sandbox
    does not work here and running unsandboxed was not allowed."""
    if suite_runs_code(suite, tasks) and not allow_unsandboxed:
        bw, problem = sandbox_status()
        if bw is None:
            raise SandboxUnavailable(refusal(problem or "no sandbox"))


def unsandboxed_line() -> str:
    """The line ``advisor probe --allow-unsandboxed`` prints: whether code will in fact run unsandboxed."""
    bw, problem = sandbox_status()
    if bw is not None:
        return "sandbox: --allow-unsandboxed given, but bubblewrap works here: code still runs sandboxed"
    return (f"WARNING: --allow-unsandboxed: {problem}; run_python and python checks run WITHOUT a sandbox "
            "(resource limits only, no isolation); every run records sandbox=unsandboxed")


# ------------------------------------------------------------------------------------------- the command
def _interpreter() -> str:
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _python_prefixes() -> list[str]:
    """Host folders the interpreter needs beyond /usr (its prefix when it lives elsewhere, e.g. pyenv)."""
    found = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix)}
    found.add(os.path.dirname(os.path.dirname(_interpreter())))
    keep = sorted(p for p in found if p != "/" and not (p + "/").startswith("/usr/"))
    return [p for p in keep if not any(p.startswith(q + "/") for q in keep if q != p)]


def _bwrap_argv(bw: Bubblewrap, workspace: Path, limits: SandboxLimits) -> tuple[list[str], int]:
    """The bwrap command line up to (not including) the interpreter's arguments, and the uid to drop to."""
    argv = [bw.exe, "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    uid = -1
    if bw.as_root:  # no user namespace: RLIMIT_NPROC never binds uid 0, so the code drops to a fresh uid;
        # sandbox_init keeps these to copy the workspace in and out, to kill the run and (CAP_SYS_PTRACE) to see
        # the memfds the code's processes hold (`/proc/PID/fd` of another uid); the code gets none
        uid = _UID_BASE + (os.getpid() % 100_000) * 1000 + next(_uids) % 1000
        for cap in ("CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE",
                    "CAP_SYS_PTRACE"):
            argv += ["--cap-add", cap]
    else:
        argv += ["--unshare-user"] + (["--disable-userns"] if bw.disable_userns else [])
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    made: set[str] = set()
    for prefix in _python_prefixes():
        parts = Path(prefix).parts
        for i in range(2, len(parts)):  # bwrap makes missing parents 0700; the dropped uid must traverse them
            parent = str(Path(*parts[:i]))
            if parent not in made and bw.perms:
                argv += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        argv += ["--ro-bind", prefix, prefix]
    argv += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache", "--proc", "/proc", "--dev", "/dev"]
    for tmp in ("/tmp", "/dev/shm"):  # private to this run; sized where bwrap can
        if bw.perms:
            argv += ["--size", str(limits.tmp_mb * 1024 * 1024), "--perms", "1777"]
        argv += ["--tmpfs", tmp]
    if _copies(bw):
        argv += ["--perms", "0700", "--dir", os.path.dirname(HOST_WORKSPACE), "--bind", str(workspace), HOST_WORKSPACE,
                 "--size", str(limits.workspace_mb * 1024 * 1024), "--perms", "0700", "--tmpfs", WORKSPACE]
    else:
        argv += ["--bind", str(workspace), WORKSPACE]
    argv += ["--remount-ro", "/", "--clearenv"]
    for name, value in _child_env(WORKSPACE).items():
        argv += ["--setenv", name, value]
    return argv + ["--", _interpreter()], uid


def _copies(bw: Bubblewrap) -> bool:
    """True when /workspace is a tmpfs copied from and back to the host workspace (as root, bwrap 0.8+)."""
    return bw.as_root and bw.perms


def _hand_over(workspace: Path, uid: int) -> None:
    """Without the tmpfs copy (bwrap < 0.8 as root): make the run's uid own the workspace tree (symlinks are
    changed, never followed)."""
    os.chown(workspace, uid, uid)
    for path, _ in walk_entries(workspace):
        os.chown(path, uid, uid, follow_symlinks=False)


def _child_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp", "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}


def _python_args(limits: SandboxLimits, uid: int, copy: bool, kind: str, payload: str, args: list[str],
                 supervise: bool = True, workspace: str = WORKSPACE) -> list[str]:
    """The interpreter's arguments: sandbox_init's source and its settings (see advisor/tools/sandbox_init.py)."""
    cpu = limits.cpu_s if limits.cpu_s is not None else int(limits.timeout_s) + 2
    rlimits = (limits.memory_mb * 1024 * 1024, cpu, limits.max_file_mb * 1024 * 1024, 256, 0,
               limits.max_processes if supervise else -1)
    cfg = {"rlimits": rlimits, "uid": uid, "supervise": supervise, "host": HOST_WORKSPACE if copy else None,
           "workspace": workspace, "kind": kind, "payload": payload, "timeout_s": limits.timeout_s,
           "total_memory_mb": limits.total_memory_mb, "workspace_mb": limits.workspace_mb, "poll_s": POLL_S,
           "workspace_files": limits.workspace_files, "copy_s": limits.copy_s}
    return ["-I", "-B", "-c", _INIT.read_text(encoding="utf-8"), json.dumps(cfg), *args]


# ------------------------------------------------------------------------------------------- running
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


def _command(workspace: Path, kind: str, payload: str, args: list[str], limits: SandboxLimits
             ) -> tuple[list[str], str, dict[str, str] | None]:
    """(argv, mode, environment) of one run; raises `SandboxUnavailable` when it may not run at all."""
    bw, problem = sandbox_status()
    if bw is None:
        if not _ALLOW_UNSANDBOXED.get():
            raise SandboxUnavailable(refusal(problem or "no sandbox"))
        argv = [sys.executable, *_python_args(limits, -1, False, kind, payload, args, supervise=False,
                                              workspace=str(workspace))]
        return argv, "unsandboxed", {**_child_env(str(workspace))}
    if kind == "file":  # the file as the sandbox sees it
        payload = f"{WORKSPACE}/{Path(payload).resolve().relative_to(workspace).as_posix()}"
    argv, uid = _bwrap_argv(bw, workspace, limits)
    if uid >= 0 and not _copies(bw):
        _hand_over(workspace, uid)
    return argv + _python_args(limits, uid, _copies(bw), kind, payload, args), "bubblewrap", {}


async def run_sandboxed(workspace: Path, kind: str, payload: str, args: list[str] | None = None,
                        limits: SandboxLimits | None = None) -> SandboxResult:
    """Run Python code (``kind="code"``) or a workspace file (``kind="file"``, a path inside `workspace`).

    The working directory is the workspace (``/workspace`` inside the sandbox); stdin is empty. Raises
    `SandboxUnavailable` when bwrap does not work here and running unsandboxed was not allowed.
    """
    limits = limits or SandboxLimits()
    workspace = Path(workspace).resolve()
    argv, mode, env = _command(workspace, kind, payload, list(args or []), limits)
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=workspace, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    out: list[bytes] = []
    err: list[bytes] = []
    budget = [limits.max_output]
    full = asyncio.Event()
    readers = asyncio.gather(_drain(proc.stdout, out, budget, full), _drain(proc.stderr, err, budget, full),
                             proc.wait())
    overflow = asyncio.ensure_future(full.wait())
    problem = None
    try:  # sandbox_init stops the run at timeout_s itself (and copies the workspace back): wait a little longer
        done, _ = await asyncio.wait({readers, overflow}, timeout=limits.timeout_s + mode_grace(mode, limits),
                                     return_when=asyncio.FIRST_COMPLETED)
        if overflow in done:
            problem = f"output limit exceeded ({limits.max_output} characters); the process was stopped"
            if mode == "bubblewrap":  # ask sandbox_init to stop the run and keep the workspace
                with contextlib.suppress(OSError, RuntimeError):
                    proc.stdin.write(f"output limit exceeded ({limits.max_output} characters)\n".encode())
                    await asyncio.wait_for(proc.wait(), timeout=_COPY_BACK_S)
        elif readers not in done:
            problem = f"time limit exceeded ({limits.timeout_s:g} s); the process was stopped"
    finally:
        overflow.cancel()
        if proc.stdin is not None:
            proc.stdin.close()
        if proc.returncode is None:
            _kill_group(proc.pid)  # bwrap dies; with it its PID namespace, every child included
        try:
            await asyncio.wait_for(readers, timeout=5)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            readers.cancel()
    stdout = b"".join(out).decode("utf-8", "replace")
    stderr = b"".join(err).decode("utf-8", "replace")
    if problem is None:
        problem = _diagnose(proc.returncode, stderr, limits)
    return SandboxResult(proc.returncode, stdout, stderr, problem, mode)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_of(returncode: int | None) -> int | None:
    """The signal that ended the code: negative codes from a plain subprocess, 128+N from bwrap."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    return returncode - 128 if 128 < returncode < 128 + 65 else None


def mode_grace(mode: str, limits: SandboxLimits | None = None) -> float:
    """Seconds past timeout_s the parent waits before killing the run itself (bubblewrap: the copy back, within
    its own budget `copy_s`, and a margin to stop the run and report)."""
    if mode != "bubblewrap":
        return 0.0
    return max(_COPY_BACK_S, (limits.copy_s if limits is not None else 0.0) + 2.0)


def _diagnose(returncode: int | None, stderr: str, limits: SandboxLimits) -> str | None:
    if returncode == VIOLATION_EXIT and _MARK in stderr:
        what = stderr.rsplit(_MARK, 1)[1].strip()
        return f"sandbox violation: {what}; the process was stopped"
    if returncode == LIMIT_EXIT and _MARK in stderr:
        return stderr.rsplit(_MARK, 1)[1].strip()
    if returncode == 0:
        return None
    tail = (stderr.strip().splitlines() or [""])[-1]
    sig = _signal_of(returncode)
    if "MemoryError" in tail:
        return f"memory limit exceeded ({limits.memory_mb} MiB); the process was stopped"
    if sig in (signal.SIGXCPU, signal.SIGKILL) and not stderr.strip():
        return "CPU time limit exceeded; the process was stopped"
    if sig == signal.SIGXFSZ or "File too large" in tail:
        return f"file size limit exceeded ({limits.max_file_mb} MiB); the process was stopped"
    if "Network is unreachable" in tail or "Temporary failure in name resolution" in tail:
        return "network access refused: the sandbox has no network"
    if "Read-only file system" in tail:
        return f"write outside the workspace refused: only {WORKSPACE} and /tmp are writable"
    if "No space left on device" in tail:
        return (f"disk space limit reached: /workspace holds at most {limits.workspace_mb} MiB (workspace_mb) and "
                f"/tmp {limits.tmp_mb} MiB (tmp_mb)")
    if "BlockingIOError: [Errno 11]" in tail:
        return f"process limit reached ({limits.max_processes} processes)"
    return None


@contextlib.contextmanager
def private_root(parent: str | Path | None = None) -> Iterator[Path]:
    """A fresh 0700 folder for one probe's episode workspaces (under `parent`, default the temp folder),
    removed on exit; folders of probes whose process is gone are removed first."""
    base = Path(parent) if parent else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    for stale in base.glob("advisor-probe-*-*"):
        pid = stale.name.split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            remove_tree(stale)
    root = Path(tempfile.mkdtemp(prefix=f"advisor-probe-{os.getpid()}-", dir=base))
    try:
        yield root
    finally:
        remove_tree(root)

