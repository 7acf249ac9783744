"""`advisor router train|eval` and `advisor route`: the learned router on the command line."""

from __future__ import annotations

import math

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from advisor import jsonout
from advisor.cli.floors_cmd import LiveStoreOpt
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
    from advisor.cli.feedback_cmd import register_router

    register_router(group)
    app.add_typer(group, name="router")
    app.command("route")(route)


def _configs(k: int, false_accept: float, false_reject: float, max_chain: int, target: float = 0.0,
             order: str = "ladder", value: float | None = None):
    from advisor.router.routing.rule import PolicyConfig
    from advisor.scores import VerifierErrors

    verifier = VerifierErrors(false_accept=false_accept, false_reject=false_reject)
    return (PolicyConfig(mode="single", target=target, value_usd=value),
            PolicyConfig(mode="escalate", k=k, verifier=verifier, max_chain=max_chain, target=target, order=order,
                         value_usd=value))


def train(store: StoreOpt = Path(DEFAULT_STORE), suite_name: SuiteOpt = None,
          ladder_name: Annotated[Optional[str], typer.Option("--ladder-name", help="Only runs on this ladder.")] = None,
          out: Annotated[Path, typer.Option("--out", help="Artifact file (.json or .npz; plain data).")]
          = Path("router.json"),
          embeddings: Annotated[bool, typer.Option("--embeddings", help="Add MiniLM sentence embeddings "
                                                   "(needs the embeddings extra).")] = False,
          folds: Annotated[int, typer.Option("--folds", min=2, help="Grouped CV folds (by prompt).")] = 5,
          c: Annotated[float, typer.Option("--C", min=1e-6, help="Inverse L2 strength.")] = 1.0,
          seed: Annotated[int, typer.Option("--seed", help="Seed of the folds and the solvers.")] = 0,
          live: Annotated[bool, typer.Option("--live", help="Add the service's verified live attempts (soft "
                                             "labels under the verifier's error rates; prompts must be stored).")]
          = False,
          live_weight: Annotated[float, typer.Option("--live-weight", min=0, help="Each live attempt counts as "
                                                     "this many probe runs.")] = 1.0,
          live_holdout: Annotated[int, typer.Option("--live-holdout", min=0, help="Leave out the most recent N "
                                                    "live decisions (the promotion gate's window).")] = 0,
          service_config: Annotated[Optional[Path], typer.Option("--service-config", exists=True, dir_okay=False,
                                                                 help="The service config whose verifier error "
                                                                 "rates label live attempts.")] = None,
          live_store: LiveStoreOpt = None,
          predictor: Annotated[Optional[list[str]], typer.Option(
              "--predictor", metavar="NAME", help="Choose the probability model among only these (repeatable: "
              "router, tfidf, class_rates); default: every one, picked by cross-validated AIQ.")] = None,
          as_json: JsonOpt = False) -> None:
    """Train per-rung calibrated P(usable) models and the cost model from the store's runs; write an artifact."""
    import warnings

    from advisor.router.model.artifact import SUFFIXES
    from advisor.router.training.fit import fit_router, training_data_from_store
    from advisor.store import RunStore, open_store

    if out.suffix not in SUFFIXES:
        raise DataError(f"--out {out}: router artifacts end in .json or .npz")
    from advisor.store import with_live

    with with_live(open_store(store, read_only=True, role=RunStore), live_store if live else None) as s:
        data = training_data_from_store(s, suite_name=suite_name, ladder_name=ladder_name)
        if live:
            from advisor.cli.feedback_cmd import add_live

            data = add_live(s, data, live_weight, live_holdout, service_config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = fit_router(data, C=c, folds=folds, seed=seed, use_embeddings=embeddings, predictors=predictor)
    model.save(out)
    if as_json:
        from advisor.router.evaluation.metrics import strict

        typer.echo(jsonout.dumps(strict({"artifact": str(out), "simulated": model.simulated,
                                         "provenance": model.provenance, "metrics": model.metrics,
                                         "default": model.default, "dependence": model.dependence}), indent=2))
        return
    prov = model.provenance
    if model.simulated:
        typer.echo(f"SIMULATED: trained on {prov['simulated_runs']} runs of stand-in rungs")
    typer.echo(f"{out}: router over {len(model.rungs)} rungs of {prov['ladder_name']!r} from {prov['runs']} runs, "
               f"{prov['prompts']} prompts, {len(prov['classes'])} classes ({prov['cost_estimated_runs']} costs "
               "estimated)")
    typer.echo(f"  {model.metrics['how']}")
    choice = model.metrics["predictor"]
    why = "the only candidate" if len(choice["candidates"]) == 1 else "highest cross-validated AIQ"
    typer.echo(f"  probability model: {choice['chosen']} of {', '.join(choice['candidates'])} ({why})")
    for name, m in model.metrics["per_rung"].items():
        auc = "n/a" if m["auc"] is None else f"{m['auc']:.3f}"
        err = "n/a" if m.get("cost_mdape") is None else f"{m['cost_mdape']:.1%}"
        est = " (costs estimated)" if (m.get("cost_estimated_share") or 0) >= 0.999 else ""
        typer.echo(f"  {name:<34} AUC {auc}  Brier {m['brier']:.3f}  ECE {m['ece']:.3f}  "
                   f"usable {m['positive_rate']:.2f}  cost MdAPE {err}{est}  ({m['calibration']})")
    for name in model.metrics.get("fallback_rungs", []):
        typer.echo(f"  warning: {name}: cross-validated AUC below 0.55 (no signal): routed on its class-level "
                   "usable rate", err=True)
    if model.default:
        d = model.default
        typer.echo(f"  default: {d['criterion']}; value of a usable result ${d['value_usd']['single']:.3g} "
                   f"(single-shot), ${d['value_usd']['escalate']:.3g} (escalation); chain failure dependence "
                   f"{model.dependence:.2f}")


def evaluate(store: StoreOpt = Path(DEFAULT_STORE), suite_name: SuiteOpt = None,
             artifact: Annotated[Optional[Path], typer.Option("--artifact", help="Judge this artifact on "
                                                              "--test-file instead of cross-validating.")] = None,
             test_file: Annotated[Optional[Path], typer.Option("--test-file", help="Held-out recorded results "
                                                               "(read like `advisor import`, in memory).")] = None,
             ladder: Annotated[Optional[Path], typer.Option("--ladder", help="Ladder of --test-file (default: "
                                                            "rebuilt from the artifact's rungs and prices).")] = None,
             usable_threshold: Annotated[float, typer.Option("--usable-threshold", min=0, max=100, help=(
                 "--test-file: the bar on the 0-100 scale (as `advisor import`)."))] = 75.0,
             output_tokens: Annotated[int, typer.Option("--output-tokens", min=0, help=(
                 "--test-file: stated output-token assumption for estimated costs."))] = 256,
             model_map: Annotated[Optional[list[str]], typer.Option("--map", help=(
                 "--test-file: MODEL=RUNG (repeatable; ids with '/' map by rule, see docs/router.md)."))] = None,
             task_column: Annotated[Optional[str], typer.Option("--task-column", help="--test-file: task column.")]
             = None,
             prompt_column: Annotated[Optional[str], typer.Option("--prompt-column", help="--test-file: prompt "
                                                                  "column.")] = None,
             ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help=(
                 "--test-file: a wide-table column that is not a model (repeatable; split markers are "
                 "ignored already)."))] = None,
             folds: Annotated[int, typer.Option("--folds", min=2, help="Grouped CV folds (by prompt).")] = 5,
             k: KOpt = 1, false_accept: FaOpt = 0.0, false_reject: FrOpt = 0.0, max_chain: ChainOpt = 3,
             out_dir: Annotated[Path, typer.Option("--out-dir", help="Folder for the JSON summary and plots.")]
             = Path("router-eval"), as_json: JsonOpt = False) -> None:
    """Cost-quality of the router's default point and sweeps vs the tf-idf baseline, the cascade, the per-class
    floor and the oracle; single-shot and verifier-gated escalation."""
    import warnings

    from advisor.router.evaluation import evaluate as ev
    from advisor.router.evaluation.metrics import strict
    from advisor.router.evaluation.tables import mode_table
    from advisor.router.training.fit import training_data_from_store
    from advisor.store import RunStore, open_store

    single, escalate = _configs(k, false_accept, false_reject, max_chain)
    warnings.filterwarnings("ignore", category=UserWarning)
    if test_file is not None or artifact is not None:
        from advisor.cli.import_cmd import parse_map
        from advisor.importers.recorded import ImportOptions
        from advisor.ladder import load_ladder
        from advisor.router.evaluation.heldout import load_heldout
        from advisor.router.model.artifact import load_router

        if artifact is None or test_file is None:
            raise DataError("--artifact and --test-file go together: the router to judge and its held-out file")
        model = load_router(artifact)
        opts = ImportOptions(suite_name="heldout", bar=usable_threshold, output_tokens=output_tokens,
                             model_map=parse_map(model_map or []), task_column=task_column,
                             prompt_column=prompt_column, ignore=ignore or [])
        data = load_heldout(test_file, model, load_ladder(ladder) if ladder else None, opts)
        cv = ev.evaluate_artifact(model, data, single, escalate)
        how = f"artifact {artifact} on {test_file}"
    else:
        with open_store(store, read_only=True, role=RunStore) as s:
            data = training_data_from_store(s, suite_name=suite_name)
        cv = ev.cross_validate(data, single, escalate, folds=folds, progress=lambda m: typer.echo(m, err=True))
        how = f"{folds}-fold CV grouped by prompt over {store}"
    summary = ev.summarise(cv)
    summary["how"] = f"{how} ({cv['how']})"
    summary["settings"] = {"k": k, "false_accept": false_accept, "false_reject": false_reject, "max_chain": max_chain}
    path = ev.write_summary(summary, out_dir / "summary.json")
    plots = ev.plot(summary, out_dir)
    if as_json:
        keys = ("default", "best_single", "aiq", "parity", "best_point", "bootstrap", "oracle")
        typer.echo(jsonout.dumps(strict({"simulated": summary["simulated"], "how": summary["how"],
                                         **{m: {k2: summary[m].get(k2) for k2 in keys}
                                            for m in ("single", "escalate")}}), indent=2))
        return
    lines = [f"{'SIMULATED: router trained or judged on simulated runs. ' if summary['simulated'] else ''}"
             f"{summary['how']}: {summary['prompts']} prompts ({summary['dropped_incomplete']} dropped for missing "
             "rungs)"]
    lines += ["", mode_table(summary, "single"), "", mode_table(summary, "escalate")]
    typer.echo("\n".join(lines))
    typer.echo(f"summary: {path}; plots: {', '.join(str(p) for p in plots)}")


