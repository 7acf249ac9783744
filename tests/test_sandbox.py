"""The run_python sandbox (bubblewrap) against every escape of issue 8: each is tried for real and the test
asserts on the host that nothing got out (files, processes, signals, sockets, secrets).

Tests that need bwrap are skipped only where it is truly absent and CI is not set (CI installs it: .ci/run).
"""

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from advisor.suite import Task
from advisor.tools import Environment, SandboxLimits, run_sandboxed
from advisor.tools import sandbox as sb

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap (bwrap) is not installed here: apt-get install bubblewrap")
LIMITS = SandboxLimits(timeout_s=8, memory_mb=256, max_processes=16)


def _task(tid="t1"):
    check = {"type": "regex", "pattern": "x"}
    return Task.model_validate({
        "id": tid, "class": "c", "instructions": "do it", "tools": ["run_python", "read_file"],
        "fixtures": {"files": {"data/a.txt": "hello"}},
        "instruction_following": [{"name": "a", "weight": 100, "check": check}],
        "task_completion": [{"name": "b", "weight": 100, "check": check}],
    })


@pytest.fixture
def ws(tmp_path):
    with sb.private_root(tmp_path / "probe") as root:
        env = Environment.create(_task(), root, limits=LIMITS)
        yield env.workspace
        env.close()


# Every escape first checks that it is inside the sandbox and stops if not, so a broken sandbox fails these
# tests instead of deleting host files or signalling every process (kill(-1) as root ends the whole machine).
GUARD = """import os as _os
if _os.getcwd() != "/workspace" or _os.path.exists("/etc/shadow") or len([p for p in _os.listdir("/proc") if p.isdigit()]) > 3:
    print("NOT ISOLATED"); _os._exit(97)
"""


def run(workspace, code, limits=LIMITS):
    return asyncio.run(run_sandboxed(workspace, "code", code, [], limits))


def escape(workspace, code, limits=LIMITS):
    """Run an escape attempt, only ever inside bubblewrap."""
    assert sb.sandbox_mode(False) == "bubblewrap", "escape attempts run only inside the sandbox"
    result = run(workspace, GUARD + code, limits)
    assert result.returncode != 97 and "NOT ISOLATED" not in result.stdout, "the code was not isolated"
    return result


def _host_processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


# ---------------------------------------------------------------------------------------- normal code
@needs_bwrap
def test_normal_code_prints_writes_the_workspace_and_is_sandboxed(ws):
    result = run(ws, "import os\nprint(open('data/a.txt').read(), os.getcwd())\nopen('out.txt', 'w').write('y')\n"
                     "open('/tmp/scratch', 'w').write('t'); print(open('/tmp/scratch').read())")
    assert result.mode == "bubblewrap" and result.problem is None and result.returncode == 0, result.stderr
    assert result.stdout.split() == ["hello", "/workspace", "t"]
    assert (ws / "out.txt").read_text() == "y"


@needs_bwrap
def test_timeout_is_reported_as_a_timeout(ws):
    result = run(ws, "while True:\n    pass", SandboxLimits(timeout_s=2))
    assert result.problem.startswith("time limit exceeded (2 s)")


@needs_bwrap
async def test_run_python_tool_observation(tmp_path):
    env = Environment.create(_task(), tmp_path, limits=LIMITS)
    call = await env.call("run_python", {"code": "import sys; print('hi', sys.argv[1:])", "args": ["a"]})
    assert call.ok and call.observation == "exit code 0\n--- stdout ---\nhi ['a']"
    env.close()


