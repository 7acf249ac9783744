"""The judge sees the work (whole files within a context budget, cuts stated), tolerant verdict parsing, and
its measured agreement with deterministic checks on a real DuckDB store."""

import asyncio
import json

import pytest

from advisor.checks.agreement import latest_verifier, measure_agreement, save_agreement
from advisor.checks.judge import JudgeError, JudgeGrade, TritonJudge, parse_verdict, rubric_prompt
from advisor.checks.judge_transcript import budget_chars
from advisor.cli import main
from advisor.records import Episode, ToolCall
from advisor.store import CriterionResult, RunRecord, Store, TurnRecord, make_run_key, now
from advisor.suite import load_suite

SUITE = """\
version: 1
name: agree
classes: [{name: c}]
tasks:
  - id: t1
    class: c
    instructions: Write report.md and state the total as TOTAL <n>.
    tools: [write_file]
    instruction_following:
      - {name: states_total, description: The answer states TOTAL and a number, weight: 100,
         check: {type: regex, pattern: 'TOTAL \\d+'}}
    task_completion:
      - {name: report_written, description: A file report.md exists, weight: 100,
         check: {type: file, path: report.md}}
"""


def _suite(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    return load_suite(path)


def _episode(tmp_path, text: str) -> Episode:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.py").write_text(text)
    return Episode(final="done", stop_reason="final", calls=[ToolCall("write_file", {"path": "big.py", "content": text},
                                                                    "wrote big.py")], workspace=ws)


def _big_file() -> str:
    body = "".join(f"def f{i}(x):\n    return x + {i}\n\n" for i in range(900))
    text = body + "# THE-VERY-END: register_all()\n"
    assert len(text) > 20_000
    return text


def test_judge_transcript_contains_the_end_of_a_20kb_file(tmp_path):
    suite = _suite(tmp_path)
    task = suite.tasks[0]
    text = _big_file()
    ep = _episode(tmp_path, text)
    prompt = rubric_prompt(task.task_completion[0], task, ep, context_length=32_768)
    assert text in prompt  # the whole file, not its first 1,500 characters
    assert "THE-VERY-END: register_all()" in prompt and "Cut from this record: nothing" in prompt
    assert "Weight: 100 of the 100 points of the task completion checklist" in prompt
    # a judge with a small context still sees the end, and is told what was cut
    small = rubric_prompt(task.task_completion[0], task, ep, context_length=4_096)
    assert "THE-VERY-END: register_all()" in small and text not in small
    assert "file big.py: " in small and "characters cut from the middle" in small
    assert len(small) <= (4_096 - 512) * 3 + 200


def test_budget_follows_the_context_length():
    assert budget_chars(32_768, 512, 1_000) == (32_768 - 512) * 3 - 1_000
    assert budget_chars(None) > 20_000


@pytest.mark.parametrize("reply, score", [
    ('{"score": 0.75, "reason": "most"}', 0.75),
    ('Here is my verdict:\n```json\n{"score": 1, "reason": "ok"}\n```', 1.0),
    ("<think>maybe {\"score\": 0}</think>\n{\"score\": 0.5, \"reason\": \"half\"}", 0.5),
    ("{'score': 0.2, 'reason': 'python literal'}", 0.2),
    ('{"verdict": "pass"}', 1.0),
    ('{"passed": false, "reason": "no"}', 0.0),
    ('{"score": 8, "out_of": 10}', 0.8),
    ('{"score": "3/4"}', 0.75),
    ('{"grade": "80%"}', 0.8),
    ("The criterion is partly met.\nScore: 0.6", 0.6),
    ('{"score": 0.1} on reflection {"score": 0.9, "reason": "corrected"}', 0.9),
])
def test_verdict_shapes(reply, score):
    assert parse_verdict(reply)[0] == pytest.approx(score)


@pytest.mark.parametrize("reply", ["I think it is fine.", '{"score": 7}', '{"reason": "no score"}'])
def test_verdicts_that_do_not_parse(reply):
    with pytest.raises(JudgeError):
        parse_verdict(reply)


class _Client:
    def __init__(self, reply):
        self.reply, self.prompts = reply, []

    async def generate(self, model, prompt, max_tokens):
        self.prompts.append(prompt)
        return type("R", (), {"text": self.reply, "input_tokens": 100, "output_tokens": 10})()


def test_triton_judge_budgets_from_its_context_length(tmp_path):
    from advisor.ladder import load_ladder

    suite = _suite(tmp_path)
    task = suite.tasks[0]
    model = load_ladder("ladders/demo.yaml").rungs[0].model_copy(update={"context_length": 2_048})
    client = _Client('```json\n{"score": 1, "reason": "ok"}\n```')
    grade = asyncio.run(TritonJudge(client, model).grade(task.task_completion[0], task, _episode(tmp_path, _big_file())))
    assert grade.score == 1.0 and "THE-VERY-END" in client.prompts[0]
    assert len(client.prompts[0]) < (2_048 - 512) * 3 + 100


class _ScriptedJudge:
    """Right about files (looks at the rebuilt workspace), always lenient about the total."""

    def __init__(self):
        self.seen = []

    async def grade(self, criterion, task, episode):
        self.seen.append(criterion.check.type)
        if criterion.name == "report_written":
            return JudgeGrade(1.0 if (episode.workspace / "report.md").is_file() else 0.0, cost_usd=0.001)
        return JudgeGrade(1.0, cost_usd=0.001)


def _store_runs(store, suite):
    cases = {"a": (True, "TOTAL 5", 100.0, 100.0), "b": (False, "nothing", 0.0, 0.0),
             "c": (True, "nothing", 0.0, 100.0)}
    for key, (wrote, final, if_s, tc_s) in cases.items():
        rk = make_run_key(key)
        run = RunRecord(run_key=rk, kind="probe", suite_name=suite.name, suite_hash="h", task_id="t1",
                        task_class="c", ladder_name="demo", ladder_hash="l", rung="r", rung_position=0,
                        if_score=if_s, tc_score=tc_s, overall=(4 * if_s + 3 * tc_s) / 7, started_at=now(),
                        finished_at=now())
        turns = ([TurnRecord(0, "write_file", json.dumps({"path": "report.md", "content": "# r"}), "wrote report.md")]
                 if wrote else []) + [TurnRecord(len([1] if wrote else []), "final", "{}", final)]
        crits = [CriterionResult("if", "states_total", 100, if_s / 100), CriterionResult("tc", "report_written", 100,
                                                                                        tc_s / 100)]
        store.add_run(run, turns, crits)


def test_agreement_rates_on_a_scripted_judge(tmp_path):
    suite = _suite(tmp_path)
    judge = _ScriptedJudge()
    with Store.open(tmp_path / "a.duckdb") as store:
        _store_runs(store, suite)
        result = asyncio.run(measure_agreement(store, suite, judge, "scripted"))
        save_agreement(store, result)
        verifier, data = latest_verifier(store)
    # criteria: 3 passed (a.total, a.report, c.report), 3 failed (b.total, b.report, c.total); the lenient
    # judge passes b.total and c.total: false accept 2/3, false reject 0/3
    assert (result.criteria.positives, result.criteria.negatives) == (3, 3)
    assert result.criteria.false_accept == pytest.approx(2 / 3) and result.criteria.false_reject == 0.0
    # runs: a usable (100), b and c not (0, 42.9); judged overall a 100, b 57.1, c 100: c is a false accept
    assert result.run_level.false_accept == pytest.approx(0.5) and result.run_level.false_reject == 0.0
    assert verifier.false_accept == pytest.approx(0.5) and data["runs"] == 3
    assert set(judge.seen) == {"judge"} and result.judge_cost_usd == pytest.approx(0.006)


def test_agreement_cli_without_a_judge_role_is_one_line(tmp_path, capsys):
    (tmp_path / "suite.yaml").write_text(SUITE)
    code = main(["judge", "agreement", "--suite", str(tmp_path / "suite.yaml"), "--ladder", "ladders/demo.yaml",
                 "--store", str(tmp_path / "s.duckdb")])
    assert code != 0 and "has no judge role" in capsys.readouterr().err
    assert main(["judge", "show", "--store", str(tmp_path / "s.duckdb")]) != 0  # no store: one line
    assert "no store here yet" in capsys.readouterr().err
