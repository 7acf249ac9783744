"""`advisor policies`: the floor rung vs routing policies (orchestrator, router, cascade) per class and
condition, from a store, with the policy to run per class and why (`advisor.report.analysis`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.suite_options import SuiteFileOpt, SuiteNameOpt, stored_suite_name
from advisor.cli.floors_cmd import BarOpt, ConfidenceOpt, StoreOpt
from advisor.money import per_1k_usable
from advisor.shares import interval, share
from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `policies` command."""
    app.command("policies")(policies)


def policies(store: StoreOpt = Path(DEFAULT_STORE),
             ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                            help="Ladder the runs used (default: the one "
                                                            "recorded with the store's policy runs).")] = None,
             suite_file: SuiteFileOpt = None, suite_name: SuiteNameOpt = None,
             as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
             bar: BarOpt = 75.0, confidence: ConfidenceOpt = 0.9,
             all_rungs: Annotated[bool, typer.Option("--all-rungs", help="Show every rung, not only each "
                                                     "class's floor rung.")] = False) -> None:
    """Per class and condition: the floor rung and each policy's usable rate (interval), $ per usable result,
    latency, rung calls per rung with the strongest-rung and own-family shares, the cascade verifier's error
    rates; then per class the policy to run and why."""
    from advisor.floors import FloorSettings, resolve_suite
    from advisor.ladder import load_ladder
    from advisor.report.analysis import advice_rows, compare, recommend, side_by_side
    from advisor.store import RunStore, open_store

    wanted = stored_suite_name(suite_file, suite_name)
    with open_store(store, read_only=True, role=RunStore) as s:
        name = resolve_suite(s, wanted)
        lad = load_ladder(ladder) if ladder else _stored_ladder(s, name)
        settings = FloorSettings(bar=bar, confidence=confidence)
        arms = compare(s, name, lad, settings)
    simulated = any(a.simulated for a in arms)
    advice = recommend(arms, settings.target)
    shown = arms if all_rungs else side_by_side(arms)
    if as_json:
        typer.echo(jsonout.dumps({"suite": name, "ladder": lad.name, "simulated": simulated,
                                  "arms": [a.to_dict() for a in shown],
                                  "recommendations": advice_rows(advice)},
                                 indent=2, default=str))
        return
    typer.echo(render_text(shown, name, lad.name, simulated, advice))


def _stored_ladder(store, suite: str):
    """The ladder recorded with the suite's policy runs (DataError when there are none, or several)."""
    from advisor.errors import DataError
    from advisor.report.analysis import stored_policy_ladders

    ladders = stored_policy_ladders(store, suite)
    if not ladders:
        raise DataError(f"{store.path}: suite {suite!r} has no policy runs yet; run `advisor probe --policy rung "
                        "--policy orchestrator --policy router --policy cascade` first")
    if len(ladders) > 1:
        raise DataError(f"{store.path}: suite {suite!r} has policy runs on {len(ladders)} ladders; choose one with "
                        "--ladder")
    (ladder_hash, ladder), = ladders.items()
    if ladder is None:
        raise DataError(f"{store.path}: the ladder {ladder_hash} of the policy runs is not recorded; pass --ladder")
    return ladder


def render_text(arms, suite: str, ladder: str, simulated: bool, advice: dict | None = None) -> str:
    """The comparison as a plain-text table (one row per class, condition and arm), then the advice lines."""
    head = f"{'SIMULATED ' if simulated else ''}suite {suite} on ladder {ladder}: floor rung vs policies"
    cols = ["class", "condition", "arm", "runs", "usable (90% CI)", "$/1k usable", "latency", "rung calls",
            "strongest", "own family", "adherence", "verifier FA/FR"]
    rows = []
    for a in arms:
        usable = f"{share(a.usable_rate)} ({interval(a.interval)})"
        latency = "-" if a.latency_s is None else f"{a.latency_s:.2f} s"
        dist = " ".join(f"{k}:{v}" for k, v in a.expert_calls.items()) or "-"
        verifier = f"{share(a.false_accept)}/{share(a.false_reject)}" if a.verified else "-"
        rows.append([a.task_class, a.condition, a.label, str(a.runs), usable, per_1k_usable(a.cost_per_usable), latency,
                     dist, share(a.strongest_share), share(a.own_family_share), share(a.adherence), verifier])
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    line = lambda r: " | ".join(v.ljust(w) for v, w in zip(r, widths))  # noqa: E731
    out = [head, line(cols), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)]
    out.append("$/1k usable: dollars per 1,000 usable results = 1,000 x mean cost per attempt / usable rate (retry "
               "until usable), orchestrator, expert and "
               "escalation tokens included; rung calls: orchestrator turns handed to each rung, router/cascade "
               "attempts per rung; strongest / own family: shares of those calls; verifier FA/FR: the cascade "
               "verifier's measured false-accept / false-reject rates")
    if advice:
        out.append(f"{'SIMULATED ' if simulated else ''}which policy to run, per class and condition:")
        out += [f"  {c} ({k}): run {run}: {why}" for (c, k), (run, why) in advice.items()]
    return "\n".join(out)
