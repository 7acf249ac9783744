"""The bad-input battery (issue 8): every bad file or value gets one clear line and writes nothing.

Each case builds its files under ``tmp_path``, runs the real CLI (`advisor.cli.main`, or a subprocess for the
cases that could hang or eat memory) and is classified as

- ``clear``: non-zero exit, exactly one stderr line ``error: ...`` holding every expected fragment (file,
  line or row, key, what to do), no traceback, and no store file created or changed;
- ``traceback``: an exception other than an advisor error escaped (or a subprocess printed a traceback);
- ``silent``: exit 0 although the input is bad (or, for the cases that must work, an error);
- ``unclear``: an error line that lacks an expected fragment, or several lines;
- ``misleading``: valid input refused, or an error that blames the wrong thing;
- ``wrote``: a store file was created or changed by a failed command;
- ``hang``: the subprocess did not finish within its time bound.

The assertion message starts with the class, so ``pytest -q tests/test_bad_input.py | grep -c 'BATTERY
traceback'`` counts them (see the report of issue 8).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from advisor.cli import main

SKILL = "# How to\nList the files first.\n"

SUITE = """\
version: 1
name: tiny
limits: {max_turns: 20}
classes: [{name: narrow}, {name: multi}]
tasks:
  - id: t-narrow
    class: narrow
    instructions: Read notes.txt and report the code word.
    skill: skill.md
    tools: [read_file, list_files]
    fixtures: {files: {notes.txt: "code word: heron"}}
    instruction_following:
      - {name: listed, weight: 100, check: {type: tool_call, tool: list_files}}
    task_completion:
      - {name: word, weight: 100, check: {type: regex, pattern: heron}}
    reference:
      steps:
        - {tool: list_files, arguments: {}, how: true}
        - {tool: read_file, arguments: {path: notes.txt}}
      final: "The code word is heron."
"""

LADDER = """\
version: 1
name: tiny
rungs:
  - name: small
    hf_id: x/small
    params_total_b: 1
    triton_model: small
    price: {basis: tokens, usd_per_m_input: 1.0, usd_per_m_output: 2.0, source: test, as_of: "2026-01"}
    context_length: 4096
    tool_call_format: hermes
  - name: large
    hf_id: x/large
    params_total_b: 10
    triton_model: large
    price: {basis: tokens, usd_per_m_input: 10.0, usd_per_m_output: 20.0, source: test, as_of: "2026-01"}
    context_length: 4096
    tool_call_format: hermes
"""

JUDGE = """\
roles:
  judge:
    name: JUDGE_NAME
    hf_id: x/judge
    params_total_b: 10
    triton_model: judge
    price: {basis: tokens, usd_per_m_input: 1.0, usd_per_m_output: 2.0, source: test, as_of: "2026-01"}
    context_length: 4096
    tool_call_format: hermes
