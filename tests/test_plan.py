"""`advisor plan` / `probe --dry-run`: runs, tokens and cost per rung, the power analysis against a
hand-computed case, `suite validate` warnings, and the probe's up-front refusal on the CPU path."""

import json
import math
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.floors import wilson_interval
from advisor.ladder import load_ladder
from advisor.probe.budget import (OBSERVATION_TOKENS, REPLY_TOKENS, SYSTEM_TOKENS, cpu_path_problems, make_plan,
                                  min_runs_to_clear, replicas_needed)
from advisor.suite import load_suite

REPO = Path(__file__).resolve().parent.parent
LADDER = REPO / "ladders" / "demo.yaml"

SUITE = """\
version: 1
name: tiny
classes: [{name: solo}, {name: many}]
tasks:
  - id: s1
    class: solo
    instructions: "Write out.txt containing the word hello."
    tools: [write_file]
    instruction_following:
      - {name: said, weight: 100, check: {type: regex, pattern: hello}}
    task_completion:
      - {name: file, weight: 100, check: {type: file, path: out.txt}}
    reference:
      steps: [{tool: write_file, arguments: {path: out.txt, content: hello}}, {tool: list_files}]
      final: hello
"""


def _suite(tmp_path, extra: str = ""):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE + extra)
    return path


def test_power_analysis_matches_the_hand_computed_case():
    # all runs usable: Wilson lower bound = n / (n + z^2); z(90%) = 1.6449, z^2 = 2.7055;
    # n / (n + 2.7055) >= 0.8  <=>  n >= 4 x 2.7055 = 10.82  ->  11 runs
    z2 = 1.6448536269514722 ** 2
    assert math.ceil(4 * z2) == 11
    assert min_runs_to_clear(0.8, 0.9) == 11
    assert wilson_interval(11, 11, 0.9)[0] >= 0.8 > wilson_interval(10, 10, 0.9)[0]
    assert replicas_needed(1, 0.8, 0.9) == 11  # one task per class at 3 replicas cannot decide 0.8 at 90%
    assert replicas_needed(4, 0.8, 0.9) == 3  # ceil(11 / 4)
    # 95%: z^2 = 3.8415 -> n >= 15.37 -> 16
    assert min_runs_to_clear(0.8, 0.95) == 16
    n = min_runs_to_clear(0.8, 0.9, rate=0.9)
    assert wilson_interval(round(0.9 * n), n, 0.9)[0] >= 0.8 > wilson_interval(round(0.9 * (n - 1)), n - 1, 0.9)[0]
    assert min_runs_to_clear(0.8, 0.9, rate=0.8) is None  # a rate at the target never clears it


def test_plan_counts_runs_tokens_cost_and_power(tmp_path):
    suite, ladder = load_suite(_suite(tmp_path)), load_ladder(LADDER)
    plan = make_plan(suite, ladder, replicas=3)
    assert plan.runs == 1 * len(ladder.rungs) * 1 * 3
    # 2 reference steps -> 3 turns; 40 characters of instructions -> 10 tokens; the history grows a turn at a time
    turns, base = 3, SYSTEM_TOKENS + 10
    tin = turns * base + (REPLY_TOKENS + OBSERVATION_TOKENS) * turns * (turns - 1) // 2
    tout = turns * REPLY_TOKENS
    for row, model in zip(plan.rungs, ladder.rungs):
        assert (row.runs, row.input_tokens, row.output_tokens) == (3, 3 * tin, 3 * tout)
        assert row.cost_usd == pytest.approx(3 * model.attempt_cost(tin, tout))
    (solo,) = [c for c in plan.power if c.task_class == "solo"]
    assert (solo.tasks, solo.runs_per_cell, solo.min_runs_to_clear, solo.replicas_best_case) == (1, 3, 11, 11)
    assert not solo.can_clear and make_plan(suite, ladder, replicas=11).power[0].can_clear
    assert plan.judge_calls == 0 and plan.judge_cost_usd == 0.0 and plan.problems == []


def test_plan_cli_json_and_probe_dry_run(tmp_path, capsys):
    path = _suite(tmp_path)
    assert main(["plan", "--suite", str(path), "--ladder", str(LADDER), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["runs"] == 3 * len(load_ladder(LADDER).rungs) and body["power"][0]["min_runs_to_clear"] == 11
    db = tmp_path / "p.duckdb"
    assert main(["probe", "--dry-run", "--suite", str(path), "--store", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == body["runs"] and not db.exists()


JUDGED = """\
  - id: j1
    class: many
    instructions: "Explain the change."
    tools: [write_file]
    instruction_following:
      - {name: clear, weight: 100, check: {type: judge, rubric: clear}}
    task_completion:
      - {name: file, weight: 100, check: {type: file, path: out.txt}}
"""


def test_cpu_path_problems_and_the_up_front_refusal(tmp_path, capsys):
    path = _suite(tmp_path, JUDGED)
    problems = cpu_path_problems(load_suite(path), load_ladder(LADDER))
    assert len(problems) == 2 and "no judge role" in problems[0] and "no reference trajectory" in problems[1]
    assert cpu_path_problems(load_suite(path), load_ladder(LADDER), tasks=["s1"]) == []
    db = tmp_path / "p.duckdb"
    code = main(["probe", "--suite", str(path), "--store", str(db), "--no-report"])
    err = capsys.readouterr().err
    assert code == 2 and "probe refused before any run" in err and "advisor plan" in err and "--url" in err
    assert not db.exists()  # nothing was run or stored


def test_suite_validate_warns(tmp_path, capsys):
    path = _suite(tmp_path, JUDGED)
    assert main(["suite", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert "class 'solo' has 1 task(s)" in out and "fewer than the 11 needed" in out
    assert "1 task(s) have no reference trajectory" in out and "j1" in out
    assert "every criterion is judge-graded" not in out
