"""The routing rule's maths: candidate chains, their expected cost and P(usable), and the choice among them.

Given per-rung usable probabilities P and attempt costs C for a **batch** of requests (one request is a batch
of one: there is no second scalar copy of the rule), every allowed rung r is a candidate start. In
**escalation** mode (a verifier exists) the candidate chains are r followed by the allowed rungs above it in the
escalation order (ladder order by default, or by falling probability), at most `max_chain` rungs (with
``stop_early``, also every shorter prefix), each rung tried up to k times; `chain_outcome_batch` gives each
chain's expected cost and P(usable) under the verifier's error rates and the **dependence** between rungs'
failures (below). In **single-shot** mode (no verifier) the chain is r alone, tried once: cost c_r, quality p_r.

Decision rule: among candidates whose P(usable) reaches `target`, the lowest preference-weighted cost per usable
result; or, with ``value_usd`` (what a usable result is worth), the highest value x P(usable) - weighted
E[cost]. When none reaches the target: the highest P(usable), where candidates within `P_TIE` (0.01) of the
highest count as tied and the tie goes to the lowest weighted cost per usable result (so a near-useless first
attempt that adds a sliver of P(usable) is not bought at full price). Preferences filter first:
allowed rungs, self-hosted only, latency limit (rungs with unknown latency are kept and the explanation says
so), weight 0 = never. The reported expected cost is always the real one.

Retry and dependence model (the one stated model, shared with `advisor.scores.chain_outcome`): attempts on one
rung are independent draws with that rung's p; across rungs, P(every step rejected) =
(1 - rho) x prod(fail_s) + rho x min(fail_s), a mixture of independent and fully dependent failures (a request
that fails one rung is likelier to fail the next). rho = 0 is the independent model; the router fits rho on
out-of-fold training outcomes (`tuning.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, NamedTuple, Sequence

import numpy as np

from advisor.errors import RouterError, did_you_mean
from advisor.scores import PERFECT, VerifierErrors

P_TIE = 0.01  #: highest-P(usable) fallback: candidates within this of the best P count as tied (module doc)


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
    verifier: VerifierErrors = PERFECT  #: measured accept/reject error rates of the verifier
    target: float = 0.0  #: minimum P(usable) of the delivered answer a candidate must reach
    order: Literal["ladder", "probability"] = "ladder"  #: escalation order above the start rung
    max_chain: int = 3  #: at most this many rungs in one chain
    stop_early: bool = False  #: also consider stopping before the end of the chain (delivering a rejected answer)
    value_usd: float | None = None  #: when set: maximise value x P(usable) - E[cost] instead (see module doc)
    dependence: float | None = None  #: rho of the dependence model (module doc); None = the router's fitted rho
    #: (independent, 0, when there is no router)

    def k_of(self, rung: str) -> int:
        """Attempts allowed on `rung`."""
        return max(1, int(self.k.get(rung, 1) if isinstance(self.k, dict) else self.k))


@dataclass
class Decision:
    """One routing decision and why it was taken (`reason` is structured; `rule` is rendered from it)."""

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
    reason: dict[str, Any] = field(default_factory=dict)
    policy: str = "router"

    def explain(self) -> dict[str, Any]:
        """The decision as plain data (stored with the decision, printed by `advisor route --json`)."""
        return {"policy": self.policy, "rung": self.rung, "chain": self.chain,
                "expected_cost_usd": self.expected_cost, "p_usable": self.p_usable,
                "cost_per_usable_usd": self.cost_per_usable, "rule": self.rule, "reason": self.reason,
                "probabilities": self.probabilities, "attempt_costs_usd": self.attempt_costs,
                "candidates": self.candidates, "excluded": self.excluded}


def describe(reason: dict[str, Any]) -> str:
    """The sentence of a structured reason (built from data, never parsed back)."""
    kind, w = reason.get("rule"), "preference-weighted " if reason.get("weighted") else ""
    target = reason.get("target", 0.0)
    if kind == "max_net_value":
        text = (f"highest net value ({reason['value_usd']:g} USD x P(usable) - {w}expected cost) among "
                f"{reason['candidates']} candidate(s) with P(usable) >= {target:g}")
    elif kind == "min_cost_per_usable":
        text = f"lowest {w}expected cost per usable result among {reason['candidates']} candidate(s) with " \
               f"P(usable) >= {target:g}"
    elif kind == "rung_net_value":
        text = (f"highest net value per rung ({reason['value_usd']:g} USD x P(usable) of the first rung - its "
                f"{w}expected attempt cost), then up the allowed rungs in ladder order")
    elif kind == "highest_p":
        text = (f"no candidate reaches P(usable) >= {target:g}: highest P(usable) (within {P_TIE:g}: then lowest "
                f"{w}cost per usable result)")
    else:
        text = reason.get("text", str(kind))
    if reason.get("mode") == "single":
        text += " (single-shot: no verifier, no retry)"
    elif reason.get("mode") == "escalate":
        text += (f" (escalation: k={reason['k']}, verifier false accept {reason['false_accept']:g}, false reject "
                 f"{reason['false_reject']:g}, failure dependence {reason.get('dependence', 0.0):.2f})")
    if reason.get("latency_unchecked"):
        text += f"; latency unknown, not checked for: {', '.join(reason['latency_unchecked'])}"
    if reason.get("default"):
        text += f"; {reason['default']}"
    return text


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


def chain_outcome_batch(p: np.ndarray, cost: np.ndarray, k, verifier: VerifierErrors | None,
                        valid: np.ndarray | None = None, dependence: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Expected cost and P(usable) of chains for many requests: p, cost (n, S) along each chain.

    `k`: attempts per step, (S,) or (n, S). `valid` (n, S) marks the steps that exist (shorter chains are padded
    with False). With ``dependence`` 0 this
    is `advisor.scores.chain_outcome` (the tests check they agree); see the module docstring for rho.

    All steps at once (the recursion over steps is a running product and a running minimum, so it is
    ``cumprod`` and ``minimum.accumulate``; a step that does not exist multiplies by 1 and takes the minimum with
    1, i.e. leaves both as they were): a few dozen numpy calls whatever the chain length, where a loop over the
    steps made that many per step (the escalation decision's main cost for one request). The same arithmetic, in
    the same order, as the step-by-step recursion (`tests/test_router_policy.py` checks they are equal).
    """
    if verifier is None:  # single-shot: the first step's (np.clip's Python layers cost more than two ufuncs)
        return cost[:, 0].copy(), np.minimum(np.maximum(p[:, 0], 0.0), 1.0)
    p = np.minimum(np.maximum(p, 0.0), 1.0)
    n, S = p.shape
    valid = np.ones(p.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    k = np.broadcast_to(np.maximum(1, np.asarray(k, dtype=int)), (n, S))
    rho = float(dependence)
    a = verifier.accept_rate(p)
    fail = (1.0 - a) ** k
    run = np.ones((n, S + 1))  # running product / minimum of the failures, from 1 before the first step
    run[:, 1:] = np.where(valid, fail, 1.0)
    prod = np.cumprod(run, axis=1)[:, 1:]
    new_reach = prod
    if rho:
        new_reach = (1.0 - rho) * prod + rho * np.minimum.accumulate(run, axis=1)[:, 1:]
        if not valid[:, 0].all():  # before any step exists nothing has been tried: reach stays exactly 1
            new_reach = np.where(np.logical_or.accumulate(valid, axis=1), new_reach, 1.0)
    reach = np.ones((n, S))  # P(reaching step s): the previous step's new reach
    reach[:, 1:] = new_reach[:, :-1]
    pos = a > 0
    a_safe = np.where(pos, a, 1.0)
    attempts = np.where(pos, (1.0 - fail) / a_safe, k)
    share = np.where(pos, p * (1 - verifier.false_reject) / a_safe, 0.0)
    gain = (reach - new_reach) * share
    if verifier.false_reject:  # a rejected usable answer delivered at the end of the chain
        last = np.arange(S) == (valid.sum(axis=1) - 1)[:, None]
        gain = gain + np.where(last & (fail > 0),
                               new_reach * p * verifier.false_reject / np.maximum(1.0 - a, 1e-300), 0.0)
    spent = np.where(valid, reach * cost * attempts, 0.0)
    gain = np.where(valid, gain, 0.0)
    exp_cost, p_use = np.zeros(n), np.zeros(n)
    for s in range(S):  # summed step by step, in order, as the recursion adds them
        exp_cost += spent[:, s]
        p_use += gain[:, s]
    return exp_cost, np.minimum(p_use, 1.0)


def candidate_table(P: np.ndarray, C: np.ndarray, rungs: Sequence[RungFacts], config: PolicyConfig,
                    prefs: Preferences | None = None) -> dict[str, np.ndarray]:
    """For a batch (n, R): per candidate chain, E[cost], P(usable), weighted cost and objective, all (n, K).

    Also the chains as rung indices (n, K, max_chain) padded with -1. Candidates: one chain per allowed start
    rung (and every prefix with ``stop_early``), in ladder order of the start.
    """
    prefs = prefs or Preferences()
    keep, _ = eligible(rungs, prefs)
    verifier = None if config.mode == "single" else config.verifier
    n = P.shape[0]
    L = 1 if config.mode == "single" else config.max_chain
    ks_by_rung = tuple(config.k_of(r.name) for r in rungs)
    if config.order == "probability" and L > 1:
        chain_idx = _candidate_chains(P, keep, L, "probability", config.stop_early)
        K = chain_idx.shape[1]
        # every candidate of every request in one call: (n x K) chains of at most L steps
        flat = chain_idx.reshape(n * K, L)
        valid = flat >= 0
        idx = np.where(valid, flat, 0)
        ks = np.array(ks_by_rung)[idx]
        rows = np.repeat(np.arange(n), K)[:, None]
        pc, cc = P[rows, idx], C[rows, idx]
    else:  # the chains do not depend on the request: laid out once per settings, shared by the batch
        lay = _ladder_layout(tuple(keep), L, config.stop_early, ks_by_rung)
        K = lay.chains.shape[0]
        chain_idx = lay.chains[None] if n == 1 else np.broadcast_to(lay.chains, (n, K, L))
        idx, valid, ks = (lay.idx, lay.valid, lay.ks) if n == 1 else (np.tile(a, (n, 1)) for a in lay[1:])
        pc, cc = P[:, lay.idx].reshape(n * K, L), C[:, lay.idx].reshape(n * K, L)
    rho = config.dependence or 0.0
    e, q = chain_outcome_batch(pc, cc, ks, verifier, valid, rho)
    exp_cost, p_use = e.reshape(n, K), q.reshape(n, K)
    if prefs.weights:
        w = np.array([prefs.weights.get(r.name, 1.0) for r in rungs])
        wcost = chain_outcome_batch(pc, cc / w[idx], ks, verifier, valid, rho)[0].reshape(n, K)
    else:
        wcost = exp_cost
    obj = np.where(p_use > 0, wcost / np.maximum(p_use, 1e-300), np.inf)
    return {"expected_cost": exp_cost, "p_usable": p_use, "objective": obj, "chains": chain_idx,
            "weighted_cost": wcost}


class _Layout(NamedTuple):
    """Ladder-order candidate chains (K, L) padded with -1, and per step: the rung index (0 for padding), whether
    the step exists, and the attempts allowed on its rung (all read-only)."""

    chains: np.ndarray
    idx: np.ndarray
    valid: np.ndarray
    ks: np.ndarray


@lru_cache(maxsize=256)
def _ladder_layout(keep: tuple[int, ...], L: int, stop_early: bool, ks_by_rung: tuple[int, ...]) -> _Layout:
    """The ladder-order candidates of these settings, laid out once: for a request of the service, the
    per-request work of the table is then a few gathers (each numpy call counts when the caches are cold)."""
    chains = _ladder_chains(keep, L, stop_early)
    valid = chains >= 0
    idx = np.where(valid, chains, 0)
    ks = np.array(ks_by_rung)[idx]
    for a in (valid, idx, ks):
        a.setflags(write=False)
    return _Layout(chains, idx, valid, ks)


def _candidate_chains(P: np.ndarray, keep: Sequence[int], L: int, order: str, stop_early: bool) -> np.ndarray:
    """Candidate chains (n, K, L) of rung indices padded with -1: per allowed start rung in ladder order, the
    start then the allowed rungs above it (in ladder order, or by falling P with ``order="probability"``)."""
    n = P.shape[0]
    full = []
    for c, start in enumerate(keep):
        above = np.array(keep[c + 1:], dtype=int) if L > 1 else np.zeros(0, dtype=int)
        if order == "probability" and len(above) > 1:
            tail = above[np.argsort(-P[:, above], axis=1, kind="stable")[:, : L - 1]]
        else:
            tail = np.broadcast_to(above[: L - 1], (n, min(len(above), L - 1)))
        chain = np.concatenate([np.full((n, 1), start), tail], axis=1)
        lengths = range(1, chain.shape[1] + 1) if stop_early else [chain.shape[1]]
        full.extend(chain[:, :length] for length in lengths)
    chain_idx = -np.ones((n, len(full), L), dtype=int)
    for c, chain in enumerate(full):
        chain_idx[:, c, : chain.shape[1]] = chain
    return chain_idx


@lru_cache(maxsize=256)
def _ladder_chains(keep: tuple[int, ...], L: int, stop_early: bool) -> np.ndarray:
    """The ladder-order candidate chains (K, L) (read-only: shared by every batch with these settings)."""
    table = _candidate_chains(np.zeros((1, max(keep) + 1)), keep, L, "ladder", stop_early)[0]
    table.setflags(write=False)
    return table


def rung_value_chains(P: np.ndarray, C: np.ndarray, keep: Sequence[int], value_usd: float, max_chain: int,
                      weights: np.ndarray | None = None) -> np.ndarray:
    """The plain per-rung rule for a batch: start at argmax over the allowed rungs of value x P_r - C_r / w_r
    (ties to the earlier rung in ladder order), then the allowed rungs above it in ladder order, at most
    `max_chain` rungs (1 in single-shot mode). Chains (n, max_chain) of rung indices padded with -1.

    In single-shot mode this is the chain rule's choice (`select` with ``value_usd``) up to ties; in escalation
    mode it ignores what the later rungs add, which is what the rule choice at training (`tuning.py`) weighs."""
    keep = np.asarray(keep, dtype=int)
    cost = C[:, keep] if weights is None else C[:, keep] / weights[keep]
    start = keep[np.argmax(value_usd * P[:, keep] - cost, axis=1)]
    table = -np.ones((int(keep.max()) + 1, max_chain), dtype=int)
    for pos, s in enumerate(keep):
        chain = [int(s), *keep[pos + 1:].tolist()][:max_chain]
        table[s, : len(chain)] = chain
    return table[start]


def chains_outcome(P: np.ndarray, C: np.ndarray, chains: np.ndarray, rungs: Sequence[RungFacts],
                   config: PolicyConfig) -> tuple[np.ndarray, np.ndarray]:
    """The predicted (E[cost], P(usable)) of given chains (n, L; -1 padded) under `config`."""
    valid = chains >= 0
    idx = np.where(valid, chains, 0)
    rows = np.arange(len(chains))[:, None]
    ks = np.array([config.k_of(r.name) for r in rungs])[idx]
    verifier = None if config.mode == "single" else config.verifier
    return chain_outcome_batch(P[rows, idx], C[rows, idx], ks, verifier, valid, config.dependence or 0.0)


def chosen_chains(table: dict[str, np.ndarray], pick: np.ndarray) -> np.ndarray:
    """The (n, max_chain) rung indices of the candidates `pick` selected."""
    return table["chains"][np.arange(len(pick)), pick]


def select(table: dict[str, np.ndarray], target: float, value_usd: float | None = None) -> np.ndarray:
    """Index (into the candidates) chosen per request under the decision rule (module docstring)."""
    if table["p_usable"].shape[1] == 1:  # one candidate
        return np.zeros(len(table["p_usable"]), dtype=int)
    meets = table["p_usable"] >= target
    if value_usd is not None:
        obj = np.where(meets, -(value_usd * table["p_usable"] - table["weighted_cost"]), np.inf)
    else:
        obj = np.where(meets, table["objective"], np.inf)
    # ties broken on the real expected cost
    obj_rank = np.lexsort((table["expected_cost"].T, obj.T), axis=0)[0]
    near = table["p_usable"] >= table["p_usable"].max(axis=1, keepdims=True) - P_TIE
    fallback = np.lexsort((table["expected_cost"].T, table["objective"].T, ~near.T), axis=0)[0]  # near ones first
    return np.where(meets.any(axis=1), obj_rank, fallback)


def base_reason(config: PolicyConfig, prefs: Preferences, rungs: Sequence[RungFacts], keep: Sequence[int]) -> dict:
    """The configuration part of a structured reason (mode, retries, verifier, dependence, weights, latency)."""
    out: dict[str, Any] = {"mode": config.mode, "target": config.target, "weighted": bool(prefs.weights)}
    if config.mode == "escalate":
        out.update(k=config.k, false_accept=config.verifier.false_accept,
                   false_reject=config.verifier.false_reject, dependence=config.dependence or 0.0)
    unknown = [rungs[i].name for i in keep if rungs[i].latency_s is None]
    if prefs.max_latency_s is not None and unknown:
        out["latency_unchecked"] = unknown
    return out


def realised_outcome(Y: np.ndarray, C: np.ndarray, chains: np.ndarray, config: PolicyConfig):
    """Realised (cost, quality) per request of chains (n, L; -1 padded) from recorded outcomes Y and costs C
    (n, R). With one recorded answer per prompt x rung a retry repeats it, so k = 1 here; recorded outcomes are
    the actual joint outcomes, so no dependence model is applied."""
    valid = chains >= 0
    idx = np.where(valid, chains, 0)
    rows = np.arange(len(Y))[:, None]
    if config.mode == "single":
        return C[rows[:, 0], idx[:, 0]], Y[rows[:, 0], idx[:, 0]]
    return chain_outcome_batch(Y[rows, idx], C[rows, idx], [1] * chains.shape[1], config.verifier, valid)
