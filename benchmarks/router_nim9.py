"""Benchmark: the learned router vs the tf-idf logistic baseline, the cascade and the per-class floor on
recorded per-prompt results (grouped CV by prompt), in one table per mode.

Default data: ``../shared/data/llmrouter-nim9/dev.csv`` beside the repository root (or ``$ADVISOR_SHARED``)
with the ladder ``ladders/llmrouter-nim9.yaml``. Any other wide table in RouterBench's convention works too
(one row per prompt, ``prompt``, a task column, one score column per model, ``<model>|total_cost`` columns);
with ``--ladder auto`` a placeholder ladder is built from the table's model columns (ordered by mean recorded
cost), which is enough when every cost is recorded.

Cost assumption (llmrouter-nim9 records no cost): per attempt, input tokens = est_prompt_tokens (characters / 4)
and output tokens = --output-tokens (default 256) at the ladder's list prices. Recorded ``|total_cost`` values
are used as they are. Only dev.csv may be used for tuning; the held-out split is elsewhere on purpose.

Run:  python benchmarks/router_nim9.py [PATH] [--folds 5] [--out-dir DIR] [--train-only]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _paths import ROOT, require, shared_dir  # noqa: E402

DEFAULT_DATA = shared_dir() / "data" / "llmrouter-nim9" / "dev.csv"
DEFAULT_LADDER = ROOT / "ladders" / "llmrouter-nim9.yaml"


def auto_ladder(path: Path, ignore: list[str]):
    """A placeholder ladder whose rungs are the table's model columns, cheapest (mean recorded cost) first."""
    from advisor.importers.recorded import PROMPT_COLUMNS, TASK_COLUMNS, WIDE_IGNORED, read_table
    from advisor.ladder import Ladder

    rows = read_table(path)
    cols = list(dict.fromkeys(k for r in rows[:50] for k in r))
    skip = {*PROMPT_COLUMNS, *TASK_COLUMNS, *WIDE_IGNORED, *ignore}
    models = [c for c in cols if c not in skip and "|" not in c]

    def mean_cost(m):
        vals = [float(r[f"{m}|total_cost"]) for r in rows if r.get(f"{m}|total_cost") not in (None, "")]
        return sum(vals) / len(vals) if vals else 0.0

    models.sort(key=mean_cost)
    rungs = [{"name": m.replace("/", "_"), "hf_id": m, "params_total_b": 1 + i, "model_id": f"recorded_{i}",
              "price": {"basis": "tokens", "usd_per_m_input": 0.0, "usd_per_m_output": 0.0,
                        "source": "recorded |total_cost (no list price)", "as_of": "n/a"},
              "context_length": 8192, "tool_call_format": "hermes", "self_hosted": False, "data_leaves_org": True}
             for i, m in enumerate(models)]
    return Ladder.model_validate({"version": 1, "name": f"auto-{path.stem}", "rungs": rungs}), \
        {m: m.replace("/", "_") for m in models if "/" in m}


