"""Routing policies by name: **batch** policies decide over a batch of requests, **episodic** ones act inside an
episode.

A batch policy (`Policy`) is built from a `Context` (the trained router, the `PolicyConfig`, the user's `Preferences`, and the
baseline model when there is one) plus its own parameters, and answers `decide(batch) -> Choice`: per request
the chain of rung indices, its predicted expected cost and P(usable), and a structured reason. One request is a
batch of one. Policies are registered in `POLICIES` (`advisor.registry.Registry`); other parts add theirs the
same way::

    @POLICIES.register("my-policy")
    class MyPolicy(Policy):
        def decide(self, batch): ...

`route_one` reuses a built policy for every request with the same settings (`route.built_policy`):
`decide` must not change the policy object.

An episodic policy (`EpisodicPolicy`) routes turn by turn inside an episode and has no batch decision: the probe
runs it (``advisor probe --policy orchestrator``) through its `runner`; `make_policy` refuses it in one line.

Every built-in registers itself where it is defined, and `POLICIES` lists the modules that define them
(``builtins``), imported on its first lookup: ``POLICIES.names()`` on a fresh interpreter lists them all, and
importing this module imports none of the episodic ones. Callers read what they need from the registry:
`batch_policies`, `episodic_policies`, `probe_chain_policies` (the batch policies ``advisor probe`` runs as
chains: class attribute ``probe_mode``) and `baseline_policies` (the comparisons the offline evaluation judges
the router against: ``baseline = True``).

Built in: ``router`` (the target rule: lowest cost per usable result among candidates reaching a P(usable)
target), ``value`` (highest value x P(usable) - cost over candidate chains), ``rung_value`` (the plain rule:
argmax over rungs of value x P(usable) - cost, then up the ladder), ``default`` (the rule and operating point
chosen in cross-validation at training, stored in the artifact), ``class_floor``, ``threshold`` (RouteLLM-style weak/
strong), ``always`` (one rung), ``chain`` (rungs named in order), ``cascade`` (cheapest-first over all rungs) and
``baseline`` (per-rung tf-idf logistic regression, argmax p - lambda x cost; `baseline.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Sequence

import numpy as np

from advisor.errors import RouterError, did_you_mean
from advisor.registry import Registry
from advisor.router.routing.rule import (Decision, PolicyConfig, Preferences, RungFacts, base_reason, candidate_table,
                                         chains_outcome, chosen_chains, describe, eligible, rung_value_chains,
                                         select)

#: Every routing policy class by name; the built-in modules register theirs on the first lookup.
POLICIES: Registry[type] = Registry("routing policy",
                                   builtins=("advisor.router.routing.policies",),
                                   entry_points="advisor.policies")


@dataclass
class Requests:
    """A batch of requests and what policies score them by (computed once, shared by every policy)."""

    texts: Sequence[str]
    classes: Sequence[str | None]
    P: np.ndarray  #: (n, R) the router's calibrated P(usable)
    C: np.ndarray  #: (n, R) predicted USD per attempt
    cache: dict = field(default_factory=dict)  #: candidate tables and other policies' scores, by key

    @classmethod
    def score(cls, model, texts: Sequence[str], classes: Sequence[str | None] | None = None) -> "Requests":
        """Score `texts` with the router `model` (features once for probabilities and costs)."""
        classes = list(classes) if classes is not None else [None] * len(texts)
        P, C = model.predict_with_costs(texts, classes)
        return cls(list(texts), classes, P, C)

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class Context:
    """What a policy is built from."""

    model: Any  #: RouterModel
    config: PolicyConfig
    prefs: Preferences = field(default_factory=Preferences)
    baseline: Any = None  #: a fitted `baseline.TfidfLogistic`, for the ``baseline`` policy

    @cached_property
    def facts(self) -> list[RungFacts]:
        """The policy's view of the rungs (built once per context: a decision reads it several times)."""
        return [RungFacts(r.name, r.self_hosted, r.latency_s) for r in self.model.rungs]


