"""Gated promotion of a router artifact, the promoted pointer the service reads, and rollback.

**The pointer.** A small JSON file (default ``<store>.router/promoted.json``) naming the serving artifact: its
path, sha256 and router version. Promotion copies the candidate into the same folder under its hash
(``<sha12>.json``/``.npz``, never overwritten), so a later edit of the candidate file cannot change what is
served, and then replaces the pointer atomically (write + rename). ``advisor serve`` reads the pointer and
watches it (`advisor.service.routing.reload`). With a PostgreSQL store (``--store postgresql://...``) the pointer is a row
of that database and the artifacts are kept there by hash (`advisor.router.feedback.pointers`), so every replica of the
service serves the same promoted router.

**The gate.** The candidate is compared with the serving artifact on a held-out window of *recent* live
outcomes: the verified attempts (see `advisor.router.feedback.live`) of the last ``window`` decisions, all of them
*after* the candidate's own training data (``provenance.live.live_until``): a time-based split. Criterion:
the Brier score of each router's predicted P(accept) of the rung that was actually tried (its calibrated
P(usable) through the verifier's stated error rates: p (1 - fr) + (1 - p) fa) against the verdict. Live data
only has outcomes for the rungs the serving policy tried, so this is the quantity both routers can be scored
on without counterfactuals; a router that expects a rung to pass where the verifier rejects it scores worse.
The difference (candidate - serving) is averaged per decision and given a 95% paired bootstrap interval
over decisions (2,000 resamples, seeded). **Promote when the interval's upper end is at most ``margin``**
(default 0.005: not worse); otherwise refuse with the figures. Every promotion, refusal and rollback is a
`router_promotions` row (which artifact, its hash and version, when, the evidence).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from advisor.errors import RouterError
from advisor.router.feedback.live import live_attempts
from advisor.router.feedback.pointers import DatabasePointer, pointer_for, sha256_of
from advisor.router.feedback.shadow_report import shadow_gate
from advisor.router.model.artifact import load_router
from advisor.scores import VerifierErrors
from advisor.store import now

if TYPE_CHECKING:
    from advisor.store.protocols import LiveRecords, RouterRegistry

CRITERION = "brier(P(accept) of the tried rung) candidate - serving, 95% paired bootstrap over decisions"
BOOTSTRAP = 2000


@dataclass
class GateResult:
    """The figures of one gate evaluation."""

    passed: bool
    reason: str
    decisions: int = 0
    attempts: int = 0
    window_from: Any = None
    window_to: Any = None
    brier_serving: float | None = None
    brier_candidate: float | None = None
    diff: float | None = None
    interval: tuple[float, float] | None = None
    margin: float = 0.005
    per_class: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (the evidence recorded with the promotion)."""
        return {"passed": self.passed, "reason": self.reason, "criterion": CRITERION, "margin": self.margin,
                "decisions": self.decisions, "attempts": self.attempts, "window_from": str(self.window_from),
                "window_to": str(self.window_to), "brier_serving": self.brier_serving,
                "brier_candidate": self.brier_candidate, "diff": self.diff,
                "interval": list(self.interval) if self.interval else None, "per_class": self.per_class}


def _accept_prob(model, rows, rates) -> np.ndarray:
    P = model.predict([r["prompt_text"] for r in rows], [r["task_class"] for r in rows])
    names = model.rung_names
    p = np.array([P[i, names.index(r["rung"])] for i, r in enumerate(rows)])
    fa = np.array([rates.get(r["task_class"] or "", VerifierErrors()).false_accept for r in rows])
    fr = np.array([rates.get(r["task_class"] or "", VerifierErrors()).false_reject for r in rows])
    return p * (1 - fr) + (1 - p) * fa


