"""A stand-in orchestrator: a stated, seeded, parametric simulation of Orchestrator-8B choosing experts.

It reads the prompt the orchestrator policy rendered, exactly as a model would: the ``call_expert`` tool in
the system prompt's tool list (its ``expert`` enum and the price table ending its description) and the task
instructions (recognised by their hash among the suites it knows, like the rung stand-ins). It writes hermes
``<think>...</think><tool_call>{...}</tool_call>`` replies through the same format code as any hermes model.

The model, with the parameters of the ladder's ``standin.orchestrator`` block (``match`` m,
``default_strongest`` s) and the task's difficulty ``d`` (`advisor.standin.behaviour.difficulty`):

1. It ranks the offered experts by price (output, then input price per million tokens, cheapest first) and
   believes the expert of rank ``i`` of ``n`` has capability ``CAP_LO + i * (CAP_HI - CAP_LO) / (n - 1)``.
2. Once per episode, from a private RNG seeded with (its seed, task id, condition, request seed): with
   probability s it **defaults to the strongest** (priciest) expert; else with probability m it **matches**:
   the cheapest expert it believes reaches ``d + MARGIN``; else it picks an expert uniformly at random.
3. Every turn it hands the turn to that expert. After ``ESCALATE_AFTER`` error observations in a row it
   escalates to the next pricier expert (and stays there).
4. When its prompt offers no ``call_expert`` tool it works the task itself as a rung stand-in of its
   ``capability`` would (`advisor.standin.agent.StandinAgent`); an unknown task gets the give-up answer.
5. An unknown task (not in the suites it knows: e.g. the probe of ``advisor ladder check``) with
   ``call_expert`` offered is routed like any other, believing it of difficulty ``UNKNOWN_DIFFICULTY``.

Nothing in the policy knows a stand-in answers; every result is labelled SIMULATED (the ladder says so).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Sequence

from advisor.agent.chat import parse_default
from advisor.agent.formats import format_for
from advisor.records import text_hash
from advisor.standin.agent import StandinAgent
from advisor.standin.behaviour import difficulty, episode_seed

CAP_LO, CAP_HI = 0.0, 4.0  #: believed capability of the cheapest and of the priciest expert
MARGIN = 0.3  #: capability it wants above the task's difficulty when matching
ESCALATE_AFTER = 2  #: error observations in a row before it escalates one expert up
UNKNOWN_DIFFICULTY = (CAP_LO + CAP_HI) / 2  #: difficulty it believes a task it does not know has
EXPERT_TOOL = "call_expert"
_TOOLS = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)
_ROW = re.compile(r"^(\S+) \| \$([\d.]+) \| \$([\d.]+) \| ", re.M)


def offered_experts(system: str) -> list[str]:
    """The aliases of the ``call_expert`` tool in a hermes system prompt, cheapest first (empty: no such tool)."""
    block = _TOOLS.search(system)
    if not block:
        return []
    for line in block.group(1).splitlines():
        try:
            fn = json.loads(line).get("function", {})
        except (json.JSONDecodeError, AttributeError):
            continue
        if fn.get("name") != EXPERT_TOOL:
            continue
        aliases = list(fn.get("parameters", {}).get("properties", {}).get("expert", {}).get("enum", []))
        prices = {a: (float(pout), float(pin)) for a, pin, pout in _ROW.findall(fn.get("description", ""))}
        return sorted(aliases, key=lambda a: (prices.get(a, (float("inf"), 0.0)), aliases.index(a)))
    return []


def choose(params: Any, aliases: Sequence[str], task_difficulty: float, rng: random.Random) -> tuple[str, str]:
    """(alias, why) of the expert chosen for an episode (aliases cheapest first)."""
    n = len(aliases)
    if rng.random() < params.default_strongest:
        return aliases[-1], "the strongest expert is the safe choice"
    if rng.random() < params.match:
        for i, alias in enumerate(aliases):
            believed = CAP_LO + (i * (CAP_HI - CAP_LO) / (n - 1) if n > 1 else CAP_HI)
            if believed >= task_difficulty + MARGIN:
                return alias, "the cheapest expert that should manage a task of this difficulty"
        return aliases[-1], "only the strongest expert should manage a task this hard"
    return aliases[rng.randrange(n)], "a guess"


class StandinOrchestrator:
    """The simulated orchestrator behind one stand-in orchestrator role."""

    def __init__(self, model: Any, suite_paths: Sequence[str | Path] = ()):
        self.model = model
        self.params = model.standin.orchestrator
        self.format = format_for(model.tool_call_format)
        self.agent = StandinAgent(model, suite_paths)  # how it works a task itself

    def reply(self, prompt: str, sampling: dict[str, Any]) -> str:
        """The next reply of the episode this prompt belongs to."""
        messages = parse_default(prompt)
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
        aliases = offered_experts(system)
        if not aliases:
            return self.agent.reply(prompt, sampling)
        task, _, turns = self.agent.read(prompt)
        if task is None:
            user = next((m["content"] for m in messages if m["role"] == "user"), prompt)
            task_id, condition, d = text_hash(user), "baseline", UNKNOWN_DIFFICULTY
        else:
            task_id, d = task.id, difficulty(task)
            condition = "skill" if task.skill_text and task.skill_text.strip() in system else "baseline"
        rng = random.Random(episode_seed(self.model.standin.seed, task_id, condition, sampling.get("seed")))
        alias, why = choose(self.params, aliases, d, rng)
        errors = 0
        for m in turns:  # escalation: error observations in a row at the end of the conversation
            if m["role"] == "tool":
                errors = errors + 1 if m["content"].startswith("ERROR") else 0
                if errors >= ESCALATE_AFTER and aliases.index(alias) < len(aliases) - 1:
                    alias, why, errors = aliases[aliases.index(alias) + 1], "the last expert kept failing", 0
        steps = len(task.reference.steps) if task is not None and task.reference else 0
        think = f"<think>The task looks like {steps} steps; {alias}: {why}.</think>"
        return f"{think}\n{self.format.render_call(EXPERT_TOOL, {'expert': alias})}"