"""

LONG_CSV = "prompt,task,model,score\nWhat is 2+2?,math,small,1.0\nWhat is 2+2?,math,large,1.0\n"


@dataclass
class Case:
    """One bad (or must-work) input: how to build it, what the message must say."""

    id: str
    build: Callable[[Path], list[str]]  #: writes files under tmp_path, returns the CLI argv
    expect: list[str] = field(default_factory=list)  #: fragments of the one error line ({tmp} = tmp_path)
    ok: bool = False  #: True: the input is valid and must be accepted
    subprocess: bool = False  #: run in a subprocess with a time and memory bound
    check_output: Callable[[str], str | None] | None = None  #: for ok cases: stdout -> problem or None


def _write(tmp: Path, name: str, text: str | bytes) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _suite(tmp: Path, text: str = SUITE, name: str = "suite.yaml", skill: str | bytes = SKILL) -> Path:
    _write(tmp, "skill.md", skill)
    return _write(tmp, name, text)


def suite_case(text: str, *args: str, skill: str | bytes = SKILL) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return ["suite", "validate", str(_suite(tmp, text, skill=skill)), *args]
    return build


def suite_bytes(tmp: Path, body: bytes) -> list[str]:
    _suite(tmp)
    return ["suite", "validate", str(_write(tmp, "suite.yaml", body))]


def ladder_case(text: str | bytes) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return ["ladder", "validate", str(_write(tmp, "ladder.yaml", text))]
    return build


def import_case(name: str, body: str | bytes, *args: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        data = _write(tmp, name, body)
        ladder = _write(tmp, "ladder.yaml", LADDER)
        return ["import", str(data), "--ladder", str(ladder), "--suite-name", "rec", "--store",
                str(tmp / "store.duckdb"), *args]
    return build


def replace(old: str, new: str, text: str = SUITE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _laughs(indent: str) -> str:
    """Nine levels of nine aliases each (a billion-laughs bomb: 9**9 leaves from under 1 KB)."""
    lines = [f"{indent}a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{indent}{cur}: &{cur} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


#: A suite whose json_equals value is a bomb (valid in shape, so only the alias bound stops it).
LAUGHS_SUITE = replace("      - {name: word, weight: 100, check: {type: regex, pattern: heron}}\n",
                       "      - name: word\n        weight: 100\n        check:\n          type: json_equals\n"
                       "          value:\n" + _laughs("            "))
LAUGHS_LADDER = replace("    tool_call_format: hermes\n", "    tool_call_format: hermes\n    vllm:\n" + _laughs("      "),
                        LADDER)


def _nested_suite_bytes(size: int) -> str:
    pad = "# " + "x" * 78 + "\n"
    return SUITE + pad * (size // len(pad) + 1)


def _store_from_import(tmp: Path) -> Path:
    store = tmp / "good.duckdb"
    data = _write(tmp, "good.csv", LONG_CSV)
    ladder = _write(tmp, "ladder.yaml", LADDER)
    assert main(["import", str(data), "--ladder", str(ladder), "--suite-name", "rec", "--store", str(store)]) == 0
    return store


def _inf_cost_store(tmp: Path) -> list[str]:
    import duckdb

    store = _store_from_import(tmp)
    con = duckdb.connect(str(store))
    con.execute("UPDATE runs SET cost_usd = 'inf'::DOUBLE")  # a store written by an older advisor
    con.close()
    return ["floors", "--store", str(store), "--json"]


def _strict_json(out: str) -> str | None:
    def refuse(const):
        raise ValueError(const)

    try:
        json.loads(out, parse_constant=refuse)
    except ValueError as exc:
        return f"not strict JSON ({exc})"
    return None


def _corrupt_store(tmp: Path) -> list[str]:
    _write(tmp, "store.duckdb", b"this is not a database\n" * 100)
    return ["floors", "--store", str(tmp / "store.duckdb")]


def _sqlite_store(tmp: Path) -> list[str]:
    con = sqlite3.connect(tmp / "store.duckdb")
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    return ["floors", "--store", str(tmp / "store.duckdb")]


def _damaged_store(how: str) -> Callable[[Path], Path]:
    """A store from a real import, then cut to half its size (``truncated``) or with one byte flipped in every
    256 KiB block but the first (``checksum``: DuckDB finds the damage only when a query reads such a block)."""
    def build(tmp: Path) -> Path:
        store = _store_from_import(tmp)
        data = bytearray(store.read_bytes())
        if how == "truncated":
            data = data[: len(data) // 2]
        else:
            for offset in range(12288 + 262144 + 100, len(data), 262144):
                data[offset] ^= 0xFF
        damaged = tmp / "store.duckdb"
        damaged.write_bytes(bytes(data))
        store.unlink()
        return damaged
    return build


def damaged_case(how: str, *command: str) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        return [*command, "--store", str(_damaged_store(how)(tmp))]
    return build


def _corrupt_spool(tmp: Path) -> list[str]:
    """A closed spool segment: a good decision, a 0xFF byte line, a ``[1,2,3]`` line, another good decision."""
    good = ['{"record": "decision", "decision_id": "%s", "created_at": "2026-01-01T00:00:00", "request_hash": "h", '
            '"policy": "p", "mode": "single", "chosen_rung": "r"}' % d for d in ("d1", "d2")]
    _write(tmp, "spool/w1-1-000001.jsonl", b"\n".join([good[0].encode(), b'{"record": "\xff"}', b"[1,2,3]",
                                                       good[1].encode()]) + b"\n")
    return ["store", "ingest", "--store", str(tmp / "live.duckdb"), "--spool", str(tmp / "spool")]


def _quarantined(out: str) -> str | None:
    return None if "2 decisions, 0 attempts ingested" in out and "2 bad lines quarantined" in out else out


_HOLDERS: list[subprocess.Popen] = []


def _locked_store(tmp: Path) -> list[str]:
    """Another process holds the store open (DuckDB's file lock)."""
    store = _store_from_import(tmp)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('ready', flush=True); time.sleep(60)", str(store)], stdout=subprocess.PIPE,
                              text=True)
    _HOLDERS.append(holder)
    assert holder.stdout.readline().strip() == "ready"
    return ["floors", "--store", str(store)]


