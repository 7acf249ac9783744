"""The routing policy: the rung (and escalation chain) with the lowest expected cost per usable result.

Given per-rung usable probabilities p and attempt costs c for one request, every allowed rung r is a candidate
start. In **escalation** mode (a verifier exists) the candidate chains are r followed by the allowed rungs
above it in the escalation order (ladder order by default, or by falling probability), at most `max_chain`
rungs (with ``stop_early``, also every shorter prefix: stopping early and delivering the last answer), each
rung tried up to k times; its expected cost and P(usable) come from `advisor.scores.chain_outcome` with the
verifier's error rates. In **single-shot** mode (no verifier) the chain is r alone, tried once: cost c_r,
quality p_r.

Decision rule: among candidates whose P(usable) reaches `target`, pick the lowest preference-weighted cost
per usable result (or, when the user states what a usable result is worth, ``value_usd``, the highest net value
value x P(usable) - weighted E[cost], RouterBench's willingness-to-pay trade-off) (E[cost] / P(usable), each rung's spend divided by its preference weight, in the spirit of
ToolOrchestra's preference reward); when none reaches the target, pick the highest P(usable) (cheapest on a
tie). Preferences filter first: allowed rungs, self-hosted only, latency limit (rungs with unknown latency are
kept and the explanation says so), weight 0 = never. The reported expected cost is always the real one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from advisor.errors import RouterError, did_you_mean
from advisor.scores import PERFECT, Step, Verifier, chain_outcome


@dataclass(frozen=True)
class RungFacts:
    """What the policy needs to know about a rung besides p and c."""

    name: str
    self_hosted: bool = True
    latency_s: float | None = None


@dataclass
class Preferences:
    """User preferences that restrict or weight rungs."""

    allowed: Sequence[str] | None = None  #: only these rungs (None = all)
    self_hosted_only: bool = False
    max_latency_s: float | None = None
    weights: dict[str, float] = field(default_factory=dict)  #: rung -> preference weight (default 1; 0 = never)


@dataclass
class PolicyConfig:
    """How requests are routed."""

    mode: Literal["single", "escalate"] = "escalate"
    k: int | dict[str, int] = 1  #: attempts per rung before escalating (escalation mode)
    verifier: Verifier = PERFECT  #: measured accept/reject error rates of the verifier
    target: float = 0.0  #: minimum P(usable) of the delivered answer a candidate must reach
    order: Literal["ladder", "probability"] = "ladder"  #: escalation order above the start rung
    max_chain: int = 3  #: at most this many rungs in one chain
    stop_early: bool = False  #: also consider stopping before the end of the chain (delivering a rejected answer)
    value_usd: float | None = None  #: when set: maximise value x P(usable) - E[cost] instead (see module doc)

    def k_of(self, rung: str) -> int:
        """Attempts allowed on `rung`."""
        return max(1, int(self.k.get(rung, 1) if isinstance(self.k, dict) else self.k))


@dataclass
class Decision:
    """One routing decision and why it was taken."""

    rung: str  #: the rung tried first
    chain: list[str]  #: rungs in escalation order (just [rung] in single-shot mode)
    expected_cost: float  #: E[USD per request], retries and escalations included
    p_usable: float  #: P(the delivered answer is usable)
    cost_per_usable: float
    rule: str
    probabilities: dict[str, float]
    attempt_costs: dict[str, float]
    candidates: list[dict[str, Any]]
    excluded: dict[str, str]

    def explain(self) -> dict[str, Any]:
        """The decision as plain data (stored with the decision, printed by `advisor route --json`)."""
        return {"rung": self.rung, "chain": self.chain, "expected_cost_usd": self.expected_cost,
                "p_usable": self.p_usable, "cost_per_usable_usd": self.cost_per_usable, "rule": self.rule,
                "probabilities": self.probabilities, "attempt_costs_usd": self.attempt_costs,
                "candidates": self.candidates, "excluded": self.excluded}


def eligible(rungs: Sequence[RungFacts], prefs: Preferences) -> tuple[list[int], dict[str, str]]:
    """Indices of the rungs the preferences allow, and the reason each other rung is out."""
    names = [r.name for r in rungs]
    for n in list(prefs.allowed or []) + list(prefs.weights):
        if n not in names:
            raise RouterError(f"unknown rung {n!r} in preferences.{did_you_mean(n, names)}")
    keep, out = [], {}
    for i, r in enumerate(rungs):
        if prefs.allowed is not None and r.name not in prefs.allowed:
            out[r.name] = "not in the allowed rungs"
        elif prefs.self_hosted_only and not r.self_hosted:
            out[r.name] = "not self-hosted"
        elif prefs.max_latency_s is not None and r.latency_s is not None and r.latency_s > prefs.max_latency_s:
            out[r.name] = f"latency {r.latency_s:.2f}s above the limit {prefs.max_latency_s:.2f}s"
        elif prefs.weights.get(r.name, 1.0) <= 0:
            out[r.name] = "preference weight 0"
        else:
            keep.append(i)
    if not keep:
        raise RouterError("no rung is allowed by these preferences: " + "; ".join(f"{k}: {v}" for k, v in out.items()))
    return keep, out


def chains(keep: list[int], p: np.ndarray, config: PolicyConfig) -> list[list[int]]:
    """Candidate chains (lists of rung indices), one per allowed start rung."""
    if config.mode == "single":
        return [[i] for i in keep]
    out = []
    for pos, i in enumerate(keep):
        above = keep[pos + 1:]
        if config.order == "probability":
            above = sorted(above, key=lambda j: -p[j])
        full = [i, *above[: max(0, config.max_chain - 1)]]
        lengths = range(1, len(full) + 1) if config.stop_early else [len(full)]
        out.extend(full[:length] for length in lengths)
    return out


def decide(p: Sequence[float], cost: Sequence[float], rungs: Sequence[RungFacts], config: PolicyConfig,
           prefs: Preferences | None = None) -> Decision:
    """Choose the chain for one request (see the module docstring); the decision explains itself."""
    prefs = prefs or Preferences()
    p = np.asarray(p, dtype=float)
    cost = np.asarray(cost, dtype=float)
    keep, excluded = eligible(rungs, prefs)
    verifier = None if config.mode == "single" else config.verifier
    cands = []
    for chain in chains(keep, p, config):
        steps = [Step(p[i], cost[i], config.k_of(rungs[i].name), rungs[i].name) for i in chain]
        real = chain_outcome(steps, verifier)
        weighted = real if not prefs.weights else chain_outcome(
            [Step(s.p, s.cost / prefs.weights.get(s.name, 1.0), s.k, s.name) for s in steps], verifier)
        cands.append({"chain": [rungs[i].name for i in chain], "expected_cost_usd": real.expected_cost,
                      "p_usable": real.p_usable, "cost_per_usable_usd": real.cost_per_usable,
                      "objective": weighted.cost_per_usable, "meets_target": real.p_usable >= config.target,
                      "weighted_cost_usd": weighted.expected_cost})
    ok = [c for c in cands if c["meets_target"]]
    if ok and config.value_usd is not None:
        best = max(ok, key=lambda c: (config.value_usd * c["p_usable"] - c["weighted_cost_usd"],
                                      -c["expected_cost_usd"]))
        rule = (f"highest net value ({config.value_usd:g} USD x P(usable) - {'preference-weighted ' if prefs.weights else ''}"
                f"expected cost) among {len(ok)} candidate(s) with P(usable) >= {config.target:g}")
    elif ok:
        best = min(ok, key=lambda c: (c["objective"], c["expected_cost_usd"]))
        rule = (f"lowest {'preference-weighted ' if prefs.weights else ''}expected cost per usable result among "
                f"{len(ok)} candidate(s) with P(usable) >= {config.target:g}")
    else:
        best = max(cands, key=lambda c: (c["p_usable"], -c["expected_cost_usd"]))
        rule = f"no candidate reaches P(usable) >= {config.target:g}: highest P(usable)"
    if config.mode == "single":
        rule += " (single-shot: no verifier, no retry)"
    else:
        rule += f" (escalation: k={config.k}, verifier false accept {config.verifier.false_accept:g}, " \
                f"false reject {config.verifier.false_reject:g})"
    unknown_latency = [rungs[i].name for i in keep if rungs[i].latency_s is None]
    if prefs.max_latency_s is not None and unknown_latency:
        rule += f"; latency unknown, not checked for: {', '.join(unknown_latency)}"
    return Decision(rung=best["chain"][0], chain=best["chain"], expected_cost=best["expected_cost_usd"],
                    p_usable=best["p_usable"], cost_per_usable=best["cost_per_usable_usd"], rule=rule,
                    probabilities={r.name: float(p[i]) for i, r in enumerate(rungs)},
                    attempt_costs={r.name: float(cost[i]) for i, r in enumerate(rungs)},
                    candidates=cands, excluded=excluded)


# ------------------------------------------------------------------------------------- vectorised (batches)
def chain_outcome_batch(p: np.ndarray, cost: np.ndarray, k: Sequence[int], verifier: Verifier | None,
                        valid: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """`chain_outcome` for many requests at once: p, cost (n, S) along each chain -> (E[cost], P(usable)).

    `valid` (n, S) marks the steps that exist (chains shorter than S are padded with False). Same maths as
    `advisor.scores.chain_outcome` (the tests check they agree).
    """
    p = np.clip(p, 0.0, 1.0)
    n, S = p.shape
    valid = np.ones_like(p, dtype=bool) if valid is None else valid
    if verifier is None:
        return cost[:, 0].copy(), p[:, 0].copy()
    reach = np.ones(n)
    exp_cost, p_use = np.zeros(n), np.zeros(n)
    last = np.zeros((n, S), dtype=bool)
    last[np.arange(n), valid.sum(axis=1) - 1] = True
    for s in range(S):
        v = valid[:, s]
        a = verifier.accept_rate(p[:, s])
        kk = max(1, int(k[s]))
        fail = (1.0 - a) ** kk
        with np.errstate(divide="ignore", invalid="ignore"):
            attempts = np.where(a > 0, (1.0 - fail) / a, kk)
            accepted_usable = np.where(a > 0, (1.0 - fail) * p[:, s] * (1 - verifier.false_reject) / a, 0.0)
            rejected_usable = np.where((last[:, s]) & (fail > 0),
                                       fail * p[:, s] * verifier.false_reject / np.maximum(1.0 - a, 1e-300), 0.0)
        exp_cost += np.where(v, reach * cost[:, s] * attempts, 0.0)
        p_use += np.where(v, reach * (accepted_usable + rejected_usable), 0.0)
        reach = np.where(v, reach * fail, reach)
    return exp_cost, np.minimum(p_use, 1.0)


def candidate_table(P: np.ndarray, C: np.ndarray, rungs: Sequence[RungFacts], config: PolicyConfig,
                    prefs: Preferences | None = None) -> dict[str, np.ndarray]:
    """For a batch (n, R): per candidate start rung, E[cost], P(usable) and objective, all (n, R').

    Also returns the chains as rung indices (n, R', max_chain) padded with -1, for realised-outcome evaluation.
    Same candidates and maths as `decide` (the tests check they agree).
    """
    prefs = prefs or Preferences()
    keep, _ = eligible(rungs, prefs)
    verifier = None if config.mode == "single" else config.verifier
    n = P.shape[0]
    L = 1 if config.mode == "single" else config.max_chain
    w = np.array([prefs.weights.get(r.name, 1.0) for r in rungs])
    full = []
    rows = np.arange(n)[:, None]
    for c, start in enumerate(keep):
        above = np.array(keep[c + 1:], dtype=int) if L > 1 else np.zeros(0, dtype=int)
        if config.order == "probability" and len(above) > 1:
            tail = above[np.argsort(-P[:, above], axis=1, kind="stable")[:, : L - 1]]
        else:
            tail = np.broadcast_to(above[: L - 1], (n, min(len(above), L - 1)))
        chain = np.concatenate([np.full((n, 1), start), tail], axis=1)
        lengths = range(1, chain.shape[1] + 1) if config.stop_early else [chain.shape[1]]
        full.extend(chain[:, :length] for length in lengths)  # as in `chains`
    exp_cost, p_use, obj, wcost = (np.zeros((n, len(full))) for _ in range(4))
    chain_idx = -np.ones((n, len(full), L), dtype=int)
    for c, chain in enumerate(full):
        chain_idx[:, c, : chain.shape[1]] = chain
        # per-rung k follows the first request's chain (exact for ladder order, where every chain is the same)
        ks = [config.k_of(rungs[int(chain[0, s])].name) for s in range(chain.shape[1])]
        pc, cc = P[rows, chain], C[rows, chain]
        exp_cost[:, c], p_use[:, c] = chain_outcome_batch(pc, cc, ks, verifier)
        weighted, _ = chain_outcome_batch(pc, cc / w[chain], ks, verifier)
        wcost[:, c] = weighted
        with np.errstate(divide="ignore"):
            obj[:, c] = np.where(p_use[:, c] > 0, weighted / np.maximum(p_use[:, c], 1e-300), np.inf)
    return {"expected_cost": exp_cost, "p_usable": p_use, "objective": obj, "chains": chain_idx,
            "weighted_cost": wcost}


def chosen_chains(table: dict[str, np.ndarray], pick: np.ndarray) -> np.ndarray:
    """The (n, max_chain) rung indices of the candidates `pick` selected."""
    return table["chains"][np.arange(len(pick)), pick]


def select(table: dict[str, np.ndarray], target: float, value_usd: float | None = None) -> np.ndarray:
    """Index (into the candidates) chosen per request under `decide`'s rule for a given target (and value)."""
    meets = table["p_usable"] >= target
    if value_usd is not None:
        obj = np.where(meets, -(value_usd * table["p_usable"] - table["weighted_cost"]), np.inf)
    else:
        obj = np.where(meets, table["objective"], np.inf)
    # tie-break on expected cost, as `decide` does
    obj_rank = np.lexsort((table["expected_cost"].T, obj.T), axis=0)[0] if obj.shape[1] > 1 else np.zeros(len(obj), int)
    fallback = np.lexsort((table["expected_cost"].T, -table["p_usable"].T), axis=0)[0] \
        if obj.shape[1] > 1 else np.zeros(len(obj), int)
    return np.where(meets.any(axis=1), obj_rank, fallback)
