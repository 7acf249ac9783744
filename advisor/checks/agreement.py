"""How often the judge agrees with deterministic checks: its false-accept and false-reject rates, measured.

`measure_agreement` takes stored runs of a suite, rebuilds each episode from the store (the task's fixture
files, then every ``write_file`` call replayed in order; the tool calls and observations; the final answer as
stored, up to the loop's record limit) and asks the judge to grade every criterion that was checked
deterministically in that run, with the criterion's description as the rubric. The deterministic outcome is
the truth. Two levels are reported:

- **criteria**: false accept = P(judge passes | check failed), false reject = P(judge fails | check passed),
  a criterion passing at a score >= `pass_at` (0.5);
- **runs** (only runs whose criteria are all deterministic): the run's overall recomputed from the judge's
  grades against the stored overall, usable at the bar: false accept = P(judge says usable | not usable),
  false reject = P(judge says not usable | usable). These are the verifier error rates of
  `advisor.scores.VerifierErrors`, which the floor finder (``--false-accept/--false-reject``), the router's policy
  and the routing service use; `latest_verifier` reads the last measurement back from the store.

What a rebuilt episode lacks (it is stated in each measurement): files written by ``run_python``, the fixture
API log, and any final answer text past the stored record limit.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from advisor.checks.base import needs_judge
from advisor.checks.judge import JudgeCheck, JudgeError
from advisor.records import Episode, ToolCall, text_hash
from advisor.scores import DEFAULT_BAR, VerifierErrors, overall_score
from advisor.tools.files import resolve_in_workspace

REBUILD_LIMITS = ("files written by run_python are missing; the fixture API log is empty; the final answer is "
                  "the stored record (cut at the loop's record limit)")


@dataclass
class Rates:
    """Confusion counts of judge verdicts against the deterministic truth."""

    positives: int = 0  #: truth passed / usable
    negatives: int = 0
    false_accepts: int = 0
    false_rejects: int = 0

    def add(self, truth: bool, judged: bool) -> None:
        """Count one comparison."""
        if truth:
            self.positives += 1
            self.false_rejects += not judged
        else:
            self.negatives += 1
            self.false_accepts += judged

    @property
    def false_accept(self) -> float | None:
        """P(judge passes | truth fails); None without negatives."""
        return self.false_accepts / self.negatives if self.negatives else None

    @property
    def false_reject(self) -> float | None:
        """P(judge fails | truth passes); None without positives."""
        return self.false_rejects / self.positives if self.positives else None


@dataclass
class Agreement:
    """One measurement of a judge against deterministic checks."""

    judge: str
    suite_name: str
    simulated: bool
    runs: int = 0
    criteria: Rates = field(default_factory=Rates)
    run_level: Rates = field(default_factory=Rates)
    unparsed: int = 0  #: criteria the judge failed to grade (left out of the rates)
    judge_cost_usd: float = 0.0
    limits: str = REBUILD_LIMITS

    def verifier(self) -> VerifierErrors:
        """The run-level rates as a `VerifierErrors` (criterion-level when no run is fully deterministic)."""
        rates = self.run_level if self.run_level.positives + self.run_level.negatives else self.criteria
        return VerifierErrors(rates.false_accept or 0.0, rates.false_reject or 0.0)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, rates included."""
        out = asdict(self)
        for key in ("criteria", "run_level"):
            r = getattr(self, key)
            out[key].update(false_accept=r.false_accept, false_reject=r.false_reject)
        return out


