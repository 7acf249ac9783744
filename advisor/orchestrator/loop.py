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

import json
from dataclasses import dataclass, field
from typing import Any, Callable

from advisor.agent.chat import system_prompt, template_for
from advisor.agent.formats import Parsed, format_for
from advisor.agent.turns import EpisodeResult, Stop, Turns, with_hint
from advisor.errors import ConfigError
from advisor.orchestrator.experts import EXPERT_TOOL, Expert, expert_tool, handoff
from advisor.orchestrator.prompt import PREFS_MODES, offered, orchestrator_prompt, render_preferences, violations
from advisor.records import Condition, Episode, StopReason

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
    tool: bool = False  #: a tool's observation (its reader's format may add its reminder of how to finish)


async def run_orchestrated(task: Any, orchestrator: Any, experts: list[Expert], client_for: Callable[[Any], Any],
                           env: Any, limits: Any, *, prefs: Any = None, config: OrchestratorConfig = OrchestratorConfig(),
                           condition: str = "baseline", sampling: dict[str, Any] | None = None,
                           request_id: str | None = None) -> OrchestratedResult:
    """Run one episode of `task` with `orchestrator` directing `experts`; never raises for model or tool problems.

    `client_for(model)` gives the backend serving a model (`advisor.backends.BackendPool`). Each turn
    is `advisor.agent.turns.Turns`' steps; this loop only decides who speaks.
    """
    fmt = format_for(orchestrator.tool_call_format)
    specs = list(env.specs())
    shown = offered(experts, prefs, config.prefs)
    by_alias = {e.alias: e for e in shown}
    own_tools = [*specs, expert_tool(shown)]
    skill = task.skill_text if condition == Condition.SKILL else None
    prefs_text = render_preferences(prefs, experts) if config.prefs != "off" else ""
    system = orchestrator_prompt(fmt.render_tools(own_tools), prefs_text, skill)
    res = OrchestratedResult(Episode(final=None, stop_reason=StopReason.MAX_TURNS, workspace=getattr(env, "workspace", None)))
    turns = Turns(res, env, limits, sampling=sampling, request_id=request_id)
    steps: list[_Step] = []

    async def ask(model: Any, messages: list[dict[str, str]], tools: list[Any], rnd: int, role: str,
                  respects: bool | None):
        gen, record = await turns.ask(client_for(model), model, template_for(model), messages, tools, f"round {rnd}")
        n_in, n_out = record.input_tokens, record.output_tokens
        res.calls.append(PolicyCall(len(res.calls), rnd, model.name, role, n_in, n_out,
                                    model.attempt_cost(n_in, n_out), record.latency_s, respects))
        return gen, record

    try:
        for rnd in range(config.max_rounds):
            turns.check_budget()
            gen, record = await ask(orchestrator, _orchestrator_messages(system, task.instructions, steps, fmt),
                                    own_tools, rnd, "orchestrator", None)
            by = "orchestrator"
            parsed = turns.parse(fmt, gen, own_tools, orchestrator)
            handed = handoff(parsed, by_alias)
            if handed is not None:
                alias = handed.alias
                record.action, record.arguments_json = EXPERT_TOOL, json.dumps(parsed.arguments)
                if handed.expert is None:
                    res.unknown_experts += 1
                    error = f"ERROR: {handed.error}"
                    record.observation = error
                    steps.append(_Step(by, gen.text or "", parsed, error))
                    turns.note_action(EXPERT_TOOL, parsed.arguments)
                    continue
                expert = handed.expert
                record.observation = f"turn handed to {alias} ({expert.name})"
                by, efmt = alias, format_for(expert.model.tool_call_format)
                gen, record = await ask(expert.model, _expert_messages(task, skill, steps, efmt, specs, alias),
                                        specs, rnd, "expert", not violations(expert, prefs) if prefs else True)
                parsed = turns.parse(efmt, gen, specs, expert.model, whose="the expert's")
            if parsed.kind == "final":
                raise turns.final(record, parsed)
            if parsed.kind == "invalid":
                if by == "orchestrator":
                    res.invalid_turns += 1
                steps.append(_Step(by, gen.text or "", None, turns.invalid(record, parsed)))
                continue
            steps.append(_Step(by, gen.text or "", parsed, await turns.act(record, parsed), tool=True))
            turns.check_tokens()
        raise Stop(StopReason.MAX_TURNS, f"no final answer in {config.max_rounds} rounds")
    except Stop as stop:
        return turns.finish(stop)


def _orchestrator_messages(system: str, instructions: str, steps: list[_Step], fmt: Any) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": instructions}]
    for s in steps:
        if s.by == "orchestrator" or s.parsed is None:
            content = s.text if s.by == "orchestrator" else f"[{s.by}] {s.text}"
        else:
            content = f"[{s.by}] {fmt.render_call(s.parsed.name, s.parsed.arguments)}"
        messages += [{"role": "assistant", "content": content}, {"role": "tool", "content": _seen(s, fmt)}]
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
                     {"role": "tool", "content": _seen(s, fmt)}]
    return messages


def _seen(step: _Step, fmt: Any) -> str:
    """A step's observation as a reader in format `fmt` sees it (a tool's, with the format's reminder)."""
    return with_hint(step.observation, fmt) if step.tool else step.observation
