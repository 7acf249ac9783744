"""`advisor router train|eval` and `advisor route`: the learned router on the command line."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.errors import DataError
from advisor.store import DEFAULT_STORE

StoreOpt = Annotated[Path, typer.Option("--store", help="DuckDB store file.")]
SuiteOpt = Annotated[Optional[str], typer.Option("--suite-name", help="Only runs of this suite.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
KOpt = Annotated[int, typer.Option("--k", min=1, help="Attempts per rung before escalating (escalation mode).")]
FaOpt = Annotated[float, typer.Option("--false-accept", min=0, max=1, help="Verifier P(accept | not usable).")]
FrOpt = Annotated[float, typer.Option("--false-reject", min=0, max=1, help="Verifier P(reject | usable).")]
ChainOpt = Annotated[int, typer.Option("--max-chain", min=1, help="At most this many rungs in an escalation chain.")]


class Order(str, Enum):
    """Escalation order above the start rung."""

    ladder = "ladder"
    probability = "probability"


OrderOpt = Annotated[Order, typer.Option("--order", help="Escalate up the ladder, or to the remaining rungs by "
                                         "falling predicted P(usable).")]


def register(app: typer.Typer) -> None:
    """Add the `router` group (train, eval) and the `route` command."""
    group = typer.Typer(help="Train and evaluate the learned router.", no_args_is_help=True)
    group.command("train")(train)
    group.command("eval")(evaluate)
    app.add_typer(group, name="router")
    app.command("route")(route)


def _configs(k: int, false_accept: float, false_reject: float, max_chain: int, target: float = 0.0,
             order: str = "ladder", value: float | None = None):
    from advisor.router.policy import PolicyConfig
    from advisor.scores import Verifier

    verifier = Verifier(false_accept=false_accept, false_reject=false_reject)
    return (PolicyConfig(mode="single", target=target, value_usd=value),
            PolicyConfig(mode="escalate", k=k, verifier=verifier, max_chain=max_chain, target=target, order=order,
                         value_usd=value))


def train(store: StoreOpt = Path(DEFAULT_STORE), suite_name: SuiteOpt = None,
          ladder_name: Annotated[Optional[str], typer.Option("--ladder-name", help="Only runs on this ladder.")] = None,
          out: Annotated[Path, typer.Option("--out", help="Artifact file (.json or .joblib).")] = Path("router.json"),
          embeddings: Annotated[bool, typer.Option("--embeddings", help="Add MiniLM sentence embeddings "
                                                   "(needs the embeddings extra).")] = False,
          folds: Annotated[int, typer.Option("--folds", min=2, help="Grouped CV folds (by prompt).")] = 5,
          c: Annotated[float, typer.Option("--C", min=1e-6, help="Inverse L2 strength.")] = 1.0,
          seed: Annotated[int, typer.Option("--seed")] = 0, as_json: JsonOpt = False) -> None:
    """Train per-rung calibrated P(usable) models from the store's runs and write a versioned artifact."""
    from advisor.router.train import fit_router, training_data_from_store
    from advisor.store import Store

    with Store.open(store, read_only=True) as s:
        data = training_data_from_store(s, suite_name=suite_name, ladder_name=ladder_name)
    model = fit_router(data, C=c, folds=folds, seed=seed, use_embeddings=embeddings)
    model.save(out)
    if as_json:
        typer.echo(jsonout.dumps({"artifact": str(out), "provenance": model.provenance, "metrics": model.metrics},
                              indent=2, default=str))
        return
    prov = model.provenance
    typer.echo(f"{out}: router over {len(model.rungs)} rungs of {prov['ladder_name']!r} from {prov['runs']} runs, "
               f"{prov['prompts']} prompts, {len(prov['classes'])} classes ({prov['cost_estimated_runs']} costs "
               f"estimated{', ' + str(prov['simulated_runs']) + ' SIMULATED runs' if prov['simulated_runs'] else ''})")
    typer.echo(f"  {model.metrics['how']}")
    for name, m in model.metrics["per_rung"].items():
        auc = "n/a" if m["auc"] is None else f"{m['auc']:.3f}"
        typer.echo(f"  {name:<34} AUC {auc}  Brier {m['brier']:.3f}  ECE {m['ece']:.3f}  "
                   f"usable {m['positive_rate']:.2f}  ({m['calibration']})")