@dataclass
class Choice:
    """Decisions for a batch: chains (n, L) of rung indices padded with -1, predicted cost and P(usable)."""

    policy: str
    chains: np.ndarray
    expected_cost: np.ndarray
    p_usable: np.ndarray
    reason: dict[str, Any]  #: shared by the batch
    met: np.ndarray | None = None  #: (n,) whether a candidate reached the target (target rules)
    table: dict | None = None  #: the candidate table, when the policy has one
    pick: np.ndarray | None = None


class Policy:
    """A batch policy: subclasses set `name` by registration and implement `decide`."""

    name = "policy"
    kind = "batch"
    probe_mode: str | None = None  #: "single" | "escalate": ``advisor probe --policy NAME`` runs it as chains
    baseline = False  #: a comparison the offline evaluation judges the router's default against

    def __init__(self, ctx: Context, **params: Any) -> None:
        self.ctx = ctx
        self.params = params
        self.keep, self.excluded = eligible(ctx.facts, ctx.prefs)

    @cached_property
    def table_key(self) -> tuple:
        """`table_for`'s key: this policy's config and preferences as text (computed once: a policy serves many
        requests)."""
        return ("table", repr(self.ctx.config), repr(self.ctx.prefs))

    def decide(self, batch: Requests) -> Choice:  # pragma: no cover - interface
        """Vectorised decision for every request of `batch`."""
        raise NotImplementedError

    # helpers shared by the fixed-chain policies
    def _fixed(self, start: np.ndarray) -> np.ndarray:
        """Chains that start at `start` (n,) and go up the allowed rungs in ladder order (escalation mode)."""
        L = 1 if self.ctx.config.mode == "single" else self.ctx.config.max_chain
        table = -np.ones((len(self.ctx.model.rungs), L), dtype=int)
        for pos, s in enumerate(self.keep):
            chain = [s, *self.keep[pos + 1:]][:L]
            table[s, : len(chain)] = chain
        return table[np.asarray(start, dtype=int)]

    def _choice(self, batch: Requests, chains: np.ndarray, reason: dict[str, Any]) -> Choice:
        cost, p = predicted_outcome(batch.P, batch.C, chains, self.ctx)
        full = {**base_reason(self.ctx.config, self.ctx.prefs, self.ctx.facts, self.keep), **reason}
        return Choice(self.name, chains, cost, p, full)


def predicted_outcome(P: np.ndarray, C: np.ndarray, chains: np.ndarray, ctx: Context):
    """The router's predicted (E[cost], P(usable)) of given chains (n, L)."""
    return chains_outcome(P, C, chains, ctx.facts, ctx.config)


def table_for(batch: Requests, policy: Policy) -> dict[str, np.ndarray]:
    """The candidate table of `batch` under the policy's config and preferences (cached on the batch, under the
    policy's `table_key`, for the other policies scoring the same batch)."""
    if policy.table_key not in batch.cache:
        ctx = policy.ctx
        batch.cache[policy.table_key] = candidate_table(batch.P, batch.C, ctx.facts, ctx.config, ctx.prefs)
    return batch.cache[policy.table_key]


@POLICIES.register("router")
class TargetRule(Policy):
    """Lowest (weighted) expected cost per usable result among candidates with P(usable) >= target."""

    name = "router"
    probe_mode = "single"  #: the probe's router arm: the rung it picks, one attempt, no verifier

    def decide(self, batch: Requests) -> Choice:
        cfg = self.ctx.config
        target = float(self.params.get("target", cfg.target))
        value = self.params.get("value_usd", cfg.value_usd if self.name == "router" else None)
        table = table_for(batch, self)
        pick = select(table, target, value)
        rows = np.arange(len(batch))
        met = (table["p_usable"] >= target).any(axis=1)
        reason = {**base_reason(cfg, self.ctx.prefs, self.ctx.facts, self.keep), "target": target,
                  "candidates": table["p_usable"].shape[1],
                  "rule": "max_net_value" if value is not None else "min_cost_per_usable"}
        if value is not None:
            reason["value_usd"] = float(value)
        if self.params.get("note"):
            reason["default"] = self.params["note"]
        return Choice(self.name, chosen_chains(table, pick), table["expected_cost"][rows, pick],
                      table["p_usable"][rows, pick], reason, met, table, pick)