def gate(candidate, serving, store: LiveRecords, window: int = 200, min_decisions: int = 30, margin: float = 0.005,
         rates: dict | None = None, seed: int = 0) -> GateResult:
    """Evaluate `candidate` against `serving` on the held-out window (see the module docstring)."""
    rows, skipped = live_attempts(store)
    until = ((candidate.provenance.get("live") or {}).get("live_until"))
    if until:
        rows = [r for r in rows if str(r["created_at"]) > until]
    both = set(candidate.rung_names) & set(serving.rung_names)
    rows = [r for r in rows if r["rung"] in both]
    order = list(dict.fromkeys(r["decision_id"] for r in rows))[-window:]
    keep = set(order)
    rows = [r for r in rows if r["decision_id"] in keep]
    res = GateResult(False, "", decisions=len(order), attempts=len(rows), margin=margin)
    if len(order) < min_decisions:
        res.reason = (f"only {len(order)} held-out live decisions with verified attempts after the candidate's "
                      f"training data (need {min_decisions}; {skipped} decisions have no stored prompt): send more "
                      "traffic with `record.store_prompts: true`, or retrain with a larger --live-holdout")
        return res
    rates = rates or {}
    y = np.array([bool(r["accepted"]) for r in rows], float)
    e_s = (_accept_prob(serving, rows, rates) - y) ** 2
    e_c = (_accept_prob(candidate, rows, rates) - y) ** 2
    dec = np.array([order.index(r["decision_id"]) for r in rows])
    n = len(order)
    cnt = np.bincount(dec, minlength=n)
    ds = np.bincount(dec, weights=e_s, minlength=n) / cnt
    dc = np.bincount(dec, weights=e_c, minlength=n) / cnt
    d = dc - ds
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, n, size=(BOOTSTRAP, n))].mean(axis=1)
    lo, hi = (float(x) for x in np.percentile(boots, [2.5, 97.5]))
    res.brier_serving, res.brier_candidate, res.diff, res.interval = float(ds.mean()), float(dc.mean()), float(d.mean()), (lo, hi)
    res.window_from, res.window_to = rows[0]["created_at"], rows[-1]["created_at"]
    for c in sorted({r["task_class"] or "" for r in rows}):
        m = np.array([(r["task_class"] or "") == c for r in rows])
        res.per_class[c] = {"attempts": int(m.sum()), "accept_rate": float(y[m].mean()),
                            "brier_serving": float(e_s[m].mean()), "brier_candidate": float(e_c[m].mean())}
    res.passed = hi <= margin
    res.reason = (f"not worse: Brier difference {res.diff:+.4f} (95% CI {lo:+.4f} .. {hi:+.4f}) <= margin {margin:g}"
                  if res.passed else
                  f"worse or not shown not worse: Brier difference {res.diff:+.4f} (95% CI {lo:+.4f} .. {hi:+.4f}) "
                  f"has its upper end above the margin {margin:g}")
    return res


def _record(store: RouterRegistry, action: str, artifact, sha: str, version: str, pointer, previous: dict | None,
            result: GateResult | None, evidence: dict) -> str:
    pid = "pro_" + uuid.uuid4().hex[:16]
    store.add_promotion({
        "promotion_id": pid, "created_at": now(), "action": action, "artifact_path": str(artifact),
        "artifact_sha256": sha, "router_version": version,
        "previous_path": _kept_name(previous, pointer) if previous else None,
        "previous_sha256": previous.get("sha256") if previous else None,
        "previous_version": previous.get("router_version") if previous else None, "pointer": str(pointer),
        "criterion": CRITERION if result else None, "passed": result.passed if result else None,
        "window_decisions": result.decisions if result else None,
        "window_from": result.window_from if result else None, "window_to": result.window_to if result else None,
        "evidence_json": evidence})
    return pid


def _kept_name(previous: dict, pointer) -> str:
    """What a promotion record names as the previous artifact: its file, or its registry key."""
    return f"sha256:{previous['sha256']}" if isinstance(pointer, DatabasePointer) else previous["artifact"]


