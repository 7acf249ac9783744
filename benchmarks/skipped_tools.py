"""Benchmark: how often the ``skipped_tool`` step check (`advisor.service.checks.skipped_tools`) flags a known-good answer.

Every task of the example suite that offers tools has a reference trajectory, the known-good way to do it: its
calls, then its answer. The check is asked of the reference's final answer with the reference's calls as the
conversation, the task's tools as the offered tools and its instructions as the user's message; any flag is a false
positive. Prints the count, the rate and each flagged task with the tool it says was skipped.

    .venv/bin/python benchmarks/skipped_tools.py [--suite suites/example/suite.yaml]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=REPO / "suites" / "example" / "suite.yaml")
    args = parser.parse_args()
    from advisor.service.checks.skipped_tools import asked_for, skipped
    from advisor.suite import load_suite

    tasks = [t for t in load_suite(args.suite).tasks if t.tools and t.reference is not None]
    flagged, asked = [], 0
    for t in tasks:
        asked += bool(asked_for(t.tools, t.instructions))
        missing = skipped(t.tools, [s.tool for s in t.reference.steps], t.instructions)
        if missing:
            flagged.append((t.id, missing))
    print(f"skipped_tool on {len(tasks)} reference trajectories of {args.suite.name} ({asked} name a tool by its "
          f"verb): {len(flagged)} flagged ({len(flagged) / max(len(tasks), 1):.0%} false positives)")
    for task, missing in flagged:
        print(f"  {task}: {', '.join(missing)}")
    sys.exit(0)


if __name__ == "__main__":
    main()
