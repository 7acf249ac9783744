"""Fixed rungs vs routing policies, per task class and condition, from one store (``advisor policies``).

For every (class, condition) and every **arm** (each rung run by itself, and each policy: ``orchestrator``,
``router``, ``cascade``) over the same suite and ladder:

- usable rate (overall >= bar) with its Wilson interval (`advisor.floors.cell_stats`, the floors' helpers);
- cost per usable result = mean cost per attempt / usable rate: retrying until a usable result, the same way
  for a rung and for a policy (a policy's attempt includes the orchestrator's tokens and every rung it called,
  escalations included);
- mean latency per episode;
- for policy arms, the **distribution of rung calls** (orchestrator: turns handed to each rung; router and
  cascade: attempts on each rung), and the two biases the ToolOrchestra write-up names: the share of calls
  that go to the strongest rung ("strongest-tool defaulting") and to the orchestrator's own family (same
  organization in the Hugging Face id; `experts.family`), the share of orchestrator calls that respect the
  user's preferences (adherence), and for the cascade its verifier's measured false-accept and false-reject
  rates over the attempts it judged.

The **floor rung** of a (class, condition) is the fixed rung the floor finder recommends there
(`advisor.floors.decide`: lowest cost per usable result at or above the floor; when no rung clears, the
largest rung, labelled ``largest rung X (no floor)``). `side_by_side` keeps, per (class, condition), the floor rung and the policies: the comparison the
report's Policies section and ``advisor policies`` show, and `recommend` says which to run and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.floors import FloorSettings, cell_stats, decide
from advisor.ladder import Ladder
from advisor.money import per_1k_usable
from advisor.orchestrator.experts import family
from advisor.router.routing.policies import episodic_policies, probe_chain_policies
from advisor.shares import share

POLICY_POSITION = 1000  #: policy arms sort after the rungs


@dataclass
class Arm:
    """One rung or policy in one (class, condition)."""

    task_class: str
    condition: str
    arm: str  #: the rung name, or the policy name
    policy: str  #: fixed | orchestrator | router | cascade
    runs: int
    scored: int
    usable: int
    usable_rate: float | None
    interval: tuple[float, float]
    cost_per_attempt: float | None
    cost_per_usable: float | None
    latency_s: float | None
    simulated: bool
    floor_rung: bool = False  #: the fixed rung the floor finder recommends in this (class, condition)
    floor_found: bool = True  #: False: no rung clears the floor there, and `floor_rung` marks the largest rung
    expert_calls: dict[str, int] = field(default_factory=dict)  #: rung -> calls (policy arms)
    strongest_share: float | None = None
    own_family_share: float | None = None
    adherence: float | None = None
    verified: int = 0  #: cascade: attempts its verifier judged
    false_accept: float | None = None  #: cascade: accepted attempts that were not usable / unusable judged ones
    false_reject: float | None = None  #: cascade: rejected attempts that were usable / usable judged ones

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @property
    def label(self) -> str:
        """How the arm is named in the side-by-side view (``floor rung nano-30b`` for the floor rung)."""
        if not self.floor_rung:
            return self.arm
        return f"floor rung {self.arm}" if self.floor_found else f"largest rung {self.arm} (no floor)"


def compare(store: Any, suite: str, ladder: Any, settings: FloorSettings = FloorSettings()) -> list[Arm]:
    """Every arm of every (class, condition) of `suite` run on `ladder` (by name), rungs first."""
    rows = store.arm_rows(suite, ladder.name)
    for r in rows:
        if r["policy"] != "fixed":
            r["rung"], r["rung_position"] = r["policy"], POLICY_POSITION + _order(r["policy"])
    latency: dict[tuple, list[float]] = {}
    policy_of: dict[str, str] = {}
    for r in rows:
        latency.setdefault((r["task_class"], r["condition"], r["rung"]), []).append(float(r["latency_s"] or 0.0))
        policy_of[r["rung"]] = r["policy"]
    cells = cell_stats(rows, settings)  # one pass: the fixed cells decide the floor rung, every cell is an arm
    floor_of = {(cf.task_class, cf.condition): (cf.recommended or (cf.rungs[-1].stats.rung if cf.rungs else None),
                                                cf.recommended is not None)
                for cf in decide([c for c in cells if policy_of[c.rung] == "fixed"], settings)}
    by_cell: dict[tuple, dict[str, tuple[int, int, int]]] = {}
    for c in store.expert_call_counts(suite, ladder.name):
        by_cell.setdefault((c["task_class"], c["condition"], c["policy"]), {})[c["model"]] = (
            int(c["n"]), int(c["rated"]), int(c["ok"]))
    verdicts = {(v["task_class"], v["condition"], v["policy"]): v for v in store.verifier_counts(suite, ladder.name)}
    strongest = ladder.rungs[-1].name
    own = family(ladder.roles.orchestrator) if ladder.roles.orchestrator is not None else None
    families = {m.name: family(m) for m in ladder.rungs}
    arms = []
    for s in cells:
        lat = latency.get((s.task_class, s.condition, s.rung), [])
        per_usable = (s.cost_per_attempt / s.usable_rate) if s.usable_rate and s.cost_per_attempt is not None else None
        policy = policy_of.get(s.rung, "fixed")
        arm = Arm(s.task_class, s.condition, s.rung, policy, s.runs, s.scored, s.usable,
                  s.usable_rate, s.interval, s.cost_per_attempt, per_usable, sum(lat) / len(lat) if lat else None,
                  s.simulated_runs > 0)
        floor, found = floor_of.get((s.task_class, s.condition), (None, False))
        arm.floor_rung, arm.floor_found = policy == "fixed" and floor == s.rung, found
        dist = by_cell.get((s.task_class, s.condition, policy), {}) if policy != "fixed" else {}
        if dist:
            total = sum(n for n, _, _ in dist.values())
            rated = sum(r for _, r, _ in dist.values())
            arm.expert_calls = {m.name: dist[m.name][0] for m in ladder.rungs if m.name in dist}
            arm.strongest_share = dist.get(strongest, (0, 0, 0))[0] / total
            arm.own_family_share = (sum(n for m, (n, _, _) in dist.items() if families.get(m) == own) / total
                                    if own is not None and policy == "orchestrator" else None)
            arm.adherence = sum(ok for _, _, ok in dist.values()) / rated if rated else None
        v = verdicts.get((s.task_class, s.condition, policy))
        if v:
            known, good = int(v["known"]), int(v["usable"])
            arm.verified = int(v["judged"])
            arm.false_accept = int(v["false_accepts"]) / (known - good) if known - good else None
            arm.false_reject = int(v["false_rejects"]) / good if good else None
        arms.append(arm)
    return arms


def _order(policy: str) -> int:
    """Episodic policies first, then the probe's chain policies (single-shot before escalating), as registered."""
    order = [*episodic_policies(), *probe_chain_policies()]
    return order.index(policy) if policy in order else len(order)


