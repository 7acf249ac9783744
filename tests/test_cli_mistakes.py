"""Ordinary command-line mistakes are one line and an exit code, caught before any work starts: outputs that cannot
be written, numbers that are not finite or out of range, an empty name, a key file that is not UTF-8, an address
that cannot be bound, a URL that does not parse. Each runs the real `advisor` entry point."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from advisor.cli import main

REPO = Path(__file__).resolve().parent.parent
DEMO = str(REPO / "ladders" / "demo.yaml")


def _one_line(capsys, argv: list[str], *words: str, code: int = 2) -> str:
    assert main(argv) == code, argv
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert "Traceback" not in captured.err + captured.out, captured.err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and all(w in err for w in words), err
    return err


@pytest.fixture
def read_only(tmp_path) -> Path:
    """A folder nobody can write, root included: a read-only bind mount where the kernel allows one, else a folder
    whose path runs through a file (that no process can create)."""
    blocked = tmp_path / "a-file"
    blocked.write_text("x")
    return blocked / "sub"


@pytest.mark.parametrize("argv", [
    ["report", "--out", "{ro}/reports"],
    ["store", "export", "{ro}/parquet"],
    ["triton", "render", DEMO, "--out", "{ro}/repo"],
    ["route", "--prompt", "hi", "--out", "{ro}/x.jsonl"],
    ["router", "promote", "--pointer", "{ro}/pointer.json", "cand.json"],
    ["suite", "import", "tessl", "{tmp}", "--out", "{ro}/suite.yaml"],
    ["router", "train", "--out", "{ro}/router.json"],
    ["router", "eval", "--out-dir", "{ro}/eval"],
])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(capsys, tmp_path, read_only, argv):
    argv = [a.format(ro=read_only, tmp=tmp_path) for a in argv]
    _one_line(capsys, argv, "cannot be written")


@pytest.mark.parametrize("argv, words", [
    (["report", "--out", "{file}"], ("is a file, not a folder",)),
    (["triton", "render", DEMO, "--out", "{file}"], ("is a file, not a folder",)),
    (["route", "--prompt", "hi", "--out", "{dir}"], ("is a folder, not a file",)),
])
def test_an_output_of_the_wrong_kind_is_refused(capsys, tmp_path, argv, words):
    (tmp_path / "f.txt").write_text("x")
    argv = [a.format(file=tmp_path / "f.txt", dir=tmp_path) for a in argv]
    _one_line(capsys, argv, *words)


@pytest.mark.parametrize("argv, words", [
    (["route", "--prompt", "x", "--weight", "nano-12b=nan"], ("--weight", "finite")),
    (["route", "--prompt", "x", "--weight", "nano-12b=-1"], ("--weight", ">= 0")),
    (["route", "--prompt", "x", "--max-latency", "-1"], ("--max-latency",)),
    (["route", "--prompt", "x", "--value", "inf"], ("--value", "not a finite number")),
    (["route", "--prompt", "x", "--target", "nan"], ("--target",)),
    (["plan", "--margin", "-5"], ("--margin", "-4.2")),
    (["plan", "--replicas", "1000000000000"], ("--replicas",)),
    (["probe", "--replicas", "1000000000000"], ("--replicas",)),
])
def test_a_number_out_of_range_is_one_line(capsys, argv, words):
    _one_line(capsys, argv, *words)


def test_an_empty_suite_name_is_one_line(capsys, tmp_path):
    (tmp_path / "r.csv").write_text("prompt_id,model,score\np1,nano-12b,1\n")
    _one_line(capsys, ["import", str(tmp_path / "r.csv"), "--ladder", DEMO, "--suite-name", ""], "suite_name")


def test_a_latin1_key_file_is_one_line_before_any_work(capsys, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_bytes("full caf\xe9-key\n".encode("latin-1"))
    assert main(["serve", "--keys", str(keys), "--store", str(tmp_path / "s.duckdb")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out  # nothing read from the store or printed before the key file is checked
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "not UTF-8" in err, err


def test_a_host_that_cannot_be_bound_is_refused_before_triton_starts(capsys):
    _one_line(capsys, ["serve", "--host", "999.1.1.1", "--store", os.devnull], "--host", "999.1.1.1")


def test_a_url_that_does_not_parse_is_one_line(capsys):
    _one_line(capsys, ["ladder", "check", DEMO, "--url", "http://[::1"], "http://[::1", "not a valid address")


def test_a_usage_mistake_is_one_line_and_help_still_prints(capsys):
    _one_line(capsys, ["probe", "--replicas", "x"], "--replicas", "advisor probe --help")
    assert main(["--version"]) == 0
    assert main(["probe", "--help"]) == 0 and "--replicas" in capsys.readouterr().out


def test_ingest_into_a_store_that_refuses_is_an_error_even_with_nothing_to_ingest(capsys, tmp_path, postgres_server):
    """A database that does not exist (as a wrong password would): the command fails with one line, though the
    spool is empty (it said "0 segments ... ingested" and exited 0)."""
    url = postgres_server.url.rsplit("/", 1)[0] + "/no_such_database"
    spool = tmp_path / "spool"
    spool.mkdir()
    assert main(["store", "ingest", "--store", url, "--spool", str(spool)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1 and "no_such_database" in err, err
