"""`advisor router promote|rollback|promotions|drift` and `router train --live`: the live feedback loop."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.floors_cmd import LiveStoreOpt
from advisor.store import DEFAULT_STORE

StoreOpt = Annotated[str, typer.Option("--store", envvar="ADVISOR_STORE_URL",
                                       help="DuckDB store (live outcomes, promotion records), or a PostgreSQL "
                                       "store (postgresql://...: its live records, pointer and artifacts).")]
PointerOpt = Annotated[Optional[Path], typer.Option("--pointer", metavar="FILE",
                                                    help="Promoted pointer the service reads "
                                                    "(default: promoted.json in the folder <store>.router; a "
                                                    "PostgreSQL store's own).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--service-config", exists=True, dir_okay=False,
                                                   help="Service config: the verifiers' stated error rates.")]
LadderOpt = Annotated[Optional[Path], typer.Option("--ladder", exists=True, dir_okay=False,
                                                   help="Ladder of the service config (default: demo).")]


def register_router(group: typer.Typer) -> None:
    """Add promote, rollback, promotions and drift to the `router` group."""
    group.command("promote")(promote)
    group.command("rollback")(rollback)
    group.command("promotions")(promotions)
    group.command("drift")(drift)
    group.command("shadow-report")(shadow_report)


def _default_pointer(store: str):
    """A PostgreSQL store's own pointer (its URL), else the pointer file beside the DuckDB store."""
    from advisor.router.feedback.pointers import default_pointer
    from advisor.store import is_database_url
    from advisor.store.protocols import duckdb_path

    return store if is_database_url(store) else default_pointer(duckdb_path(store))


def _ladder(path: Path | None):
    from advisor.ladder import load_ladder
    from advisor.probe.session import DEFAULT_LADDER, default_file

    return load_ladder(path or default_file(DEFAULT_LADDER))


def _service_config(path: Path, ladder_path: Path | None):
    from advisor.service.process.config import load_config

    return load_config(path, _ladder(ladder_path))


def add_live(store, data, weight: float, holdout: int, service_config: Path | None, ladder_path: Path | None = None):
    """`router train --live`: the probe data plus the verified live attempts older than the held-out window."""
    from advisor.router.feedback.live import live_attempts, merge_live, split_by_time, verifier_rates

    rows, skipped = live_attempts(store)
    train_rows, held = split_by_time(rows, holdout)
    rates = verifier_rates(_service_config(service_config, ladder_path), store) if service_config else {}
    out = merge_live(data, train_rows, rates, weight, skipped, len({r["decision_id"] for r in held}))
    info = out.provenance["live"]
    typer.echo(f"live: {info['attempts']} verified attempts of {info['decisions']} decisions added (weight "
               f"{weight:g} each); {info['held_out_decisions']} most recent decisions held out; "
               f"{skipped} decisions skipped (prompt not stored: set record.store_prompts)")
    return out


