"""The ladder's rungs as experts: aliases, capability prose, the price/latency table and ``call_expert``.

The orchestrator never sees rung names: rung ``i`` (ladder order, smallest first) is ``expert-{i+1}``, as in
ToolOrchestra's evaluation, where models are offered under aliases so that a name does not pull the choice.
What it is told about each expert, generated from the ladder (and the store, when given):

- prose per expert: parameters (total, active), context length, whether it is self-hosted, and, with probe
  results, its measured usable rate per task class (``usable k/n``) and mean latency per model call;
- a table ending the description, ``Model | price per million input tokens | price per million output tokens
  | average latency`` (latency measured per model call in the store's fixed-rung runs, else ``unknown``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from advisor.tools.base import ToolSpec, object_schema

EXPERT_TOOL = "call_expert"
TABLE_HEADER = "Model | price per million input tokens | price per million output tokens | average latency"


@dataclass(frozen=True)
class Expert:
    """One rung offered to the orchestrator."""

    alias: str
    model: Any  #: the ladder `Model`
    position: int  #: 0 = the smallest rung
    latency_s: float | None = None  #: mean measured latency per model call
    usable: dict[str, tuple[int, int]] = field(default_factory=dict)  #: class -> (usable runs, scored runs)

    @property
    def name(self) -> str:
        """The rung's name."""
        return self.model.name


@dataclass(frozen=True)
class Handoff:
    """An orchestrator's ``call_expert``: the alias it named, and the expert it hands the turn to, or why none."""

    alias: str
    expert: Expert | None
    error: str | None = None


def handoff(parsed: Any, by_alias: dict[str, Expert]) -> Handoff | None:
    """What a parsed orchestrator reply hands over (every orchestrated turn reads it here: the probe's episode loop
    and the routing service's ``orchestrator`` model); None when it does not call ``call_expert``."""
    if parsed.kind != "call" or parsed.name != EXPERT_TOOL:
        return None
    alias = str((parsed.arguments or {}).get("expert", ""))
    if alias in by_alias:
        return Handoff(alias, by_alias[alias])
    return Handoff(alias, None, f"unknown expert {alias!r}; {EXPERT_TOOL} takes one of "
                                f"{', '.join(by_alias) or '(none offered)'}")


def alias_of(position: int) -> str:
    """The alias of the rung at `position`."""
    return f"expert-{position + 1}"


def probe_facts(store: Any, ladder: Any) -> dict[str, dict[str, Any]]:
    """Per rung of `ladder`: mean latency per model call and (usable, scored) per class, from fixed-rung runs."""
    rows = store.rung_facts(ladder.name)
    facts: dict[str, dict[str, Any]] = {}
    for r in rows:
        f = facts.setdefault(r["rung"], {"usable": {}, "latency": 0.0, "calls": 0})
        f["usable"][r["task_class"]] = (int(r["usable"] or 0), int(r["scored"] or 0))
        f["latency"] += float(r["latency"] or 0.0)
        f["calls"] += int(r["calls"] or 0)
    return {k: {"usable": v["usable"], "latency_s": (v["latency"] / v["calls"]) if v["calls"] else None}
            for k, v in facts.items()}


def experts_for(ladder: Any, facts: dict[str, dict[str, Any]] | None = None) -> list[Expert]:
    """Every rung of the ladder as an `Expert` (with its probe facts when given)."""
    facts = facts or {}
    return [Expert(alias_of(i), m, i, facts.get(m.name, {}).get("latency_s"), dict(facts.get(m.name, {}).get("usable", {})))
            for i, m in enumerate(ladder.rungs)]


def _money(usd_per_m: float) -> str:
    return f"${usd_per_m:.2f}" if round(usd_per_m, 2) == usd_per_m else f"${usd_per_m:.4g}"


def prices_per_m(model: Any) -> tuple[float, float]:
    """(input, output) USD per million tokens, for token and GPU-hour prices alike."""
    pin, pout = model.price.per_token()
    return pin * 1e6, pout * 1e6


def _size(model: Any) -> str:
    total = f"{model.params_total_b:g}B-parameter"
    if model.params_active_b:
        return f"{total} mixture-of-experts model ({model.params_active_b:g}B active per token)"
    return f"{total} model"


def prose(expert: Expert) -> str:
    """What the orchestrator is told about one expert."""
    m = expert.model
    hosting = "self-hosted" if m.self_hosted else "hosted outside the organization"
    text = f"{expert.alias}: a {_size(m)}, context {m.context_length // 1024}k tokens, {hosting}."
    if expert.usable:
        parts = [f"{c} {u}/{n}" for c, (u, n) in sorted(expert.usable.items()) if n]
        if parts:
            text += " Measured usable results per task class: " + ", ".join(parts) + "."
    return text


def price_table(experts: Sequence[Expert]) -> str:
    """The ToolOrchestra-style table: alias, input and output price per million tokens, average latency."""
    rows = [TABLE_HEADER]
    for e in experts:
        pin, pout = prices_per_m(e.model)
        latency = f"{e.latency_s:.2f} s" if e.latency_s is not None else "unknown"
        rows.append(f"{e.alias} | {_money(pin)} | {_money(pout)} | {latency}")
    return "\n".join(rows)


def expert_tool(experts: Sequence[Expert]):
    """The ``call_expert`` tool spec: one required argument ``expert``, an enum of the offered aliases."""
    description = ("Hand this turn to an expert model. It sees the whole conversation and the same task tools, "
                   "and its reply (a tool call or the final answer) is taken as this turn. Choose an expert based "
                   "on the task difficulty and on both expert cost and performance.\n"
                   + "\n".join(prose(e) for e in experts) + "\n" + price_table(experts))
    schema = object_schema({"expert": {"type": "string", "enum": [e.alias for e in experts],
                                       "description": "Alias of the expert that takes this turn."}}, ["expert"])
    return ToolSpec(name=EXPERT_TOOL, description=description, parameters=schema)


def family(model: Any) -> str:
    """A model's family for the self-enhancement flag: the organization part of its Hugging Face id."""
    return str(model.hf_id).split("/", 1)[0].lower()