@POLICIES.register("value")
class ValueRule(TargetRule):
    """Highest value x P(usable) - (weighted) expected cost (``value_usd``: what a usable result is worth)."""

    name = "value"
    probe_mode = None

    def __init__(self, ctx: Context, **params: Any) -> None:
        if params.get("value_usd") is None:
            raise RouterError("the value policy needs value_usd (what a usable result is worth, USD)")
        super().__init__(ctx, **params)


@POLICIES.register("rung_value")
class RungValue(ValueRule):
    """The plain rule: start at argmax over rungs of value x P(usable) - (weighted) attempt cost, with the
    router's P and predicted cost, then up the allowed rungs in ladder order (`rule.rung_value_chains`)."""

    name = "rung_value"

    def decide(self, batch: Requests) -> Choice:
        cfg = self.ctx.config
        value = float(self.params["value_usd"])
        weights = (np.array([self.ctx.prefs.weights.get(r.name, 1.0) for r in self.ctx.facts])
                   if self.ctx.prefs.weights else None)
        chains = rung_value_chains(batch.P, batch.C, self.keep, value,
                                   1 if cfg.mode == "single" else cfg.max_chain, weights)
        reason = {"rule": "rung_net_value", "value_usd": value}
        if self.params.get("note"):
            reason["default"] = self.params["note"]
        return self._choice(batch, chains, reason)


#: The decision rules the training chooses between in cross-validation (`tuning.choose_rule`), by the policy
#: that applies each; the first wins a tie.
DECISION_RULES = {"chain_value": "value", "rung_value": "rung_value"}


@POLICIES.register("default")
class DefaultRule(ValueRule):
    """The rule and operating point chosen in cross-validation at training (see `tuning.py`): the chain value
    rule, or the plain per-rung rule where the artifact records that it won (``default.rule``)."""

    name = "default"

    def __init__(self, ctx: Context, **params: Any) -> None:
        d = ctx.model.default or {}
        values = d.get("value_usd") or {}
        if ctx.config.mode not in values:
            raise RouterError("this router artifact has no default operating point; retrain it with "
                              "`advisor router train`, or give --target or --value")
        note = f"default chosen in CV: {d.get('criterion', '')}".strip()
        self.rule = (d.get("rule") or {}).get(ctx.config.mode, "chain_value")
        super().__init__(ctx, **{"value_usd": float(values[ctx.config.mode]), "note": note, **params})

    def decide(self, batch: Requests) -> Choice:
        if self.rule == "rung_value":
            return RungValue.decide(self, batch)  # type: ignore[arg-type]  (same attributes: a ValueRule)
        return super().decide(batch)


@POLICIES.register("always")
class Always(Policy):
    """Every request to one rung (``rung``; escalating up the ladder from it in escalation mode)."""

    name = "always"

    def decide(self, batch: Requests) -> Choice:
        names = self.ctx.model.rung_names
        rung = self.params.get("rung", names[-1])
        if rung not in names:
            raise RouterError(f"unknown rung {rung!r}.{did_you_mean(rung, names)}")
        start = np.full(len(batch), names.index(rung))
        return self._choice(batch, self._fixed(start), {"rule": "always", "text": f"always {rung}"})