def promote(candidate: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="Candidate artifact.")],
            store: StoreOpt = DEFAULT_STORE, pointer: PointerOpt = None,
            window: Annotated[int, typer.Option("--window", min=1, help="Held-out live decisions (most recent, "
                                                "after the candidate's training data).")] = 200,
            min_decisions: Annotated[int, typer.Option("--min-decisions", min=1, help="Refuse with fewer "
                                                       "held-out decisions than this.")] = 30,
            margin: Annotated[float, typer.Option("--margin", min=0, help="Largest Brier increase still 'not "
                                                  "worse' (upper end of the 95% paired interval).")] = 0.005,
            service_config: ConfigOpt = None, ladder: LadderOpt = None,
            force: Annotated[bool, typer.Option("--force", help="Promote even when the gate refuses "
                                                "(recorded as forced).")] = False,
            require_shadow: Annotated[bool, typer.Option("--require-shadow", help="Also require the candidate's "
                                                         "shadow estimate (`router shadow-report`) not worse on "
                                                         "usable rate.")] = False,
            shadow_margin: Annotated[float, typer.Option("--shadow-margin", min=0, max=1, help="Largest usable-rate "
                                                         "loss still 'not worse' (lower end of the 95% "
                                                         "interval).")] = 0.02,
            as_json: JsonOpt = False) -> None:
    """Gate CANDIDATE against the serving router on recent live outcomes; promote it when it is not worse."""
    from advisor.router.feedback.live import verifier_rates
    from advisor.router.feedback.promotion import promote as do_promote
    from advisor.store import open_store

    pointer = pointer or _default_pointer(store)
    from advisor.store import RunStore

    with open_store(store) as s:  # measured verifier rates are probe-run data: a DuckDB store's, else the config's
        rates = (verifier_rates(_service_config(service_config, ladder), s if isinstance(s, RunStore) else None)
                 if service_config else {})
        out = do_promote(candidate, s, pointer, window, min_decisions, margin, rates, force, require_shadow,
                         shadow_margin)
    if as_json:
        typer.echo(jsonout.dumps(out, indent=2))
    else:
        g = out.get("gate")
        if g and g.get("brier_serving") is not None:
            typer.echo(f"gate on {g['decisions']} held-out live decisions ({g['attempts']} verified attempts, "
                       f"{g['window_from']} .. {g['window_to']}): Brier of P(accept) serving {g['brier_serving']:.4f}"
                       f", candidate {g['brier_candidate']:.4f}")
            for c, m in g["per_class"].items():
                typer.echo(f"  {c or '(no class)':<20} {m['attempts']:>5} attempts  accept {m['accept_rate']:.2f}  "
                           f"Brier serving {m['brier_serving']:.4f} candidate {m['brier_candidate']:.4f}")
        if out.get("shadow"):
            typer.echo(out["shadow"]["reason"])
        verb = {"refused": "REFUSED", "unchanged": "unchanged"}.get(out["action"], "promoted")
        typer.echo(f"{verb}: {out['router_version']}: {out['reason']}")
        if out["promoted"]:
            from advisor.store.protocols import redact

            typer.echo(f"pointer {redact(str(pointer))} -> {out['artifact']} (a serving `advisor serve` reloads it "
                       "within 1 s)")
    if out["action"] == "refused":
        raise typer.Exit(3)


def rollback(store: StoreOpt = DEFAULT_STORE, pointer: PointerOpt = None, as_json: JsonOpt = False) -> None:
    """Point the service back to the router that served before the current one (recorded)."""
    from advisor.router.feedback.promotion import rollback as do_rollback
    from advisor.store import open_store

    pointer = pointer or _default_pointer(store)
    with open_store(store) as s:
        out = do_rollback(s, pointer)
    if as_json:
        typer.echo(jsonout.dumps(out, indent=2))
        return
    typer.echo(f"rolled back: {out['from_version']} -> {out['router_version']} ({out['artifact']})")


def promotions(store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """Every recorded promotion, refusal and rollback, newest first."""
    from advisor.store import open_store

    with open_store(store, read_only=True) as s:
        rows = s.promotions()
    if as_json:
        typer.echo(jsonout.dumps(rows, indent=2))
        return
    for r in rows:
        typer.echo(f"{r['created_at']:%Y-%m-%d %H:%M:%S}  {r['action']:<8} {r['router_version']}  "
                   f"(was {r['previous_version'] or '-'})  window {r['window_decisions'] or '-'}")


def drift(store: Annotated[Path, typer.Option("--store", help="DuckDB store (probe runs; live outcomes unless "
                                              "--live-store).")] = Path(DEFAULT_STORE),
          threshold: Annotated[float, typer.Option("--threshold", min=0, max=1, help="Flag a class whose live "
                                                   "rate differs from the expected one by more than this.")] = 0.15,
          live_store: LiveStoreOpt = None, as_json: JsonOpt = False) -> None:
    """Per class: live accept rate vs probe usable rate, predicted vs realised P(usable), cost per usable result."""
    from advisor.router.feedback.drift import drift_table, render_lines
    from advisor.store import RunStore, open_store, with_live

    with with_live(open_store(store, read_only=True, role=RunStore), live_store) as s:
        table = drift_table(s, threshold)
    if as_json:
        typer.echo(jsonout.dumps(table, indent=2))
        return
    for line in render_lines(table):
        typer.echo(line)


def shadow_report(store: StoreOpt = Path(DEFAULT_STORE),
                  version: Annotated[Optional[str], typer.Option("--version", help="The shadow candidate's router "
                                                                 "version (default: the latest shadowed).")] = None,
                  as_json: JsonOpt = False) -> None:
    """Estimate a shadow candidate's cost and usable rate on the live traffic it shadowed, with intervals."""
    from advisor.router.feedback.shadow_report import render
    from advisor.router.feedback.shadow_report import shadow_report as build
    from advisor.store import RunStore, open_store

    with open_store(store, read_only=True, role=RunStore) as s:
        rep = build(s, version)
    if as_json:
        typer.echo(jsonout.dumps(rep.as_dict(), indent=2))
        return
    for line in render(rep):
        typer.echo(line)