def evaluate(store: StoreOpt = Path(DEFAULT_STORE), suite_name: SuiteOpt = None,
             artifact: Annotated[Optional[Path], typer.Option("--artifact", help="Judge this artifact on "
                                                              "--test-file instead of cross-validating.")] = None,
             test_file: Annotated[Optional[Path], typer.Option("--test-file", help="Held-out recorded results "
                                                               "(imported in memory; needs --ladder).")] = None,
             ladder: Annotated[Optional[Path], typer.Option("--ladder", help="Ladder of --test-file.")] = None,
             folds: Annotated[int, typer.Option("--folds", min=2, help="Grouped CV folds (by prompt).")] = 5,
             k: KOpt = 1, false_accept: FaOpt = 0.0, false_reject: FrOpt = 0.0, max_chain: ChainOpt = 3,
             out_dir: Annotated[Path, typer.Option("--out-dir", help="Folder for the JSON summary and plots.")]
             = Path("router-eval"), as_json: JsonOpt = False) -> None:
    """Cost-quality curves of the router vs baselines, single-shot and verifier-gated escalation."""
    from advisor.router import evaluate as ev
    from advisor.router.train import training_data_from_store
    from advisor.store import Store

    single, escalate = _configs(k, false_accept, false_reject, max_chain)
    if test_file is not None:
        from advisor.importers.recorded import ImportOptions, import_recorded
        from advisor.ladder import load_ladder
        from advisor.router.artifact import load_router

        if artifact is None or ladder is None:
            raise DataError("--test-file needs --artifact (the router to judge) and --ladder")
        model = load_router(artifact)
        with Store.open(":memory:") as s:
            import_recorded(test_file, load_ladder(ladder), s, ImportOptions(suite_name="heldout"))
            data = training_data_from_store(s, suite_name="heldout")
        cv = ev.evaluate_artifact(model, data, single, escalate)
        how = f"artifact {artifact} on {test_file}"
    else:
        with Store.open(store, read_only=True) as s:
            data = training_data_from_store(s, suite_name=suite_name)
        cv = ev.cross_validate(data, single, escalate, folds=folds,
                               progress=lambda m: typer.echo(m, err=True))
        how = f"{folds}-fold CV grouped by prompt over {store}"
    summary = ev.summarise(cv)
    summary["how"] = how
    summary["settings"] = {"k": k, "false_accept": false_accept, "false_reject": false_reject, "max_chain": max_chain}
    path = ev.write_summary(summary, out_dir / "summary.json")
    plots = ev.plot(summary, out_dir)
    if as_json:
        typer.echo(jsonout.dumps({m: {"summary": summary[m]["summary"], "parity": summary[m]["parity"],
                                   "oracle": summary[m]["oracle"]} for m in ("single", "escalate")},
                              indent=2, default=str))
        return
    typer.echo(format_summary(summary))
    typer.echo(f"summary: {path}; plots: {', '.join(str(p) for p in plots)}")


def format_summary(summary: dict) -> str:
    """Human-readable tables of an evaluation summary (costs in USD per 1,000 requests)."""
    lines = [f"{summary.get('how', '')}: {summary['prompts']} prompts "
             f"({summary['dropped_incomplete']} dropped for missing rungs)"]
    for mode in ("single", "escalate"):
        s = summary[mode]
        lines.append(f"\n== {mode} mode ==  (cost = USD per 1,000 requests; quality = usable rate)")
        lines.append(f"  {'policy':<40} {'quality':>8} {'cost':>9} {'AIQ':>7}")
        for name, pts in s["curves"].items():
            best = max(pts, key=lambda p: (p["quality"], -p["cost"]))
            lines.append(f"  {name:<40} {best['quality']:>8.3f} {best['cost'] * 1e3:>9.4f} "
                         f"{s['summary'][name]['aiq']:>7.3f}" + ("" if len(pts) == 1 else "  (best point of sweep)"))
        for label, p in s["parity"].items():
            rc = "never reached" if p["router_cost"] is None else \
                f"{p['router_cost'] * 1e3:.4f} (saving {p['saving'] * 100:.1f}%)"
            lines.append(f"  parity with {label} ({p['rung']}: quality {p['quality']:.3f}, cost "
                         f"{p['cost'] * 1e3:.4f}): router cost {rc}")
        o = s["oracle"]
        lines.append(f"  oracle: quality {o['quality']:.3f}, cost {o['cost'] * 1e3:.4f}; router's best quality is "
                     f"{o['quality_gap_to_router_best']:.3f} below it")
    return "\n".join(lines)


