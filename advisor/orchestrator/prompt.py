"""The orchestrator's system prompt, with the user's preferences rendered into it.

ToolOrchestra trained with a per-example preference vector but its released evaluation prompts carry none;
here the user's `advisor.router.routing.rule.Preferences` become a ``# User preferences`` section of the system
prompt, one sentence per preference, naming experts by alias:

- ``allowed`` -> "Call only these experts: ..."
- ``self_hosted_only`` -> "Call only self-hosted experts; these are not: ..."
- ``max_latency_s`` -> "Each expert call should take at most X s on average; over that limit: ..." (measured)
- ``weights`` -> "Preference weights (1 = neutral, higher = preferred, 0 = never call): ..."

How they are applied is `PREFS_MODES` (``OrchestratorConfig.prefs``):

- ``prompt`` (default): stated in the prompt only; every expert stays callable, so adherence (the share of
  expert calls that respect the preferences) measures the orchestrator itself;
- ``enforce``: stated, and experts the preferences exclude are dropped from the ``expert`` enum (a call to
  one is an error observation);
- ``off``: not rendered (the released evaluation's prompt).
"""

from __future__ import annotations

from typing import Any, Sequence

from advisor.agent.chat import SKILL_HEADER
from advisor.orchestrator.experts import Expert

PREFS_MODES = ("prompt", "enforce", "off")
PREFS_HEADER = "# User preferences"


def violations(expert: Expert, prefs: Any) -> list[str]:
    """Why calling `expert` breaks the preferences (empty: it respects them)."""
    why = []
    if prefs.allowed is not None and expert.name not in set(prefs.allowed):
        why.append("not an allowed expert")
    if prefs.self_hosted_only and not expert.model.self_hosted:
        why.append("not self-hosted")
    if prefs.max_latency_s is not None and expert.latency_s is not None and expert.latency_s > prefs.max_latency_s:
        why.append(f"average latency {expert.latency_s:.2f} s over {prefs.max_latency_s:g} s")
    if float(prefs.weights.get(expert.name, 1.0)) <= 0:
        why.append("weight 0 (never)")
    return why


def render_preferences(prefs: Any, experts: Sequence[Expert]) -> str:
    """The ``# User preferences`` section (empty string when the preferences restrict nothing)."""
    if prefs is None:
        return ""
    by_name = {e.name: e for e in experts}
    lines = []
    if prefs.allowed is not None:
        names = [by_name[n].alias for n in prefs.allowed if n in by_name]
        lines.append(f"- Call only these experts: {', '.join(names) or 'none'}.")
    if prefs.self_hosted_only:
        hosted = [e.alias for e in experts if not e.model.self_hosted]
        lines.append("- Call only self-hosted experts" + (f"; these are not: {', '.join(hosted)}." if hosted else "."))
    if prefs.max_latency_s is not None:
        slow = [e.alias for e in experts if e.latency_s is not None and e.latency_s > prefs.max_latency_s]
        lines.append(f"- Each expert call should take at most {prefs.max_latency_s:g} s on average"
                     + (f"; over that limit: {', '.join(slow)}." if slow else "."))
    if prefs.weights:
        weights = [f"{by_name[n].alias} {float(w):g}" for n, w in prefs.weights.items() if n in by_name]
        lines.append("- Preference weights (1 = neutral, higher = preferred, 0 = never call): "
                     + ", ".join(weights) + ".")
    if not lines:
        return ""
    return (f"{PREFS_HEADER}\n\nThe user set these preferences for this task. Respect them; among the experts "
            "they allow, choose by task difficulty, cost and performance.\n" + "\n".join(lines))


def offered(experts: Sequence[Expert], prefs: Any, mode: str) -> list[Expert]:
    """The experts in the ``expert`` enum: all of them, except in ``enforce`` mode."""
    if mode == "enforce" and prefs is not None:
        return [e for e in experts if not violations(e, prefs)]
    return list(experts)


def orchestrator_prompt(tools_text: str, prefs_text: str = "", skill_text: str | None = None) -> str:
    """The orchestrator's system prompt: its role, its tools (task tools and ``call_expert``), preferences, skill."""
    parts = ["You are an orchestrator working on a task in a sandboxed workspace. Each turn, either act yourself "
             "with one of the task's tools, or hand the turn to an expert model with call_expert: choose an "
             "expert based on the task difficulty, and based on both expert cost and performance.", tools_text]
    if prefs_text:
        parts.append(prefs_text)
    if skill_text:
        parts.append(f"{SKILL_HEADER}\n\nFollow this guidance document while you work:\n\n{skill_text.strip()}")
    return "\n\n".join(parts)
