"""How often the give-up patterns (`advisor.service.checks.give_ups`) fire on answers that are not give-ups.

    .venv/bin/python benchmarks/give_up_patterns.py                       # the example suite's reference answers
    .venv/bin/python benchmarks/give_up_patterns.py --store advisor.duckdb  # and a probe store's usable answers

Two sets of answers that did the work, and one that did not:
- the example suite's reference final answers (`reference.final` and `reference.final_sloppy` of every task:
  written by hand, not by a model);
- with ``--store``, the final answers of the store's usable runs (overall at or above the run's bar); on the demo
  these are the SIMULATED stand-ins' answers, on the CPU ladder real models';
- with ``--store``, the final answers of runs that were not usable, for how many of those the patterns catch.

A match on a usable answer is a false positive: that answer would be retried and escalated for nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from advisor.service.checks.give_ups import gave_up  # noqa: E402


def reference_answers(suite: Path) -> list[str]:
    """Every task's hand-written reference answers."""
    tasks = yaml.safe_load(suite.read_text())["tasks"]
    out = []
    for task in tasks:
        ref = task.get("reference") or {}
        out += [ref[k] for k in ("final", "final_sloppy") if isinstance(ref.get(k), str)]
    return out


def store_answers(path: Path) -> tuple[list[str], list[str]]:
    """(usable, not usable) final answers of the store's probe runs."""
    from advisor.store import Store

    with Store.open(path, read_only=True) as store:
        rows = store.query("SELECT r.overall >= r.bar AS usable, t.observation AS text FROM runs r "
                           "JOIN turns t ON t.run_key = r.run_key WHERE t.action = 'final' AND NOT r.unscored")
    usable = [r["text"] for r in rows if r["usable"]]
    other = [r["text"] for r in rows if not r["usable"]]
    return usable, other


def rate(answers: list[str]) -> dict:
    hits = [a for a in answers if gave_up(a)]
    return {"answers": len(answers), "matched": len(hits),
            "rate": round(len(hits) / len(answers), 4) if answers else None, "examples": hits[:3]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", type=Path, default=REPO / "suites" / "example" / "suite.yaml")
    ap.add_argument("--store", type=Path, help="a probe store: its usable and unusable final answers")
    args = ap.parse_args(argv)
    out = {"reference answers (false positives)": rate(reference_answers(args.suite))}
    if args.store:
        usable, other = store_answers(args.store)
        out["usable probe answers (false positives)"] = rate(usable)
        out["unusable probe answers (caught)"] = rate(other)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
