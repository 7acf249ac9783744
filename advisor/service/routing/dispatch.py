"""One live request: decide -> call the rung -> verify -> retry, escalate or fail over, within a deadline.

The decision: an episodic policy the service serves (``model: "orchestrator"``: `advisor.service.routing.served`)
decides as the request runs; ``model: "auto"`` asks the routing policy (a policy of
`advisor.router.routing.policies.POLICIES` over the learned router, through `route_one`: the config's
``routing.policy`` or the artifact's default; for a class with a fixed ``chain`` in the service config, the
``chain`` policy); a rung name pins that rung (no routing, still recorded). The chain is then walked
(`advisor.service.routing.attempts.walk_plan`, the seam's one attempt walker): each rung is tried up to k times (the
class's ``retries``) while its verifier rejects the answer, then the next rung is tried (an escalation). A rung
that is down or times out is skipped (a **failover**, counted apart from quality failures): the next rung of the
chain, else the other allowed rungs above it, then below it. The request never runs past its end-to-end
deadline. The answer delivered is the first accepted one, or the last one with verdict ``rejected``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from contextlib import aclosing
from typing import Any

from advisor.backends import time_limit
from advisor.errors import RouterError, did_you_mean
from advisor.router.routing.route import route_one
from advisor.router.routing.rule import PolicyConfig, Preferences
from advisor.scores import VerifierErrors
from advisor.service.routing.attempts import (Outcome, RequestPlan, deliver, max_tokens_for, recorded, rung_call, settle,
                                      unanswered, walk_plan)
from advisor.service.api.chat import Reply, request_text
from advisor.service.routing.load import apply as apply_load
from advisor.service.api.request import RequestError
from advisor.service.routing.served import served_policies, served_policy
from advisor.service.sessions.steps import route_session, session_columns
from advisor.service.routing.shadow import shadow_columns, shadow_decide
from advisor.service.routing.context_window import fitting
from advisor.service.checks.step_check import (broken_kinds, count_broken, is_soft, needs_check, retry_request,
                                        step_checker)
from advisor.store import now, text_hash


# ----------------------------------------------------------------------------------------------- deciding
def decide(rt, req, key) -> RequestPlan:
    """The plan for a validated request (RequestError 404/403/400 for unknown or forbidden rungs)."""
    started = time.perf_counter()
    text = request_text(req)
    prefs = req.advisor
    if prefs is not None and prefs.task_class:
        task_class, source = prefs.task_class, "given"
    else:
        task_class, source = rt.config.predict_class(text)
    ccfg = rt.config.class_config(task_class)
    verifier = rt.verifier_for(task_class)
    names = [r.name for r in rt.ladder.rungs]
    allowed = [n for n in names if key is None or key.may_use(n)]
    if prefs is not None and prefs.rungs:
        for n in prefs.rungs:
            if n not in names:
                raise RequestError(f"unknown rung {n!r} in advisor.rungs.{did_you_mean(n, names)}", param="advisor.rungs")
        allowed = [n for n in allowed if n in prefs.rungs]
    if req.model == "auto":  # a rung that cannot hold the prompt and its output is passed over (400 when none can)
        allowed = fitting(rt, req, allowed, max_tokens_for)
        if ccfg.chain and not set(ccfg.chain) & set(allowed):  # the class's chain: its own rungs or none
            fitting(rt, req, [n for n in ccfg.chain if key is None or key.may_use(n)], max_tokens_for)
    elif req.model in rt.rungs:
        fitting(rt, req, [req.model], max_tokens_for)
    plan = RequestPlan("dec_" + uuid.uuid4().hex, text, task_class, source, "", "", [], ccfg.retries if verifier else 1,
                verifier, allowed, end_user=req.user)
    served = served_policy(rt, req.model)
    if served is not None:
        served.plan(rt, req, plan)  # an episodic policy (advisor.service.routing.served) decides as the request runs
    elif req.model != "auto":
        if req.model not in names:
            policies = ["auto", *served_policies(rt)]
            raise RequestError(f"the model {req.model!r} does not exist: use {' or '.join(map(repr, policies))} or a "
                               f"rung.{did_you_mean(req.model, [*policies, *names])}",
                               status=404, param="model", code="model_not_found")
        if key is not None and not key.may_use(req.model):
            raise RequestError(f"this API key may not use rung {req.model!r}", status=403, param="model",
                               code="rung_not_allowed", kind="permission_error")
        if prefs is not None and prefs.rungs and req.model not in prefs.rungs:
            raise RequestError(f"the model {req.model!r} is not among advisor.rungs ({', '.join(prefs.rungs)}): pin a "
                               f"rung of them, or send model 'auto'", param="advisor.rungs")
        plan.policy, plan.mode, plan.chain = "pinned", "pinned", [req.model]
        plan.p_usable = _p_of(rt, text, task_class, req.model)
    else:
        if not route_session(rt, req, plan, key, lambda: decide_auto(rt, req, plan, ccfg, key)):
            decide_auto(rt, req, plan, ccfg, key)
        apply_load(rt, req, plan)  # a first rung whose expected wait breaks the deadline is passed over
        if rt.config.shadow is not None:  # the candidate decides beside (advisor.service.routing.shadow); not applied
            try:
                shadow_decide(rt, plan, *policy_inputs(rt, req, plan, ccfg, key))
            except RequestError:
                pass
    if needs_check(req, rt.config.api):  # an agent step or JSON asked for: checked before the client sees it
        plan.check, plan.check_tries = step_checker(req, rt.config.api), 1 + rt.config.api.step_retries
    plan.decision_s = time.perf_counter() - started
    rt.metrics.decision_seconds.observe(plan.decision_s)
    return plan


def decide_auto(rt, req, plan: RequestPlan, ccfg, key) -> None:
    """The ``model: "auto"`` decision, by a routing policy: ``chain`` with the class's configured ``chain`` when it
    has one, else the service's routing policy."""
    if ccfg.chain:
        if key is not None and not any(key.may_use(n) for n in ccfg.chain):
            _forbidden()
        _route(rt, req, plan, ccfg, key, policy="chain", rungs=tuple(ccfg.chain))
    else:
        _route(rt, req, plan, ccfg, key, policy=rt.policy_name)