def side_by_side(arms: list[Arm]) -> list[Arm]:
    """Per (class, condition): the floor rung, then each policy (the arms the Policies section compares)."""
    return [a for a in arms if a.floor_rung or a.policy != "fixed"]


def stored_policy_ladders(store: Any, suite: str) -> dict[str, Any]:
    """Ladder hash -> the `Ladder` recorded with `suite`'s policy runs (None when its config is not recorded)."""
    out: dict[str, Any] = {}
    for ladder_hash in store.policy_ladder_hashes(suite):
        config = store.ladder_config(ladder_hash)
        out[ladder_hash] = Ladder.model_validate(config) if config else None
    return out


def stored_comparison(store: Any, suite: str, settings: FloorSettings = FloorSettings()) -> list[Arm]:
    """`compare` for every ladder of `suite` that has policy runs, with the ladder read back from the store."""
    arms: list[Arm] = []
    for ladder in stored_policy_ladders(store, suite).values():
        if ladder is not None:
            arms += compare(store, suite, ladder, settings)
    return arms


def recommend(arms: list[Arm], target: float) -> dict[tuple[str, str], tuple[str, str]]:
    """Per (class, condition): the arm a platform team should run, and one line saying why.

    Among the floor rung and the policies (`side_by_side`): the cheapest $ per usable result among arms whose
    usable rate reaches `target`; when none does, the arm with the highest usable rate. The line names the
    runner-up, says when the choice rests on a verifier (cascade) or a second model (orchestrator), and when
    the sample is small (fewer than 10 scored runs).
    """
    out: dict[tuple[str, str], tuple[str, str]] = {}
    shown = side_by_side(arms)
    for key in sorted({(a.task_class, a.condition) for a in arms}):
        cell = [a for a in shown if (a.task_class, a.condition) == key and a.usable_rate is not None]
        if not cell:
            continue
        ok = sorted((a for a in cell if a.usable_rate >= target and a.cost_per_usable is not None),
                    key=lambda a: a.cost_per_usable)
        if ok:
            best, rest = ok[0], ok[1:]
            why = (f"cheapest per usable result ({per_1k_usable(best.cost_per_usable)} per 1k, usable "
                   f"{share(best.usable_rate)}) "
                   f"among those reaching the {target:.0%} target")
            if rest:
                why += f"; next {rest[0].label} at {per_1k_usable(rest[0].cost_per_usable)} per 1k"
        else:
            best = max(cell, key=lambda a: (a.usable_rate, -(a.cost_per_usable or float("inf"))))
            why = (f"none reaches the {target:.0%} target; highest usable rate ({share(best.usable_rate)}, "
                   f"{per_1k_usable(best.cost_per_usable)} per 1k usable results): probe more or add a larger rung")
        if best.policy != "fixed" and len(best.expert_calls) == 1:
            only = next(iter(best.expert_calls))
            why += f"; every call went to {only}: the same as running {only}"
            floor = next((a for a in cell if a.floor_rung and a.arm == only), None)
            if floor is not None:
                why += f" ({best.runs} runs here vs {floor.runs} fixed runs of it)"
        if best.policy == "cascade":
            why += "; needs a verifier in production (here: the task-completion checks"
            why += f", false accept {share(best.false_accept)})" if best.false_accept is not None else ")"
        elif best.policy == "orchestrator":
            why += "; needs the orchestrator model served beside the rungs"
        if best.scored < 10:
            why += f"; only {best.scored} scored run{'' if best.scored == 1 else 's'}"
        out[key] = (best.label, why)
    return out


def advice_rows(advice: dict[tuple[str, str], tuple[str, str]]) -> list[dict[str, str]]:
    """`recommend`'s answer as JSON rows (``advisor policies --json`` and the report's ``floors.json``)."""
    return [{"task_class": c, "condition": k, "run": run, "why": why} for (c, k), (run, why) in advice.items()]
