"""Benchmark: the bad-input battery, run as a careless user and as an attacker would, each case a process of its own.

The bad-input cases a command line or a sandboxed run can reach: outputs that cannot be written, numbers that are
not finite or out of range, names and files that are not UTF-8, addresses that do not parse, imports far over their
limits (sparse files, NUL padding, FIFOs, /dev/zero, a 100 MB router artifact), Tessl trees whose symlinks and skill
paths point at host files, a store that refuses, and model code in the real bubblewrap sandbox that hides memory
from the watch (SysV shared memory, memfds), writes non-UTF-8 file names or fills the workspace with files. Each
case runs `advisor` (or a sandboxed run) as a child process, and is classed:

  * traceback: a Python traceback reached the user (stdout or stderr);
  * silent:    a mistake the command should refuse exited 0 (or a sandbox bound that did not stop the run);
  * unbounded: the child's peak resident memory (``ru_maxrss``) passed its case's bound, or it ran past its time;
  * leak:      a host secret outside the input tree turned up in what the command wrote;
  * unclear:   a refusal that is not one line on stderr starting ``error:`` and naming what was wrong;
  * held:      none of these.

    .venv/bin/python benchmarks/bad_input_battery.py [--only WORD] [--service] [--json]

The service's surfaces (upstreams, replicas during a database outage, /healthz under load) and the manifests
(a real `kubectl kustomize`) need servers and a cluster renderer; their cases are tests
(`--service` runs them: tests/test_backend_openai_hostile.py, test_replica_sessions.py, test_health_ahead.py,
test_kubernetes.py, test_stored_responses.py and test_service_limits.py, with test_non_utf8_names.py for the run
stored whole after its model code wrote a non-UTF-8 name, and `store ingest` into a PostgreSQL database that
refuses) and are counted by pytest's outcome.
Exit 1 when a case is not held.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
ADVISOR = str(Path(sys.executable).with_name("advisor"))
DEMO = str(REPO / "ladders" / "demo.yaml")
SECRET = "host-secret-7f3a"
DEFAULT_RSS_MB = 1024  #: a case's memory bound unless it states its own
TIME_S = 120  #: a case still running after this is unbounded


@dataclass
class Case:
    group: str
    name: str
    argv: list[str]  #: with {tmp} (the case's folder) and {ro} (a folder nobody can create) filled in
    refuse: bool = True  #: the command must exit non-zero with one line
    words: tuple[str, ...] = ()  #: words the refusal names
    rss_mb: int = DEFAULT_RSS_MB
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, str], str | None] | None = None  #: after the run: a class ("silent", ...) or None
    stdin: str = ""  #: what the child reads (a sandboxed case's code)


@dataclass
class Outcome:
    group: str
    name: str
    verdict: str
    exit: int | None
    peak_mb: float
    seconds: float
    said: str = ""
    detail: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- inputs
def _csv(path: Path, prompts: int = 1) -> None:
    """A three-model results table of `prompts` prompts (3 rows each, about 60 bytes a row)."""
    with path.open("w") as fh:
        fh.write("prompt_id,prompt,model,score\n")
        for i in range(prompts):
            for model in ("nano-12b", "nano-30b", "super-120b"):
                fh.write(f"p{i},What is question {i} about the billing api?,{model},0.{i % 10}\n")


def _csv_of(prompts: int) -> Callable[[Path], None]:
    return lambda tmp: _csv(tmp / "table.csv", prompts)


def _sparse(name: str, gib: float, head: bytes = b"") -> Callable[[Path], None]:
    def make(tmp: Path) -> None:
        with (tmp / name).open("wb") as fh:
            fh.write(head)
            fh.truncate(int(gib * 2**30))  # apparent size; nothing written: all NUL bytes
    return make


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda tmp: os.mkfifo(tmp / name)


def _big_artifact(tmp: Path) -> None:
    with (tmp / "router.json").open("w") as fh:
        fh.write('{"weights": [')
        chunk = ",".join(["0.5"] * 100_000)
        while fh.tell() < 100 * 10**6:
            fh.write(chunk + ",")
        fh.write("0.5]}")


def _latin1_keys(tmp: Path) -> None:
    (tmp / "keys.txt").write_bytes("full caf\xe9-key\n".encode("latin-1"))


def _tile(tmp: Path, *, task: bytes | None = None, tile_json: dict | None = None,
          link_task: bool = False, link_fixture: bool = False, link_skill: bool = False,
          capability: bytes | None = None, fifo: str | None = None) -> None:
    host = tmp / "host"
    (host / "skill").mkdir(parents=True)
    (host / "secret.txt").write_text(SECRET)
    (host / "skill" / "SKILL.md").write_text(f"# skill\n{SECRET}\n")
    (host / "skill" / "notes.md").write_text(SECRET)
    d = tmp / "tree" / "evals" / "s1"
    d.mkdir(parents=True)
    (d / "criteria.json").write_text(json.dumps({"type": "weighted_checklist", "checklist": [
        {"name": "Writes the file", "description": "Writes out.txt", "max_score": 10}]}))
    if link_task:
        (d / "task.md").symlink_to(host / "secret.txt")
    else:
        (d / "task.md").write_bytes(task or b"Write out.txt with the word done.")
    if link_fixture:
        (d / "data.txt").symlink_to(host / "secret.txt")
    if capability is not None:
        (d / "capability.txt").write_bytes(capability)
    if fifo:
        os.mkfifo(d / fifo)
    if link_skill:
        (tmp / "tree" / "skills").mkdir()
        (tmp / "tree" / "skills" / "s").symlink_to(host / "skill")
    if tile_json is not None:
        text = json.dumps(tile_json).replace("HOST", str(host))
        (tmp / "tree" / "tile.json").write_text(text)


def tile(**kw) -> Callable[[Path], None]:
    return lambda tmp: _tile(tmp, **kw)


TESSL = ["suite", "import", "tessl", "{tmp}/tree", "--out", "{tmp}/out/suite.yaml"]


# ---------------------------------------------------------------------------------------------- the sandbox
SANDBOX = r"""
import asyncio, json, os, sys
from pathlib import Path
from advisor.tools import sandbox as sb
from advisor.tools.sandbox import SandboxLimits, run_sandboxed
status = sb.sandbox_status()[0]
if status is None or not status.as_root:
    print(json.dumps({"skipped": "needs bubblewrap run as root"})); sys.exit(0)
