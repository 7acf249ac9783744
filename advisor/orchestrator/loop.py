"""One orchestrated episode: the orchestrator decides each turn, acting itself or handing the turn to an expert.

Design (ToolOrchestra's ``call_expert`` in its agent evaluation): a call of ``call_expert(expert)`` hands the
whole conversation and the task's own tools to the expert rung, and the expert's reply **replaces** the
orchestrator's turn: a tool call in it is executed as the turn's action, a final answer ends the episode. We
chose replacement over "the reply comes back as an observation" because the rungs are agents, not answer
oracles: their reply is an action on the task, and replaying it as the turn keeps one conversation and one
action per turn, the same accounting as a fixed-rung episode.

Rules, each counted in the result:

- only the first valid tool call of a turn is executed (the observation notes how many were ignored);
- an orchestrator reply that cannot be parsed (invalid JSON, unclosed tag, cut off) is shown its error and the
  turn is **repeated** (`invalid_turns`); `limits.max_invalid` of them in a row stop it (``invalid_output``);
- an unknown expert alias is an error observation (the turn counts as a round);
- the round limit (`OrchestratorConfig.max_rounds`, default 50 as in ToolOrchestra) replaces the suite's
  turn limit; the suite's token and time budgets apply to all calls together; stuck detection as in
  `advisor.agent.loop`.

Each model call (orchestrator or expert) is one `PolicyCall` with the server's token counts and its cost at
that model's price; the episode's cost is their sum (`OrchestratedResult.cost`).

Conversations: the orchestrator sees its own replies as written and an expert's action rewritten in the
orchestrator's tool-call format, prefixed ``[expert-k]``; an expert sees every executed action rewritten in its
own format (so a model never reads calls in a syntax it was not trained on) and its own unusable replies with
their parse errors, under a rung's usual system prompt; the orchestrator's routing turns are left out.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from advisor.agent.chat import system_prompt, template_for
from advisor.agent.formats import Parsed, format_for
from advisor.agent.loop import OBSERVATION_CHARS, RECORD_CHARS, EpisodeResult, clip_text, call_signature, is_stuck
from advisor.errors import BackendError, ConfigError
from advisor.orchestrator.experts import EXPERT_TOOL, Expert, expert_tool
from advisor.orchestrator.prompt import PREFS_MODES, offered, orchestrator_prompt, render_preferences, violations
from advisor.records import Condition, Episode, StopReason, ToolCall, TurnRecord

DEFAULT_ROUNDS = 50


@dataclass(frozen=True)
class OrchestratorConfig:
    """How the orchestrator is run (see the module docstring and `advisor.orchestrator.prompt`)."""

    max_rounds: int = DEFAULT_ROUNDS
    prefs: str = "prompt"  #: one of `PREFS_MODES`

    def __post_init__(self) -> None:
        if self.prefs not in PREFS_MODES:
            raise ConfigError(f"unknown preferences mode {self.prefs!r}; use one of {', '.join(PREFS_MODES)}")
        if self.max_rounds < 1:
            raise ConfigError(f"max_rounds must be at least 1 (got {self.max_rounds})")


@dataclass
class PolicyCall:
    """One model call of a policy episode: who was called, for which round, and what it cost."""

    seq: int
    round: int
    model: str  #: the rung or role name
    role: str  #: orchestrator | expert
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_s: float
    respects: bool | None = None  #: expert calls: whether the call respects the user's preferences
    verdict: str | None = None  #: chain attempts: what the verifier said (None: not verified)
    accepted: bool | None = None  #: chain attempts: the verifier accepted the attempt
    usable: bool | None = None  #: chain attempts: the attempt's overall reached the bar (None: unscored)


@dataclass
class OrchestratedResult(EpisodeResult):
    """An `EpisodeResult` whose model calls went to several models, each priced at its own rate."""

    calls: list[PolicyCall] = field(default_factory=list)
    invalid_turns: int = 0  #: orchestrator replies that could not be parsed (each turn was repeated)
    unknown_experts: int = 0  #: calls of call_expert with an alias not offered

    def cost(self, model: Any = None) -> float:
        """USD of every call, each at its own model's price (`model` is ignored)."""
        return sum(c.cost_usd for c in self.calls)

    def cost_by_model(self) -> dict[str, float]:
        """USD per model called."""
        out: dict[str, float] = {}
        for c in self.calls:
            out[c.model] = out.get(c.model, 0.0) + c.cost_usd
        return out

    def expert_sequence(self) -> list[str]:
        """The rungs the orchestrator handed turns to, in order."""
        return [c.model for c in self.calls if c.role == "expert"]