# ---------------------------------------------------------------------------------------- the file system
@needs_bwrap
def test_writing_and_deleting_outside_the_workspace_is_blocked(ws, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("intact")
    outside = str(tmp_path)
    code = f"""
import ctypes, os, sqlite3
tries = {{}}
def attempt(name, fn):
    try:
        fn(); tries[name] = "DONE"
    except Exception as exc:
        tries[name] = type(exc).__name__
root = os.open("/", os.O_RDONLY)
up = os.open("..", os.O_RDONLY)
attempt("open", lambda: open({str(victim)!r}, "w").write("pwned"))
attempt("open_usr", lambda: open("/usr/evil", "w"))
attempt("dir_fd_create", lambda: os.open("evil", os.O_CREAT | os.O_WRONLY, dir_fd=root))
attempt("dir_fd_parent", lambda: os.open("evil", os.O_CREAT | os.O_WRONLY, dir_fd=up))
attempt("dir_fd_unlink", lambda: os.unlink("bin", dir_fd=root))
attempt("unlink", lambda: os.unlink({str(victim)!r}))
attempt("sqlite", lambda: sqlite3.connect({outside + "/evil.db"!r}).execute("create table t(x)"))
attempt("sqlite_usr", lambda: sqlite3.connect("/usr/evil.db").execute("create table t(x)"))
attempt("mkfifo", lambda: os.mkfifo({outside + "/evil.fifo"!r}))
attempt("mkfifo_root", lambda: os.mkfifo("/evil.fifo"))
libc = ctypes.CDLL("libc.so.6", use_errno=True)
for name, path in (("ctypes_creat", b"/usr/lib/evil"), ("ctypes_creat_root", b"/evil"),
                   ("ctypes_creat_host", {(outside + "/evil.c").encode()!r})):
    tries[name] = "DONE" if libc.creat(path, 0o644) >= 0 else "errno %d" % ctypes.get_errno()
tries["ctypes_unlink"] = "DONE" if libc.unlink({str(victim).encode()!r}) == 0 else "refused"
tries["ctypes_system"] = libc.system(b"echo x > /usr/evil-sh; echo y > {outside}/evil-sh")
print(tries)
"""
    result = escape(ws, code)
    assert result.returncode == 0, result.stderr
    tries = eval(result.stdout.strip().splitlines()[-1])  # noqa: S307 - our own dict literal
    assert "DONE" not in tries.values(), tries
    assert victim.read_text() == "intact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe", "victim.txt"]
    assert not any(Path(p).exists() for p in ("/usr/evil", "/usr/lib/evil", "/usr/evil.db", "/evil", "/evil.fifo",
                                              "/usr/evil-sh"))
    assert sorted(p.name for p in ws.iterdir()) == ["data"]


@needs_bwrap
def test_secrets_home_and_other_episodes_are_not_visible(tmp_path):
    with sb.private_root(tmp_path) as root:
        assert (root.stat().st_mode & 0o777) == 0o700
        mine, other = Environment.create(_task("a"), root), Environment.create(_task("b"), root)
        (other.workspace / "secret.txt").write_text("TOP-SECRET-B")
        code = f"""
import os
seen = []
for path in ("/etc/shadow", "/etc/passwd", {str(other.workspace / 'secret.txt')!r}, os.path.expanduser("~root/.bashrc"),
             "/root/.bash_history", "/proc/1/root/etc/shadow"):
    try:
        seen.append(open(path).read()[:40])
    except OSError as exc:
        seen.append(type(exc).__name__)
for folder in ({str(root)!r}, "/tmp", "/", "/root", "/etc"):
    try:
        seen.append(sorted(os.listdir(folder)))
    except OSError as exc:
        seen.append(type(exc).__name__)
print(seen)
"""
        result = escape(mine.workspace, code)
        assert result.returncode == 0, result.stderr
        assert "TOP-SECRET-B" not in result.stdout and "root:" not in result.stdout
        assert other.workspace.name not in result.stdout
        mine.close()
        other.close()
    assert not root.exists()  # the private folder is removed at the end