def route(prompt: Annotated[Optional[str], typer.Option("--prompt", help="One request's text.")] = None,
          batch: Annotated[Optional[Path], typer.Option("--batch", help="Requests: JSONL or CSV with a 'prompt' "
                                                        "column (and optionally 'task').")] = None,
          out: Annotated[Optional[Path], typer.Option("--out", help="JSONL output for --batch (default stdout).")]
          = None,
          router: Annotated[Path, typer.Option("--router", help="Router artifact (.json or .npz).")]
          = Path("router.json"),
          task_class: Annotated[Optional[str], typer.Option("--class", help="Task class, when known.")] = None,
          allow: Annotated[Optional[list[str]], typer.Option("--allow", help="Allowed rung (repeatable).")] = None,
          self_hosted_only: Annotated[bool, typer.Option("--self-hosted-only", help="Only self-hosted rungs.")]
          = False,
          max_latency: Annotated[Optional[float], typer.Option("--max-latency", min=0, help="Seconds per "
                                                                "attempt.")] = None,
          weight: Annotated[Optional[list[str]], typer.Option("--weight", help="RUNG=W preference weight "
                                                              "(default 1; 0 = never).")] = None,
          target: Annotated[float, typer.Option("--target", min=0, max=1, help="Minimum P(usable) of the "
                                                "delivered answer (target rule instead of the default).")] = 0.0,
          k: KOpt = 1, no_verifier: Annotated[bool, typer.Option("--no-verifier", help="Single-shot: no retry, "
                                                                 "no escalation.")] = False,
          false_accept: FaOpt = 0.0, false_reject: FrOpt = 0.0, max_chain: ChainOpt = 3,
          order: OrderOpt = Order.ladder,
          value: Annotated[Optional[float], typer.Option("--value", min=0, help="What a usable result is worth "
                                                         "(USD): pick the highest value x P(usable) - expected "
                                                         "cost instead of the default operating point.")]
          = None,
          policy: Annotated[Optional[str], typer.Option("--policy", help="Routing policy by name (default: the "
                                                        "artifact's default, or the rule --target/--value state); "
                                                        "e.g. router, value, default, class_floor, threshold, "
                                                        "always, cascade.")] = None,
          rung: Annotated[Optional[str], typer.Option("--rung", help="The rung of --policy always.")] = None,
          as_json: JsonOpt = False) -> None:
    """Choose the rung for one prompt or a batch file (one JSON decision per row)."""
    from advisor.router.model.artifact import load_router
    from advisor.router.routing.policies import POLICIES
    from advisor.router.routing.route import decision_row, read_requests, route_batch, route_one
    from advisor.router.routing.rule import Preferences

    if (prompt is None) == (batch is None):
        raise DataError("give exactly one of --prompt TEXT or --batch FILE")
    if policy is not None:
        POLICIES.get(policy)  # unknown name: one line with did-you-mean
    single, escalate = _configs(k, false_accept, false_reject, max_chain, target, order.value, value)
    config = single if no_verifier else escalate
    weights = {}
    for item in weight or []:
        name, sep, w = item.partition("=")
        try:
            weights[name] = float(w)
        except ValueError:
            raise DataError(f"--weight {item!r}: expected RUNG=NUMBER") from None
        if not sep or not name or not math.isfinite(weights[name]) or weights[name] < 0:
            raise DataError(f"--weight {item!r}: expected RUNG=W with W a finite number >= 0 (0 = never)")
    prefs = Preferences(allowed=allow or None, self_hosted_only=self_hosted_only, max_latency_s=max_latency,
                        weights=weights)
    model = load_router(router)
    params = {k2: v for k2, v in (("rung", rung), ("value_usd", value), ("target", target if target else None))
              if v is not None}
    if policy in ("class_floor",) and "target" not in params:
        params.pop("target", None)
    sim = model.simulated
    if prompt is not None:
        d = route_one(model, prompt, task_class, config, prefs, policy=policy, **params)
        if as_json:
            typer.echo(jsonout.dumps(decision_row(d, verbose=True, simulated=sim), indent=2))
            return
        if sim:
            typer.echo(f"SIMULATED: this router was trained on {model.provenance['simulated_runs']} runs of "
                       "stand-in rungs; its probabilities describe the simulation, not real models")
        typer.echo(f"{d.rung}  (chain {' -> '.join(d.chain)}; expected cost ${d.expected_cost:.6f}, "
                   f"P(usable) {d.p_usable:.3f}, ${d.cost_per_usable:.6f} per usable result)")
        typer.echo(f"  policy {d.policy}; rule: {d.rule}")
        for name, p in sorted(d.probabilities.items(), key=lambda x: -x[1]):
            note = f"  [excluded: {d.excluded[name]}]" if name in d.excluded else ""
            typer.echo(f"  {name:<34} P(usable) {p:.3f}  attempt ${d.attempt_costs[name]:.6f}{note}")
        return
    rows, texts, classes = read_requests(batch)
    if task_class is not None:
        classes = [c or task_class for c in classes]
    decisions = route_batch(model, texts, classes, config, prefs, explain=as_json, policy=policy, **params)
    sink = out.open("w") if out else sys.stdout
    try:
        for d, r in zip(decisions, rows):
            sink.write(jsonout.dumps(decision_row(d, r, verbose=as_json, simulated=sim)) + "\n")
    finally:
        if out:
            sink.close()
    if out:
        typer.echo(f"{len(decisions)} decisions -> {out}" + (" (SIMULATED router)" if sim else ""), err=True)