@dataclass
class _Step:
    """One executed (or failed) turn of the shared conversation."""

    by: str  #: "orchestrator" or an expert alias
    text: str  #: what the model wrote
    parsed: Parsed | None
    observation: str


async def run_orchestrated(task: Any, orchestrator: Any, experts: list[Expert], client_for: Callable[[Any], Any],
                           env: Any, limits: Any, *, prefs: Any = None, config: OrchestratorConfig = OrchestratorConfig(),
                           condition: str = "baseline", sampling: dict[str, Any] | None = None,
                           request_id: str | None = None) -> OrchestratedResult:
    """Run one episode of `task` with `orchestrator` directing `experts`; never raises for model or tool problems.

    `client_for(model)` gives the `ModelClient` serving a model (the same Triton client as the rungs).
    """
    fmt = format_for(orchestrator.tool_call_format)
    template = template_for(orchestrator)
    specs = list(env.specs())
    shown = offered(experts, prefs, config.prefs)
    by_alias = {e.alias: e for e in shown}
    skill = task.skill_text if condition == Condition.SKILL else None
    prefs_text = render_preferences(prefs, experts) if config.prefs != "off" else ""
    system = orchestrator_prompt(fmt.render_tools([*specs, expert_tool(shown)]), prefs_text, skill)
    res = OrchestratedResult(Episode(final=None, stop_reason=StopReason.MAX_TURNS, workspace=getattr(env, "workspace", None)))
    ep, steps, actions = res.episode, [], []
    invalid_in_row = 0
    start = time.monotonic()
    deadline = start + float(limits.timeout_s)

    def stop(reason: StopReason, error: str | None = None) -> OrchestratedResult:
        ep.stop_reason, ep.error = reason, error
        ep.api_log = list(getattr(env, "api_log", []) or [])
        res.latency_s = time.monotonic() - start
        return res

    async def ask(model: Any, prompt: str, rnd: int, role: str, respects: bool | None):
        remaining = deadline - time.monotonic()
        rid = f"{request_id}:{len(res.calls)}" if request_id else None
        t0 = time.monotonic()
        gen = await asyncio.wait_for(client_for(model).generate(
            model.triton_model, prompt, max_tokens=int(model.max_output_tokens), sampling=sampling,
            timeout_s=remaining, request_id=rid), timeout=remaining)
        latency = time.monotonic() - t0
        n_in, n_out = int(gen.input_tokens), int(gen.output_tokens)
        res.model_calls += 1
        res.input_tokens += n_in
        res.output_tokens += n_out
        res.tokens_from_server = res.tokens_from_server and bool(getattr(gen, "tokens_from_server", True))
        note = getattr(gen, "note", None)
        if note and note not in res.notes:
            res.notes.append(note)
        res.calls.append(PolicyCall(len(res.calls), rnd, model.name, role, n_in, n_out,
                                    model.attempt_cost(n_in, n_out), latency, respects))
        res.turns.append(TurnRecord(turn=len(res.turns), action="invalid", input_tokens=n_in, output_tokens=n_out,
                                    latency_s=latency, finish_reason=str(gen.finish_reason or "")))
        return gen

    for rnd in range(config.max_rounds):
        if time.monotonic() >= deadline:
            return stop(StopReason.TIMEOUT, f"episode wall time reached {limits.timeout_s:g} s")
        if res.input_tokens + res.output_tokens >= limits.max_tokens:
            return stop(StopReason.MAX_TOKENS, f"{res.input_tokens + res.output_tokens} tokens used of {limits.max_tokens}")
        prompt = template.render(_orchestrator_messages(system, task.instructions, steps, fmt))
        try:
            gen = await ask(orchestrator, prompt, rnd, "orchestrator", None)
            text, by = gen.text or "", "orchestrator"
            parsed = _parse(fmt, gen, specs + [expert_tool(shown)], orchestrator)
            if parsed.kind == "call" and parsed.name == EXPERT_TOOL:
                alias = str(parsed.arguments.get("expert", ""))
                res.turns[-1].action, res.turns[-1].arguments_json = EXPERT_TOOL, json.dumps(parsed.arguments)
                if alias not in by_alias:
                    res.unknown_experts += 1
                    error = (f"ERROR: unknown expert {alias!r}; call_expert takes one of "
                             f"{', '.join(by_alias) or '(none offered)'}")
                    res.turns[-1].observation = error
                    steps.append(_Step(by, text, parsed, error))
                    actions.append(call_signature(EXPERT_TOOL, parsed.arguments))
                    if is_stuck(actions):
                        return stop(StopReason.STUCK, f"repeating actions: last {EXPERT_TOOL!r}")
                    continue
                expert = by_alias[alias]
                res.turns[-1].observation = f"turn handed to {alias} ({expert.name})"
                efmt = format_for(expert.model.tool_call_format)
                eprompt = template_for(expert.model).render(_expert_messages(task, skill, steps, efmt, specs, alias))
                gen = await ask(expert.model, eprompt, rnd, "expert", not violations(expert, prefs) if prefs else True)
                text, by = gen.text or "", alias
                parsed = _parse(efmt, gen, specs, expert.model)
        except asyncio.TimeoutError:
            return stop(StopReason.TIMEOUT, f"model call of round {rnd} still pending at the {limits.timeout_s:g} s limit")
        except BackendError as exc:
            if time.monotonic() >= deadline - 0.05:
                return stop(StopReason.TIMEOUT, f"model call of round {rnd} still pending at the {limits.timeout_s:g} s limit")
            return stop(StopReason.BACKEND_ERROR, f"round {rnd}: {exc}")
        record = res.turns[-1]
        if parsed.kind == "final":
            record.action, record.observation = "final", clip_text(parsed.final or "", RECORD_CHARS)
            ep.final = parsed.final
            return stop(StopReason.FINAL)
        if parsed.kind == "invalid":
            invalid_in_row += 1
            if by == "orchestrator":
                res.invalid_turns += 1
            error = f"ERROR: could not parse {'your' if by == 'orchestrator' else 'the expert' + chr(39) + 's'} reply: {parsed.error}"
            record.observation = error
            steps.append(_Step(by, text, None, error))
            if invalid_in_row >= limits.max_invalid:
                return stop(StopReason.INVALID_OUTPUT, f"{invalid_in_row} unusable replies in a row; last: {parsed.error}")
            continue
        invalid_in_row = 0
        try:
            call: ToolCall = await asyncio.wait_for(env.call(parsed.name, parsed.arguments),
                                                    timeout=max(deadline - time.monotonic(), 0.001))
        except asyncio.TimeoutError:
            ep.calls.append(ToolCall(parsed.name, parsed.arguments, "tool call cut by the episode time limit", ok=False))
            return stop(StopReason.TIMEOUT, f"tool {parsed.name!r} still running at the {limits.timeout_s:g} s limit")
        ep.calls.append(call)
        observation = call.observation if call.ok else f"ERROR: {call.observation}"
        if parsed.extra_calls:
            observation += (f"\n[note: only the first tool call of the reply was run; "
                            f"{parsed.extra_calls} more ignored]")
        record.action, record.arguments_json = parsed.name, json.dumps(parsed.arguments, default=str)
        record.observation = clip_text(observation, RECORD_CHARS)
        steps.append(_Step(by, text, parsed, clip_text(observation, OBSERVATION_CHARS)))
        actions.append(call_signature(parsed.name, parsed.arguments))
        if is_stuck(actions):
            return stop(StopReason.STUCK, f"repeating actions: last {parsed.name!r}")
    return stop(StopReason.MAX_TURNS, f"no final answer in {config.max_rounds} rounds")


