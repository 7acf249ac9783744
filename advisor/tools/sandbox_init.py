"""The first program of a sandboxed run: it sets the limits, runs the code in a child and watches it.

This file is not imported by the advisor: `advisor.tools.sandbox` passes its source to the interpreter inside
the sandbox (``python -I -B -c <this file> <settings JSON>``), so it uses the standard library only. Steps:

1. as root (``host`` set): copy the host workspace, bound at ``host`` (inside a root-owned 0700 folder the
   code cannot enter), into ``/workspace``, a tmpfs of ``workspace_mb``, owned by the run's own uid: whatever the
   code writes is bounded by that size and reaches the host disk only through step 4;
2. fork the code's process: it sets the resource limits every process of the run inherits (address space, CPU
   seconds, file size, open files, no core, processes), drops to the run's unprivileged uid (as root; no
   capability left) and runs the code;
3. meanwhile, every ``poll_s``, add up the memory the run holds (`resident_bytes`: every process's resident
   memory, ``/proc`` showing only the sandbox's own, plus the run's System V shared memory and open memfds, which
   no process's resident memory shows): over ``total_memory_mb`` every process is killed; so it is at ``timeout_s``, or when the
   parent writes a line to stdin (the output limit). The code, as another uid, cannot signal or trace this
   process;
4. kill what is left (daemons included), copy ``/workspace`` back to the host workspace (regular files,
   folders and links as links, never followed, no setuid/setgid bit; files counted at their apparent size
   against ``workspace_mb``, so sparse files cannot grow past it on the host; iteratively, at any depth; the
   mount namespace has no other writable host path), and exit with the code's status, or with 114 and a
   ``[sandbox] ...`` line when a limit stopped the run or the copy back was cut (113: a violation).

Not as root (a user namespace: the code would share this process's uid) the workspace is bound directly and
step 1 and the copy back are skipped. Unsandboxed (``supervise`` false: no PID namespace, so no killing
"every process") the limits are set and the code runs in this process.
"""

import json
import os
import resource
import runpy
import select
import shutil
import signal
import stat
import sys
import time

VIOLATION, LIMIT = 113, 114
LIMIT_NAMES = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_NPROC")


def say(what):
    os.write(2, ("\n[sandbox] " + what + "\n").encode("utf-8", "replace"))


def stop(code, what):
    say(what)
    os._exit(code)


def drop_privileges(uid):
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        stop(VIOLATION, "could not drop to an unprivileged uid: " + str(exc))
    with open("/proc/self/status") as f:
        if any(line.startswith(("CapEff:", "CapPrm:")) and int(line.split()[1], 16) for line in f):
            stop(VIOLATION, "capabilities left after dropping privileges")


