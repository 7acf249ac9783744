"""Synthetic probe runs with known answers, for the floor, adaptive and report tests (no Triton needed).

An `Oracle` decides each run's outcome from a hash of (class, task, rung, condition, replica), so the same run
always has the same outcome whether a full grid or an adaptive prober asks for it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from advisor.store import RunRecord, make_run_key

RUNGS = ("small", "mid", "large")
COSTS = {"small": 0.010, "mid": 0.020, "large": 0.050}


def make_run(task_class: str, task_id: str, rung: str, condition: str = "baseline", replica: int = 0,
             overall: float | None = 90.0, stop_reason: str = "final", cost: float | None = None,
             turns: int = 10, unscored: bool = False, simulated: bool = False, suite: str = "synth",
             rungs: tuple[str, ...] = RUNGS) -> RunRecord:
    """One synthetic run; IF and TC are chosen so that (4 IF + 3 TC) / 7 == overall exactly."""
    if_score = tc_score = overall
    if unscored:
        if_score = tc_score = overall = None
    return RunRecord(
        run_key=make_run_key("synth", suite, task_id, rung, condition, replica), kind="probe",
        suite_name=suite, suite_hash="suitehash-" + suite, task_id=task_id, task_class=task_class,
        ladder_name="synthladder", ladder_hash="ladderhash", rung=rung, rung_position=rungs.index(rung),
        condition=condition, replica=replica, stop_reason=stop_reason, turns=turns,
        input_tokens=1000, output_tokens=200, cost_usd=COSTS.get(rung, 0.03) if cost is None else cost,
        judge_cost_usd=0.001, if_score=if_score, tc_score=tc_score, overall=overall, unscored=unscored,
        unscored_reason="scorer error" if unscored else None, simulated=simulated, advisor_version="test")


def _u(*parts) -> float:
    h = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()
    return int(h[:12], 16) / float(16 ** 12)


@dataclass
class Oracle:
    """Known usable probabilities per (class, condition, rung); failures split into non-converged and poor."""

    p: dict[tuple[str, str, str], float]
    tasks: dict[str, int]  #: tasks per class
    nonconverge: dict[str, float] = field(default_factory=lambda: {"small": 0.9, "mid": 0.2, "large": 0.1})
    simulated: bool = False
    rungs: tuple[str, ...] = RUNGS

    def task_ids(self, task_class: str) -> list[str]:
        """The task ids of a class."""
        return [f"{task_class}-{i:02d}" for i in range(self.tasks[task_class])]

    def run(self, task_class: str, task_id: str, rung: str, condition: str, replica: int) -> RunRecord:
        """The (deterministic) outcome of one run."""
        u = _u(task_class, task_id, rung, condition, replica)
        usable = u < self.p[(task_class, condition, rung)]
        v = _u("fail", task_id, rung, condition, replica)
        if usable:
            overall, stop, turns = 80.0 + 20.0 * v, "final", 8 + int(6 * v)
        elif v < self.nonconverge.get(rung, 0.0):
            overall, stop, turns = 10.0 * v, "max_turns", 12
        else:
            overall, stop, turns = 20.0 + 50.0 * v, "final", 20 + int(10 * v)
        cost = COSTS[rung] * (0.8 + 0.4 * _u("cost", task_id, rung, condition, replica))
        return make_run(task_class, task_id, rung, condition, replica, overall=round(overall, 3),
                        stop_reason=stop, cost=cost, turns=turns, simulated=self.simulated, rungs=self.rungs)

    def full_grid(self, replicas: int, conditions=("baseline", "skill")) -> list[RunRecord]:
        """Every run of the full grid."""
        return [self.run(c, t, r, cond, rep) for c in self.tasks for t in self.task_ids(c) for r in self.rungs
                for cond in conditions for rep in range(replicas)]


def demo_oracle(simulated: bool = False) -> Oracle:
    """The calibrated shape: small below everywhere, mid the floor for narrow classes, large for multi-step."""
    p = {}
    for cond in ("baseline", "skill"):
        lift = 0.03 if cond == "skill" else 0.0
        for cls in ("lookup", "api_call"):
            p[(cls, cond, "small")], p[(cls, cond, "mid")], p[(cls, cond, "large")] = 0.0, 0.97 + lift / 3, 0.99
        p[("multi_step", cond, "small")] = 0.0
        p[("multi_step", cond, "mid")] = 0.25 + lift
        p[("multi_step", cond, "large")] = 0.97 + lift / 3
    return Oracle(p=p, tasks={"lookup": 8, "api_call": 8, "multi_step": 8}, simulated=simulated)


#: A two-task suite the stand-ins can act on (for tests that run the embedded Triton).
TINY_SUITE = """\
version: 1
name: adaptive-tiny
limits: {max_turns: 20}
classes: [{name: narrow}, {name: multi}]
tasks:
  - id: a-narrow
    class: narrow
    instructions: Read notes.txt and report the code word.
    tools: [read_file, list_files]
    fixtures: {files: {notes.txt: "code word: heron"}}
    instruction_following:
      - {name: listed, weight: 100, check: {type: tool_call, tool: list_files}}
    task_completion:
      - {name: word, weight: 100, check: {type: regex, pattern: heron}}
    reference:
      steps:
        - {tool: list_files, arguments: {}, how: true}
        - {tool: read_file, arguments: {path: notes.txt}}
      final: "The code word is heron."
      final_wrong: "The code word is crane."
  - id: a-multi
    class: multi
    instructions: Read the three files and write out.txt.
    tools: [read_file, write_file]
    fixtures: {files: {f0.txt: a, f1.txt: b, f2.txt: c}}
    instruction_following:
      - {name: wrote, weight: 100, check: {type: file, path: out.txt}}
    task_completion:
      - {name: done, weight: 100, check: {type: regex, pattern: "^done$"}}
    reference:
      steps:
        - {tool: read_file, arguments: {path: f0.txt}}
        - {tool: read_file, arguments: {path: f1.txt}}
        - {tool: read_file, arguments: {path: f2.txt}}
        - {tool: write_file, arguments: {path: out.txt, content: x}, how: true}
      final: "done"
      final_wrong: "failed"
"""
