"""``model: "orchestrator"``: the ladder's orchestrator role picks the rung that answers a live request.

The same policy as ``advisor probe --policy orchestrator`` (`advisor.orchestrator.loop`), for one turn of a
client's conversation: the orchestrator sees the request's messages and tools plus ``call_expert(expert)``
(the rungs the request may use, under their aliases, with the price table: `advisor.orchestrator.experts`),
with the request's preferences in its system prompt (`advisor.orchestrator.prompt.render_preferences`).

- A ``call_expert`` call hands the turn to that rung: the rung gets the client's own conversation and tools
  (rendered as for any pinned rung) and its reply **replaces** the orchestrator's turn, as in the probe.
- A reply without ``call_expert`` (the orchestrator answered, or called one of the client's tools) is
  delivered as the orchestrator's own reply.
- A reply that does not parse, or names an alias not offered, is repeated up to `MAX_INVALID` times in all;
  after that the request fails with 502 and says why.
- With a class verifier, the delivered reply is verified once (verdict recorded and returned in
  ``x-advisor-verdict``); the orchestrator is not asked again (no retry loop in this mode).

Every model call is one recorded attempt (the orchestrator's under its role name, the expert's under its rung)
with the server's token counts, so the request's cost is the orchestrator's tokens plus the expert's. Each is
counted in the metrics as in any other mode (`Metrics.count_call` and `Metrics.count_result`): the
orchestrator's own answers that handed the turn over or did not parse as ``unverified``, the delivered
answer with its verdict, so verified answers reach the drift gauges too.
Streaming is refused for this model (the expert is only known once the orchestrator has answered).

The service serves it as the episodic policy ``orchestrator`` of ``POLICIES`` (registered in
`advisor.service.routing.served.SERVED`).
"""

from __future__ import annotations

from typing import Any

from advisor.agent.formats import format_for
from advisor.orchestrator.experts import expert_tool, experts_for, handoff
from advisor.orchestrator.prompt import orchestrator_prompt, render_preferences
from advisor.router.routing.rule import Preferences
from advisor.service.routing.attempts import Attempt, Outcome, RequestPlan, call_model, call_rung, settle
from advisor.service.api.chat import parse_reply, render_prompt, tool_specs
from advisor.service.api.request import Message, RequestError
from advisor.service.routing.served import SERVED, ServedPolicy

MODEL_ID = "orchestrator"  #: the model name clients ask for
MAX_INVALID = 2  #: orchestrator replies that may fail to parse before the request fails


def serves_orchestrator(rt: Any) -> bool:
    """True when the ladder has an orchestrator role (``GET /v1/models`` then lists `MODEL_ID`)."""
    return rt.ladder.roles.orchestrator is not None


def plan_orchestrated(rt: Any, req: Any, plan: RequestPlan) -> None:
    """Fill `plan` for a ``model: "orchestrator"`` request (the rung is chosen when it runs)."""
    if req.stream:
        raise RequestError(f"model {MODEL_ID!r} does not stream: the answering rung is known only once the "
                           "orchestrator has chosen it; send stream: false", param="stream", code="stream_unsupported")
    if not plan.allowed:
        raise RequestError("this API key or request allows no rung for the orchestrator to call", status=403,
                           param="model", code="rung_not_allowed", kind="permission_error")
    plan.policy, plan.mode, plan.chain, plan.k = MODEL_ID, MODEL_ID, [], 1
    plan.explanation = {"rule": "the orchestrator role chooses the expert rung", "offered": list(plan.allowed),
                        "orchestrator": rt.ladder.roles.orchestrator.name}


def _preferences(req: Any, plan: RequestPlan) -> Any:
    prefs = req.advisor
    return Preferences(allowed=list(plan.allowed), self_hosted_only=bool(prefs and prefs.self_hosted_only),
                       max_latency_s=prefs.max_latency_s if prefs else None)


def _orchestrator_prompt(rt: Any, req: Any, plan: RequestPlan):
    """(prompt text, tool specs the reply is parsed against, aliases by name) for the orchestrator."""
    orch = rt.ladder.roles.orchestrator
    experts = [e for e in experts_for(rt.ladder) if e.name in plan.allowed]
    tool = expert_tool(experts)
    specs = [*tool_specs(req), tool]
    system = orchestrator_prompt(format_for(orch.tool_call_format).render_tools(specs),
                                 render_preferences(_preferences(req, plan), experts))
    messages = [Message(role="system", content=system), *req.messages]
    prompt = render_prompt(orch, req.model_copy(update={"messages": messages, "tools": None}))
    return prompt, specs, {e.alias: e for e in experts}


async def serve_orchestrated(rt: Any, req: Any, plan: RequestPlan, deadline: float) -> Outcome:
    """Ask the orchestrator, run the expert it picks (or deliver its own reply), verify once; never past
    `deadline` (a monotonic time)."""
    orch = rt.ladder.roles.orchestrator
    out = Outcome(plan, [])
    prompt, specs, by_alias = _orchestrator_prompt(rt, req, plan)
    fmt = format_for(orch.tool_call_format)
    why = "no reply"
    for _ in range(MAX_INVALID):
        attempt, text = await call_model(rt, req, plan, orch, prompt, deadline)
        out.attempts.append(attempt)
        if text is None:
            out.status, out.error = (504 if attempt.out_of_time else 503), \
                f"the orchestrator {orch.name} could not answer: {attempt.error}"
            return out
        parsed = fmt.parse(text, specs)
        if parsed.kind == "invalid":
            why = parsed.error
        elif (handed := handoff(parsed, by_alias)) is not None:
            alias = handed.alias
            if handed.expert is not None:
                rung = handed.expert.name
                plan.chain = [rung]
                plan.explanation["expert"] = {"alias": alias, "rung": rung}
                rt.metrics.count_result(orch.name, plan.task_class, "unverified", rt.simulated(orch.name))
                expert_attempt, reply = await call_rung(rt, req, plan, rung, deadline)
                out.attempts.append(expert_attempt)
                if reply is None:
                    out.status, out.error = 503, f"expert {rung} chosen by the orchestrator failed: {expert_attempt.error}"
                    return out
                return await _deliver(rt, plan, out, expert_attempt, rung, reply)
            why = handed.error
        else:  # the orchestrator answered, or called one of the client's tools
            plan.chain = [orch.name]
            return await _deliver(rt, plan, out, attempt, orch.name, parse_reply(orch, text, req))
        attempt.verdict = f"invalid: {why}"
        rt.metrics.count_result(orch.name, plan.task_class, "unverified", rt.simulated(orch.name))
    out.status, out.error = 502, (f"the orchestrator {orch.name} gave {MAX_INVALID} unusable replies (last: {why}); "
                                  "check it with `advisor ladder check`")
    return out


SERVED.add(MODEL_ID, ServedPolicy(serves_orchestrator, plan_orchestrated, serve_orchestrated))


async def _deliver(rt: Any, plan: RequestPlan, out: Outcome, attempt: Attempt, rung: str, reply: Any) -> Outcome:
    out.reply, out.rung, out.verdict = reply, rung, await settle(rt, plan, attempt, reply)
    return out