def route(prompt: Annotated[Optional[str], typer.Option("--prompt", help="One request's text.")] = None,
          batch: Annotated[Optional[Path], typer.Option("--batch", help="Requests: JSONL or CSV with a 'prompt' "
                                                        "column (and optionally 'task').")] = None,
          out: Annotated[Optional[Path], typer.Option("--out", help="JSONL output for --batch (default stdout).")]
          = None,
          router: Annotated[Path, typer.Option("--router", help="Router artifact.")] = Path("router.json"),
          task_class: Annotated[Optional[str], typer.Option("--class", help="Task class, when known.")] = None,
          allow: Annotated[Optional[list[str]], typer.Option("--allow", help="Allowed rung (repeatable).")] = None,
          self_hosted_only: Annotated[bool, typer.Option("--self-hosted-only")] = False,
          max_latency: Annotated[Optional[float], typer.Option("--max-latency", help="Seconds per attempt.")] = None,
          weight: Annotated[Optional[list[str]], typer.Option("--weight", help="RUNG=W preference weight "
                                                              "(default 1; 0 = never).")] = None,
          target: Annotated[float, typer.Option("--target", min=0, max=1, help="Minimum P(usable) of the "
                                                "delivered answer.")] = 0.0,
          k: KOpt = 1, no_verifier: Annotated[bool, typer.Option("--no-verifier", help="Single-shot: no retry, "
                                                                 "no escalation.")] = False,
          false_accept: FaOpt = 0.0, false_reject: FrOpt = 0.0, max_chain: ChainOpt = 3,
          order: OrderOpt = Order.ladder,
          value: Annotated[Optional[float], typer.Option("--value", min=0, help="What a usable result is worth "
                                                         "(USD): pick the highest value x P(usable) - expected "
                                                         "cost instead of the lowest cost per usable result.")]
          = None, as_json: JsonOpt = False) -> None:
    """Choose the rung for one prompt or a batch file (one JSON decision per row)."""
    from advisor.router.artifact import load_router
    from advisor.router.policy import Preferences
    from advisor.router.routing import decision_row, read_requests, route_batch, route_one

    if (prompt is None) == (batch is None):
        raise DataError("give exactly one of --prompt TEXT or --batch FILE")
    single, escalate = _configs(k, false_accept, false_reject, max_chain, target, order.value, value)
    config = single if no_verifier else escalate
    weights = {}
    for item in weight or []:
        name, sep, value = item.partition("=")
        try:
            weights[name] = float(value)
        except ValueError:
            raise DataError(f"--weight {item!r}: expected RUNG=NUMBER") from None
    prefs = Preferences(allowed=allow or None, self_hosted_only=self_hosted_only, max_latency_s=max_latency,
                        weights=weights)
    model = load_router(router)
    if prompt is not None:
        d = route_one(model, prompt, task_class, config, prefs)
        if as_json:
            typer.echo(jsonout.dumps(decision_row(d, verbose=True), indent=2))
            return
        typer.echo(f"{d.rung}  (chain {' -> '.join(d.chain)}; expected cost ${d.expected_cost:.6f}, "
                   f"P(usable) {d.p_usable:.3f}, ${d.cost_per_usable:.6f} per usable result)")
        typer.echo(f"  rule: {d.rule}")
        for name, p in sorted(d.probabilities.items(), key=lambda x: -x[1]):
            note = f"  [excluded: {d.excluded[name]}]" if name in d.excluded else ""
            typer.echo(f"  {name:<34} P(usable) {p:.3f}  attempt ${d.attempt_costs[name]:.6f}{note}")
        return
    rows, texts, classes = read_requests(batch)
    if task_class is not None:
        classes = [c or task_class for c in classes]
    decisions = route_batch(model, texts, classes, config, prefs, explain=as_json)
    sink = out.open("w") if out else sys.stdout
    try:
        for d, r in zip(decisions, rows):
            sink.write(jsonout.dumps(decision_row(d, r, verbose=as_json)) + "\n")
    finally:
        if out:
            sink.close()
    if out:
        typer.echo(f"{len(decisions)} decisions -> {out}", err=True)
