"""The bundled example suite: size and shape, and every reference trajectory replayed through a real
Environment and scored: final -> 100/100; final_sloppy (also without the `how` steps) keeps TC and loses IF;
final_wrong loses TC; doing nothing fails the code tasks' tests."""

from collections import Counter
from pathlib import Path

import pytest

from advisor.checks import score_episode
from advisor.checks.selftest import replay, selftest_task
from advisor.records import Episode
from advisor.suite import load_suite
from advisor.tools import Environment, available_tools

SUITE = Path(__file__).resolve().parents[1] / "suites" / "example" / "suite.yaml"
_suite = load_suite(SUITE, set(available_tools()))


def test_shape():
    classes = Counter(t.task_class for t in _suite.tasks)
    assert len(_suite.tasks) >= 40
    assert len(classes) >= 5 and min(classes.values()) >= 8
    assert sum(t.has_skill for t in _suite.tasks) * 2 >= len(_suite.tasks)
    for task in _suite.tasks:
        assert task.reference is not None and task.reference.final_sloppy and task.reference.final_wrong
        for criterion in [*task.instruction_following, *task.task_completion]:
            assert criterion.check.type != "judge", f"{task.id}/{criterion.name} needs a judge"


def test_multi_step_tasks_are_longer():
    steps = {c: [len(t.reference.steps) for t in _suite.tasks if t.task_class == c] for c in {t.task_class for t in _suite.tasks}}
    assert min(steps["multi_step"]) >= 5 and max(steps["multi_step"]) <= 8
    for short in ("api_calls", "doc_retrieval", "extraction"):
        assert max(steps[short]) <= 3


@pytest.mark.parametrize("task", _suite.tasks, ids=lambda t: t.id)
async def test_reference_selftest(task, tmp_path):
    result = await selftest_task(task, tmp_path)
    assert result.ok, result.problems


@pytest.mark.parametrize("task", _suite.tasks, ids=lambda t: t.id)
async def test_sloppy_with_all_steps_keeps_tc(task, tmp_path):
    card = await replay(task, tmp_path, "final_sloppy", how_steps=True)
    assert card.tc_score == 100 and card.if_score < 100


@pytest.mark.parametrize("task", [t for t in _suite.tasks if t.task_class == "code_change"], ids=lambda t: t.id)
async def test_untouched_code_fails_its_tests(task, tmp_path):
    env = Environment.create(task, tmp_path)
    card = await score_episode(task, Episode(final=task.reference.final, stop_reason="final", workspace=env.workspace))
    env.close()
    assert card.tc_score < 100


@pytest.mark.slow
def test_cli_selftest(capsys):
    from advisor.cli import main

    assert main(["suite", "validate", "--selftest", str(SUITE)]) == 0
    assert f"self-test: {len(_suite.tasks)}/{len(_suite.tasks)} references behave as designed" in capsys.readouterr().out
