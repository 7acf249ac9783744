"""Checks on known good and bad outputs, IF/TC/overall arithmetic, unscored runs, and the Triton judge with a
fake client."""

import json

import pytest

from advisor.agent.fake import FakeModel, Reply
from advisor.checks import JudgeError, JudgeGrade, TritonJudge, get_check, parse_json_lenient, parse_verdict, score_episode
from advisor.checks.base import CheckError
from advisor.records import Episode, ToolCall
from advisor.ladder import Model
from advisor.suite import Criterion, Task


def _crit(check, name="c", weight=100):
    return Criterion.model_validate({"name": name, "weight": weight, "check": check})


def _ep(final="done", calls=(), api_log=(), workspace=None, stop="final", **kw):
    return Episode(final=final, stop_reason=stop, calls=list(calls), api_log=list(api_log), workspace=workspace, **kw)


async def _run(check, episode):
    crit = _crit(check)
    return (await get_check(crit.check.type)(crit.check, None, episode)).score


@pytest.mark.parametrize("check,final,expected", [
    ({"type": "regex", "pattern": r"^OK re_\d+$"}, "OK re_12", 1.0),
    ({"type": "regex", "pattern": r"^OK re_\d+$"}, "Done: re_12", 0.0),
    ({"type": "regex", "pattern": "secret", "must_match": False}, "all clear", 1.0),
    ({"type": "regex", "pattern": "secret", "must_match": False}, "the secret is", 0.0),
    ({"type": "regex", "pattern": "^answer", "flags": "im"}, "x\nANSWER: 4", 1.0),
    ({"type": "regex", "pattern": "x"}, None, 0.0),
])
async def test_regex(check, final, expected):
    assert await _run(check, _ep(final)) == expected


SCHEMA = {"type": "object", "properties": {"total": {"type": "number"}, "due": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"}},
          "required": ["total", "due"], "additionalProperties": False}


@pytest.mark.parametrize("final,expected", [
    ('{"total": 12.5, "due": "2026-12-03"}', 1.0),
    ('Here:\n```json\n{"total": 12.5, "due": "2026-12-03"}\n```', 1.0),  # lenient parse: format is IF's job
    ('{"total": "12.5", "due": "2026-12-03"}', 0.0),
    ('{"total": 12.5, "due": "3 Dec 2026"}', 0.0),
    ('{"total": 12.5, "due": "2026-12-03", "extra": 1}', 0.0),
    ("no json at all", 0.0),
])
async def test_json_schema(final, expected):
    assert await _run({"type": "json_schema", "schema": SCHEMA}, _ep(final)) == expected


@pytest.mark.parametrize("path,value,expected", [
    ("a.b", 12.5, 1.0), ("a.b", 12.50000000001, 1.0), ("a.b", 13, 0.0), ("items.1.sku", "S2", 1.0),
    ("items.5.sku", "S2", 0.0), ("flag", True, 1.0), ("flag", 1, 0.0), ("", {"a": {"b": 12.5}}, 0.0),
])
async def test_json_equals(path, value, expected):
    final = json.dumps({"a": {"b": 12.5}, "items": [{"sku": "S1"}, {"sku": "S2"}], "flag": True})
    assert await _run({"type": "json_equals", "path": path, "value": value}, _ep(final)) == expected


def test_parse_json_lenient():
    assert parse_json_lenient('prefix {"a": 1} suffix') == {"a": 1}
    with pytest.raises(ValueError):
        parse_json_lenient("nothing")


async def test_file_check_and_file_target(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out/r.md").write_text("# Report\n\n## Summary\nTotal 4310.00\n")
    ep = _ep(workspace=tmp_path)
    assert await _run({"type": "file", "path": "out/r.md", "contains": "4310.00"}, ep) == 1.0
    assert await _run({"type": "file", "path": "out/r.md", "contains": "9999"}, ep) == 0.0
    assert await _run({"type": "file", "path": "out/r.md", "equals": "# Report\n\n## Summary\nTotal 4310.00"}, ep) == 1.0
    assert await _run({"type": "file", "path": "out/missing.md"}, ep) == 0.0
    assert await _run({"type": "file", "path": "out/missing.md", "exists": False}, ep) == 1.0
    assert await _run({"type": "regex", "target": "file:out/r.md", "pattern": "^## Summary$", "flags": "m"}, ep) == 1.0
    assert await _run({"type": "regex", "target": "file:out/none.md", "pattern": "x"}, ep) == 0.0


async def test_python_check(tmp_path):
    (tmp_path / "mod.py").write_text("def f():\n    return 2\n")
    (tmp_path / "test_mod.py").write_text("from mod import f\nassert f() == 2\nprint('ALL TESTS PASSED')\n")
    (tmp_path / "test_bad.py").write_text("from mod import f\nassert f() == 3\nprint('ALL TESTS PASSED')\n")
    ep = _ep(workspace=tmp_path)
    assert await _run({"type": "python", "path": "test_mod.py", "expect": "ALL TESTS PASSED"}, ep) == 1.0
    assert await _run({"type": "python", "path": "test_bad.py", "expect": "ALL TESTS PASSED"}, ep) == 0.0
    assert await _run({"type": "python", "path": "absent.py", "expect": "x"}, ep) == 0.0


LOG = [{"method": "GET", "path": "/v1/orders/O1", "headers": {"authorization": "Bearer k"}, "json": None, "status": 200},
       {"method": "POST", "path": "/v1/refunds", "headers": {"authorization": "Bearer k", "idempotency-key": "refund-O1"},
        "json": {"order_id": "O1", "amount_cents": 1999, "lines": [{"sku": "A"}]}, "status": 200}]


@pytest.mark.parametrize("check,expected", [
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "body": {"amount_cents": 1999, "lines.0.sku": "A"}}, 1.0),
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "body": {"amount_cents": 19.99}}, 0.0),
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "header": {"Idempotency-Key": "refund-O1"}}, 1.0),
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "header": {"Idempotency-Key": "refund-O2"}}, 0.0),
    ({"type": "state", "method": "GET", "path": "/v1/orders/O\\d+", "header": {"Authorization": "Bearer .+"}}, 1.0),
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "count": 2}, 0.0),
    ({"type": "state", "method": "DELETE", "path": "/v1/.*", "must_happen": False}, 1.0),
    ({"type": "state", "method": "POST", "path": "/v1/refunds", "must_happen": False}, 0.0),
])
async def test_state(check, expected):
    assert await _run(check, _ep(api_log=LOG)) == expected