@POLICIES.register("chain")
class FixedChain(Policy):
    """A chain named rung by rung (``rungs``): the allowed ones in the given order (in single-shot mode, the first
    of them). The service's classes with a configured ``chain`` are routed by it."""

    name = "chain"

    def decide(self, batch: Requests) -> Choice:
        names = self.ctx.model.rung_names
        given = list(self.params.get("rungs") or [])
        for rung in given:
            if rung not in names:
                raise RouterError(f"unknown rung {rung!r} in the chain.{did_you_mean(rung, names)}")
        chain = [names.index(n) for n in given if names.index(n) in self.keep]
        if not chain:
            raise RouterError(f"no rung of the chain ({', '.join(given) or 'empty'}) is allowed")
        chain = chain[:1] if self.ctx.config.mode == "single" else chain
        return self._choice(batch, np.tile(np.array(chain), (len(batch), 1)),
                            {"rule": "chain", "text": "fixed chain: " + " -> ".join(names[j] for j in chain)})


@POLICIES.register("class_floor")
class ClassFloor(Policy):
    """Per class, the cheapest rung whose training usable rate reaches ``target`` (else the best rung)."""

    name = "class_floor"
    baseline = True

    def decide(self, batch: Requests) -> Choice:
        stats = self.ctx.model.training["stats"]
        t = float(self.params.get("target", 0.8))
        rate, mcost = np.array(stats["rung_rate"], float), np.array(stats["rung_mean_cost"], float)
        keep = np.array(self.keep)
        by_class: dict[str | None, int] = {}
        for c in set(batch.classes):
            rates = np.array([np.nan if x is None else x for x in stats["class_rates"].get(c or "", rate)], float)
            rates = np.where(np.isnan(rates), rate, rates)[keep]
            ok = np.flatnonzero(rates >= t)
            by_class[c] = int(keep[ok[np.argmin(mcost[keep][ok])]] if len(ok) else keep[np.argmax(rates)])
        start = np.array([by_class[c] for c in batch.classes], dtype=int)
        return self._choice(batch, self._fixed(start), {"rule": "class_floor", "target": t, "text":
                            f"cheapest rung whose training usable rate in the class reaches {t:g}"})


@POLICIES.register("threshold")
class Threshold(Policy):
    """RouteLLM-style: the cheap rung when the router's P(usable | cheap) >= ``threshold``, else the best."""

    name = "threshold"
    baseline = True

    def decide(self, batch: Requests) -> Choice:
        stats = self.ctx.model.training["stats"]
        t = float(self.params.get("threshold", 0.5))
        rate, mcost = np.array(stats["rung_rate"], float), np.array(stats["rung_mean_cost"], float)
        strong = max(self.keep, key=lambda j: (rate[j], -mcost[j]))
        weak = min(self.keep, key=lambda j: (mcost[j], -rate[j]))
        use_weak = batch.P[:, weak] >= t
        L = 1 if self.ctx.config.mode == "single" else 2
        chains = -np.ones((len(batch), L), dtype=int)
        chains[:, 0] = np.where(use_weak, weak, strong)
        if L == 2 and weak != strong:
            chains[:, 1] = np.where(use_weak, strong, -1)
        names = self.ctx.model.rung_names
        return self._choice(batch, chains, {"rule": "threshold", "threshold": t, "weak": names[weak],
                                            "strong": names[strong], "text": f"{names[weak]} when its P(usable) "
                                            f">= {t:g}, else {names[strong]}"})


@POLICIES.register("cascade")
class Cascade(Policy):
    """Cheapest-first cascade over every allowed rung, ordered by mean training cost (stops at the first
    accepted answer; in single-shot mode: the cheapest rung)."""

    name = "cascade"
    probe_mode = "escalate"  #: the probe's cascade arm: cheapest first while the verifier rejects
    baseline = True

    def decide(self, batch: Requests) -> Choice:
        mcost = np.array(self.ctx.model.training["stats"]["rung_mean_cost"], float)
        order = sorted(self.keep, key=lambda j: mcost[j])
        L = 1 if self.ctx.config.mode == "single" else len(order)
        chains = np.tile(np.array(order[:L]), (len(batch), 1))
        names = self.ctx.model.rung_names
        return self._choice(batch, chains, {"rule": "cascade", "text": "cheapest-first cascade: "
                                            + " -> ".join(names[j] for j in order[:L])})