# ---------------------------------------------------------------------------------------- processes
@needs_bwrap
def test_fork_bomb_is_bounded_and_leaves_nothing(ws):
    marker = f"bomb-{uuid.uuid4().hex}"
    code = f"""# {marker}
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
except OSError:
    open("forks.txt", "w").write(str(n))
    raise
"""
    result = escape(ws, code)
    assert result.problem == "process limit reached (16 processes)", (result.problem, result.stderr[-300:])
    assert int((ws / "forks.txt").read_text()) < 16
    time.sleep(0.5)
    assert _host_processes_with(marker) == []


@needs_bwrap
def test_setsid_children_die_with_the_run(ws):
    marker = f"daemon-{uuid.uuid4().hex}"
    code = f"""# {marker}
import os, subprocess, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(2)
        open("alive.txt", "w").write("still running")
        os._exit(0)
    os._exit(0)
subprocess.Popen(["/bin/sh", "-c", "sleep 2; echo x > alive-sh.txt"], start_new_session=True)
print("parent done")
"""
    result = escape(ws, code)
    assert result.returncode == 0 and "parent done" in result.stdout, result.stderr
    time.sleep(3)
    assert not (ws / "alive.txt").exists() and not (ws / "alive-sh.txt").exists()
    assert _host_processes_with(marker) == []


@needs_bwrap
def test_signals_never_reach_the_prober_or_other_processes(ws):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code = f"""
import os, signal
for pid in ({os.getpid()}, {victim.pid}, os.getppid()):
    for how in ("kill", "pidfd"):
        try:
            if how == "kill":
                os.kill(pid, signal.SIGKILL)
            else:
                signal.pidfd_send_signal(os.pidfd_open(pid), signal.SIGKILL)
        except OSError as exc:
            print(pid, how, type(exc).__name__)
try:
    os.killpg({os.getpgid(0)}, signal.SIGKILL)
except OSError as exc:
    print("killpg", type(exc).__name__)
os.kill(-1, signal.SIGKILL)  # everything it may signal: only its own sandbox
"""
        result = escape(ws, code)
        time.sleep(0.3)
        assert victim.poll() is None, "a process outside the sandbox was killed"
        # its parent is the run's watcher (sandbox_init, root with CAP_KILL): out of its reach as well
        assert "2 kill PermissionError" in result.stdout and "2 pidfd PermissionError" in result.stdout
    finally:
        victim.kill()
        victim.wait()
    # and this test process is evidently still alive


# ---------------------------------------------------------------------------------------- network and /proc
class _Listener:
    """A TCP or Unix listener on the host that records every connection it accepts."""

    def __init__(self, family, address):
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                pass

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


@needs_bwrap
def test_no_loopback_unix_socket_or_abstract_socket_reaches_the_host(ws, tmp_path):
    tcp = _Listener(socket.AF_INET, ("127.0.0.1", 0))
    port = tcp.sock.getsockname()[1]
    unix_path = str(tmp_path / "host.sock")
    unix = _Listener(socket.AF_UNIX, unix_path)
    abstract_name = f"\0advisor-test-{uuid.uuid4().hex}"
    abstract = _Listener(socket.AF_UNIX, abstract_name)
    try:
        code = f"""
import socket
for family, address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, {unix_path!r}),
                        (socket.AF_UNIX, {abstract_name!r}), (socket.AF_UNIX, "/run/systemd/private"),
                        (socket.AF_INET, ("1.1.1.1", 80))):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect(address)
        print("CONNECTED", address)
    except OSError as exc:
        print("refused", type(exc).__name__)
"""
        result = escape(ws, code)
        time.sleep(0.5)
        assert result.returncode == 0, result.stderr
        assert "CONNECTED" not in result.stdout
        assert (tcp.accepted, unix.accepted, abstract.accepted) == (0, 0, 0)
    finally:
        for listener in (tcp, unix, abstract):
            listener.close()