def run_code(kind, payload, args):
    """Run the code as the main program of this process (what ``python file`` or ``python -c`` would do)."""
    sys.path.insert(0, os.getcwd())
    sys.argv = [payload if kind == "file" else "<run_python>"] + args
    if kind == "file":
        runpy.run_path(payload, run_name="__main__")
    else:
        exec(compile(payload, "<run_python>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})


def set_limits(cfg):
    for name, value in zip(LIMIT_NAMES, cfg["rlimits"]):
        if value >= 0:
            resource.setrlimit(getattr(resource, name), (value, value))
    if cfg["uid"] >= 0:
        drop_privileges(cfg["uid"])


def child_main(cfg, args):
    """In the forked child: limits, uid, then the code; end as the interpreter would (threads joined, atexit)."""
    code = 0
    try:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        set_limits(cfg)
        os.chdir(cfg["workspace"])
        run_code(cfg["kind"], cfg["payload"], args)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        # lazy: in the code's own process, after its run (this file runs as a script inside the sandbox)
        import traceback
        traceback.print_exc()
        code = 1
    try:
        # lazy: in the code's own process, after its run, as the interpreter's exit would
        import threading
        threading._shutdown()
        # lazy: likewise
        import atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code & 0xFF)


def resident_bytes():
    """Memory the run holds, in bytes: the resident memory of every process in this PID namespace but its init
    (bwrap), plus what no process's resident memory shows: System V shared memory of the run's own IPC namespace
    (held after every process detached it) and the contents of memfds any process holds open (written, never
    mapped). A shared page is counted once in each place it shows, so the sum errs high, never low."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    memfds = set()
    for name in os.listdir("/proc"):
        if name.isdigit() and name != "1":
            try:
                with open("/proc/" + name + "/statm", "rb") as f:
                    total += int(f.read().split()[1]) * page
            except (OSError, ValueError, IndexError):
                pass
            total += memfd_bytes("/proc/" + name + "/fd", memfds)
    return total + sysv_shm_bytes()


def sysv_shm_bytes():
    """Resident and swapped bytes of the System V shared memory segments in this IPC namespace."""
    total = 0
    try:
        with open("/proc/sysvipc/shm") as f:
            head = f.readline().split()
            rss, swap = head.index("rss"), head.index("swap")
            for line in f:
                cols = line.split()
                total += int(cols[rss]) + int(cols[swap])
    except (OSError, ValueError, IndexError):
        pass
    return total


def memfd_bytes(fds, seen):
    """Allocated bytes of the memfds open in one process's fd folder that `seen` (inodes) does not hold yet."""
    total = 0
    try:
        names = os.listdir(fds)
    except OSError:
        return 0
    for fd in names:
        path = fds + "/" + fd
        try:
            if not os.readlink(path).startswith("/memfd:"):
                continue
            st = os.stat(path)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def kill_all(child):
    """SIGKILL every process this uid may signal in the namespace (this one excepted), then reap the child."""
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    try:
        return os.waitpid(child, 0)[1]
    except ChildProcessError:
        return None


def watch(child, cfg):
    """Wait for the child; (wait status or None, the limit that stopped it or None)."""
    deadline = time.monotonic() + cfg["timeout_s"]
    budget = cfg["total_memory_mb"] * 1024 * 1024
    control = [0]
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return status, None
        if time.monotonic() > deadline:
            return kill_all(child), "time limit exceeded ({:g} s)".format(cfg["timeout_s"])
        used = resident_bytes()
        if used > budget:
            return kill_all(child), ("memory limit exceeded: the run held {} MiB (its processes, shared memory and "
                                     "memfds), over the limit of {} MiB (total_memory_mb)".format(
                                         used >> 20, cfg["total_memory_mb"]))
        ready, _, _ = select.select(control, [], [], cfg["poll_s"])
        if ready:
            line = os.read(0, 200).decode("utf-8", "replace").strip()
            if line:
                return kill_all(child), line
            control = []  # stdin closed (or /dev/null): nobody will ask to stop
            time.sleep(cfg["poll_s"])


def _remove(path):
    """Delete a file, link or whole folder, without recursion (a folder tree of any depth) and following no link."""
    if not stat.S_ISDIR(os.lstat(path).st_mode):
        os.unlink(path)
        return
    stack, emptied = [path], []
    while stack:
        folder = stack.pop()
        emptied.append(folder)
        for entry in os.scandir(folder):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                os.unlink(entry.path)
    for folder in reversed(emptied):
        os.rmdir(folder)


MODE_BITS = 0o777  #: permission bits copied: never setuid, setgid or sticky


class CopyCut(Exception):
    """The copy stopped at its time budget (`copy_s`): what was copied stays, the rest is not copied."""


def mirror(src, dst, owner=-1, budget=None, max_entries=None, deadline=None):
    """Make folder `dst` hold what `src` holds: regular files (copied when size or time differ), folders and
    links (as links); nothing else is created, no link is ever followed on either side, and no setuid, setgid
    or sticky bit is copied. Iterative: a folder tree of any depth. What is created is given to uid `owner`
    when it is not -1.

    With `budget` (bytes), regular files count at their apparent size (``st_size``: a sparse file at its full
    length, as the copy writes it); a file past the budget is not copied (what `dst` held under that name is
    kept). With `max_entries`, entries (files, folders, links) past that count are not copied either; past
    `deadline` (``time.monotonic()``) the copy stops with `CopyCut`. Returns ([paths of `src` not copied], total
    apparent bytes, entries seen)."""
    skipped, used, folders, entries = [], 0, [], 0
    stack = [(src, dst)]
    while stack:
        if deadline is not None and time.monotonic() > deadline:
            raise CopyCut(entries)
        src_dir, dst_dir = stack.pop()
        names = sorted(os.listdir(src_dir))
        present = set(names)
        for name in os.listdir(dst_dir):
            if name not in present:
                _remove(os.path.join(dst_dir, name))
        for name in names:
            s, d = os.path.join(src_dir, name), os.path.join(dst_dir, name)
            entries += 1
            if max_entries is not None and entries > max_entries:
                skipped.append(s)
                continue
            if deadline is not None and entries % 256 == 0 and time.monotonic() > deadline:
                raise CopyCut(entries)
            si = os.lstat(s)
            try:
                di = os.lstat(d)
            except FileNotFoundError:
                di = None
            mode = stat.S_IMODE(si.st_mode) & MODE_BITS
            if stat.S_ISDIR(si.st_mode):
                if di is not None and not stat.S_ISDIR(di.st_mode):
                    _remove(d)
                    di = None
                if di is None:
                    os.mkdir(d, 0o700)
                stack.append((s, d))
                folders.append((d, mode | 0o700))
            elif stat.S_ISLNK(si.st_mode):
                if di is not None:
                    _remove(d)
                os.symlink(os.readlink(s), d)
            elif stat.S_ISREG(si.st_mode):
                used += si.st_size
                if budget is not None and used > budget:
                    skipped.append(s)
                    continue
                if di is not None and stat.S_ISREG(di.st_mode) and (
                        di.st_size, di.st_mtime_ns) == (si.st_size, si.st_mtime_ns):
                    if stat.S_IMODE(di.st_mode) != mode:
                        os.chmod(d, mode)
                    continue
                if di is not None:
                    _remove(d)
                shutil.copy2(s, d, follow_symlinks=False)
                os.chmod(d, mode)
            else:  # a FIFO, socket or device in the workspace: not copied
                if di is not None:
                    _remove(d)
                continue
            if owner != -1:
                os.lchown(d, owner, owner)
    for folder, mode in reversed(folders):  # deepest first: a folder made read-only is filled before
        os.chmod(folder, mode)
    return skipped, used, entries


def copy_back(workspace, host, cfg):
    """Copy /workspace back to the host workspace within workspace_mb by apparent size, workspace_files entries
    and copy_s seconds (its own budget, apart from the code's time limit); the problem, or None."""
    limit, most = cfg["workspace_mb"], cfg["workspace_files"]
    try:
        skipped, used, entries = mirror(workspace, host, budget=limit * 1024 * 1024, max_entries=most,
                                        deadline=time.monotonic() + cfg["copy_s"])
    except CopyCut as cut:
        return ("copy back cut at its own time budget of {:g} s (copy_s) after {} entries: the rest of the "
                "workspace was not copied back".format(cfg["copy_s"], cut.args[0]))
    except OSError as exc:
        return "the workspace could not be copied back: {}".format(exc)
    if not skipped:
        return None
    names = [os.path.relpath(p, workspace) for p in skipped]
    shown = ", ".join(names[:5]) + (" and {} more".format(len(names) - 5) if len(names) > 5 else "")
    if entries > most:
        return ("workspace limit exceeded: it holds {} entries (files, folders, links), over the limit of {} "
                "(workspace_files); not copied back: {}".format(entries, most, shown))
    return ("workspace limit exceeded: its files total {} MiB by apparent size (a sparse file counts at its full "
            "length), over the {} MiB limit (workspace_mb); not copied back: {}".format(used >> 20, limit, shown))


def copy_in(host, workspace, cfg):
    try:
        os.chown(workspace, cfg["uid"], cfg["uid"])
        os.chmod(workspace, 0o700)
        mirror(host, workspace, cfg["uid"])
    except OSError as exc:
        stop(LIMIT, "the workspace does not fit in its {} MiB (workspace_mb): {}".format(cfg["workspace_mb"], exc))


def main():
    cfg = json.loads(sys.argv[1])
    args = sys.argv[2:]
    if not cfg["supervise"]:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)  # stdin is the parent's control pipe; the code reads an empty stdin
        set_limits(cfg)
        os.chdir(cfg["workspace"])
        run_code(cfg["kind"], cfg["payload"], args)
        return
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a file too large for a limit is an OSError here, not death
    if cfg["host"]:
        copy_in(cfg["host"], cfg["workspace"], cfg)
    child = os.fork()
    if child == 0:
        child_main(cfg, args)
    status, problem = watch(child, cfg)
    kill_all(child)  # daemons and other leftovers, before the workspace is copied back
    if cfg["host"]:
        kept = copy_back(cfg["workspace"], cfg["host"], cfg)
        if kept:
            problem = "; ".join(p for p in (problem and problem + "; the process was stopped", kept) if p)
            stop(LIMIT, problem)
    if problem:
        stop(LIMIT, problem + "; the process was stopped")
    if status is None:
        os._exit(1)
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


if __name__ == "__main__":
    main()