def _import_into(kind: Callable[[Path], list[str]]) -> Callable[[Path], list[str]]:
    def build(tmp: Path) -> list[str]:
        kind(tmp)
        data = _write(tmp, "good.csv", LONG_CSV)
        ladder = _write(tmp, "ladder.yaml", LADDER)
        return ["import", str(data), "--ladder", str(ladder), "--suite-name", "rec", "--store",
                str(tmp / "store.duckdb")]
    return build


def _big_suite(tmp: Path) -> list[str]:
    path = _suite(tmp, _nested_suite_bytes(3 * 1024 * 1024))
    return ["suite", "validate", str(path)]


LATIN1 = SUITE.replace("report the code word.", "report the code word caf\xe9.").encode("latin-1")
LATIN1_OFFSET = SUITE.index("report the code word.") + len("report the code word caf")

CASES: list[Case] = [
    # ------------------------------------------------------------------ encodings
    Case("suite-latin1", lambda t: suite_bytes(t, LATIN1), ["suite.yaml", f"byte {LATIN1_OFFSET}", "UTF-8"]),
    Case("suite-bom", lambda t: suite_bytes(t, b"\xef\xbb\xbf" + SUITE.encode()), ok=True),
    Case("skill-latin1", suite_case(SUITE, skill=b"# How to\nList the files first, caf\xe9.\n"),
         ["skill.md", "byte 34", "UTF-8"]),
    Case("ladder-latin1", ladder_case(LADDER.replace("source: test", "source: caf\xe9", 1).encode("latin-1")),
         ["ladder.yaml", "byte", "UTF-8"]),
    Case("ladder-utf16", ladder_case(LADDER.encode("utf-16")), ["ladder.yaml", "byte 0", "UTF-8"]),
    Case("csv-latin1", import_case("r.csv", LONG_CSV.replace("What is", "Qu'est-ce caf\xe9", 1).encode("latin-1")),
         ["r.csv", "byte", "UTF-8"]),
    Case("csv-bom", import_case("r.csv", b"\xef\xbb\xbf" + LONG_CSV.encode()), ok=True),
    # ------------------------------------------------------------------ YAML bombs and size
    Case("yaml-billion-laughs", lambda t: ["suite", "validate", str(_suite(t, LAUGHS_SUITE))],
         ["suite.yaml", "alias"], subprocess=True),
    Case("ladder-billion-laughs", lambda t: ["ladder", "validate", str(_write(t, "ladder.yaml", LAUGHS_LADDER))],
         ["ladder.yaml", "alias"], subprocess=True),
    Case("suite-too-big", _big_suite, ["suite.yaml", "MB", "ADVISOR_MAX_INPUT_MB"], subprocess=True),
    # ------------------------------------------------------------------ suites
    Case("duplicate-class", suite_case(replace("{name: multi}", "{name: narrow}")),
         ["suite.yaml:4", "classes.1.name", "duplicate class"]),
    Case("invalid-regex", suite_case(replace("pattern: heron", "pattern: 'her(on'")),
         ["suite.yaml:15", "tasks.0.task_completion.0.check.pattern", "regex"]),
    Case("invalid-regex-selftest", suite_case(replace("pattern: heron", "pattern: 'her(on'"), "--selftest"),
         ["suite.yaml:15", "tasks.0.task_completion.0.check.pattern", "regex"]),
    Case("invalid-json-schema", suite_case(replace("{type: regex, pattern: heron}",
                                                   "{type: json_schema, schema: {type: objec}}")),
         ["suite.yaml:15", "tasks.0.task_completion.0.check.schema", "not a JSON Schema", "'objec'"]),
    Case("unknown-regex-flag", suite_case(replace("pattern: heron", "pattern: heron, flags: iq")),
         ["suite.yaml:15", "tasks.0.task_completion.0.check.flags", "'q'"]),
    Case("unknown-tool-in-check", suite_case(replace("tool: list_files}", "tool: list_filez}")),
         ["suite.yaml:13", "tasks.0.instruction_following.0.check.tool", "list_filez", "list_files"]),
    Case("skill-traversal", suite_case(replace("skill: skill.md", "skill: ../../../../etc/passwd")),
         ["suite.yaml:9", "tasks.0.skill", "outside the suite's folder"]),
    Case("skill-absolute", suite_case(replace("skill: skill.md", "skill: /etc/passwd")),
         ["suite.yaml:9", "tasks.0.skill", "outside the suite's folder"]),
    Case("skill-missing", suite_case(replace("skill: skill.md", "skill: nope.md")),
         ["suite.yaml:9", "tasks.0.skill", "nope.md"]),
    Case("fixture-path-escapes", suite_case(replace("{notes.txt:", "{../notes.txt:")),
         ["suite.yaml:11", "tasks.0.fixtures.files", "../notes.txt"]),
    Case("fixture-path-absolute", suite_case(replace("{notes.txt:", "{/tmp/notes.txt:")),
         ["suite.yaml:11", "tasks.0.fixtures.files", "/tmp/notes.txt"]),
    Case("max-turns-true", suite_case(replace("{max_turns: 20}", "{max_turns: true}")),
         ["suite.yaml:3", "limits.max_turns", "integer"]),
    Case("max-turns-string", suite_case(replace("{max_turns: 20}", "{max_turns: '20'}")),
         ["suite.yaml:3", "limits.max_turns", "integer"]),
    Case("timeout-inf", suite_case(replace("{max_turns: 20}", "{max_turns: 20, timeout_s: .inf}")),
         ["suite.yaml:3", "limits.timeout_s", "finite"]),
    Case("verifier-string", suite_case(replace("{name: multi}", "{name: multi, verifier: 'yes'}")),
         ["suite.yaml:4", "classes.1.verifier", "boolean"]),
    Case("check-count-true", suite_case(replace("tool: list_files}", "tool: list_files, max_calls: true}")),
         ["suite.yaml:13", "tasks.0.instruction_following.0.check", "max_calls", "integer"]),
    Case("unknown-task-tool", suite_case(replace("tools: [read_file, list_files]", "tools: [read_file, lst]")),
         ["suite.yaml:10", "tasks.0.tools.1", "lst"]),
    # ------------------------------------------------------------------ ladders
    Case("shared-triton-model", ladder_case(replace("triton_model: large", "triton_model: small", LADDER)),
         ["ladder.yaml:14", "rungs.1.triton_model", "'small'", "rungs.0"]),
    Case("rung-role-same-name", ladder_case(LADDER + JUDGE.replace("JUDGE_NAME", "small")),
         ["ladder.yaml:20", "roles.judge.name", "'small'"]),
    Case("role-shares-triton-model", ladder_case(LADDER + JUDGE.replace("JUDGE_NAME", "judge").replace(
        "triton_model: judge", "triton_model: large")), ["ladder.yaml:23", "roles.judge.triton_model", "'large'"]),
    Case("duplicate-rung", ladder_case(replace("name: large", "name: small", LADDER)),
         ["ladder.yaml:11", "rungs.1.name", "duplicate"]),
    Case("inf-price", ladder_case(replace("usd_per_m_input: 1.0", "usd_per_m_input: .inf", LADDER)),
         ["ladder.yaml:8", "usd_per_m_input", "finite"]),
    Case("nan-price", ladder_case(replace("usd_per_m_input: 1.0", "usd_per_m_input: .nan", LADDER)),
         ["ladder.yaml:8", "usd_per_m_input", "finite"]),
    Case("negative-price", ladder_case(replace("usd_per_m_input: 1.0", "usd_per_m_input: -1", LADDER)),
         ["ladder.yaml:8", "usd_per_m_input", "0"]),
    Case("params-inf", ladder_case(replace("params_total_b: 1\n", "params_total_b: .inf\n", LADDER)),
         ["ladder.yaml:6", "rungs.0.params_total_b", "finite"]),
    Case("context-length-true", ladder_case(replace("context_length: 4096", "context_length: true", LADDER)),
         ["ladder.yaml:9", "rungs.0.context_length", "integer"]),
    # ------------------------------------------------------------------ imports
    Case("long-csv-no-score", import_case("r.csv", "prompt,task,model,result\nq,math,small,1.0\n"),
         ["r.csv", "'score'", "--shape"]),
    Case("long-csv-no-model", import_case("r.csv", "prompt,task,score\nq,math,1.0\n"),
         ["r.csv", "'model'"]),
    Case("inf-tokens", import_case("r.csv", "prompt,task,model,score,input_tokens\nq,math,small,1.0,inf\n"),
         ["r.csv", "row 2", "input_tokens", "'inf'"]),
    Case("huge-tokens", import_case("r.csv", "prompt,task,model,score,input_tokens\nq,math,small,1.0,1e30\n"),
         ["r.csv", "row 2", "input_tokens", "1e30"]),
    Case("inf-cost", import_case("r.csv", "prompt,task,model,score,cost\nq,math,small,1.0,inf\n"),
         ["r.csv", "row 2", "cost", "finite"]),
    Case("1e400-cost-jsonl", import_case("r.jsonl", '{"prompt": "q", "task": "m", "model": "small", "score": 1, '
                                                    '"cost": 1e400}\n'), ["r.jsonl", "row 1", "cost", "finite"]),
    Case("negative-cost", import_case("r.csv", "prompt,task,model,score,cost\nq,math,small,1.0,-0.5\n"),
         ["r.csv", "row 2", "cost", "non-negative"]),
    Case("wide-inf-cost", import_case("r.csv", "prompt,task,small,small|total_cost\nq,math,1.0,inf\n"),
         ["r.csv", "row 2", "small|total_cost", "finite"]),
    Case("nan-score", import_case("r.csv", "prompt,task,model,score\nq,math,small,nan\n"),
         ["r.csv", "row 2", "NaN"]),
    # digits of other scripts: Python's float() takes them (١ -> 1.0, stored as 100), a plain decimal is ASCII
    Case("arabic-indic-score", import_case("r.csv", "prompt,task,model,score\nq,math,small,\u0661\n"),
         ["r.csv", "row 2", "column 'score'", "'\u0661'", "ASCII"]),
    Case("arabic-indic-half-score-jsonl", import_case("r.jsonl", '{"prompt": "q", "task": "m", "model": "small", '
                                                                 '"score": "\u0660.\u0665"}\n'),
         ["r.jsonl", "row 1", "column 'score'", "ASCII"]),
    Case("fullwidth-score-wide", import_case("r.csv", "prompt,task,small,large\nq,math,\uff11,1\n"),
         ["r.csv", "row 2", "column 'small'", "'\uff11'"]),
    Case("fullwidth-tokens", import_case("r.csv", "prompt,task,model,score,input_tokens\nq,math,small,1,\uff11\uff12\n"),
         ["r.csv", "row 2", "input_tokens", "not a number"]),
    Case("unknown-model", import_case("r.csv", "prompt,task,model,score\nq,math,smal,1.0\n"),
         ["r.csv", "'smal'", "--map"]),
    Case("empty-csv", import_case("r.csv", ""), ["r.csv", "empty"]),
    Case("bad-jsonl", import_case("r.jsonl", '{"prompt": "q"\n'), ["r.jsonl", "byte 16", "JSON"]),
    Case("jsonl-not-utf8", import_case("r.jsonl", b'{"prompt": "caf\xe9", "task": "m", "model": "small", '
                                                  b'"score": 1}\n'), ["r.jsonl", "byte 15", "UTF-8"]),
    Case("corrupt-parquet", import_case("r.parquet", b"PAR1 this is not parquet"), ["r.parquet", "Parquet"]),
    Case("unsupported-suffix", import_case("r.xlsx", "x"), ["r.xlsx", ".csv"]),
    Case("import-bad-ladder", lambda t: import_case("r.csv", LONG_CSV)(t)[:3] + [
        str(_write(t, "bad.yaml", replace("usd_per_m_input: 1.0", "usd_per_m_input: .inf", LADDER)))]
        + import_case("r.csv", LONG_CSV)(t)[4:], ["bad.yaml:8", "usd_per_m_input"]),
    # ------------------------------------------------------------------ stores
    Case("corrupt-store", _corrupt_store, ["store.duckdb", "not a DuckDB", "another advisor"]),
    Case("sqlite-store", _sqlite_store, ["store.duckdb", "SQLite"]),
    Case("import-into-corrupt-store", _import_into(_corrupt_store), ["store.duckdb", "not a DuckDB"]),
    Case("import-into-sqlite-store", _import_into(_sqlite_store), ["store.duckdb", "SQLite"]),
    Case("store-is-directory", lambda t: (t / "store.duckdb").mkdir() or ["floors", "--store",
                                                                          str(t / "store.duckdb")],
         ["store.duckdb", "folder"]),
    Case("store-in-use", _locked_store, ["good.duckdb", "another advisor process"]),
    Case("store-truncated-floors", damaged_case("truncated", "floors"), ["store.duckdb", "damaged", "backup"]),
    Case("store-checksum-floors", damaged_case("checksum", "floors"), ["store.duckdb", "damaged", "checksum"]),
    Case("store-truncated-info", damaged_case("truncated", "store", "info"), ["store.duckdb", "damaged"]),
    Case("store-checksum-info", damaged_case("checksum", "store", "info"), ["store.duckdb", "damaged"]),
    Case("store-checksum-router-train", damaged_case("checksum", "router", "train"), ["store.duckdb", "damaged"]),
    Case("store-truncated-serve", lambda t: damaged_case("truncated", "serve")(t) + [
        "--ladder", str(_write(t, "ladder.yaml", LADDER)), "--url", "127.0.0.1:9", "--no-auth"],
         ["store.duckdb", "damaged", "backup"], subprocess=True),
    # a corrupt spool line is quarantined, the rest of its segment ingested (no UnicodeDecodeError / TypeError)
    Case("spool-corrupt-lines", _corrupt_spool, ok=True, check_output=_quarantined),
    # ------------------------------------------------------------------ strict JSON output
    Case("floors-json-inf", _inf_cost_store, ok=True, check_output=_strict_json),
]

