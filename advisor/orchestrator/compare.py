"""Fixed rungs vs routing policies, per task class and condition, from one store (``advisor policies``).

For every (class, condition) and every **arm** (each rung run by itself, and each policy such as
``orchestrator``) over the same suite and ladder:

- usable rate (overall >= bar) with its Wilson interval (`advisor.floors.cell_stats`, the floors' helpers);
- cost per usable result = mean cost per attempt / usable rate: retrying until a usable result, the same way
  for a rung and for a policy (a policy's attempt includes the orchestrator's and every expert's tokens);
- mean latency per episode;
- for policy arms, the **distribution of expert calls** per rung, and the two biases the ToolOrchestra
  write-up names: the share of expert calls that go to the strongest rung ("strongest-tool defaulting") and
  to the orchestrator's own family (same organization in the Hugging Face id; `experts.family`), and the
  share of expert calls that respect the user's preferences (adherence).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.floors import FloorSettings, cell_stats
from advisor.orchestrator.experts import family

POLICY_POSITION = 1000  #: policy arms sort after the rungs


@dataclass
class Arm:
    """One rung or policy in one (class, condition)."""

    task_class: str
    condition: str
    arm: str  #: the rung name, or the policy name
    policy: str  #: fixed | orchestrator | ...
    runs: int
    scored: int
    usable: int
    usable_rate: float | None
    interval: tuple[float, float]
    cost_per_attempt: float | None
    cost_per_usable: float | None
    latency_s: float | None
    simulated: bool
    expert_calls: dict[str, int] = field(default_factory=dict)  #: rung -> calls (policy arms)
    strongest_share: float | None = None
    own_family_share: float | None = None
    adherence: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def compare(store: Any, suite: str, ladder: Any, settings: FloorSettings = FloorSettings()) -> list[Arm]:
    """Every arm of every (class, condition) of `suite` run on `ladder` (by name), rungs first."""
    rows = store.arm_rows(suite, ladder.name)
    for r in rows:
        if r["policy"] != "fixed":
            r["rung"], r["rung_position"] = r["policy"], POLICY_POSITION
    latency: dict[tuple, list[float]] = {}
    policy_of: dict[str, str] = {}
    for r in rows:
        latency.setdefault((r["task_class"], r["condition"], r["rung"]), []).append(float(r["latency_s"] or 0.0))
        policy_of[r["rung"]] = r["policy"]
    calls = store.expert_call_counts(suite, ladder.name)
    by_cell: dict[tuple, dict[str, tuple[int, int]]] = {}
    for c in calls:
        by_cell.setdefault((c["task_class"], c["condition"], c["policy"]), {})[c["model"]] = (int(c["n"]), int(c["ok"]))
    strongest = ladder.rungs[-1].name
    own = family(ladder.roles.orchestrator) if ladder.roles.orchestrator is not None else None
    families = {m.name: family(m) for m in ladder.rungs}
    arms = []
    for s in cell_stats(rows, settings):
        lat = latency.get((s.task_class, s.condition, s.rung), [])
        per_usable = (s.cost_per_attempt / s.usable_rate) if s.usable_rate and s.cost_per_attempt is not None else None
        arm = Arm(s.task_class, s.condition, s.rung, policy_of.get(s.rung, "fixed"), s.runs, s.scored, s.usable,
                  s.usable_rate, s.interval, s.cost_per_attempt, per_usable, sum(lat) / len(lat) if lat else None,
                  s.simulated_runs > 0)
        dist = by_cell.get((s.task_class, s.condition, arm.policy), {}) if arm.policy != "fixed" else {}
        if dist:
            total = sum(n for n, _ in dist.values())
            arm.expert_calls = {m.name: dist[m.name][0] for m in ladder.rungs if m.name in dist}
            arm.strongest_share = dist.get(strongest, (0, 0))[0] / total
            arm.own_family_share = (sum(n for m, (n, _) in dist.items() if families.get(m) == own) / total
                                    if own is not None else None)
            arm.adherence = sum(ok for _, ok in dist.values()) / total
        arms.append(arm)
    return arms


def stored_comparison(store: Any, suite: str, settings: FloorSettings = FloorSettings()) -> list[Arm]:
    """`compare` for every ladder of `suite` that has policy runs, with the ladder read back from the store."""
    from advisor.ladder import Ladder

    arms: list[Arm] = []
    for ladder_hash in store.policy_ladder_hashes(suite):
        config = store.ladder_config(ladder_hash)
        if config:
            arms += compare(store, suite, Ladder.model_validate(config), settings)
    return arms


def recommend(arms: list[Arm], target: float) -> dict[tuple[str, str], tuple[str, str]]:
    """Per (class, condition): the arm a platform team should run and why.

    The cheapest $ per usable result among arms whose usable rate reaches `target`; when none does, the arm
    with the highest usable rate (a policy only wins by being cheaper at the same bar, or by clearing it).
    """
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for key in sorted({(a.task_class, a.condition) for a in arms}):
        cell = [a for a in arms if (a.task_class, a.condition) == key and a.usable_rate is not None]
        ok = [a for a in cell if a.usable_rate >= target and a.cost_per_usable is not None]
        if ok:
            best = min(ok, key=lambda a: a.cost_per_usable)
            out[key] = (best.arm, f"cheapest per usable result among arms at usable rate >= {target:.0%}")
        elif cell:
            best = max(cell, key=lambda a: (a.usable_rate, -(a.cost_per_usable or float("inf"))))
            out[key] = (best.arm, f"no arm reaches {target:.0%}; highest usable rate")
    return out