@POLICIES.register("baseline")
class Baseline(Policy):
    """Per-rung tf-idf logistic regression; argmax p - lambda x mean cost (``value_usd`` = 1 / lambda)."""

    name = "baseline"
    baseline = True

    def decide(self, batch: Requests) -> Choice:
        if self.ctx.baseline is None:
            raise RouterError("the baseline policy needs a fitted baseline model (router eval fits one per fold)")
        key = ("baseline", id(self.ctx.baseline))
        if key not in batch.cache:
            batch.cache[key] = self.ctx.baseline.predict(batch.texts, batch.classes)
        Pb = batch.cache[key]
        value = float(self.params.get("value_usd", 1.0))
        keep = np.array(self.keep)
        score = value * Pb[:, keep] - self.ctx.baseline.mean_cost[keep]
        start = keep[np.argmax(score, axis=1)]
        return self._choice(batch, self._fixed(start), {"rule": "baseline", "value_usd": value, "text":
                            f"tf-idf logistic baseline: argmax P - cost / {value:g}"})


class EpisodicPolicy:
    """An episodic policy: routes inside an episode, turn by turn, so it has no batch decision. Subclasses give
    the model its runs are stored under (`model_of`) and the probe's episode function (`runner`)."""

    name = "episodic"
    kind = "episodic"

    def __init__(self, ctx: Any = None, **params: Any) -> None:
        self.ctx, self.params = ctx, params

    @staticmethod
    def model_of(ladder: Any) -> Any:  # pragma: no cover - interface
        """The model the policy's runs are stored under."""
        raise NotImplementedError

    @staticmethod
    def runner(ladder: Any, client_for: Any, **options: Any):  # pragma: no cover - interface
        """An episode function with `advisor.agent.loop.run_episode`'s signature."""
        raise NotImplementedError


def _names(keep) -> list[str]:
    return [name for name, cls in POLICIES.items().items() if keep(cls)]


def batch_policies() -> list[str]:
    """The registered policies that decide over a batch (`Policy`), sorted."""
    return _names(lambda cls: getattr(cls, "kind", "batch") == "batch")


def episodic_policies() -> list[str]:
    """The registered policies that act inside an episode (`EpisodicPolicy`), sorted."""
    return _names(lambda cls: getattr(cls, "kind", "batch") == "episodic")


def probe_chain_policies() -> list[str]:
    """The batch policies the probe runs as chains of rung episodes: single-shot ones first, then escalating."""
    found = _names(lambda cls: getattr(cls, "kind", "batch") == "batch" and getattr(cls, "probe_mode", None))
    return sorted(found, key=lambda n: (POLICIES.get(n).probe_mode != "single", n))


def baseline_policies() -> list[str]:
    """The batch policies the offline evaluation compares the router's default with, sorted."""
    return _names(lambda cls: getattr(cls, "baseline", False))


def make_policy(name: str, ctx: Context, **params: Any) -> Policy:
    """The batch policy registered as `name`, built for `ctx` (UnknownNameError with did-you-mean otherwise;
    RouterError for an episodic policy, which has no batch decision)."""
    cls = POLICIES.get(name)
    if getattr(cls, "kind", "batch") != "batch":
        raise RouterError(f"{name!r} is an episodic policy: it routes turn by turn inside an episode (run it with "
                          f"`advisor probe --policy {name}`), not over a batch of requests; batch policies: "
                          f"{', '.join(batch_policies())}")
    return cls(ctx, **params)