def _parse(fmt: Any, gen: Any, specs: list[Any], model: Any) -> Parsed:
    if gen.finish_reason == "length":
        return Parsed("invalid", error=f"the reply was cut off at the {model.max_output_tokens}-token output limit")
    return fmt.parse(gen.text or "", specs)


def _orchestrator_messages(system: str, instructions: str, steps: list[_Step], fmt: Any) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": instructions}]
    for s in steps:
        if s.by == "orchestrator" or s.parsed is None:
            content = s.text if s.by == "orchestrator" else f"[{s.by}] {s.text}"
        else:
            content = f"[{s.by}] {fmt.render_call(s.parsed.name, s.parsed.arguments)}"
        messages += [{"role": "assistant", "content": content}, {"role": "tool", "content": s.observation}]
    return messages


def _expert_messages(task: Any, skill: str | None, steps: list[_Step], fmt: Any, specs: list[Any],
                     alias: str) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system_prompt(fmt.render_tools(specs), skill)},
                {"role": "user", "content": task.instructions}]
    for s in steps:
        if s.parsed is None and s.by == alias:  # its own unusable reply, with the parse error it got
            messages += [{"role": "assistant", "content": s.text}, {"role": "tool", "content": s.observation}]
            continue
        if s.parsed is None or s.parsed.name == EXPERT_TOOL:
            continue  # the orchestrator's own routing and parse errors are not part of the task conversation
        messages += [{"role": "assistant", "content": fmt.render_call(s.parsed.name, s.parsed.arguments)},
                     {"role": "tool", "content": s.observation}]
    return messages
