"""The probe: run a suite's tasks on a ladder's rungs through the agent loop, score, store, summarize.

`full_grid` plans the runs, `execute` runs any list of them (resumable, concurrent per rung), `summarize`
aggregates the stored runs, and `run_probe(config, planner)` does all of it the way ``advisor probe`` does,
with a `FullGridPlanner` or an `AdaptivePlanner` (`advisor.probe.planners`, `advisor.probe.adaptive`).
"""

from advisor.probe.plan import RunSpec, full_grid
from advisor.probe.planners import AdaptivePlanner, FullGridPlanner, Planner, run_waves
from advisor.probe.runner import ProbeOutcome, RunResult, execute, record_config, run_one
from advisor.probe.session import ProbeConfig, ProbeRun, default_file, run_probe
from advisor.probe.summary import render, summarize

__all__ = ["RunSpec", "full_grid", "AdaptivePlanner", "FullGridPlanner", "Planner", "run_waves", "ProbeOutcome",
           "RunResult", "execute", "record_config", "run_one", "ProbeConfig", "ProbeRun", "default_file", "run_probe", "render", "summarize"]
