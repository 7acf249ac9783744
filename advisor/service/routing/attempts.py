"""The attempts of a live request and the types around them: the request's plan, each attempt, the outcome; the
plan's walk (`walk_plan`: the seam's one attempt walker, `advisor.backends.walk`, with the plan's chain, tries,
failover order and escalation count), one attempt's record (`recorded`), its verification (`settle`).

The lower layer of the service: the chain walk (`advisor.service.routing.dispatch`), the token stream
(`advisor.service.http.streaming`) and the orchestrator mode (`advisor.service.routing.orchestrated`) all walk through here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, AsyncIterator, NamedTuple

from advisor.backends import FailureKind, Try, backend_kind, walk_attempts
from advisor.backends.walk import Call, Check, one_attempt
from advisor.redaction import without_urls
from advisor.service.api.chat import Reply, chat_inputs, parse_reply, render_prompt
from advisor.service.routing.context_window import is_overflow, too_long
from advisor.verifier.base import judges


class AttemptError(str, Enum):
    """Why an attempt gave no answer: the word its recorded `Attempt.error` starts with (and the failover
    metric's label). ``deadline``: the request's time was up before the call; ``timeout`` and ``down`` (the
    backend): a failover; ``stream broke``: tokens had been sent, so no failover (the error goes on with the
    backend's kind: ``stream broke: timeout: ...``); ``client disconnected``: the client left."""

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

    def fail(self, kind: AttemptError, detail: str = "", failover: bool = False,
             backend: FailureKind | None = None) -> "Attempt":
        """Record why the attempt gave no answer: ``error`` is "<kind>: <detail>" (as stored), with the backend's
        own kind of failure after the word when it says more ("down: key refused: ...", "stream broke: timeout:
        ...")."""
        self.error_kind, self.failover = kind, failover or self.failover
        if backend is not None and backend.value != kind.value:
            detail = f"{backend.value}: {detail}"
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
    session: Any = None  #: the agent session's step (`advisor.service.sessions.latch.SessionStep`), if any
    shadow: dict | None = None  #: the shadow candidate's decision (`advisor.service.routing.shadow`), recorded only
    #: the per-step check the walk runs on every answer before it counts (`advisor.backends.walk`: ``check(Answer)
    #: -> None | reason``; a reason retries the rung, `check_tries` times at most, then escalates)
    check: Check | None = None
    check_tries: int = 1


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
    code: str | None = None  #: the error's OpenAI code when it is not the status's own (context_length_exceeded)

    @property
    def cost_usd(self) -> float:
        """USD of every attempt (and verifier judge calls)."""
        return sum(a.cost_usd for a in self.attempts)


class Answer(NamedTuple):
    """What a rung answered on the buffered path: the generation and its reply as an OpenAI message."""

    result: Any  #: `advisor.backends.GenerationResult`
    reply: Reply


def failover_order(rt, plan: RequestPlan, tried: set[str], failed: str) -> list[str]:
    """Rungs to fall back on after `failed` is down: rest of the chain, then allowed rungs above, then below."""
    names = [r.name for r in rt.ladder.rungs]
    rest = [n for n in plan.chain if n not in tried]
    at = names.index(failed)
    extra = [n for n in names[at + 1:] + names[:at][::-1] if n in plan.allowed and n not in tried and n not in rest]
    return rest + extra


def failover_kind(kind: FailureKind) -> AttemptError:
    """The recorded kind of a backend failure: ``timeout`` for the seam's timeout kind, else ``down`` (the rung
    cannot answer now: unreachable, key refused, overloaded, bad output)."""
    return AttemptError.TIMEOUT if kind is FailureKind.TIMEOUT else AttemptError.DOWN


def max_tokens_for(rt, req, model) -> int:
    """max_tokens of one attempt: the request's, else the rung's max_output_tokens (bounded by the config)."""
    asked = req.max_completion_tokens or req.max_tokens
    return min(asked or model.max_output_tokens, rt.config.limits.max_tokens)


def walk_plan(rt, plan: RequestPlan, deadline: float, call: Call, checked: bool = True) -> AsyncIterator[Try]:
    """The plan's attempts (`advisor.backends.walk_attempts`): its chain, `plan.k` tries a rung, failover to
    `failover_order` unless the rung is pinned, escalations counted, and (when `checked`: the answers are
    `Answer`s) the plan's per-step check."""
    failover = None if plan.mode == "pinned" else (lambda tried, rung: failover_order(rt, plan, tried, rung))
    check = plan.check if checked else None
    return walk_attempts(plan.chain, call, tries=plan.k, deadline=deadline, failover=failover, check=check,
                         check_tries=plan.check_tries,
                         on_escalate=lambda rung, to: rt.metrics.child(rt.metrics.escalations, rung, to).inc())


def generation_args(rt, req, plan: RequestPlan, model, remaining: float) -> dict[str, Any]:
    """The keyword arguments of one attempt's `generate` / `generate_stream` (the time limit: the attempt's
    bound or what is left of the deadline)."""
    return {"max_tokens": max_tokens_for(rt, req, model), "sampling": req.sampling(),
            "timeout_s": min(rt.config.limits.attempt_timeout_s, remaining), "request_id": plan.decision_id}


def rung_call(rt, req, plan: RequestPlan) -> Call:
    """The buffered path's `call` for the walk: a rung's generation on the request, parsed (an `Answer`)."""
    async def call(rung: str, remaining: float) -> Answer:
        model = rt.rungs[rung]
        result = await rt.client_for(model).generate(model.model_id, render_prompt(model, req),
                                                     **generation_args(rt, req, plan, model, remaining),
                                                     **chat_inputs(model, req))
        return Answer(result, parse_reply(model, result.text or "", req))
    return call


def recorded(rt, t: Try, model=None, result=None) -> Attempt:
    """The attempt record of a walked `Try` (with `result`'s counts and cost when it answered), counted in the
    metrics (`Metrics.count_call`), for every mode. A rung's reply the per-step check refused keeps its cost and
    says why in ``verdict`` (``invalid: <reason>``)."""
    attempt = Attempt(t.rung, latency_s=t.latency_s)
    if t.out_of_time:
        attempt.fail(AttemptError.DEADLINE, t.error)
    elif t.failure is not None:
        attempt.fail(failover_kind(t.failure), t.error, failover=True, backend=t.failure)
    elif result is not None:
        fill_attempt(attempt, model, result)
        if t.rejected is not None:
            attempt.verdict = f"invalid: {t.rejected}"
    rt.metrics.count_call(attempt, rt.simulated(t.rung))
    return attempt


async def call_rung(rt, req, plan: RequestPlan, rung: str, deadline: float) -> tuple[Attempt, Reply | None]:
    """One attempt of a rung (never raises for backend failures: the attempt records them)."""
    t = await one_attempt(rung, rung_call(rt, req, plan), deadline=deadline)
    answer = t.answer if t.answered else None
    return recorded(rt, t, rt.rungs[rung], answer and answer.result), answer and answer.reply


async def call_model(rt, req, plan: RequestPlan, model, prompt: str, deadline: float) -> tuple[Attempt, str | None]:
    """One generation of the role `model` on `prompt`: the attempt and its text (None when it failed: the
    attempt's error says why)."""
    async def call(name: str, remaining: float):
        return await rt.client_for(model).generate(model.model_id, prompt,
                                                   **generation_args(rt, req, plan, model, remaining))

    t = await one_attempt(model.name, call, deadline=deadline)
    result = t.answer if t.answered else None
    return recorded(rt, t, model, result), (None if result is None else result.text or "")


def fill_attempt(attempt: Attempt, model, result) -> None:
    """Token counts, cost and finish reason of a finished generation."""
    attempt.input_tokens, attempt.output_tokens = result.input_tokens, result.output_tokens
    attempt.cost_usd = model.attempt_cost(result.input_tokens, result.output_tokens)
    attempt.finish_reason, attempt.tokens_from_server = result.finish_reason, result.tokens_from_server


def unanswered(rt, out: Outcome) -> Outcome:
    """`out` when no rung answered: 504 when the deadline stopped the walk, else 503, and why."""
    timed_out = any(a.out_of_time for a in out.attempts)
    if out.attempts and not timed_out and all(is_overflow(a.error) for a in out.attempts):
        refused = too_long(None, max(rt.rungs[a.rung].window for a in out.attempts))
        out.status, out.error, out.code = 400, str(refused), refused.code
        return out
    out.status = 504 if timed_out else 503
    errors = attempt_errors(out.attempts)
    out.error = (f"the request ran out of its {rt.config.limits.deadline_s:g}s deadline ({errors})" if timed_out else
                 f"no rung could answer: {errors or 'nothing tried'}." + triton_hint(rt, out.attempts))
    return out


def attempt_errors(attempts) -> str:
    """The attempts' errors as a client reads them: each names its rung, without the addresses behind it."""
    return "; ".join(f"{a.rung}: {without_urls(a.error or '')}" for a in attempts)


def triton_hint(rt, attempts) -> str:
    """" Is Triton up?" when a rung that failed is served by a server advisor watches (`BackendKind.server`; the
    embedded one named), else nothing."""
    servers = sorted({backend_kind(rt.rungs[a.rung]).server for a in attempts if a.rung in rt.rungs} - {""})
    if not servers:
        return ""
    return "".join(f" Is {s} (embedded) up?" if rt.settings.served_by == "embedded" else f" Is {s} up?" for s in servers)


async def settle(rt, plan: RequestPlan, attempt: Attempt, reply: Reply) -> str:
    """The result of an answered attempt, counted (`Metrics.count_result`): ``unverified`` without a verifier or
    for a tool-call step the verifier does not judge (`advisor.verifier.judges`: a class's answer checks judge
    answers), else the plan's verifier's ``accepted`` or ``rejected`` (its verdict and cost noted on the attempt)."""
    if plan.verifier is None or not judges(plan.verifier, reply):
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
