"""The one attempt walker (`advisor.backends.walk_attempts`): order, retries, escalation, failover, deadline, failure
kinds and the per-step check, with scripted calls (the service and probe paths that consume it are tested with
real servers in tests/test_attempt_failures.py, tests/test_service.py and tests/test_policy_chain.py)."""

from __future__ import annotations

import asyncio
import time

from advisor.backends import BackendFailure, FailureKind, GenerationTimeout, walk_attempts
from advisor.errors import BackendError


def _walk(script: dict, chain, consume=None, **kwargs):
    """The walk's tries as (rung, number, what) with `script[rung]` a list of answers or exceptions per attempt;
    `consume(try)` returns True to accept (leave the loop)."""
    calls = {r: 0 for r in script}

    async def call(rung, remaining):
        calls[rung] += 1
        out = script[rung][min(calls[rung], len(script[rung])) - 1]
        if isinstance(out, BaseException):
            raise out
        return out

    async def go():
        seen = []
        async for t in walk_attempts(chain, call, **kwargs):
            what = (t.failure.value if t.failure else "deadline" if t.out_of_time else
                    f"rejected: {t.rejected}" if t.rejected else t.answer)
            seen.append((t.rung, t.number, what, t.last))
            if t.answered and consume is not None and consume(t):
                break
        return seen

    return asyncio.run(go())


def test_rejected_answers_are_retried_then_escalated_and_an_accepted_one_ends_the_walk():
    escalations = []
    seen = _walk({"a": ["bad"], "b": ["bad", "good"]}, ["a", "b"], consume=lambda t: t.answer == "good", tries=2,
                 on_escalate=lambda rung, to: escalations.append((rung, to)))
    assert seen == [("a", 1, "bad", False), ("a", 2, "bad", False), ("b", 1, "bad", False), ("b", 2, "good", True)]
    assert escalations == [("a", "b")]


def test_failures_are_classified_and_failed_over_or_end_the_walk():
    script = {"a": [GenerationTimeout("slow")], "b": [BackendError("refused")], "c": ["ok"],
              "d": [BackendFailure("busy", FailureKind.OVERLOADED)]}
    seen = _walk(script, ["a"], consume=lambda t: True, failover=lambda tried, rung: [n for n in "bc" if n not in tried])
    assert seen == [("a", 1, "timeout", False), ("b", 1, "down", False), ("c", 1, "ok", True)]
    assert _walk(script, ["d", "c"]) == [("d", 1, "overloaded", True)], "no failover: the walk ends"


def test_an_answer_that_failed_keeps_it():
    seen = _walk({"a": ["backend_error"], "b": ["ok"]}, ["a", "b"],
                 failed=lambda answer: FailureKind.DOWN if answer == "backend_error" else None)
    assert seen == [("a", 1, "down", True)]


def test_the_deadline_ends_the_walk_before_a_call():
    seen = _walk({"a": ["x"]}, ["a", "a"], deadline=time.monotonic() - 1)
    assert seen == [("a", 1, "deadline", True)]


def test_the_check_turns_an_answer_into_a_retry_or_an_escalation_with_its_reason():
    def check(answer):
        return None if answer.startswith("call") else f"not a tool call: {answer!r}"

    async def async_check(answer):
        return check(answer)

    script = {"a": ["", "call(x"], "b": ["call(y)"]}
    seen = _walk(script, ["a", "b"], consume=lambda t: True, check=check, check_tries=2)
    assert seen == [("a", 1, "rejected: not a tool call: ''", False), ("a", 2, "call(x", False)]
    seen = _walk(script, ["a", "b"], consume=lambda t: True, check=async_check)
    assert seen == [("a", 1, "rejected: not a tool call: ''", False), ("b", 1, "call(y)", True)]


def test_the_services_walk_applies_the_plans_step_check_and_records_the_reason():
    """A plan's per-step check (`RequestPlan.check`) refuses an answer: the attempt keeps its cost, says why in
    its verdict, and the next rung answers (scripted client: the real backends' path is the same `generate`)."""
    from pathlib import Path
    from types import SimpleNamespace

    from advisor.backends import GenerationResult
    from advisor.ladder import load_ladder
    from advisor.service.routing.attempts import RequestPlan
    from advisor.service.process.config import load_config
    from advisor.service.routing.dispatch import run
    from advisor.service.records.metrics import Metrics
    from advisor.service.api.parse import parse_request

    ladder = load_ladder(Path(__file__).resolve().parent.parent / "ladders" / "demo.yaml")
    small, mid = ladder.rungs[0], ladder.rungs[1]

    class Client:
        async def generate(self, model_id, prompt, **kw):
            text = "" if model_id == small.model_id else "Thirty days."
            return GenerationResult(text, "stop", 20, 8 if text else 0, True, 0.01, model_id)

    rt = SimpleNamespace(ladder=ladder, rungs={r.name: r for r in ladder.rungs}, config=load_config(None, ladder),
                         metrics=Metrics(), simulated=lambda name: True, client_for=lambda model: Client(),
                         settings=SimpleNamespace(served_by="scripted"))
    req = parse_request({"model": "auto", "messages": [{"role": "user", "content": "Refund window?"}]}, {})
    plan = RequestPlan("dec_x", "Refund window?", None, "given", "cascade", "single", [small.name, mid.name], 1,
                       None, [r.name for r in ladder.rungs],
                       check=lambda answer: None if answer.reply.content else "empty reply")
    out = asyncio.run(run(rt, req, plan))
    assert out.status == 200 and out.rung == mid.name and out.reply.content == "Thirty days."
    first = out.attempts[0]
    assert first.rung == small.name and first.verdict == "invalid: empty reply" and first.input_tokens == 20
    assert first.error is None and not first.failover
    text = rt.metrics.render()[0].decode()
    assert f'advisor_escalations_total{{from_rung="{small.name}",to_rung="{mid.name}"}} 1.0' in text