def _forbidden() -> None:
    raise RequestError("this API key may not use any rung of the chain", status=403, code="rung_not_allowed",
                       kind="permission_error")


def _p_of(rt, text: str, task_class: str | None, rung: str) -> float | None:
    if rung not in rt.router.rung_names:
        return None
    return float(rt.router.predict_one(text, task_class)[rt.router.rung_names.index(rung)])


def _route(rt, req, plan: RequestPlan, ccfg, key, policy: str | None, **params) -> None:
    config, p = policy_inputs(rt, req, plan, ccfg, key)
    try:
        # explain=False: the plan's explanation keeps no candidate list, so none is built
        d = route_one(rt.router, plan.text, plan.task_class, config, p, policy=policy, explain=False, **params)
    except RouterError as exc:
        raise RequestError(str(exc), param="advisor") from None
    plan.policy, plan.mode, plan.chain = f"{d.policy}:{rt.router.version_tag}", config.mode, list(d.chain)
    plan.p_usable, plan.expected_cost = d.p_usable, d.expected_cost
    plan.explanation = {"rule": d.rule, "reason": d.reason, "probabilities": d.probabilities,
                        "excluded": d.excluded, "expected_cost_usd": d.expected_cost, "p_usable": d.p_usable}
    if policy != "chain":  # a configured chain is taken as written
        never_usable(rt, plan, config, d.probabilities)


#: a P(usable) below this is "predicted never usable": the router's floor for a rung that never passed a class's
#: runs is 0.001 (`advisor.router.training.linear.class_rates`), a calibrated model's can be 0
NEVER_USABLE = 5e-3


def never_usable(rt, plan: RequestPlan, config, probabilities: dict[str, float]) -> None:
    """A policy's first rung predicted never to be usable is not taken while another allowed rung is predicted
    usable at all: the cheapest such rung (the ladder's order) leads the chain instead, and the explanation says so.
    (A target of 0 lets the cheapest rung "meet" it with P(usable) 0: its answer is predicted nonsense.)"""
    first = plan.chain[0] if plan.chain else None
    if first is None or probabilities.get(first, 1.0) >= NEVER_USABLE:
        return
    usable = [n for n in (r.name for r in rt.ladder.rungs)
              if n in plan.allowed and probabilities.get(n, 0.0) >= NEVER_USABLE]
    if not usable:
        return
    plan.chain = [usable[0], *(n for n in plan.chain if n != usable[0])][: max(len(plan.chain), 1)]
    if config.mode == "single":
        plan.chain = plan.chain[:1]
    plan.p_usable = probabilities[usable[0]]
    plan.explanation["never_usable"] = f"{first}: P(usable) {probabilities[first]:.4f}; {usable[0]} leads instead"


