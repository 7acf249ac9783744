"""What a probe runs: one `RunSpec` per episode, and the full grid of a suite on a ladder.

A run is identified by (kind, suite hash, task, ladder hash, rung, condition, replica); its run key is the
hash of those parts (`advisor.records.make_run_key`), so the same spec always maps to the same stored run and
a rerun skips it. The episode's seed is derived from the run key, so a replica is reproducible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from advisor.errors import ConfigError, did_you_mean
from advisor.probe.chain import arm_of
from advisor.records import CONDITIONS, Condition, RunKind, make_run_key
from advisor.router.routing.policies import POLICIES, episodic_policies, probe_chain_policies


@dataclass(frozen=True)
class RunSpec:
    """One episode to run: a task on a rung, in a condition, as replica number `replica`."""

    task_id: str
    rung: str
    condition: str = Condition.BASELINE  #: a `Condition`
    replica: int = 0
    kind: str = RunKind.PROBE
    policy: str = "fixed"  #: fixed (the rung itself) or a policy run (`rung` is then the policy's model)

    def run_key(self, suite_hash: str, ladder_hash: str) -> str:
        """The idempotent key of this run in the store."""
        extra = () if self.policy == "fixed" else (self.policy,)
        return make_run_key(self.kind, suite_hash, self.task_id, ladder_hash, self.rung, self.condition,
                            self.replica, *extra)

    def seed(self, suite_hash: str, ladder_hash: str) -> int:
        """The sampling seed of this episode (stable: derived from the run key; fits a signed 32-bit int)."""
        return int(self.run_key(suite_hash, ladder_hash)[:8], 16) & 0x7FFFFFFF


def full_grid(suite: Any, ladder: Any, replicas: int = 3, conditions: Sequence[str] = CONDITIONS,
              rungs: Iterable[str] | None = None, tasks: Iterable[str] | None = None,
              policies: Sequence[str] = ("rung",)) -> list[RunSpec]:
    """Every (task, rung or policy, condition, replica) of a probe; the skill condition only for tasks with a skill.

    `policies`: ``rung`` runs every rung (`rungs`) itself; an episodic policy (``orchestrator``) adds one run
    per task, condition and replica under the policy's model (`policy_model`). Ordered replica-major, then
    task, then rung, so that a partial probe (``--max-runs``, an interruption) covers every task and rung
    before it repeats any.
    """
    if replicas < 1:
        raise ConfigError(f"replicas must be at least 1 (got {replicas})")
    bad = [c for c in conditions if c not in CONDITIONS]
    if bad:
        raise ConfigError(f"unknown condition(s) {', '.join(bad)}; use baseline and/or skill")
    rung_names = [ladder.rung(r).name for r in rungs] if rungs is not None else [r.name for r in ladder.rungs]
    slots = [(r, "fixed") for r in rung_names] if "rung" in policies else []
    slots += [(policy_model(ladder, p).name, p) for p in policies if p != "rung"]
    if tasks is not None:
        chosen = []
        for tid in tasks:
            try:
                chosen.append(suite.task(tid))
            except KeyError:
                raise ConfigError(f"suite {suite.name!r} has no task {tid!r}."
                                  f"{did_you_mean(tid, [t.id for t in suite.tasks])}") from None
    else:
        chosen = list(suite.tasks)
    specs = []
    for replica in range(replicas):
        for task in chosen:
            for rung, policy in slots:
                for condition in task.conditions():
                    if condition in conditions:
                        specs.append(RunSpec(task.id, rung, condition, replica, policy=policy))
    return specs


def policy_model(ladder: Any, policy: str) -> Any:
    """The model a policy's runs are stored under (the orchestrator role; for ``router`` and ``cascade`` a
    `advisor.probe.chain.PolicyArm` named after the policy); ConfigError for a policy the probe cannot run."""
    if policy in probe_chain_policies():
        return arm_of(ladder, policy)
    if policy not in POLICIES:
        raise ConfigError(f"unknown policy {policy!r}.{did_you_mean(policy, ['rung', *POLICIES.names()])}")
    if policy not in episodic_policies():
        raise ConfigError(f"policy {policy!r} is not one the probe runs; use rung, "
                          f"{', '.join([*episodic_policies(), *probe_chain_policies()])}")
    return POLICIES.get(policy).model_of(ladder)
