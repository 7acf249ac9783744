"""Routing requests with a trained router: probabilities from the artifact, the choice from the policy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

from advisor.errors import DataError
from advisor.router.artifact import RouterModel
from advisor.router.policy import (Decision, PolicyConfig, Preferences, RungFacts, candidate_table, chosen_chains,
                                   decide, eligible, select)


def rung_facts(model: RouterModel) -> list[RungFacts]:
    """The policy's view of the router's rungs."""
    return [RungFacts(r.name, r.self_hosted, r.latency_s) for r in model.rungs]


def route_one(model: RouterModel, text: str, task_class: str | None, config: PolicyConfig,
              prefs: Preferences | None = None, facts: list[RungFacts] | None = None) -> Decision:
    """One decision in-process (the fast path: no sklearn call)."""
    p = model.predict_one(text, task_class)
    tokens = len(text) / 4.0
    cost = [r.attempt_cost(tokens) for r in model.rungs]
    return decide(p, cost, facts or rung_facts(model), config, prefs)


def route_batch(model: RouterModel, texts: Sequence[str], classes: Sequence[str | None], config: PolicyConfig,
                prefs: Preferences | None = None, explain: bool = False) -> list[Decision]:
    """Decisions for many requests: probabilities in one batch, the choice vectorised (same rule as `decide`).

    With ``explain=True`` every decision is made by `decide` and carries its full candidate table; otherwise
    the decision keeps the probabilities, attempt costs, exclusions and rule but not the candidate list.
    """
    import numpy as np

    P = model.predict(texts, classes)
    C = model.attempt_costs(texts)
    facts = rung_facts(model)
    if explain or not len(texts):
        return [decide(P[i], C[i], facts, config, prefs) for i in range(len(texts))]
    prefs = prefs or Preferences()
    _, excluded = eligible(facts, prefs)
    table = candidate_table(P, C, facts, config, prefs)
    pick = select(table, config.target, config.value_usd)
    rows = np.arange(len(texts))
    chains = chosen_chains(table, pick)
    cost, p_use = table["expected_cost"][rows, pick], table["p_usable"][rows, pick]
    met = (table["p_usable"] >= config.target).any(axis=1)
    head = decide(P[0], C[0], facts, config, prefs).rule  # the rule's wording for this configuration
    tail = head[head.index(" ("):] if " (" in head else ""
    weighted = "preference-weighted " if prefs.weights else ""
    lead = (f"highest net value ({config.value_usd:g} USD x P(usable) - {weighted}expected cost)"
            if config.value_usd is not None else f"lowest {weighted}expected cost per usable result")
    names = model.rung_names
    out = []
    for i in range(len(texts)):
        chain = [names[j] for j in chains[i] if j >= 0]
        rule = (lead + f" among candidates with P(usable) >= {config.target:g}" if met[i] else
                f"no candidate reaches P(usable) >= {config.target:g}: highest P(usable)") + tail
        out.append(Decision(rung=chain[0], chain=chain, expected_cost=float(cost[i]), p_usable=float(p_use[i]),
                            cost_per_usable=float(cost[i] / p_use[i]) if p_use[i] > 0 else float("inf"), rule=rule,
                            probabilities=dict(zip(names, map(float, P[i]))),
                            attempt_costs=dict(zip(names, map(float, C[i]))), candidates=[], excluded=excluded))
    return out


def read_requests(path: str | Path, prompt_column: str = "prompt",
                  class_column: str = "task") -> tuple[list[dict[str, Any]], list[str], list[str | None]]:
    """Rows, prompts and classes of a JSONL or CSV request file (DataError on a missing prompt)."""
    from advisor.importers.recorded import read_table

    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".csv"):
        raise DataError(f"{path}: batch requests are .jsonl or .csv")
    rows = read_table(path)
    texts, classes = [], []
    for n, row in enumerate(rows, start=1):
        text = row.get(prompt_column)
        if text is None or not str(text).strip():
            raise DataError(f"{path}: request {n} has no {prompt_column!r}")
        texts.append(str(text))
        cls = row.get(class_column, row.get("task_class"))
        classes.append(None if cls is None else str(cls))
    return rows, texts, classes


def decision_row(decision: Decision, request: dict[str, Any] | None = None, verbose: bool = False) -> dict[str, Any]:
    """One output line of `advisor route`: chosen rung, expected cost and probability (+ explanation)."""
    out: dict[str, Any] = {}
    if request:
        for key in ("id", "prompt_id", "sample_id", "prompt_key"):
            if key in request:
                out[key] = request[key]
    out.update({"rung": decision.rung, "chain": decision.chain, "expected_cost_usd": decision.expected_cost,
                "p_usable": decision.p_usable, "p_usable_first_rung": decision.probabilities[decision.rung],
                "cost_per_usable_usd": decision.cost_per_usable, "rule": decision.rule})
    if verbose:
        out["explanation"] = decision.explain()
    return out


def iter_rows(decisions: Iterable[Decision], rows: Sequence[dict[str, Any]], verbose: bool) -> Iterable[dict]:
    """Output rows for a batch."""
    for d, r in zip(decisions, rows):
        yield decision_row(d, r, verbose)