limits = SandboxLimits(**json.loads(sys.argv[2]))
with sb.private_root(Path(sys.argv[1])) as root:
    ws = root / "episode"; ws.mkdir()
    r = asyncio.run(run_sandboxed(ws, "code", sys.stdin.read(), [], limits))
    names = [os.fsencode(n).hex() for n in os.listdir(ws)][:3]
    print(json.dumps({"problem": r.problem, "stdout": r.stdout[-400:], "files": len(os.listdir(ws)), "names": names}))
"""
SHM = """
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for i in range(200):  # 3 GB filled, then detached: in nobody's RSS
    sid = libc.shmget(0, 15 * 1024 * 1024, 0o1600)
    addr = libc.shmat(sid, None, 0)
    ctypes.memset(addr, 1, 15 * 1024 * 1024)
    libc.shmdt(ctypes.c_void_p(addr))
    print("shm", i, flush=True)
time.sleep(20)
print("all held")
"""
MEMFD = """
import os, time
fds = []
block = b"x" * (15 * 1024 * 1024)
for i in range(200):  # 3 GB written into memfds, never mapped: in nobody's RSS
    fd = os.memfd_create("hold%d" % i)
    os.write(fd, block)
    fds.append(fd)
time.sleep(20)
print("all held")
"""
NON_UTF8 = "open(b'\\xff\\xfe-report.txt', 'w').write('x')\nprint('wrote')\n"
MANY_FILES = "import os\nfor i in range(150000):\n    open('f%06d' % i, 'w').close()\nprint('made')\n"


def sandboxed(name: str, code: str, limits: dict, expect: Callable[[dict], bool]) -> Case:
    """A case that runs `code` in the real sandbox with `limits`; held when `expect(result)` holds."""
    argv = [sys.executable, "-c", SANDBOX, "{tmp}/probe", json.dumps(limits)]

    def check(tmp: Path, out: str) -> str | None:
        try:
            result = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            return "traceback" if "Traceback" in out else "silent"
        if "skipped" in result:
            return "skipped"
        return None if expect(result) else "silent"
    return Case("sandbox", name, argv, refuse=False, check=check, stdin=code)


# ---------------------------------------------------------------------------------------------- the cases
def cases() -> list[Case]:
    out: list[Case] = []
    for argv in (["report", "--out", "{ro}/reports"], ["store", "export", "{ro}/parquet"],
                 ["triton", "render", DEMO, "--out", "{ro}/repo"], ["route", "--prompt", "hi", "--out", "{ro}/x.jsonl"],
                 ["router", "promote", "--pointer", "{ro}/pointer.json", "cand.json"],
                 ["suite", "import", "tessl", "{tmp}", "--out", "{ro}/suite.yaml"],
                 ["router", "train", "--out", "{ro}/router.json"], ["router", "eval", "--out-dir", "{ro}/eval"]):
        out.append(Case("cli output", f"{' '.join(argv[:2])}: read-only output", argv, words=("cannot be written",)))
    for argv, words in ((["report", "--out", "{tmp}/f.txt"], ("is a file",)),
                        (["triton", "render", DEMO, "--out", "{tmp}/f.txt"], ("is a file",)),
                        (["route", "--prompt", "hi", "--out", "{tmp}"], ("is a folder",))):
        out.append(Case("cli output", f"{argv[0]}: output of the wrong kind", argv, words=words,
                        setup=lambda tmp: (tmp / "f.txt").write_text("x")))
    for argv, words in ((["route", "--prompt", "x", "--weight", "nano-12b=nan"], ("--weight",)),
                        (["route", "--prompt", "x", "--weight", "nano-12b=-1"], ("--weight",)),
                        (["route", "--prompt", "x", "--max-latency", "-1"], ("--max-latency",)),
                        (["route", "--prompt", "x", "--value", "inf"], ("--value",)),
                        (["plan", "--margin", "-5"], ("--margin",)),
                        (["plan", "--replicas", "1000000000000"], ("--replicas",)),
                        (["probe", "--replicas", "1000000000000"], ("--replicas",))):
        out.append(Case("cli numbers", " ".join(argv[-2:]), argv, words=words))
    out += [
        Case("cli names", "import --suite-name ''", ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name",
                                                       "", "--store", "{tmp}/s.duckdb"], words=("suite_name",),
             setup=lambda tmp: _csv(tmp / "table.csv")),
        Case("cli names", "serve --keys latin-1", ["serve", "--keys", "{tmp}/keys.txt", "--store", "{tmp}/s.duckdb"],
             words=("not UTF-8",), setup=_latin1_keys),
        Case("cli names", "serve --host 999.1.1.1", ["serve", "--host", "999.1.1.1", "--store", os.devnull],
             words=("--host",)),
        Case("cli names", "ladder check --url http://[::1", ["ladder", "check", DEMO, "--url", "http://[::1"],
             words=("not a valid address",)),
        Case("imports", "240,000 rows imported (under the row limit)",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             refuse=False, rss_mb=2560, setup=_csv_of(80_000)),
        Case("imports", "20 MiB of short rows refused before reading them",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             words=("row limit",), setup=_csv_of(120_000)),
        Case("imports", "100 MiB table refused before reading",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             words=("32 MiB limit",), setup=_sparse("table.csv", 100 / 1024, b"prompt_id,prompt,model,score\n")),
        Case("imports", "2 GiB sparse all-NUL .csv",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             words=("limit",), setup=_sparse("table.csv", 2)),
        Case("imports", "one row then 4 KiB of NUL bytes",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             words=("NUL byte",), setup=_sparse("table.csv", 4096 / 2**30 + 60 / 2**30,
                                                b"prompt_id,prompt,model,score\np1,hello,nano-12b,1\n")),
        Case("imports", "a FIFO as a table",
             ["import", "{tmp}/table.csv", "--ladder", DEMO, "--suite-name", "x", "--store", "{tmp}/s.duckdb"],
             words=("not a regular file",), setup=_fifo("table.csv")),
        Case("imports", "100 MB JSON router artifact", ["route", "--prompt", "hi", "--router", "{tmp}/router.json"],
             words=("router.json",), setup=_big_artifact),
        Case("imports", "ladder validate /dev/zero", ["ladder", "validate", "/dev/zero"],
             words=("not a regular file",)),
        Case("imports", "ladder validate a FIFO", ["ladder", "validate", "{tmp}/ladder.yaml"],
             words=("not a regular file",), setup=_fifo("ladder.yaml")),
        Case("tessl", "symlinked task.md", TESSL, words=("task.md", "outside"), setup=tile(link_task=True)),
        Case("tessl", "symlinked scenario file (skipped, not copied)", TESSL, refuse=False,
             setup=tile(link_fixture=True)),
        Case("tessl", "absolute skill path", TESSL, words=("tile.json",),
             setup=tile(tile_json={"name": "o/t", "skills": {"s": {"path": "HOST/skill/SKILL.md"}}})),
        Case("tessl", "'..' skill path", TESSL, words=("tile.json",),
             setup=tile(tile_json={"name": "o/t", "skills": {"s": {"path": "../host/skill"}}})),
        Case("tessl", "symlinked skill folder", TESSL, words=("outside",),
             setup=tile(link_skill=True, tile_json={"name": "o/t", "skills": {"s": {"path": "skills/s/SKILL.md"}}})),
        Case("tessl", "latin-1 task.md", TESSL, words=("task.md", "not UTF-8"),
             setup=tile(task="Écrire le fichier out.txt".encode("latin-1"))),
        Case("tessl", "latin-1 capability.txt", TESSL, words=("capability.txt", "not UTF-8"),
             setup=tile(capability="caf\xe9".encode("latin-1"))),
        Case("tessl", "a FIFO in the tree", TESSL, words=("not a regular file",), setup=tile(fifo="capability.txt")),
    ]
    for name, code, limits, expect in (
            ("SysV shared memory held, detached", SHM, {"timeout_s": 20, "memory_mb": 256},
             lambda r: (r["problem"] or "").startswith("memory limit exceeded") and "all held" not in r["stdout"]),
            ("memfds written, never mapped", MEMFD, {"timeout_s": 20, "memory_mb": 256},
             lambda r: (r["problem"] or "").startswith("memory limit exceeded") and "all held" not in r["stdout"]),
            ("150,000 files in the workspace", MANY_FILES, {"timeout_s": 30},
             lambda r: (r["problem"] or "").startswith("workspace limit exceeded") and r["files"] <= 50_000),
            ("a non-UTF-8 file name", NON_UTF8, {"timeout_s": 10},
             lambda r: r["problem"] is None and "wrote" in r["stdout"] and r["names"] == ["fffe2d7265706f72742e747874"])):
        out.append(sandboxed(name, code, limits, expect))
    return out


# ---------------------------------------------------------------------------------------------- running
def run(case: Case, tmp: Path) -> Outcome:
    ro = tmp / "a-file" / "sub"  # a path through a file: no process can create it
    (tmp / "a-file").write_text("x")
    if case.setup:
        case.setup(tmp)
    argv = [a.replace("{tmp}", str(tmp)).replace("{ro}", str(ro)) for a in case.argv]
    if argv[0] != sys.executable:
        argv = [ADVISOR, *argv]
    started = time.monotonic()
    with open(tmp / "stdout.txt", "wb") as out, open(tmp / "stderr.txt", "wb") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=tmp,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        timer = threading.Timer(TIME_S, _kill_group, [proc.pid])
        timer.start()
        try:
            proc.stdin.write(case.stdin.encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
    seconds = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    stdout, stderr = ((tmp / f).read_text(errors="replace") for f in ("stdout.txt", "stderr.txt"))
    text = stdout + stderr
    said = (stderr.strip() or stdout.strip()).splitlines()[-1] if text.strip() else ""
    peak = usage.ru_maxrss / 1024
    detail = []
    if "Traceback" in text:
        verdict = "traceback"
    elif seconds >= TIME_S or peak > case.rss_mb:
        verdict, detail = "unbounded", [f"peak {peak:.0f} MiB (bound {case.rss_mb}), {seconds:.0f} s"]
    elif _leaked(tmp):
        verdict = "leak"
    elif case.refuse and code == 0:
        verdict = "silent"
    elif case.refuse and not (len(stderr.strip().splitlines()) == 1 and said.startswith("error:")
                              and all(w in said for w in case.words)):
        verdict, detail = "unclear", ["a refusal is one line starting 'error:' naming " + ", ".join(case.words)]
    elif not case.refuse and code != 0:
        verdict, detail = "refused", ["a run that should be answered failed"]
    else:
        verdict = (case.check(tmp, stdout) if case.check else None) or "held"
    return Outcome(case.group, case.name, verdict, code, round(peak, 1), round(seconds, 2), said, detail)


def _kill_group(pid: int) -> None:
    """Kill a case that ran past its time, with what it started (it may just have ended)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _leaked(tmp: Path) -> bool:
    """A host secret in what the command wrote (the input trees apart)."""
    written = tmp / "out"
    if not written.is_dir():
        return False
    return any(SECRET in p.read_text(errors="replace") for p in written.rglob("*") if p.is_file())