def policy_inputs(rt, req, plan: RequestPlan, ccfg, key) -> tuple[PolicyConfig, Preferences]:
    """The routing policy's settings and the request's preferences (RequestError when no rung is allowed)."""
    prefs = req.advisor
    routing = rt.config.routing
    config = PolicyConfig(mode="escalate" if plan.verifier else "single", k=ccfg.retries,
                          verifier=rt.policy_verifier(plan.task_class) if plan.verifier else VerifierErrors(),
                          target=prefs.target if prefs and prefs.target is not None else routing.target,
                          max_chain=routing.max_chain, order=routing.order,
                          value_usd=prefs.value_usd if prefs else None)
    allowed = [n for n in plan.allowed if n in rt.router.rung_names]
    if prefs is not None and prefs.max_cost_usd is not None:
        costs = rt.router.attempt_costs([plan.text])[0]
        allowed = [n for n in allowed if costs[rt.router.rung_names.index(n)] <= prefs.max_cost_usd]
    if not allowed:
        if key is not None and not any(key.may_use(n) for n in rt.router.rung_names):
            _forbidden()
        raise RequestError("no rung is allowed by this request's preferences (advisor.rungs, max_cost_usd and the "
                           "API key's rungs)", param="advisor")
    return config, Preferences(allowed=allowed, self_hosted_only=bool(prefs and prefs.self_hosted_only),
                               max_latency_s=prefs.max_latency_s if prefs else None)


async def run(rt, req, plan: RequestPlan) -> Outcome:
    """Walk the plan's chain (see the module docstring) and return the outcome (never past the deadline)."""
    deadline = time.monotonic() + rt.config.limits.deadline_s
    served = served_policy(rt, plan.mode)
    if served is not None:
        return await served.run(rt, req, plan, deadline)
    out = Outcome(plan, [])
    last: tuple[str, Reply] | None = None
    soft: tuple[str, Reply] | None = None  #: the last well-formed step a better rung may improve on (`SOFT_KINDS`)
    if plan.check is None:  # nothing to check (no tools, no JSON asked): the plan's walk as it is
        walk, call = plan, rung_call(rt, req, plan)
    else:
        retries = BrokenRetries(rt, req, plan)
        walk, call = dataclasses.replace(stepped_up(rt, plan), check=retries.check), retries.call
    async with aclosing(walk_plan(rt, walk, deadline, call)) as tries:
        async for t in tries:
            answer = t.answer if t.failure is None else None
            out.attempts.append(recorded(rt, t, rt.rungs[t.rung], answer and answer.result))
            if t.rejected is not None:
                count_broken(rt, t.rung, t.rejected)
                if is_soft(t.rejected):
                    soft = (t.rung, answer.reply)
            if not t.answered:
                continue  # failed, out of time or refused by the check: the walk says what comes next
            last = (t.rung, answer.reply)
            word = await settle(rt, plan, out.attempts[-1], answer.reply)
            if word != "rejected":
                return deliver(out, t.rung, answer.reply, word)
    if last is not None:
        return deliver(out, last[0], last[1], "rejected")
    if soft is not None:  # every rung tried gave up, or was cut at its own cap: the last one is the answer
        attempt = next(a for a in reversed(out.attempts) if a.rung == soft[0])
        return deliver(out, soft[0], soft[1], await settle(rt, plan, attempt, soft[1]))
    if broken_kinds(out.attempts) and not any(a.out_of_time for a in out.attempts):
        out.status = 502
        out.error = "no rung gave a well-formed step (" + "; ".join(
            f"{a.rung}: {a.verdict[len('invalid: '):]}" for a in out.attempts if a.verdict) + ")"
        return out
    return unanswered(rt, out)


