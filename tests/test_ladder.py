"""Ladder files: validation errors name the file, the key and the line; `advisor ladder show|validate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import ConfigError
from advisor.ladder import load_ladder

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"
NEMOTRON = REPO / "ladders" / "nemotron.yaml"

BASE = """\
version: 1
name: tiny
url: localhost:8001
rungs:
  - name: small
    hf_id: org/small
    params_total_b: 1
    triton_model: small
    price: {basis: tokens, usd_per_m_input: 0.1, usd_per_m_output: 0.2, source: test, as_of: "2026-11"}
    context_length: 4096
    tool_call_format: hermes
  - name: big
    hf_id: org/big
    params_total_b: 10
    triton_model: big
    price: {basis: tokens, usd_per_m_input: 0.5, usd_per_m_output: 1.0, source: test, as_of: "2026-11"}
    context_length: 4096
    tool_call_format: hermes
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ladder.yaml"
    path.write_text(text)
    return path


def _error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_ladder(path)
    return str(info.value)


def test_shipped_ladders_load():
    demo, real = load_ladder(DEMO), load_ladder(NEMOTRON)
    assert demo.simulated and all(m.simulated for m in demo.models())
    assert not real.simulated and [r.name for r in real.rungs] == [r.name for r in demo.rungs]
    assert real.roles.orchestrator is not None and real.roles.judge is not None


def test_base_ladder_is_valid(tmp_path):
    lad = load_ladder(_write(tmp_path, BASE))
    assert [r.name for r in lad.rungs] == ["small", "big"]


def test_unknown_key_names_file_key_and_line(tmp_path):
    path = _write(tmp_path, BASE.replace("    context_length: 4096\n", "    context_length: 4096\n    colour: red\n", 1))
    msg = _error(path)
    assert f"{path}:11:" in msg and "rungs.0.colour" in msg and "unknown key" in msg


def test_wrong_type_names_file_key_and_line(tmp_path):
    path = _write(tmp_path, BASE.replace("params_total_b: 10", "params_total_b: lots"))
    msg = _error(path)
    assert f"{path}:14:" in msg and "rungs.1.params_total_b" in msg


def test_duplicate_rung_name_names_file_key_and_line(tmp_path):
    path = _write(tmp_path, BASE.replace("name: big", "name: small"))
    msg = _error(path)
    assert f"{path}:12:" in msg and "rungs.1.name" in msg and "duplicate rung name 'small'" in msg


def test_missing_price_names_file_key_and_line(tmp_path):
    text = BASE.replace(
        '    price: {basis: tokens, usd_per_m_input: 0.5, usd_per_m_output: 1.0, source: test, as_of: "2026-11"}\n', "")
    msg = _error(_write(tmp_path, text))
    assert f"{tmp_path / 'ladder.yaml'}:12:" in msg and "rungs.1.price" in msg and "missing" in msg


def test_missing_price_field_names_the_nested_key(tmp_path):
    msg = _error(_write(tmp_path, BASE.replace("usd_per_m_output: 1.0, ", "")))
    assert "rungs.1.price" in msg and "usd_per_m_output" in msg and ":16:" in msg


def test_bad_yaml_and_missing_file(tmp_path):
    assert ":2: invalid YAML" in _error(_write(tmp_path, "version: 1\nname: a: b\n"))
    assert "file not found" in _error(tmp_path / "nope.yaml")


def test_cli_validate_ok_and_error(tmp_path, capsys):
    assert main(["ladder", "validate", str(DEMO)]) == 0
    assert "SIMULATED" in capsys.readouterr().out
    bad = _write(tmp_path, BASE.replace("hf_id: org/big", "hf_id: org/big\n    colour: red"))
    code = main(["ladder", "validate", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "rungs.1.colour" in err and "Traceback" not in err


def test_cli_show_table_and_json(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # rich would shorten the cells on a narrow terminal
    assert main(["ladder", "show", str(NEMOTRON)]) == 0
    out = capsys.readouterr().out
    assert "nemotron_3_super_120b_a12b" in out and "orchestrator" in out
    assert main(["ladder", "show", str(DEMO), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["simulated"] is True and [r["name"] for r in data["rungs"]] == ["nano-12b", "nano-30b", "super-120b"]