@needs_bwrap
def test_other_processes_environment_is_not_readable(ws):
    secret = f"SECRET-{uuid.uuid4().hex}"
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, "TOKEN": secret})
    try:
        code = f"""
import os
found, visible = [], sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for pid in set(visible) | {{{victim.pid}, {os.getpid()}, 1}}:
    try:
        found.append(open(f"/proc/{{pid}}/environ", "rb").read().decode("latin-1"))
    except OSError:
        pass
print(visible)
print("{secret}" in "".join(found))
"""
        result = escape(ws, code)
        assert result.returncode == 0, result.stderr
        visible, leaked = result.stdout.strip().splitlines()
        assert leaked == "False"
        assert len(json.loads(visible)) <= 3  # its own PID namespace: bwrap's init, python and nothing else
    finally:
        victim.kill()
        victim.wait()


# ---------------------------------------------------------------------------------------- refusal
@pytest.fixture
def no_bwrap(monkeypatch, tmp_path):
    """PATH without bwrap (the sandbox check is redone with it, and again after the test)."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    sb.sandbox_status.cache_clear()
    yield
    sb.sandbox_status.cache_clear()


async def test_run_python_is_refused_without_bwrap(no_bwrap, tmp_path):
    env = Environment.create(_task(), tmp_path)
    call = await env.call("run_python", {"code": "print('should not run')"})
    env.close()
    assert not call.ok and "\n" not in call.observation and "should not run" not in call.observation
    assert call.observation.startswith("error: run_python refused: bubblewrap (bwrap) is not installed")
    assert "apt-get install bubblewrap" in call.observation and "--allow-unsandboxed" in call.observation


def test_probe_is_refused_before_any_server_without_bwrap(no_bwrap, tmp_path, capsys):
    """A suite given with --suite that runs code is refused up front (the default suite runs without its code
    tasks instead: tests/test_first_run.py)."""
    from advisor.cli import main

    suite = Path(__file__).resolve().parent.parent / "suites" / "example" / "suite.yaml"
    code = main(["probe", "--suite", str(suite), "--store", str(tmp_path / "s.duckdb"), "--max-runs", "1",
                 "--no-report"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0, err
    assert err.startswith("error: run_python refused: bubblewrap (bwrap) is not installed")
    assert not (tmp_path / "s.duckdb").exists()


def test_unsandboxed_only_when_allowed(no_bwrap, ws):
    with sb.unsandboxed_allowed():
        result = run(ws, "print('trusted')")
    assert (result.mode, result.stdout.strip()) == ("unsandboxed", "trusted")
    assert sb.sandbox_mode(True) == "unsandboxed" and sb.sandbox_mode(False) == "refused"
    assert sb.unsandboxed_line().startswith("WARNING: --allow-unsandboxed: bubblewrap (bwrap) is not installed")


def test_allow_unsandboxed_probe_prints_and_records_it(no_bwrap, triton_server, tmp_path, capsys):
    from advisor.cli import main
    from advisor.store import Store

    store = tmp_path / "s.duckdb"
    code = main(["probe", "--url", triton_server.grpc_url, "--ladder", "ladders/demo.yaml", "--store", str(store),
                 "--max-runs", "4", "--full-grid", "--no-report", "--allow-unsandboxed", "--json"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "WARNING: --allow-unsandboxed" in err
    with Store.open(store) as s:
        settings = [json.loads(r["settings_json"]) for r in s.query("SELECT settings_json FROM runs")]
    assert len(settings) == 4 and {x["sandbox"] for x in settings} == {"unsandboxed"}


# ---------------------------------------------------------------------------------------- the private folder
def test_private_root_is_0700_removed_and_sweeps_dead_probes(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"advisor-probe-{int(dead.stdout)}-x1"
    (stale / "ep").mkdir(parents=True)
    live = tmp_path / f"advisor-probe-{os.getppid()}-x2"
    live.mkdir()
    with sb.private_root(tmp_path) as root:
        assert root.parent == tmp_path and (root.stat().st_mode & 0o777) == 0o700
        assert not stale.exists() and live.exists()
    assert not root.exists()
