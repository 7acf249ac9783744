"""Routing requests with a trained router: probabilities and costs from the artifact, the choice from a policy.

The policy is named (`policies.POLICIES`); by default `policy_name` resolves it from the configuration: an
explicit ``--value`` or ``--target`` uses that rule, otherwise the artifact's default (chosen in
cross-validation at training). One request goes through the same vectorised decision as a batch (of one).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from advisor.errors import DataError
from advisor.importers.recorded import read_table
from advisor.router.model.artifact import RouterModel
from advisor.router.model.cache import cache_of
from advisor.router.routing.policies import Context, Requests, make_policy, to_decisions
from advisor.router.routing.rule import Decision, PolicyConfig, Preferences


def policy_name(model: RouterModel, config: PolicyConfig) -> str:
    """`router` (target or value rule) when the config states one, else the artifact's `default`, if any."""
    if config.value_usd is not None or config.target > 0 or not (model.default or {}).get("value_usd"):
        return "router"
    return "default"


def context(model: RouterModel, config: PolicyConfig, prefs: Preferences | None = None, baseline=None) -> Context:
    """A policy context with the router's fitted chain dependence unless the config sets one."""
    if config.dependence is None:
        config = replace(config, dependence=float(model.dependence))
    return Context(model, config, prefs or Preferences(), baseline)


def route_one(model: RouterModel, text: str, task_class: str | None, config: PolicyConfig,
              prefs: Preferences | None = None, policy: str | None = None, explain: bool = True,
              **params: Any) -> Decision:
    """One decision in-process (a batch of one through the vectorised policy; with `explain`, the decision
    carries its candidate list). The policy is built once per (router, policy, config, preferences,
    parameters) and reused (`built_policy`)."""
    pol = built_policy(model, config, prefs, policy, params)
    p, c = model.score_one(text, task_class)
    batch = Requests([text], [task_class], p[None, :], c[None, :])
    return to_decisions(pol.decide(batch), batch, pol.ctx, pol.excluded, explain=explain)[0]


BUILT_MAX = 256  #: built policies kept per router (requests' preferences vary: bounded, emptied when full)


def built_policy(model: RouterModel, config: PolicyConfig, prefs: Preferences | None = None,
                 policy: str | None = None, params: dict[str, Any] | None = None):
    """The policy `policy` (default: `policy_name`) for this router, config and preferences, built on first use
    and then reused: building one (its context, the rungs the preferences allow, its reason) cost about as much
    as the rule itself on a batch of one. Policies keep no state between decisions, so one object serves every
    request with the same settings; the key is the settings' text (they are plain, mutable dataclasses)."""
    name = policy or policy_name(model, config)
    key = (name, repr(config), repr(prefs), repr(sorted(params.items())) if params else "")
    built = cache_of(model).setdefault("policies", {})
    pol = built.get(key)
    if pol is None:
        if len(built) >= BUILT_MAX:
            built.clear()
        pol = built[key] = make_policy(name, context(model, config, prefs), **(params or {}))
    return pol


def route_batch(model: RouterModel, texts: Sequence[str], classes: Sequence[str | None], config: PolicyConfig,
                prefs: Preferences | None = None, explain: bool = False, policy: str | None = None,
                **params: Any) -> list[Decision]:
    """Decisions for many requests: probabilities and costs in one batch, the choice vectorised.

    With ``explain=True`` every decision carries its full candidate table.
    """
    batch = Requests.score(model, texts, classes)
    ctx = context(model, config, prefs)
    pol = make_policy(policy or policy_name(model, config), ctx, **params)
    if not len(texts):
        return []
    return to_decisions(pol.decide(batch), batch, ctx, pol.excluded, explain=explain)


def read_requests(path: str | Path, prompt_column: str = "prompt",
                  class_column: str = "task") -> tuple[list[dict[str, Any]], list[str], list[str | None]]:
    """Rows, prompts and classes of a JSONL or CSV request file (DataError on a missing prompt)."""
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


def decision_row(decision: Decision, request: dict[str, Any] | None = None, verbose: bool = False,
                 simulated: bool = False) -> dict[str, Any]:
    """One output line of `advisor route`: chosen rung, expected cost and probability (+ explanation)."""
    out: dict[str, Any] = {}
    if request:
        for key in ("id", "prompt_id", "sample_id", "prompt_key"):
            if key in request:
                out[key] = request[key]
    out.update({"rung": decision.rung, "chain": decision.chain, "expected_cost_usd": decision.expected_cost,
                "p_usable": decision.p_usable, "p_usable_first_rung": decision.probabilities[decision.rung],
                "cost_per_usable_usd": _finite(decision.cost_per_usable), "policy": decision.policy,
                "rule": decision.rule, "simulated": simulated})
    if verbose:
        out["explanation"] = {k: _finite(v) if isinstance(v, float) else v for k, v in decision.explain().items()}
        for cand in out["explanation"]["candidates"]:
            for key in ("cost_per_usable_usd", "objective"):
                cand[key] = _finite(cand[key])
    return out


def _finite(x: float) -> float | None:
    """Strict JSON: None instead of inf/NaN."""
    return float(x) if np.isfinite(x) else None


def iter_rows(decisions: Iterable[Decision], rows: Sequence[dict[str, Any]], verbose: bool,
              simulated: bool = False) -> Iterable[dict]:
    """Output rows for a batch."""
    for d, r in zip(decisions, rows):
        yield decision_row(d, r, verbose, simulated)