def rebuild_episode(task, run: dict, turns: list[dict], root: Path) -> Episode:
    """The episode of a stored run, as far as the store keeps it (see the module docstring)."""
    ws = Path(tempfile.mkdtemp(prefix="judge-", dir=root))
    for rel, text in task.fixtures.files.items():
        path = resolve_in_workspace(ws, rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    calls, final = [], None
    for t in sorted(turns, key=lambda t: t["turn"]):
        if t["action"] == "final":
            final = t["observation"] or ""
            continue
        if t["action"] == "invalid":
            continue
        args = json.loads(t["arguments_json"] or "{}")
        ok = not (t["observation"] or "").startswith("ERROR")
        calls.append(ToolCall(t["action"], args, t["observation"] or "", ok))
        if t["action"] == "write_file" and ok and isinstance(args.get("path"), str):
            try:
                path = resolve_in_workspace(ws, args["path"])
            except Exception:  # noqa: BLE001 - an unsafe path was refused in the run too
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(args.get("content", "")), encoding="utf-8")
    return Episode(final=final, stop_reason=run["stop_reason"], calls=calls, workspace=ws)


def _criterion(task, checklist: str, name: str):
    crits = task.instruction_following if checklist == "if" else task.task_completion
    return next((c for c in crits if c.name == name), None)


async def measure_agreement(store, suite, judge, judge_name: str, *, max_runs: int | None = None,
                            pass_at: float = 0.5, bar: float = DEFAULT_BAR) -> Agreement:
    """Grade the deterministically checked criteria of `suite`'s stored runs with `judge`; compare."""
    runs = store.scored_suite_runs(suite.name, limit=max_runs)
    out = Agreement(judge_name, suite.name, simulated=any(r["simulated"] for r in runs))
    tasks = {t.id: t for t in suite.tasks}
    with tempfile.TemporaryDirectory(prefix="advisor-agreement-") as tmp:
        for run in runs:
            task = tasks.get(run["task_id"])
            if task is None:
                continue
            results = store.criterion_rows(run["run_key"])
            pairs = [(r, _criterion(task, r["checklist"], r["criterion"])) for r in results]
            checked = [(r, c) for r, c in pairs if c is not None and not needs_judge(c.check) and r["score"] is not None]
            if not checked:
                continue
            turns = store.turn_rows(run["run_key"])
            episode = rebuild_episode(task, run, turns, Path(tmp))
            out.runs += 1
            judged: dict[tuple[str, str], float] = {}
            for result, crit in checked:
                as_judged = crit.model_copy(update={"check": JudgeCheck(type="judge")})
                try:
                    grade = await judge.grade(as_judged, task, episode)
                except JudgeError:
                    out.unparsed += 1
                    continue
                out.judge_cost_usd += float(grade.cost_usd or 0.0)
                judged[(result["checklist"], crit.name)] = float(grade.score)
                out.criteria.add(result["score"] >= pass_at, float(grade.score) >= pass_at)
            all_crits = [("if", c) for c in task.instruction_following] + [("tc", c) for c in task.task_completion]
            if run["overall"] is not None and all((side, c.name) in judged for side, c in all_crits):
                totals = {side: sum(c.weight * judged[(side, c.name)] for s, c in all_crits if s == side)
                          for side in ("if", "tc")}
                judged_overall = overall_score(totals["if"], totals["tc"])
                out.run_level.add(run["overall"] >= bar, judged_overall >= bar)
    return out


def save_agreement(store, agreement: Agreement) -> None:
    """Append one measurement to the store's judge_agreement table."""
    c = agreement.criteria
    store.add_judge_agreement(agreement.judge, text_hash(agreement.judge), agreement.suite_name, agreement.runs,
                              c.positives, c.negatives, c.false_accept, c.false_reject, agreement.unparsed,
                              agreement.simulated, agreement.as_dict())


def latest_verifier(store, judge: str | None = None) -> tuple[VerifierErrors, dict] | None:
    """The last measured judge's verifier error rates (and the measurement), or None when never measured."""
    rows = store.judge_agreements(judge)
    if not rows:
        return None
    data = json.loads(rows[0]["detail_json"])
    run_level = data["run_level"]
    rates = run_level if run_level["positives"] + run_level["negatives"] else data["criteria"]
    return VerifierErrors(rates["false_accept"] or 0.0, rates["false_reject"] or 0.0), data