CALLS = [ToolCall("search_docs", {"query": "x"}), ToolCall("read_doc", {"doc_id": "kb-1"}),
         ToolCall("read_doc", {"doc_id": "kb-2"})]


@pytest.mark.parametrize("check,expected", [
    ({"type": "tool_call", "tool": "read_doc", "arguments": {"doc_id": "kb-2"}}, 1.0),
    ({"type": "tool_call", "tool": "read_doc", "arguments": {"doc_id": "kb-9"}}, 0.0),
    ({"type": "tool_call", "tool": "run_python"}, 0.0),
    ({"type": "tool_call", "tool": "run_python", "must_happen": False}, 1.0),
    ({"type": "tool_call", "tool": "read_doc", "max_calls": 1}, 0.0),
    ({"type": "tool_call", "tool": "read_doc", "max_calls": 2}, 1.0),
])
async def test_tool_call(check, expected):
    assert await _run(check, _ep(calls=CALLS)) == expected


async def test_calls_target():
    assert await _run({"type": "regex", "target": "calls", "pattern": '"doc_id": "kb-2"'}, _ep(calls=CALLS)) == 1.0


def _task(if_checks, tc_checks):
    return Task.model_validate({"id": "t", "class": "c", "instructions": "Do the thing.",
                                "instruction_following": if_checks, "task_completion": tc_checks})


TASK = _task([{"name": "fmt", "weight": 60, "check": {"type": "regex", "pattern": "^OK "}},
              {"name": "polite", "weight": 40, "check": {"type": "regex", "pattern": "thanks"}}],
             [{"name": "id", "weight": 100, "check": {"type": "regex", "pattern": "re_1"}}])


async def test_score_weighted_sums_and_overall():
    card = await score_episode(TASK, _ep("OK re_1"))
    assert (card.if_score, card.tc_score) == (60.0, 100.0)
    assert card.overall == pytest.approx((4 * 60 + 3 * 100) / 7)
    assert card.unscored_reason is None and [c.score for c in card.criteria] == [1.0, 0.0, 1.0]
    assert [c.checklist for c in card.criteria] == ["if", "if", "tc"]


