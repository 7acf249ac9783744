"""`advisor policies`: fixed rungs vs routing policies (orchestrator) per class and condition, from a store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.floors_cmd import BarOpt, ConfidenceOpt, StoreOpt
from advisor.store import DEFAULT_STORE


def register(app: typer.Typer) -> None:
    """Add the `policies` command."""
    app.command("policies")(policies)


def policies(store: StoreOpt = Path(DEFAULT_STORE),
             ladder: Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                            help="Ladder the runs used (default: ladders/demo.yaml).")] = None,
             suite: Annotated[Optional[str], typer.Option("--suite", help="Suite name (needed when the store "
                                                          "holds several).")] = None,
             as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
             bar: BarOpt = 75.0, confidence: ConfidenceOpt = 0.9) -> None:
    """Per class and condition: each rung and each policy's usable rate (interval), $ per usable result,
    latency, and for policies the expert calls per rung with the strongest-rung and own-family shares."""
    from advisor.floors import FloorSettings, resolve_suite
    from advisor.ladder import load_ladder
    from advisor.orchestrator.compare import compare
    from advisor.probe.session import DEFAULT_LADDER, default_file
    from advisor.store import Store

    lad = load_ladder(ladder or default_file(DEFAULT_LADDER))
    with Store.open(store, read_only=True) as s:
        name = resolve_suite(s, suite)
        arms = compare(s, name, lad, FloorSettings(bar=bar, confidence=confidence))
    simulated = any(a.simulated for a in arms)
    if as_json:
        typer.echo(jsonout.dumps({"suite": name, "ladder": lad.name, "simulated": simulated,
                                  "arms": [a.to_dict() for a in arms]}, indent=2, default=str))
        return
    typer.echo(render_text(arms, name, lad.name, simulated))


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def render_text(arms, suite: str, ladder: str, simulated: bool) -> str:
    """The comparison as a plain-text table (one row per class, condition and arm)."""
    head = f"{'SIMULATED ' if simulated else ''}suite {suite} on ladder {ladder}: rungs vs policies"
    cols = ["class", "condition", "arm", "runs", "usable (90% CI)", "$/usable", "latency", "expert calls",
            "strongest", "own family", "adherence"]
    rows = []
    for a in arms:
        lo, hi = a.interval
        usable = f"{_pct(a.usable_rate)} ({100 * lo:.0f}-{100 * hi:.0f}%)"
        money = "-" if a.cost_per_usable is None else f"${a.cost_per_usable:.5f}"
        latency = "-" if a.latency_s is None else f"{a.latency_s:.2f} s"
        dist = " ".join(f"{k}:{v}" for k, v in a.expert_calls.items()) or "-"
        rows.append([a.task_class, a.condition, a.arm, str(a.runs), usable, money, latency, dist,
                     _pct(a.strongest_share), _pct(a.own_family_share), _pct(a.adherence)])
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    line = lambda r: " | ".join(v.ljust(w) for v, w in zip(r, widths))  # noqa: E731
    out = [head, line(cols), "-+-".join("-" * w for w in widths), *(line(r) for r in rows)]
    out.append("$/usable: mean cost per attempt / usable rate (retry until usable), orchestrator and expert "
               "tokens included; strongest / own family: share of expert calls")
    return "\n".join(out)
