"""Reading inputs is bounded before any work: an imported table over its size limit, a text table with NUL bytes,
a FIFO, and a router artifact of JSON lists are each one line, checked before their content is parsed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from advisor.cli import main

REPO = Path(__file__).resolve().parent.parent
DEMO = str(REPO / "ladders" / "demo.yaml")


def _one_line(capsys, argv, *words):
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(w in err for w in words), err


def test_an_import_over_its_size_limit_is_refused_before_reading(capsys, tmp_path, monkeypatch):
    table = tmp_path / "big.csv"
    with table.open("wb") as fh:  # sparse: 2 GiB apparent, nothing written
        fh.truncate(2 * 2**30)
    _one_line(capsys, ["import", str(table), "--ladder", DEMO, "--suite-name", "x", "--store",
                       str(tmp_path / "s.duckdb")], "over the 32 MiB limit", "ADVISOR_MAX_IMPORT_MB")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_table_of_more_rows_than_its_limit_is_refused_before_its_rows_are_read(capsys, tmp_path, monkeypatch,
                                                                               suffix):
    """Short rows: far under the size limit, over the row limit (an imported row costs kilobytes in memory)."""
    monkeypatch.setenv("ADVISOR_MAX_IMPORT_ROWS", "10")
    table = tmp_path / f"many{suffix}"
    if suffix == ".csv":
        table.write_text("prompt_id,prompt,model,score\n" + "".join(f"p{i},q,nano-12b,1\n" for i in range(11)))
    else:
        table.write_text("".join(json.dumps({"prompt_id": f"p{i}", "prompt": "q", "model": "nano-12b", "score": 1})
                                 + "\n" for i in range(11)))
    _one_line(capsys, ["import", str(table), "--ladder", DEMO, "--suite-name", "x", "--store",
                       str(tmp_path / "s.duckdb")], "11 rows is over the 10-row limit", "ADVISOR_MAX_IMPORT_ROWS")
    monkeypatch.setenv("ADVISOR_MAX_IMPORT_ROWS", "11")  # at the limit: imported
    assert main(["import", str(table), "--ladder", DEMO, "--suite-name", "x", "--store",
                 str(tmp_path / "s.duckdb")]) == 0


def test_a_table_with_nul_bytes_after_its_rows_is_refused(capsys, tmp_path):
    table = tmp_path / "padded.csv"
    table.write_bytes(b"prompt_id,prompt,model,score\np1,hello,nano-12b,1\n" + b"\x00" * 4096)
    _one_line(capsys, ["import", str(table), "--ladder", DEMO, "--suite-name", "x", "--store",
                       str(tmp_path / "s.duckdb")], "NUL byte at byte 49")


def test_a_fifo_given_as_a_table_is_refused_without_blocking(capsys, tmp_path):
    fifo = tmp_path / "table.csv"
    os.mkfifo(fifo)
    _one_line(capsys, ["import", str(fifo), "--ladder", DEMO, "--suite-name", "x", "--store",
                       str(tmp_path / "s.duckdb")], "not a regular file")


def test_a_router_artifact_of_json_lists_is_refused_before_parsing(tmp_path):
    from advisor.errors import RouterError
    from advisor.router.model.artifact import MAX_JSON_VALUES, load_router

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"weights": [0.5] * (MAX_JSON_VALUES + 10)}))
    with pytest.raises(RouterError, match="JSON values"):
        load_router(path)