def to_decisions(choice: Choice, batch: Requests, ctx: Context, excluded: dict[str, str],
                 explain: bool = False) -> list[Decision]:
    """One `Decision` per request of a `Choice` (with the candidate list when `explain` and a table exists)."""
    names = ctx.model.rung_names if hasattr(ctx.model, "rung_names") else [r.name for r in ctx.facts]
    return _decisions(choice, batch.P, batch.C, names, excluded, explain)


def _decisions(choice: Choice, P: np.ndarray, C: np.ndarray, names: Sequence[str], excluded: dict[str, str],
               explain: bool) -> list[Decision]:
    out = []
    for i in range(len(choice.chains)):
        chain = [names[j] for j in choice.chains[i] if j >= 0]
        reason = dict(choice.reason)
        if choice.met is not None and not choice.met[i]:
            reason["rule"] = "highest_p"
        cands = []
        if explain and choice.table is not None:
            t = choice.table
            for c in range(t["p_usable"].shape[1]):
                cands.append({"chain": [names[j] for j in t["chains"][i, c] if j >= 0],
                              "expected_cost_usd": float(t["expected_cost"][i, c]),
                              "p_usable": float(t["p_usable"][i, c]),
                              "cost_per_usable_usd": _per_usable(t["expected_cost"][i, c], t["p_usable"][i, c]),
                              "objective": float(t["objective"][i, c]),
                              "meets_target": bool(t["p_usable"][i, c] >= reason.get("target", 0.0)),
                              "weighted_cost_usd": float(t["weighted_cost"][i, c])})
        cost, p = float(choice.expected_cost[i]), float(choice.p_usable[i])
        out.append(Decision(rung=chain[0], chain=chain, expected_cost=cost, p_usable=p,
                            cost_per_usable=_per_usable(cost, p), rule=describe(reason),
                            probabilities=dict(zip(names, P[i].tolist())),
                            attempt_costs=dict(zip(names, C[i].tolist())), candidates=cands,
                            excluded=excluded, reason=reason, policy=choice.policy))
    return out


def _per_usable(cost: float, p: float) -> float:
    return float(cost / p) if p > 0 else float("inf")


def decisions_from_table(P: np.ndarray, C: np.ndarray, rungs: Sequence[RungFacts], config: PolicyConfig,
                         prefs: Preferences, explain: bool = False) -> list[Decision]:
    """The router rule (target or value, from `config`) on raw arrays, without a trained model."""
    keep, excluded = eligible(rungs, prefs)
    table = candidate_table(P, C, rungs, config, prefs)
    pick = select(table, config.target, config.value_usd)
    rows = np.arange(len(P))
    reason = {**base_reason(config, prefs, rungs, keep), "candidates": table["p_usable"].shape[1],
              "rule": "max_net_value" if config.value_usd is not None else "min_cost_per_usable"}
    if config.value_usd is not None:
        reason["value_usd"] = float(config.value_usd)
    met = (table["p_usable"] >= config.target).any(axis=1)
    choice = Choice("router", chosen_chains(table, pick), table["expected_cost"][rows, pick],
                    table["p_usable"][rows, pick], reason, met, table, pick)
    return _decisions(choice, P, C, [r.name for r in rungs], excluded, explain)


def with_mode(ctx: Context, **changes: Any) -> Context:
    """A copy of `ctx` whose config has `changes` (e.g. mode="single")."""
    return replace(ctx, config=replace(ctx.config, **changes))


def decide_one(p: Sequence[float], cost: Sequence[float], rungs: Sequence[RungFacts], config: PolicyConfig,
               prefs: Preferences | None = None) -> Decision:
    """Choose the chain for one request: the vectorised rule on a batch of one, with its candidate table."""
    P = np.asarray(p, dtype=float)[None, :]
    C = np.asarray(cost, dtype=float)[None, :]
    return decisions_from_table(P, C, rungs, config, prefs or Preferences(), explain=True)[0]
