"""The held-out workflow in one command: a recorded-results file judged against a router artifact.

`advisor router eval --artifact A --test-file F` reads F with the options of `advisor import` (``--map``,
``--ignore``, ``--task-column``, ``--prompt-column``, ``--usable-threshold``, ``--output-tokens``) into an
in-memory store. Extra conveniences:
- known bookkeeping columns (`BOOKKEEPING`: split markers such as ``orig_split`` / ``split``) are ignored;
- a wide column whose values are not numbers stops with a message suggesting ``--ignore COLUMN``;
- model ids map to rung names without ``--map`` by one rule (case-insensitive, first match): the id equals the
  rung's name or hf_id; or the id's last ``/`` segment equals the rung's name or the last segment of its
  hf_id; or the id with ``/`` replaced by ``_`` or ``-`` equals the rung's name. So
  ``meta/llama-2-70b-chat`` maps to the rung ``llama-2-70b-chat`` (or ``meta_llama-2-70b-chat``);
- without ``--ladder``, the ladder is rebuilt from the artifact's rungs (names and per-token prices), enough
  to estimate costs the file does not record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from advisor.errors import DataError
from advisor.importers.recorded import (ID_COLUMNS, PROMPT_COLUMNS, TASK_COLUMNS, WIDE_IGNORED, ImportOptions,
                                        import_recorded, read_table)
from advisor.ladder import Ladder
from advisor.router.training.fit import training_data_from_store
from advisor.store import RunStore, open_store

BOOKKEEPING = ("orig_split", "split", "fold", "orig_fold", "data_split", "subset")


def rung_for(model_id: str, rungs: Sequence[tuple[str, str | None]]) -> str | None:
    """The rung name that `model_id` maps to under the module's rule (rungs: (name, hf_id) pairs)."""
    mid = model_id.strip().lower()
    last = mid.rsplit("/", 1)[-1]
    tests = [lambda n, h: mid in (n, h), lambda n, h: last in (n, (h or "").rsplit("/", 1)[-1]),
             lambda n, h: n in (mid.replace("/", "_"), mid.replace("/", "-"))]
    for test in tests:
        for name, hf in rungs:
            if test(name.lower(), (hf or "").lower() or None):
                return name
    return None


def _model_ids(rows: list[dict[str, Any]], opts, path) -> list[str]:
    columns = list(dict.fromkeys(k for r in rows[:50] for k in r))
    if opts.shape == "long" or (opts.shape == "auto" and {"model", "score"} <= set(columns)):
        return sorted({str(r["model"]) for r in rows if r.get("model") is not None})
    skip = {*PROMPT_COLUMNS, *TASK_COLUMNS, *ID_COLUMNS, *WIDE_IGNORED, *opts.ignore, opts.prompt_column,
            opts.task_column}
    models = [c for c in columns if c not in skip and "|" not in c]
    for col in models:
        for r in rows[:200]:
            v = r.get(col)
            if isinstance(v, str) and v.strip():
                try:
                    float(v)
                except ValueError:
                    raise DataError(f"{path}: column {col!r} holds non-numeric values (e.g. {v!r}); if it is "
                                    f"not a model score column, pass --ignore {col}") from None
    return models


def ladder_from_artifact(model):
    """A placeholder ladder with the artifact's rungs and per-token prices (recorded results, not served)."""
    rungs = [{"name": r.name, "hf_id": r.name, "params_total_b": 1 + i, "model_id": f"recorded_{i}",
              "price": {"basis": "tokens", "usd_per_m_input": r.usd_per_input_token * 1e6,
                        "usd_per_m_output": r.usd_per_output_token * 1e6,
                        "source": "the router artifact's rung prices", "as_of": "n/a"},
              "context_length": 8192, "tool_call_format": "hermes", "self_hosted": r.self_hosted,
              "data_leaves_org": r.data_leaves_org} for i, r in enumerate(model.rungs)]
    return Ladder.model_validate({"version": 1, "name": "from-artifact", "rungs": rungs})


def load_heldout(path: str | Path, model, ladder=None, opts=None):
    """Import `path` in memory (see the module docstring) and return its `TrainingData`."""
    path = Path(path)
    opts = opts or ImportOptions(suite_name="heldout")
    rows = read_table(path)
    columns = set(k for r in rows[:50] for k in r)
    ignore = [*opts.ignore, *(c for c in BOOKKEEPING if c in columns and c not in opts.ignore)]
    opts = opts.model_copy(update={"ignore": ignore, "suite_name": "heldout"})
    ladder = ladder or ladder_from_artifact(model)
    pairs = [(r.name, r.hf_id) for r in ladder.rungs]
    names = [r.name for r in ladder.rungs]
    mapping = dict(opts.model_map)
    for mid in _model_ids(rows, opts, path):
        if mid not in mapping and mid not in names:
            rung = rung_for(mid, pairs)
            if rung is not None:
                mapping[mid] = rung
    opts = opts.model_copy(update={"model_map": mapping})
    with open_store(":memory:", role=RunStore) as store:
        import_recorded(path, ladder, store, opts)
        return training_data_from_store(store, suite_name="heldout")