def promote(candidate_path: str | Path, store: RouterRegistry, pointer, window: int = 200, min_decisions: int = 30,
            margin: float = 0.005, rates: dict | None = None, force: bool = False, require_shadow: bool = False,
            shadow_margin: float = 0.02) -> dict[str, Any]:
    """Gate the candidate against the pointer's artifact and, when it passes (or with `force`), promote it.

    `pointer` is a pointer file's path, a PostgreSQL store URL (its registry's pointer), or a pointer object
    (`advisor.router.feedback.pointers`). With `require_shadow` the candidate must also have run in shadow and pass
    `shadow_report.shadow_gate` (its estimated usable rate on the shadowed traffic not worse than the serving
    one's by more than `shadow_margin`).

    The first promotion (no pointer yet) has nothing to compare with and is recorded as ``initial``. Returns
    the outcome (``promoted``, ``action``, ``gate`` figures, ``artifact``, ``router_version``); a refusal is
    recorded too and returned with ``promoted: False``.
    """
    pointer = pointer_for(pointer) if isinstance(pointer, (str, Path)) else pointer
    cand_path = Path(candidate_path)
    candidate = load_router(cand_path)
    sha = sha256_of(cand_path)
    previous = pointer.read() if pointer.exists() else None
    if previous is not None and previous.get("sha256") == sha:
        return {"promoted": False, "action": "unchanged", "reason": "the candidate is already serving",
                "router_version": candidate.version_tag, "artifact": previous["artifact"]}
    result = None
    if previous is not None:
        serving = load_router(previous["artifact"])
        result = gate(candidate, serving, store, window, min_decisions, margin, rates)
    evidence = {"gate": result.as_dict() if result else None, "forced": force,
                "candidate": {"path": str(cand_path), "version": candidate.version_tag,
                              "provenance": candidate.provenance}}
    if result is not None and not result.passed and not force:
        _record(store, "refused", cand_path, sha, candidate.version_tag, pointer, previous, result, evidence)
        return {"promoted": False, "action": "refused", "reason": result.reason, "gate": result.as_dict(),
                "router_version": candidate.version_tag, "serving_version": previous.get("router_version")}
    if require_shadow:
        ok, why, report = shadow_gate(store, candidate.version_tag, shadow_margin)
        evidence["shadow"] = {"passed": ok, "reason": why, "report": report}
        if not ok and not force:
            _record(store, "refused", cand_path, sha, candidate.version_tag, pointer, previous, result, evidence)
            return {"promoted": False, "action": "refused", "reason": why, "gate": result.as_dict() if result else None,
                    "shadow": evidence["shadow"], "router_version": candidate.version_tag,
                    "serving_version": previous.get("router_version") if previous else None}
    kept = pointer.keep(cand_path, sha, candidate.version_tag)
    action = "initial" if previous is None else ("forced" if result is not None and not result.passed else "promote")
    pid = _record(store, action, kept, sha, candidate.version_tag, pointer, previous, result, evidence)
    pointer.write(kept, sha, candidate.version_tag, pid)
    return {"promoted": True, "action": action, "promotion_id": pid, "artifact": kept,
            "router_version": candidate.version_tag, "gate": result.as_dict() if result else None,
            "reason": result.reason if result else "first promotion: nothing serving to compare with",
            "serving_version": previous.get("router_version") if previous else None, "shadow": evidence.get("shadow")}


def rollback(store: RouterRegistry, pointer) -> dict[str, Any]:
    """Point back to the artifact that served before the current one (recorded as a ``rollback`` row)."""
    pointer = pointer_for(pointer) if isinstance(pointer, (str, Path)) else pointer
    current = pointer.read()
    installed = [r for r in store.promotions() if r["artifact_sha256"] == current.get("sha256")
                 and r["action"] in ("promote", "forced", "initial") and str(r["pointer"]) == str(pointer)]
    if not installed or not installed[0]["previous_sha256"]:
        raise RouterError(f"{pointer}: nothing to roll back to (the serving router {current.get('router_version')} "
                          "was the first promoted)")
    row = installed[0]
    prev = pointer.fetch(row["previous_sha256"], row["previous_path"])
    model = load_router(prev)
    pid = _record(store, "rollback", row["previous_path"], row["previous_sha256"], model.version_tag, pointer,
                  current, None, {"rolled_back": current, "restores_promotion": row["promotion_id"]})
    pointer.write(row["previous_path"], row["previous_sha256"], model.version_tag, pid)
    return {"action": "rollback", "promotion_id": pid, "artifact": str(prev), "router_version": model.version_tag,
            "from_version": current.get("router_version")}