def _window(value: str) -> tuple[tuple[int, int] | None, str]:
    """``--window``: "HEAD,TAIL" or "none" -> (the window for `fit_router`, how the output names it)."""
    if value.strip().lower() == "none":
        return None, "none (whole text)"
    try:
        head, tail = (int(v) for v in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--window takes HEAD,TAIL (characters) or none, not {value!r}") from None
    return (head, tail), f"first {head} + last {tail} characters"


def run(argv: list[str] | None = None) -> dict:
    """Parse arguments, run the grouped-CV evaluation and print the tables; return the summary."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", nargs="?", default=str(DEFAULT_DATA), help="wide RouterBench-style table")
    ap.add_argument("--ladder", default=str(DEFAULT_LADDER), help="ladder YAML, or 'auto' (see module doc)")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--output-tokens", type=int, default=256, help="stated output-token assumption")
    ap.add_argument("--k", type=int, default=1, help="attempts per rung in escalation mode")
    ap.add_argument("--false-accept", type=float, default=0.0)
    ap.add_argument("--false-reject", type=float, default=0.0)
    ap.add_argument("--max-chain", type=int, default=3)
    ap.add_argument("--n-hash", type=int, default=2 ** 16)
    ap.add_argument("--embeddings", action="store_true", help="add MiniLM sentence embeddings to the features")
    ap.add_argument("--no-stack", action="store_true", help="without the second stage across rungs (train._fit_stack)")
    ap.add_argument("--no-class-model", action="store_true",
                    help="without class prediction for requests without a class (classpred.py)")
    ap.add_argument("--hide-test-classes", action="store_true",
                    help="held-out requests come without their class (measures class prediction)")
    ap.add_argument("--subsample", type=int, default=None,
                    help="use this many prompts drawn at random (seeded), for quick exploration only")
    ap.add_argument("--window", default=None, type=_window, metavar="HEAD,TAIL|none",
                    help="characters of a long prompt the features read (default: the router's, "
                         "advisor.router.model.features.WINDOW; 'none': the whole text)")
    ap.add_argument("--predictors", default=None, metavar="NAME,...",
                    help="the candidate probability models the training chooses among in grouped CV "
                         "(advisor.router.training.predictors; default: every registered one)")
    ap.add_argument("--out-dir", default=None, help="write summary.json and plots here")
    ap.add_argument("--train-only", action="store_true",
                    help="fit one router on the whole table with --folds inner folds and print its cross-validated "
                         "choices (probability model, decision rule) instead of the outer-CV evaluation")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")

    from advisor.cli.router_cmd import _configs
    from advisor.importers.recorded import ImportOptions, import_recorded, token_assumption
    from advisor.ladder import load_ladder
    from advisor.router.evaluation import evaluate as ev
    from advisor.router.training.fit import training_data_from_store
    from advisor.store import Store

    path = require(Path(args.path))
    if args.ladder == "auto":
        ladder, mapping = auto_ladder(path, [])
    else:
        ladder, mapping = load_ladder(args.ladder), {}
    t0 = time.perf_counter()
    with Store.open(":memory:") as store:
        rep = import_recorded(path, ladder, store, ImportOptions(suite_name="bench", output_tokens=args.output_tokens,
                                                                 model_map=mapping))
        data = training_data_from_store(store, suite_name="bench")
    if args.subsample and args.subsample < len(data.texts):
        import numpy as np

        data = data.subset(np.sort(np.random.default_rng(args.seed).choice(len(data.texts), args.subsample,
                                                                            replace=False)))
    if args.train_only:
        return train_only(data, args, path, time.perf_counter() - t0)
    single, escalate = _configs(args.k, args.false_accept, args.false_reject, args.max_chain)
    cv = ev.cross_validate(data, single, escalate, folds=args.folds, seed=args.seed,
                           fit_kwargs={"n_hash": args.n_hash, "use_embeddings": args.embeddings,
                                       "stack": not args.no_stack,
                                       "predict_classes": not args.no_class_model,
                                       **({"predictors": args.predictors.split(",")} if args.predictors else {}),
                                       **({} if args.window is None else {"window": args.window[0]})},
                           hide_test_classes=args.hide_test_classes,
                           progress=lambda m: print(m, file=sys.stderr, flush=True))
    summary = ev.summarise(cv, seed=args.seed)
    elapsed = time.perf_counter() - t0
    summary["how"] = (f"{args.folds}-fold CV grouped by prompt on {path}"
                      + (f", SUBSAMPLE of {len(data.texts)} prompts" if args.subsample else "")
                      + ("; test requests without their class" if args.hide_test_classes else ""))
    summary["cost_assumption"] = (f"{rep.cost_recorded} costs recorded, {rep.cost_estimated} estimated: "
                                  + token_assumption(args.output_tokens))
    print(f"data: {path} ({rep.prompts} prompts, {len(rep.models)} models, {len(rep.classes)} classes); "
          f"bar: score >= {rep.bar / 100:.2f}")
    print(f"cost: {summary['cost_assumption']}")
    print(f"features: hashed n-grams + cues + class{' + MiniLM embeddings' if args.embeddings else ''}"
          f"{'' if args.no_stack else '; second stage across rungs'}"
          f"{'' if args.no_class_model else '; class predicted when missing'}"
          f"{'' if args.window is None else f'; text window {args.window[1]}'}"
          f"{'; TEST REQUESTS WITHOUT THEIR CLASS' if args.hide_test_classes else ''}")
    print(f"evaluation: {summary['how']}; escalation: k={args.k}, verifier false accept {args.false_accept}, "
          f"false reject {args.false_reject}, chains of at most {args.max_chain} rungs in ladder order; "
          f"{elapsed:.0f}s")
    print_models(cv)
    print_predictors(cv)
    for mode in ("single", "escalate"):
        print_mode(summary, mode)
    if args.out_dir:
        out = Path(args.out_dir)
        ev.write_summary(summary, out / "summary.json")
        ev.plot(summary, out)
        print(f"\nwrote {out / 'summary.json'} and plots")
    return summary


def train_only(data, args, path: Path, loaded_s: float) -> dict:
    """`--train-only`: one `fit_router` on the whole table (as `advisor router train` would), its choices printed."""
    from advisor.router.evaluation.tables import predictor_lines, rule_lines
    from advisor.router.training.fit import fit_router

    t0 = time.perf_counter()
    model = fit_router(data, folds=args.folds, seed=args.seed, n_hash=args.n_hash, use_embeddings=args.embeddings,
                       stack=not args.no_stack, predict_classes=not args.no_class_model,
                       **({"predictors": args.predictors.split(",")} if args.predictors else {}))
    print(f"data: {path} ({len(data.texts)} prompts); one router fitted with {args.folds}-fold CV grouped by "
          f"prompt (seed {args.seed}); {loaded_s + time.perf_counter() - t0:.0f}s")
    for line in predictor_lines([model.metrics]) + rule_lines([model.metrics]):
        print(line)
    d = model.default
    print(f"default: value_usd {d.get('value_usd')}, rule {d.get('rule')}; {d.get('criterion')}")
    return {"rule": model.rule, "predictor": model.predictor, "default": d}


def print_models(cv: dict) -> None:
    """Per rung, mean over the outer folds of the router's inner-CV AUC and cost error (MdAPE)."""
    from advisor.router.evaluation.tables import model_lines

    for line in model_lines(cv["fold_metrics"], cv["rungs"]):
        print(line)


def print_predictors(cv: dict) -> None:
    """Which probability model each outer fold's training chose, and every candidate's inner-CV figures."""
    from advisor.router.evaluation.tables import predictor_lines, rule_lines

    for line in predictor_lines(cv["fold_metrics"]) + rule_lines(cv["fold_metrics"]):
        print(line)


def print_mode(summary: dict, mode: str) -> None:
    """Print one mode's table (see advisor.router.evaluation.tables.mode_table)."""
    from advisor.router.evaluation.tables import mode_table

    print()
    print(mode_table(summary, mode))


if __name__ == "__main__":
    run(sys.argv[1:])