def stepped_up(rt, plan: RequestPlan) -> RequestPlan:
    """The plan the walk follows: a single-rung plan with a step check goes on, after its rung's broken steps, to
    the allowed rungs above it (a broken step escalates within the request: `advisor.service.checks.step_check`); the
    decided plan (its chain as recorded) is left as it is."""
    if plan.mode != "single" or not plan.chain:
        return plan
    names = [r.name for r in rt.ladder.rungs]
    last = plan.chain[-1]
    above = [n for n in names[names.index(last) + 1:] if n in plan.allowed and n not in plan.chain]
    return dataclasses.replace(plan, chain=[*plan.chain, *above]) if above else plan


class BrokenRetries:
    """The walk's `call` and per-step check for one request: a try that follows a broken step on the same rung
    moves the seed on (`retry_request`: a seeded model would write the same broken step again); a retry after a
    verifier's rejection keeps the request's seed."""

    def __init__(self, rt, req, plan: RequestPlan):
        self.rt, self.req, self.plan = rt, req, plan
        self.rung: str | None = None
        self.broken: dict[str, int] = {}

    async def call(self, rung: str, remaining: float):
        """A rung's generation on the request (the seed moved on by the rung's broken steps so far)."""
        self.rung = rung
        return await rung_call(self.rt, retry_request(self.req, self.broken.get(rung, 0)), self.plan)(rung, remaining)

    def check(self, answer) -> str | None:
        """The plan's check, counting the broken steps of the rung just called."""
        reason = self.plan.check(answer)
        if reason is not None:
            self.broken[self.rung] = self.broken.get(self.rung, 0) + 1
        return reason


async def run_with_deadline(rt, req, plan: RequestPlan) -> Outcome:
    """`run` bounded by the end-to-end deadline (a verifier or judge that hangs cannot hold the request).

    The bound runs in the request's own task (``asyncio.timeout``), not in a task of its own as
    ``asyncio.wait_for`` would on Python 3.11: one task less and fewer event-loop turns per request."""
    try:
        async with time_limit(rt.config.limits.deadline_s + 1.0):
            return await run(rt, req, plan)
    except asyncio.TimeoutError:
        return Outcome(plan, [], status=504, error=f"the request ran out of its {rt.config.limits.deadline_s:g}s deadline")


# ----------------------------------------------------------------------------------------------- recording
def records(rt, out: Outcome, key, started_at, latency_s: float, attempts_at=None) -> list[dict[str, Any]]:
    """The decision row and one row per attempt, as the store's columns (attempts created at `attempts_at`,
    default now)."""
    plan = out.plan
    status = "ok" if out.status == 200 and out.verdict != "rejected" else (
        "rejected" if out.status == 200 else "error")
    sim = any(rt.simulated(a.rung) for a in out.attempts) or (bool(plan.chain) and rt.simulated(plan.chain[0]))
    decision = {
        "record": "decision", "decision_id": plan.decision_id, "created_at": started_at,
        "request_hash": text_hash(plan.text), "prompt_text": plan.text if rt.config.record.store_prompts else None,
        "task_class": plan.task_class, "policy": plan.policy, "mode": plan.mode,
        "chosen_rung": plan.chain[0] if plan.chain else "", "expected_cost": plan.expected_cost,
        "p_usable": plan.p_usable, "router_version": rt.router.version_tag,
        "explanation_json": json.dumps(plan.explanation, default=str), "class_source": plan.class_source,
        "chain_json": json.dumps(plan.chain), "final_rung": out.rung, "status": status, "http_status": out.status,
        "attempts": len(out.attempts), "failovers": sum(a.failover for a in out.attempts),
        "total_cost_usd": out.cost_usd, "latency_s": latency_s, "simulated": sim,
        "api_key": key.name if key is not None else None, "end_user": plan.end_user, "worker": rt.worker,
        **session_columns(plan), **shadow_columns(plan)}
    step = {"session_id": plan.session.session_id, "session_step": plan.session.step} if plan.session else {}
    rows = [decision]
    for i, a in enumerate(out.attempts, start=1):
        rows.append({"record": "attempt", "decision_id": plan.decision_id, "attempt": i, "rung": a.rung,
                     "input_tokens": a.input_tokens, "output_tokens": a.output_tokens, "cost_usd": a.cost_usd,
                     "latency_s": a.latency_s, "verified": a.verified, "accepted": a.accepted, "error": a.error,
                     "created_at": attempts_at or now(), "simulated": rt.simulated(a.rung), "failover": a.failover,
                     "finish_reason": a.finish_reason, "verdict": a.verdict,
                     "tokens_from_server": a.tokens_from_server, **step})
    return rows
