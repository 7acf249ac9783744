"""The bad-input battery, second pass (issue 30): nesting depth, router artifacts that claim too much, and
recorded results that were accepted silently. Same classes and runner as tests/test_bad_input.py."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from test_bad_input import LADDER, SUITE, Case, _write, import_case, run_case

ROUTE = ["--prompt", "hello"]


def _deep_json(tmp: Path) -> list[str]:
    """A router.json of 100,000 nested objects (json.loads alone raises RecursionError)."""
    _write(tmp, "deep.json", '{"a":' * 100_000 + "1" + "}" * 100_000)
    return ["route", "--router", str(tmp / "deep.json"), *ROUTE]


def _deep_suite(tmp: Path) -> list[str]:
    """A suite whose tasks value is a flow list nested 2,500 deep."""
    _write(tmp, "deep.yaml", "version: 1\nname: deep\ntasks: " + "[" * 2500 + "]" * 2500 + "\n")
    return ["suite", "validate", str(tmp / "deep.yaml")]


def _alias_tower(tmp: Path) -> list[str]:
    """Each anchor nests the previous one 60 deep: every level is shallow, the aliases make it 600 deep."""
    lines = ["version: 1", "name: tower", "a0: &a0 " + "[" * 60 + "]" * 60]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} " + "[" * 59 + f"*a{i - 1}" + "]" * 59)
    _write(tmp, "tower.yaml", "\n".join(lines) + "\n")
    return ["suite", "validate", str(tmp / "tower.yaml")]


def _npy_header(shape: tuple[int, ...], dtype=np.float32) -> bytes:
    buf = io.BytesIO()
    npy_format.write_array_header_1_0(buf, {"descr": npy_format.dtype_to_descr(np.dtype(dtype)),
                                            "fortran_order": False, "shape": shape})
    return buf.getvalue()


def _bomb(tmp: Path) -> list[str]:
    """A 0.5 MB .npz whose one array inflates to 512 MiB of zeros (a decompression bomb)."""
    n = 128 * 2**20  # float32 -> 512 MiB
    with zipfile.ZipFile(tmp / "bomb.npz", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open("a0.npy", "w", force_zip64=True) as fh:
            fh.write(_npy_header((n,)))
            chunk = bytes(2**24)
            for _ in range(n * 4 // len(chunk)):
                fh.write(chunk)
        zf.writestr("__skeleton__.npy", _npy_header((2,), np.uint8) + b"{}")
    assert (tmp / "bomb.npz").stat().st_size < 4 * 2**20
    return ["route", "--router", str(tmp / "bomb.npz"), *ROUTE]


def _lying_header(tmp: Path) -> list[str]:
    """A .npy header claiming 10**12 floats over 8 bytes of data (numpy would allocate before reading)."""
    with zipfile.ZipFile(tmp / "lie.npz", "w") as zf:
        zf.writestr("a0.npy", _npy_header((10**12,)) + bytes(8))
    return ["route", "--router", str(tmp / "lie.npz"), *ROUTE]


def _wide_window(tmp: Path) -> list[str]:
    """An artifact (otherwise checked later) whose text window reads a million characters."""
    state = {"format": "advisor-router", "format_version": 2, "w_sparse": [], "w_dense": [], "bias": [],
             "calib_x": [], "calib_y": [], "rungs": [{"name": "small"}],
             "featurizer": {"n_hash": 4, "classes": [], "window": [1, 1_000_000], "char_cap": 1000,
                            "word_cap": 6000}}
    _write(tmp, "wide.json", json.dumps(state))
    return ["route", "--router", str(tmp / "wide.json"), *ROUTE]


JSONL_OBJECT = '{"prompt": {"text": "q"}, "task": "m", "model": "small", "score": 1}\n'
HEAD = "prompt_id,prompt,task,model,score\n"

CASES: list[Case] = [
    # ------------------------------------------------------------------ nesting depth (one shared bound)
    Case("route-deep-json", _deep_json, ["deep.json", "nested more than 100 levels", "ADVISOR_MAX_NESTING"]),
    Case("suite-deep-yaml", _deep_suite, ["deep.yaml:3", "nested more than 100 levels", "ADVISOR_MAX_NESTING"]),
    Case("suite-alias-tower", _alias_tower, ["tower.yaml", "nested more than 100 levels", "aliases"]),
    # ------------------------------------------------------------------ router artifacts
    Case("npz-bomb", _bomb, ["bomb.npz", "512 MiB", "256 MiB", "ADVISOR_MAX_ROUTER_MB"], subprocess=True),
    Case("npz-lying-header", _lying_header, ["lie.npz", "a0.npy", "(1000000000000,)", "8 bytes"],
         subprocess=True),
    Case("router-wide-window", _wide_window, ["wide.json", "featurizer.window", "[1, 1000000]", "0-20000",
                                              "MAX_WINDOW_CHARS"]),
    # ------------------------------------------------------------------ recorded results
    Case("score-underscore", import_case("r.csv", "prompt,task,model,score\nq,math,small,0_1\n"),
         ["r.csv", "row 2", "'0_1'", "not a number"]),
    Case("tokens-underscore", import_case("r.csv", "prompt,task,model,score,input_tokens\nq,math,small,1,1_000\n"),
         ["r.csv", "row 2", "input_tokens", "'1_000'"]),
    Case("duplicate-rows", import_case("r.csv", HEAD + "p1,q,math,small,1\np1,q,math,small,1\n"),
         ["r.csv", "rows 2, 3", "'p1'", "'small'", "--replicas"]),
    Case("duplicate-prompts-no-id", import_case("r.csv", "prompt,task,model,score\nq,math,small,1\nq,math,small,0\n"),
         ["r.csv", "rows 2, 3", "'small'", "--replicas"]),
    Case("id-two-prompts", import_case("r.csv", HEAD + "p1,q,math,small,1\np1,other,math,large,1\n"),
         ["r.csv", "rows 2 and 3", "'p1'", "two different prompts"]),
    Case("id-two-classes", import_case("r.csv", HEAD + "p1,q,math,small,1\np1,q,code,large,1\n"),
         ["r.csv", "rows 2 and 3", "'p1'", "two different classes", "'math'", "'code'"]),
    Case("jsonl-deep", import_case("r.jsonl", '{"prompt": "q", "task": "m", "model": "small", "score": 1}\n'
                                   '{"prompt": "q", "x": ' + "[" * 120 + "]" * 120 + "}\n"),
         ["r.jsonl: line 2", "nested more than 100 levels", "ADVISOR_MAX_NESTING"]),
    Case("jsonl-object-prompt", import_case("r.jsonl", JSONL_OBJECT), ["r.jsonl", "row 1", "'prompt'", "JSON object"]),
    Case("replicas-intended", import_case("r.csv", HEAD + "p1,q,math,small,1\np1,q,math,small,0\n", "--replicas"),
         ok=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_limits(case: Case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verdict, detail = run_case(case, tmp_path, capsys)
    assert verdict == "clear", f"BATTERY {verdict}: {case.id}: {detail}"


def test_nesting_limit_is_a_setting(tmp_path, monkeypatch, capsys):
    """ADVISOR_MAX_NESTING raises the bound; a suite 150 deep then fails on its content, not its depth."""
    from advisor.cli import main

    _write(tmp_path, "deep.yaml", SUITE.replace("limits: {max_turns: 20}", "extra: " + "[" * 150 + "]" * 150))
    (tmp_path / "skill.md").write_text("x")
    assert main(["suite", "validate", str(tmp_path / "deep.yaml")]) != 0
    assert "ADVISOR_MAX_NESTING=100" in capsys.readouterr().err
    monkeypatch.setenv("ADVISOR_MAX_NESTING", "200")
    assert main(["suite", "validate", str(tmp_path / "deep.yaml")]) != 0
    err = capsys.readouterr().err
    assert "nested" not in err and "extra" in err


def test_replicas_are_stored_as_replicas(tmp_path):
    """With --replicas two rows of one (id, model) become replicas 0 and 1 of one task."""
    import duckdb

    from advisor.cli import main

    data = _write(tmp_path, "r.csv", HEAD + "p1,q,math,small,1\np1,q,math,small,0\n")
    ladder = _write(tmp_path, "ladder.yaml", LADDER)
    store = tmp_path / "s.duckdb"
    assert main(["import", str(data), "--ladder", str(ladder), "--suite-name", "rec", "--store", str(store),
                 "--replicas"]) == 0
    con = duckdb.connect(str(store), read_only=True)
    assert sorted(con.execute("SELECT replica, overall FROM runs").fetchall()) == [(0, 100.0), (1, 0.0)]
    con.close()
