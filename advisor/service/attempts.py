"""One attempt of a live request and the types around it: the request's plan, each attempt, the outcome; one
call of a rung (or a role) within the deadline, its verification (`settle`), and the failover order.

The lower layer of the service: the chain walk (`advisor.service.dispatch`), the token stream
(`advisor.service.streaming`) and the orchestrator mode (`advisor.service.orchestrated`) all call through here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from advisor.backends import FailureKind, failure_kind
from advisor.errors import BackendError
from advisor.service.chat import Reply, chat_inputs, parse_reply, render_prompt


class AttemptError(str, Enum):
    """Why an attempt gave no answer: the word its recorded `Attempt.error` starts with (and the failover
    metric's label). ``deadline``: the request's time was up before the call; ``timeout`` and ``down`` (the
    backend): a failover; ``stream broke``: tokens had been sent; ``client disconnected``: the client left."""

    DEADLINE = "deadline"
    TIMEOUT = "timeout"
    DOWN = "down"
    STREAM_BROKE = "stream broke"
    CLIENT_GONE = "client disconnected"


@dataclass
class Attempt:
    """One call of one rung."""

    rung: str
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    verified: bool = False
    accepted: bool | None = None
    verdict: str | None = None
    error: str | None = None
    failover: bool = False
    finish_reason: str | None = None
    tokens_from_server: bool = True
    error_kind: AttemptError | None = None  #: why there is no answer (`error` holds the detail too)

    def fail(self, kind: AttemptError, detail: str = "", failover: bool = False) -> "Attempt":
        """Record why the attempt gave no answer: ``error`` is "<kind>: <detail>" (as stored)."""
        self.error_kind, self.failover = kind, failover or self.failover
        self.error = f"{kind.value}: {detail}" if detail else kind.value
        return self

    @property
    def out_of_time(self) -> bool:
        """The request's deadline stopped this attempt before it was made."""
        return self.error_kind is AttemptError.DEADLINE


@dataclass
class RequestPlan:
    """The routing decision for one request."""

    decision_id: str
    text: str
    task_class: str | None
    class_source: str
    policy: str
    mode: str
    chain: list[str]
    k: int
    verifier: Any
    allowed: list[str]
    p_usable: float | None = None
    expected_cost: float | None = None
    explanation: dict = field(default_factory=dict)
    decision_s: float = 0.0
    end_user: str | None = None  #: the request's OpenAI `user` field, recorded as given
    session: Any = None  #: the agent session's step (`advisor.service.sessions.SessionStep`), if any
    shadow: dict | None = None  #: the shadow candidate's decision (`advisor.service.shadow`), recorded only


@dataclass
class Outcome:
    """What happened to one request."""

    plan: RequestPlan
    attempts: list[Attempt]
    reply: Reply | None = None
    rung: str | None = None  #: the rung whose answer is delivered
    verdict: str = "unverified"  #: accepted | rejected | unverified
    status: int = 200
    error: str | None = None

    @property
    def cost_usd(self) -> float:
        """USD of every attempt (and verifier judge calls)."""
        return sum(a.cost_usd for a in self.attempts)


def failover_order(rt, plan: RequestPlan, tried: set[str], failed: str) -> list[str]:
    """Rungs to fall back on after `failed` is down: rest of the chain, then allowed rungs above, then below."""
    names = [r.name for r in rt.ladder.rungs]
    rest = [n for n in plan.chain if n not in tried]
    at = names.index(failed)
    extra = [n for n in names[at + 1:] + names[:at][::-1] if n in plan.allowed and n not in tried and n not in rest]
    return rest + extra


def failover_kind(exc: BackendError) -> AttemptError:
    """The recorded kind of a backend failure: ``timeout`` for the seam's timeout kind, else ``down`` (the rung
    cannot answer now: unreachable, key refused, overloaded, bad output)."""
    return AttemptError.TIMEOUT if failure_kind(exc) is FailureKind.TIMEOUT else AttemptError.DOWN


def max_tokens_for(rt, req, model) -> int:
    """max_tokens of one attempt: the request's, else the rung's max_output_tokens (bounded by the config)."""
    asked = req.max_completion_tokens or req.max_tokens
    return min(asked or model.max_output_tokens, rt.config.limits.max_tokens)


async def call_rung(rt, req, plan: RequestPlan, rung: str, deadline: float) -> tuple[Attempt, Reply | None]:
    """One attempt (never raises for backend failures: the attempt records them)."""
    model = rt.rungs[rung]
    attempt, text = await call_model(rt, req, plan, model, lambda: render_prompt(model, req), deadline,
                                     chat=chat_inputs(model, req))
    return attempt, (None if text is None else parse_reply(model, text, req))


async def call_model(rt, req, plan: RequestPlan, model, prompt, deadline: float,
                     chat: dict | None = None) -> tuple[Attempt, str | None]:
    """One generation of `model` (a rung or a role) on ``prompt()``: the attempt and its text (None when it
    failed: the attempt's error says why; a timeout or a backend that is down is a failover). The call is
    counted in the metrics here (`Metrics.count_call`), for every mode."""
    attempt, text = Attempt(model.name), None
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        attempt.fail(AttemptError.DEADLINE, "no time left for this attempt")
    else:
        started = time.perf_counter()
        try:
            result = await rt.client_for(model).generate(
                model.triton_model, prompt(), max_tokens=max_tokens_for(rt, req, model), sampling=req.sampling(),
                timeout_s=min(rt.config.limits.attempt_timeout_s, remaining), request_id=plan.decision_id,
                **(chat or {}))
        except BackendError as exc:
            attempt.fail(failover_kind(exc), str(exc), failover=True)
        attempt.latency_s = time.perf_counter() - started
        if not attempt.error:
            fill_attempt(attempt, model, result)
            text = result.text or ""
    rt.metrics.count_call(attempt, rt.simulated(model.name))
    return attempt, text


def fill_attempt(attempt: Attempt, model, result) -> None:
    """Token counts, cost and finish reason of a finished generation."""
    attempt.input_tokens, attempt.output_tokens = result.input_tokens, result.output_tokens
    attempt.cost_usd = model.attempt_cost(result.input_tokens, result.output_tokens)
    attempt.finish_reason, attempt.tokens_from_server = result.finish_reason, result.tokens_from_server


async def settle(rt, plan: RequestPlan, attempt: Attempt, reply: Reply) -> str:
    """The result of an answered attempt, counted (`Metrics.count_result`): ``unverified`` without a verifier,
    else the plan's verifier's ``accepted`` or ``rejected`` (its verdict and cost noted on the attempt)."""
    if plan.verifier is None:
        word = "unverified"
    else:
        verdict = await plan.verifier.verify(reply, plan.text)
        attempt.verified, attempt.accepted, attempt.verdict = True, verdict.accepted, verdict.detail
        attempt.cost_usd += verdict.cost_usd
        word = "accepted" if verdict.accepted else "rejected"
    rt.metrics.count_result(attempt.rung, plan.task_class, word, rt.simulated(attempt.rung))
    return word


def deliver(out: Outcome, rung: str, reply: Reply, verdict: str) -> Outcome:
    """`out` delivering `reply` of `rung` with its verdict."""
    out.reply, out.rung, out.verdict = reply, rung, verdict
    return out
