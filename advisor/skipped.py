"""Classes of a suite that have no runs in the store, and why: every answer lists them as skipped.

A probe without a working sandbox (bubblewrap) leaves out the tasks that run code (`run_python`, python checks),
so whole classes (code_change, multi_step in the example suite) have no runs. The probe's answer, `advisor floors`
and the report read the suite's classes from its recorded config (`suites.config_json`) and name each class
without runs with the reason and the fix, instead of leaving it out silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable


@dataclass(frozen=True)
class SkippedClass:
    """A class of the suite with no probe runs: why, and what to do."""

    task_class: str
    tasks: int  #: tasks of the class in the suite
    reason: str
    fix: str
    short: str = "no runs"  #: a few words for a table cell

    def line(self) -> str:
        """One line for the terminal and the report's next steps."""
        return f"{self.task_class}: skipped: {self.reason}; to probe it: {self.fix}"


def task_runs_code(task: dict[str, Any]) -> bool:
    """True when a recorded task (a dict of the suite config) offers run_python or has a python check
    (the recorded twin of `advisor.tools.sandbox.runs_code`)."""
    if "run_python" in (task.get("tools") or []):
        return True
    return any(isinstance(c, dict) and (c.get("check") or {}).get("type") == "python"
               for key in ("instruction_following", "task_completion") for c in task.get(key) or [])


def skipped_classes(config: dict[str, Any] | None, probed: Iterable[str],
                    wanted: Iterable[str] | None = None) -> list[SkippedClass]:
    """The classes of a recorded suite `config` without runs (not in `probed`), limited to `wanted` when given."""
    if not config:
        return []
    have, only = set(probed), None if wanted is None else set(wanted)
    tasks: dict[str, list[dict[str, Any]]] = {}
    for t in config.get("tasks") or []:
        if isinstance(t, dict) and t.get("class"):
            tasks.setdefault(t["class"], []).append(t)
    names = [c["name"] for c in config.get("classes") or [] if isinstance(c, dict) and "name" in c]
    names += [n for n in tasks if n not in names]
    out = []
    for cls in names:
        if cls in have or (only is not None and cls not in only) or not tasks.get(cls):
            continue
        mine = tasks[cls]
        if all(task_runs_code(t) for t in mine):
            problem = _sandbox_problem()
            if problem is not None:
                out.append(SkippedClass(cls, len(mine), f"its {len(mine)} tasks run code and {problem}",
                                        "apt-get install bubblewrap, then `advisor probe` (or `make probe`)",
                                        "no sandbox"))
                continue
        out.append(SkippedClass(cls, len(mine), "no runs stored yet", "`advisor probe` runs the classes without runs"))
    return out


def _sandbox_problem() -> str | None:
    """Why no sandbox works here (None when bubblewrap works)."""
    # lazy: the sandbox probe runs `bwrap --help` once, only when a class that runs code has no runs
    from advisor.tools.sandbox import sandbox_status

    return sandbox_status()[1]
