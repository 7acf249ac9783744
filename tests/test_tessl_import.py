"""Import of Tessl-style scenario folders and tiles into a suite (criteria -> judge checks, IF/TC split)."""

import json
import shutil
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.errors import DataError
from advisor.importers.tessl import classify, import_tessl, rescale
from advisor.suite import load_suite

FIXTURES = Path(__file__).parent / "fixtures" / "tessl"


def test_single_scenario(tmp_path):
    out = tmp_path / "out" / "suite.yaml"
    summary = import_tessl(FIXTURES / "scenario-auth", out)
    suite = load_suite(out)
    (task,) = suite.tasks
    assert summary.tasks == 1 and summary.with_skill == 1
    assert task.task_class == "authentication" and suite.classes[0].description == "Authentication"
    assert "session-based login" in task.instructions
    assert task.has_skill and "sessions.create" in task.skill_text
    assert (out.parent / task.skill).is_file()
    assert "server.py" in task.fixtures.files
    assert [c.name for c in task.instruction_following] == ["uses_the_session_helper", "cookie_flags"]
    assert [c.name for c in task.task_completion] == ["routes_protected", "health_stays_public"]
    assert [c.weight for c in task.instruction_following] == [60.0, 40.0]
    assert [c.weight for c in task.task_completion] == [70.0, 30.0]
    assert all(c.check.type == "judge" for c in [*task.instruction_following, *task.task_completion])


def test_tile_with_evals(tmp_path):
    out = tmp_path / "suite.yaml"
    summary = import_tessl(FIXTURES / "tile-payments", out, name="payments")
    suite = load_suite(out)
    assert suite.name == "payments" and [t.id for t in suite.tasks] == ["payments-skills-scenario-1", "payments-skills-scenario-2"]
    first, second = suite.tasks
    assert first.skill == second.skill == "skills/stripe-upgrade.md" and "Stripe-Version" in first.skill_text
    assert [c.name for c in first.instruction_following] == ["pins_api_version", "idempotency_keys"]
    assert [c.name for c in first.task_completion] == ["charge_works"]
    # scenario-2 has only an outcome criterion: IF gets the stated default criterion
    assert [c.name for c in second.instruction_following] == ["instructions_followed"]
    assert summary.synthesized == 1


def test_folder_of_scenarios_and_tiles_via_cli(tmp_path, capsys):
    out = tmp_path / "s.yaml"
    assert main(["suite", "import", "tessl", str(FIXTURES), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "imported 3 scenario(s)" in text and "authentication" in text
    assert main(["suite", "validate", str(out)]) == 0


def test_split_rule_and_rescale():
    assert classify("Uses the helper", "instead of hand-rolled cookies") == "if"
    assert classify("Output correct", "returns the right total and the tests pass") == "tc"
    assert classify("Something", "") == "if"  # ties go to instruction following
    weights = rescale([1, 1, 1])
    assert abs(sum(weights) - 100) < 1e-9 and weights[0] == pytest.approx(33.3333)


def test_bad_criteria_names_the_file(tmp_path):
    bad = tmp_path / "scenario-1"
    shutil.copytree(FIXTURES / "scenario-auth", bad)
    (bad / "criteria.json").write_text(json.dumps({"type": "checklist", "items": []}))
    with pytest.raises(DataError, match=r"scenario-1/criteria.json: expected"):
        import_tessl(bad, tmp_path / "o.yaml")
    (bad / "criteria.json").write_text('{"type": "weighted_checklist", "checklist": [{"name": "a", "max_score": -1}]}')
    with pytest.raises(DataError, match=r"checklist\[0\].max_score"):
        import_tessl(bad, tmp_path / "o.yaml")


def test_missing_capability_and_empty_folder(tmp_path):
    bad = tmp_path / "scenario-1"
    shutil.copytree(FIXTURES / "scenario-auth", bad)
    (bad / "capability.txt").unlink()
    with pytest.raises(DataError, match="capability.txt: missing"):
        import_tessl(bad, tmp_path / "o.yaml")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no Tessl scenarios found"):
        import_tessl(empty, tmp_path / "o.yaml")


def test_tile_skill_path_missing(tmp_path):
    tile = tmp_path / "tile"
    shutil.copytree(FIXTURES / "tile-payments", tile)
    shutil.rmtree(tile / "skills")
    with pytest.raises(DataError, match="skill file not found"):
        import_tessl(tile, tmp_path / "o.yaml")