# The corrupt-store case wants the line to say what is wrong and NOT blame another process.
NOT_IN = {"corrupt-store": ["another advisor"], "import-into-corrupt-store": ["another advisor"],
          "sqlite-store": ["another advisor"], "long-csv-no-score": ["wide table"]}
for _c in CASES:
    _c.expect = [e for e in _c.expect if e not in NOT_IN.get(_c.id, [])]


def _snapshot(tmp: Path) -> dict[str, bytes | None]:
    out = {}
    for p in tmp.rglob("*"):
        if p.is_file() and (p.suffix in (".duckdb", ".wal") or p.name.endswith(".duckdb.wal")):
            out[str(p)] = p.read_bytes()
    return out


_RUNNER = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    from advisor.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def run_case(case: Case, tmp: Path, capsys) -> tuple[str, str]:
    """Run one case; return (class, detail)."""
    argv = case.build(tmp)
    before = _snapshot(tmp)
    if case.subprocess:
        try:
            proc = subprocess.run([sys.executable, "-c", _RUNNER, *argv], capture_output=True, text=True,
                                  timeout=30, cwd=tmp, env={**os.environ, "COLUMNS": "200"})
        except subprocess.TimeoutExpired:
            return "hang", "no answer within 30 s"
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
        if "Traceback" in err or "MemoryError" in err:
            return "traceback", err.strip().splitlines()[-1] if err.strip() else "traceback"
    else:
        capsys.readouterr()
        try:
            rc = main(argv)
        except Exception as exc:  # anything but an advisor error escaping main is a traceback for a user
            return "traceback", f"{type(exc).__name__}: {exc}"[:300]
        out, err = capsys.readouterr()
    after = _snapshot(tmp)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if case.ok:
        if rc != 0:
            return "misleading", f"valid input refused (exit {rc}): {err.strip()[:300]}"
        problem = case.check_output(out) if case.check_output else None
        return ("unclear", problem) if problem else ("clear", "")
    if rc == 0:
        return "silent", f"accepted (exit 0): {out.strip()[:200]}"
    if after != before:
        return "wrote", f"store file(s) written: {sorted(set(after) ^ set(before)) or 'changed'}; {err.strip()[:200]}"
    text = err.replace(str(tmp) + "/", "")
    missing = [e for e in case.expect if e not in text]
    banned = [b for b in NOT_IN.get(case.id, []) if b in text]
    if banned:
        return "misleading", f"says {banned}: {text.strip()[:400]}"
    if len(lines) != 1 or not lines[0].startswith("error: ") or missing:
        return "unclear", f"missing {missing}, misleading {banned}, {len(lines)} lines: {text.strip()[:400]}"
    return "clear", ""


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if case.id == "suite-too-big":
        monkeypatch.setenv("ADVISOR_MAX_INPUT_MB", "1")
    try:
        verdict, detail = run_case(case, tmp_path, capsys)
    finally:
        while _HOLDERS:
            holder = _HOLDERS.pop()
            holder.kill()
            holder.wait()
    assert verdict == "clear", f"BATTERY {verdict}: {case.id}: {detail}"