SERVICE_TESTS = ["tests/test_backend_openai_hostile.py", "tests/test_replica_sessions.py", "tests/test_health_ahead.py",
                 "tests/test_kubernetes.py", "tests/test_stored_responses.py", "tests/test_service_limits.py",
                 "tests/test_non_utf8_names.py",
                 "tests/test_cli_mistakes.py::test_ingest_into_a_store_that_refuses_is_an_error_even_with_nothing_to_ingest"]


def service_cases() -> list[Outcome]:
    """The service's, the manifests' and the stored run's cases, as tests (pytest's outcome per test)."""
    import xml.etree.ElementTree as ET

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="advisor-battery-") as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                        *SERVICE_TESTS], cwd=REPO, capture_output=True, text=True)
        cases = list(ET.parse(report).iter("testcase"))
    out = []
    for tc in cases:
        failed = tc.find("failure") is not None or tc.find("error") is not None
        skipped = tc.find("skipped") is not None
        out.append(Outcome("service (tests)", f"{tc.get('classname', '').rsplit('.', 1)[-1]}::{tc.get('name')}",
                           "failed" if failed else "skipped" if skipped else "held", None, 0.0,
                           float(tc.get("time", 0))))
    print(f"  (service tests: {time.monotonic() - started:.0f} s)", file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="Run only the cases whose group or name contains this word.")
    ap.add_argument("--service", action="store_true", help="Also run the service's and the manifests' test cases.")
    ap.add_argument("--json", action="store_true", help="One JSON object instead of the table.")
    args = ap.parse_args(argv)
    chosen = [c for c in cases() if not args.only or args.only in c.group or args.only in c.name]
    results = []
    started = time.monotonic()
    for case in chosen:
        with tempfile.TemporaryDirectory(prefix="advisor-battery-") as tmp:
            results.append(run(case, Path(tmp)))
        r = results[-1]
        if not args.json:
            print(f"{r.verdict:<10} {r.group:<12} {r.name:<48} exit {r.exit!s:>4} {r.peak_mb:7.0f} MiB "
                  f"{r.seconds:6.1f} s  {r.said[:90]}{'  ' + '; '.join(r.detail) if r.detail else ''}", flush=True)
    if args.service:
        results += service_cases()
    tally: dict[str, int] = {}
    for r in results:
        tally[r.verdict] = tally.get(r.verdict, 0) + 1
    bad = {k: v for k, v in tally.items() if k not in ("held", "skipped")}
    summary = (f"bad-input battery: {len(results)} cases, {tally.get('held', 0)} held, "
               f"{tally.get('skipped', 0)} skipped; " + (", ".join(f"{v} {k}" for k, v in sorted(bad.items()))
                                                           or "0 tracebacks, 0 silent, 0 unclear, 0 unbounded, 0 leaks")
               + f"; {time.monotonic() - started:.0f} s, load average {os.getloadavg()[0]:.2f}")
    if args.json:
        print(json.dumps({"summary": summary, "tally": tally, "cases": [asdict(r) for r in results]}, indent=1))
    else:
        for r in results:
            if r.group == "service (tests)" and r.verdict != "held":
                print(f"{r.verdict:<10} {r.name}")
        print(summary)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
