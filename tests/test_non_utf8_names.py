"""Names and text that model code writes are data: a file name that is not UTF-8, written inside the real
bubblewrap sandbox, comes back from list_files escaped (not dropped), and the run that saw it is stored in a real
DuckDB store instead of aborting the probe."""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from advisor.records import RunRecord, TurnRecord, utf8_safe
from advisor.store import Store
from advisor.suite import Task
from advisor.tools import Environment, SandboxLimits
from advisor.tools import sandbox as sb

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"),
                                 reason="bubblewrap (bwrap) is not installed here: apt-get install bubblewrap")
CODE = "open(b'\\xff\\xfe-report.txt', 'wb').write(b'\\xff out')\nprint(open(b'\\xff\\xfe-report.txt', 'rb').read())"


def _task():
    check = {"type": "regex", "pattern": "x"}
    return Task.model_validate({
        "id": "names", "class": "c", "instructions": "write files", "tools": ["run_python", "list_files"],
        "instruction_following": [{"name": "a", "weight": 100, "check": check}],
        "task_completion": [{"name": "b", "weight": 100, "check": check}]})


def test_utf8_safe_escapes_and_keeps_everything():
    name = os.fsdecode(b"\xff\xfe-report.txt")
    assert utf8_safe(name) == "\\xff\\xfe-report.txt"
    assert utf8_safe("caf\u00e9 \ud800") == "caf\u00e9 \\ud800"
    assert utf8_safe("plain") == "plain"


@needs_bwrap
def test_a_non_utf8_file_name_is_listed_escaped_and_its_run_is_stored(tmp_path):
    with sb.private_root(tmp_path / "probe") as root:
        env = Environment.create(_task(), root, limits=SandboxLimits(timeout_s=8, memory_mb=256, max_processes=16))
        try:
            wrote = asyncio.run(env.call("run_python", {"code": CODE}))
            listed = asyncio.run(env.call("list_files", {}))
        finally:
            env.close()
    assert wrote.ok, wrote.observation
    assert listed.ok and "\\xff\\xfe-report.txt" in listed.observation, listed.observation
    for text in (wrote.observation, listed.observation):
        text.encode("utf-8")  # valid UTF-8: a model prompt and a store row can hold it
    store_path = tmp_path / "s.duckdb"
    with Store.open(store_path) as store:
        run = RunRecord(run_key="k1", kind="probe", suite_name="s", suite_hash="h", task_id="names", task_class="c",
                        ladder_name="l", ladder_hash="lh", rung="r", rung_position=0,
                        error=os.fsdecode(b"saw \xff\xfe-report.txt"))
        turns = [TurnRecord(turn=0, action="list_files", observation=listed.observation),
                 TurnRecord(turn=1, action="final", observation=os.fsdecode(b"done: \xff.txt"))]
        assert store.add_run(run, turns)
    with Store.open(store_path, read_only=True) as store:
        rows = store.query("SELECT observation FROM turns ORDER BY turn")
        (error,) = [r["error"] for r in store.query("SELECT error FROM runs")]
    assert "\\xff\\xfe-report.txt" in rows[0]["observation"] and rows[1]["observation"] == "done: \\xff.txt"
    assert error == "saw \\xff\\xfe-report.txt"