def test_size_limit_is_overridable(tmp_path, monkeypatch):
    """The input size limit is stated in the error and raised by ADVISOR_MAX_INPUT_MB."""
    path = _suite(tmp_path, _nested_suite_bytes(2 * 1024 * 1024))
    monkeypatch.setenv("ADVISOR_MAX_INPUT_MB", "1")
    assert main(["suite", "validate", str(path)]) != 0
    monkeypatch.setenv("ADVISOR_MAX_INPUT_MB", "4")
    assert main(["suite", "validate", str(path)]) == 0


def test_bom_csv_imports_prompt_column(tmp_path, capsys):
    """A CSV saved by Excel (UTF-8 with BOM) imports with its first column named 'prompt', not '\\ufeffprompt'."""
    store = tmp_path / "s.duckdb"
    data = _write(tmp_path, "r.csv", b"\xef\xbb\xbf" + LONG_CSV.encode())
    ladder = _write(tmp_path, "ladder.yaml", LADDER)
    assert main(["import", str(data), "--ladder", str(ladder), "--suite-name", "rec", "--store", str(store),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["runs_added"] == 2 and report["shape"] == "long"


def _tools(n: int, parameters: dict | None = None) -> list[dict]:
    return [{"type": "function", "function": {"name": f"f{i}", "parameters": parameters or {"type": "object"}}}
            for i in range(n)]


def _deep_schema(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


_HI = [{"role": "user", "content": "hi"}]
#: (case, raw body, x-advisor-* headers, setting named in the one-line 400) of the service's request limits (issue 30)
SERVICE_REQUESTS = [
    ("deep-json", b'{"model": "auto", "messages": [], "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", {},
     "limits.max_json_depth"),
    ("deep-tool-schema", json.dumps({"model": "auto", "messages": _HI, "tools": _tools(1, _deep_schema(400))}).encode(),
     {}, "limits.max_json_depth"),
    ("many-tools", json.dumps({"model": "auto", "messages": _HI, "tools": _tools(4000)}).encode(), {},
     "limits.max_tools"),
    ("big-tool-schema", json.dumps({"model": "auto", "messages": _HI, "tools": _tools(
        1, {"type": "object", "description": "x" * 40_000})}).encode(), {}, "limits.max_tool_schema_bytes"),
    ("long-class-header", b'{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}',
     {"x-advisor-class": "c" * 300}, "limits.max_label_chars"),
    ("long-class", json.dumps({"model": "auto", "messages": _HI, "advisor": {"class": "c" * 300}}).encode(), {},
     "limits.max_label_chars"),
    ("long-user", json.dumps({"model": "auto", "messages": _HI, "user": "u" * 300}).encode(), {},
     "limits.max_label_chars"),
]


@pytest.mark.parametrize("case, raw, headers, setting", SERVICE_REQUESTS, ids=[c[0] for c in SERVICE_REQUESTS])
def test_service_request_limits_refuse_with_one_line_naming_the_setting(case, raw, headers, setting):
    """The service's request checks (the ones before any rung is asked; end to end in test_service_limits.py)
    refuse each hostile request with a 400 whose one-line message names the limit (no RecursionError, no 500)."""
    import asyncio

    from advisor.service.process.config import Limits
    from advisor.service.api.limits import check_header_values, parse_bounded
    from advisor.service.api.request import RequestError

    async def check():
        check_header_values(headers, Limits())
        await parse_bounded(raw, headers, Limits())

    with pytest.raises(RequestError) as err:
        asyncio.run(check())
    message = str(err.value)
    assert err.value.status == 400 and setting in message and "\n" not in message and len(message) < 300, message


def test_service_limit_settings_are_checked_with_file_key_and_line(tmp_path):
    from advisor.errors import ConfigError
    from advisor.service.process.config import load_config

    path = _write(tmp_path, "service.yaml", "version: 1\nlimits:\n  max_json_depth: 100000\n")
    with pytest.raises(ConfigError, match=r"service.yaml:3: limits.max_json_depth: .*128"):
        load_config(path)