@pytest.mark.parametrize("stop", ["max_turns", "stuck", "invalid_output", "timeout"])
async def test_runs_that_ran_out_are_scored_not_unscored(stop):
    card = await score_episode(TASK, _ep(None, stop=stop))
    assert card.unscored_reason is None and card.overall == 0.0


async def test_backend_error_is_unscored():
    card = await score_episode(TASK, _ep(None, stop="backend_error", error="connection refused"))
    assert card.overall is None and card.if_score is None and "backend_error" in card.unscored_reason


JUDGE_TASK = _task([{"name": "fmt", "weight": 100, "check": {"type": "regex", "pattern": "OK"}}],
                   [{"name": "useful", "weight": 100, "description": "The answer is useful.",
                     "check": {"type": "judge", "rubric": "1 if it answers the question."}}])


async def test_judge_criterion_without_judge_is_unscored():
    card = await score_episode(JUDGE_TASK, _ep("OK"))
    assert card.overall is None and "needs a judge" in card.unscored_reason


class _FixedJudge:
    def __init__(self, score=None, error=None):
        self.score, self.error = score, error

    async def grade(self, criterion, task, episode):
        if self.error:
            raise self.error
        return JudgeGrade(self.score, input_tokens=100, output_tokens=10, cost_usd=0.002)


async def test_judge_grades_and_costs_are_recorded():
    card = await score_episode(JUDGE_TASK, _ep("OK"), judge=_FixedJudge(0.5))
    assert card.tc_score == 50.0 and card.if_score == 100.0
    assert (card.judge_input_tokens, card.judge_output_tokens, card.judge_cost_usd) == (100, 10, 0.002)


async def test_judge_failure_is_unscored():
    card = await score_episode(JUDGE_TASK, _ep("OK"), judge=_FixedJudge(error=RuntimeError("boom")))
    assert card.overall is None and "judge failed" in card.unscored_reason


async def test_bad_check_target_is_unscored():
    task = _task([{"name": "f", "weight": 100, "check": {"type": "regex", "target": "nowhere", "pattern": "x"}}],
                 [{"name": "g", "weight": 100, "check": {"type": "regex", "pattern": "x"}}])
    card = await score_episode(task, _ep("x"))
    assert card.overall is None and "unknown target" in card.unscored_reason


def test_unknown_check_type():
    with pytest.raises(CheckError, match="Did you mean 'regex'"):
        get_check("regexp")


def _fake_client(text):
    return FakeModel([Reply(text, input_tokens=1000, output_tokens=20)])


JUDGE_MODEL = Model.model_validate({
    "name": "judge", "hf_id": "x/judge", "params_total_b": 8, "triton_model": "judge_8b", "context_length": 32768,
    "tool_call_format": "hermes", "price": {"basis": "tokens", "usd_per_m_input": 1.0, "usd_per_m_output": 2.0, "source": "t", "as_of": "2026-11"}})


async def test_triton_judge_with_fake_client():
    client = _fake_client('Verdict: {"score": 0.8, "reason": "mostly right"}')
    judge = TritonJudge(client, JUDGE_MODEL, max_tokens=64)
    card = await score_episode(JUDGE_TASK, _ep("OK", calls=[ToolCall("read_doc", {"doc_id": "kb-1"}, "text")]), judge=judge)
    assert card.tc_score == pytest.approx(80.0)
    model, prompt, max_tokens = client.calls[0].model, client.calls[0].prompt, client.calls[0].max_tokens
    assert model == "judge_8b" and max_tokens == 64
    assert "The answer is useful." in prompt and "read_doc" in prompt and "Do the thing." in prompt
    assert card.judge_input_tokens == 1000 and card.judge_cost_usd == pytest.approx(1000 * 1e-6 + 20 * 2e-6)


async def test_triton_judge_unparseable_reply_is_unscored_but_costed():
    judge = TritonJudge(_fake_client("I think it is fine."), JUDGE_MODEL)
    card = await score_episode(JUDGE_TASK, _ep("OK"), judge=judge)
    assert card.overall is None and "no JSON verdict" in card.unscored_reason
    assert card.judge_input_tokens == 1000


def test_parse_verdict():
    assert parse_verdict('{"score": 1, "reason": "ok"}') == (1.0, "ok")
    with pytest.raises(JudgeError, match="outside 0-1"):
        parse_verdict('{"score": 7}')
    with pytest.raises(JudgeError):
        parse_verdict('{"verdict": "unclear"}')  # tolerated shapes: tests/test_judge.py
