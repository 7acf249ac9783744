"""Does the orchestrator role answer in its tool-call format? The probe behind ``advisor ladder check``.

The orchestrator policy only works if the role's model hands turns to experts in the format the ladder names
(``hermes`` for Nemotron-Orchestrator-8B: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, after an
optional ``<think>...</think>``). The check offers it a tiny task with one tool, ``call_expert``, whose
``expert`` enum holds the ladder's rungs under their aliases (rendered exactly as the policy renders it,
`advisor.orchestrator.experts.expert_tool`), and passes when the reply parses as a call of ``call_expert``
with an offered alias. Anything else (prose, a final answer, an unclosed tag, invalid JSON, another tool, an
alias not offered, a reply cut off) fails with a message that says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from advisor.agent.chat import template_for
from advisor.agent.formats import format_for
from advisor.orchestrator.experts import EXPERT_TOOL, expert_tool, experts_for
from advisor.orchestrator.prompt import orchestrator_prompt

CHECK_TASK = ("Check task: a customer asks for the status of order 42. Do not answer yourself: hand this turn "
              "to one expert with call_expert.")


@dataclass(frozen=True)
class FormatProbe:
    """The rendered prompt of the check and what a passing reply must contain."""

    prompt: str
    aliases: tuple[str, ...]
    format_name: str
    specs: tuple[Any, ...]


def format_probe(ladder: Any, model: Any) -> FormatProbe:
    """The check's prompt for `model` (the orchestrator role of `ladder`), in its chat template and format."""
    fmt = format_for(model.tool_call_format)
    experts = experts_for(ladder)
    tool = expert_tool(experts)
    system = orchestrator_prompt(fmt.render_tools([tool]))
    prompt = template_for(model).render([{"role": "system", "content": system},
                                         {"role": "user", "content": CHECK_TASK}])
    return FormatProbe(prompt, tuple(e.alias for e in experts), fmt.name, (tool,))


def judge_reply(probe: FormatProbe, text: str, finish_reason: str | None = None) -> tuple[str | None, str | None]:
    """(the expert alias called, None) when the reply is a valid call; else (None, why it is not)."""
    want = f'a {probe.format_name} call of {EXPERT_TOOL} (e.g. <tool_call>{{"name": "{EXPERT_TOOL}", ' \
           f'"arguments": {{"expert": "{probe.aliases[0]}"}}}}</tool_call> in hermes)'
    if finish_reason == "length":
        return None, f"the reply was cut off at the output limit before {want} was complete"
    parsed = format_for(probe.format_name).parse(text or "", probe.specs)
    if parsed.kind == "invalid":
        return None, f"the reply is not a valid {probe.format_name} tool call: {parsed.error}"
    if parsed.kind == "final":
        return None, (f"the reply is not in {probe.format_name} tool-call format: it answered in prose instead of "
                      f"{want} (served with the {probe.format_name} tool-call parser? the right model?)")
    if parsed.name != EXPERT_TOOL:
        return None, f"the reply called {parsed.name!r}, not {EXPERT_TOOL!r}, the only tool offered"
    alias = parsed.arguments.get("expert")
    if alias not in probe.aliases:
        return None, (f"the reply called {EXPERT_TOOL} with expert={alias!r}, not one of the offered aliases "
                      f"{', '.join(probe.aliases)}")
    return str(alias), None
