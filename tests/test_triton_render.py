"""Rendering ladders into a vLLM-backend Triton model repository, and the committed triton_models/."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import ConfigError
from advisor.ladder import load_ladder
from advisor.triton.render import diff_repository, render_files, render_repository

REPO = Path(__file__).resolve().parent.parent
DEMO_LADDER = REPO / "ladders" / "demo.yaml"

NEMOTRON = REPO / "ladders" / "nemotron.yaml"
SOURCE = "ladders/nemotron.yaml"


@pytest.fixture(scope="module")
def nemotron():
    return load_ladder(NEMOTRON)


def test_committed_triton_models_is_up_to_date(nemotron):
    problems = diff_repository(nemotron, REPO / "triton_models", SOURCE)
    assert problems == [], (
        f"triton_models/ is out of date ({problems}); run: advisor triton render {SOURCE} --out triton_models")


def test_every_model_gets_vllm_config_and_engine_args(nemotron, tmp_path):
    render_repository(nemotron, tmp_path, SOURCE)
    for model in nemotron.models():
        cfg = (tmp_path / model.triton_model / "config.pbtxt").read_text()
        assert 'backend: "vllm"' in cfg
        assert "decoupled: true" in cfg
        assert "kind: KIND_MODEL" in cfg
        assert 'key: "REPORT_CUSTOM_METRICS"' in cfg and 'string_value: "true"' in cfg
        assert f'name: "{model.triton_model}"' in cfg
        args = json.loads((tmp_path / model.triton_model / "1" / "model.json").read_text())
        assert args == {"model": model.hf_id, **model.vllm}
    assert "generated" in (tmp_path / "README.md").read_text().lower()


def test_engine_args_carry_the_ladder_facts(nemotron):
    files = render_files(nemotron, SOURCE)
    super_args = json.loads(files["nemotron_3_super_120b_a12b/1/model.json"])
    assert super_args["tensor_parallel_size"] == 4 and super_args["trust_remote_code"] is True
    nano = json.loads(files["nemotron_nano_12b_v2/1/model.json"])
    assert nano["mamba_ssm_cache_dtype"] == "float32"


def test_diff_detects_edits_missing_and_stale_models(nemotron, tmp_path):
    render_repository(nemotron, tmp_path, SOURCE)
    assert diff_repository(nemotron, tmp_path, SOURCE) == []
    (tmp_path / "nemotron_nano_12b_v2" / "1" / "model.json").write_text("{}\n")
    shutil.rmtree(tmp_path / "nemotron_orchestrator_8b")
    shutil.copytree(tmp_path / "nemotron_3_nano_30b_a3b", tmp_path / "old_model")
    problems = diff_repository(nemotron, tmp_path, SOURCE)
    assert "changed nemotron_nano_12b_v2/1/model.json" in problems
    assert "missing nemotron_orchestrator_8b/config.pbtxt" in problems
    assert "stale old_model/" in problems
    render_repository(nemotron, tmp_path, SOURCE)  # re-rendering repairs all three
    assert diff_repository(nemotron, tmp_path, SOURCE) == []
    assert not (tmp_path / "old_model").exists()


def test_hand_made_folders_are_left_alone(nemotron, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.pbtxt").write_text('backend: "python"\n')
    render_repository(nemotron, tmp_path, SOURCE)
    assert (tmp_path / "mine" / "config.pbtxt").exists()


def test_simulated_ladder_is_refused():
    with pytest.raises(ConfigError, match="simulated"):
        render_files(load_ladder(DEMO_LADDER), "ladders/demo.yaml")


def test_cli_render_and_check(tmp_path, capsys):
    out = tmp_path / "repo"
    assert main(["triton", "render", str(NEMOTRON), "--out", str(out)]) == 0
    assert "wrote 11 files for 5 models" in capsys.readouterr().out
    assert main(["triton", "render", str(NEMOTRON), "--out", str(out), "--check"]) == 0
    (out / "nemotron_nano_12b_v2" / "config.pbtxt").write_text("edited\n")
    assert main(["triton", "render", str(NEMOTRON), "--out", str(out), "--check"]) == 1
    assert "changed nemotron_nano_12b_v2/config.pbtxt" in capsys.readouterr().err
    assert main(["triton", "render", str(DEMO_LADDER), "--out", str(out)]) == 2
    assert "simulated" in capsys.readouterr().err
