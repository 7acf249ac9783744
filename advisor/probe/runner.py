"""The probe runner: run a list of `RunSpec`s concurrently, score each episode, commit each run at once.

The library entry point is `execute` (the CLI and adaptive probing build on it)::

    outcome = await execute(specs, ladder=ladder, suite=suite, store=store,
                            client_for_rung=lambda model: client, concurrency=8)

- `specs`: any list of `RunSpec` (`advisor.probe.plan.full_grid` gives the full grid; adaptive probing
  passes one wave at a time). Their order is the order runs start in.
- Resuming: specs whose run key is already stored are **skipped** (`RunResult.status == "skipped"`), except
  runs stored with stop reason ``backend_error``: those are deleted and run again (a retry).
- Concurrency: at most `concurrency` episodes in flight **per rung** (each rung has its own semaphore;
  a finished episode's commit happens after it leaves the semaphore). A policy of the probe (``router``,
  ``cascade``, the orchestrator) has a semaphore of its own, like a rung: the calls its episodes make on the
  rungs are not counted against those rungs' semaphores, so with policies in a probe a rung can have up to
  `concurrency` more calls in flight. A llama.cpp model (``llama_cpp:`` in the ladder) gets one slot: it serves
  one request at a time.
- Each finished run is committed at once with its turns and criterion results (`Store.add_run`, one
  transaction), so a crash or Ctrl-C loses at most the runs in flight. Commits run one at a time in a
  writer thread (the event loop keeps driving episodes meanwhile); `execute` waits for the last commit
  before it returns or re-raises, so the caller may close the store right after.
- A run that ended in ``backend_error`` is stored **unscored** (scores NULL, ``unscored = true``), never 0.
- Guards: `max_runs` caps the runs started by this call; `max_cost` stops starting new runs once the cost
  of the runs finished by this call reaches it (runs in flight finish). With `server_error_streak`, after
  that many backend errors in a row on a rung the rung's client is asked `server_ready()`; when the server
  is gone no more runs start (``stopped == "server_down"``, `ProbeOutcome.stop_note` says so in one line).
  Specs not started are reported with status ``not_run`` and `ProbeOutcome.stopped` says why.
- `client_for_rung(model)` returns an object with the `TritonClient.generate` signature; the caller owns the
  clients' lifetime. `on_result(result)` is called after each run (progress bars).

`execute` returns a `ProbeOutcome` with one `RunResult` per spec, in the order of `specs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from advisor.version import __version__
from advisor.agent.loop import run_episode
from advisor.checks import score_episode
from advisor.probe.plan import RunSpec, policy_model
from advisor.records import UNSCORABLE_STOPS, RunRecord, StopReason, now
from advisor.scores import Thresholds
from advisor.tools.environment import Environment
from advisor.tools.sandbox import private_root, sandbox_mode, unsandboxed_allowed

DEFAULT_CONCURRENCY = 8
DEFAULT_SAMPLING = {"temperature": 0.7}
#: Seconds the readiness check after a streak of backend errors may take (no answer: the server is gone).
SERVER_CHECK_S = 2.0


@dataclass
class RunResult:
    """What happened to one spec."""

    spec: RunSpec
    run_key: str
    status: str  #: done | skipped | not_run
    record: RunRecord | None = None  #: the stored run (done), None otherwise
    retried: bool = False  #: a stored backend_error run was deleted and run again


@dataclass
class ProbeOutcome:
    """The result of one `execute` call."""

    results: list[RunResult] = field(default_factory=list)
    cost_usd: float = 0.0  #: model cost of the runs finished by this call (judge cost apart)
    judge_cost_usd: float = 0.0
    elapsed_s: float = 0.0
    stopped: str | None = None  #: max_runs | max_cost | server_down when specs were left not run
    stop_note: str | None = None  #: one line saying why, for server_down

    def merge(self, other: "ProbeOutcome") -> None:
        """Add another call's results and money to this one (a probe of several waves)."""
        self.results.extend(other.results)
        self.cost_usd += other.cost_usd
        self.judge_cost_usd += other.judge_cost_usd
        self.elapsed_s += other.elapsed_s
        self.stopped = self.stopped or other.stopped
        self.stop_note = self.stop_note or other.stop_note

    def count(self, status: str) -> int:
        """Number of results with this status."""
        return sum(r.status == status for r in self.results)

    @property
    def backend_errors(self) -> int:
        """Runs of this call that ended in backend_error (stored unscored; retried by the next probe)."""
        return sum(r.record is not None and r.record.stop_reason == StopReason.BACKEND_ERROR for r in self.results)


def record_config(store: Any, ladder: Any, suite: Any) -> tuple[str, str]:
    """Record the ladder and suite (idempotent); return (ladder_hash, suite_hash)."""
    ladder_hash = store.record_ladder(ladder)
    suite_hash = suite.config_hash()
    store.record_suite(suite.name, suite_hash, suite.source, suite.model_dump(mode="json", by_alias=True),
                       [(t.id, t.task_class, t.has_skill, t.prompt_hash()) for t in suite.tasks],
                       [(t.prompt_hash(), t.instructions) for t in suite.tasks])
    return ladder_hash, suite_hash


def _slots(model: Any, concurrency: int) -> int:
    """Episodes in flight on one model: `concurrency`, but 1 for a llama.cpp model (it serves one request at a
    time: more episodes would only wait inside the server, on their own time limits)."""
    return 1 if getattr(model, "llama_cpp", None) is not None else max(1, concurrency)


async def execute(specs: Sequence[RunSpec], *, ladder: Any, suite: Any, store: Any,
                  client_for_rung: Callable[[Any], Any], concurrency: int = DEFAULT_CONCURRENCY,
                  max_cost: float | None = None, max_runs: int | None = None,
                  thresholds: Thresholds = Thresholds(), judge: Any = None, workdir: str | Path | None = None,
                  sampling: dict[str, Any] | None = None, allow_unsandboxed: bool = False,
                  on_result: Callable[[RunResult], None] | None = None,
                  server_error_streak: int | None = None,
                  episode_for: Callable[[str], Callable] | None = None) -> ProbeOutcome:
    """Run `specs` (see the module docstring); return one `RunResult` per spec.

    `episode_for(policy)` gives the episode function of a policy run (a spec whose ``policy`` is not
    ``fixed``; `advisor.orchestrator.policy.episode_runner`, `advisor.probe.chain.chain_runner`); it reaches its
    models through the ``client_for`` it was built with, so its ``client`` argument is None. Fixed runs use
    `advisor.agent.loop.run_episode` with the rung's client.
    """
    started = time.monotonic()
    ladder_hash, suite_hash = record_config(store, ladder, suite)
    keys = [s.run_key(suite_hash, ladder_hash) for s in specs]
    stored = store.run_keys(kind=None, suite_hash=suite_hash, ladder_hash=ladder_hash)
    overlap = sorted(set(keys) & stored)
    failed = {r["run_key"] for r in store.runs(suite_hash=suite_hash, ladder_hash=ladder_hash,
                                                 stop_reason=StopReason.BACKEND_ERROR, run_key=overlap)} if overlap else set()
    outcome = ProbeOutcome()
    results: list[RunResult | None] = [None] * len(specs)
    todo: list[int] = []
    seen: set[str] = set()
    for i, (spec, key) in enumerate(zip(specs, keys)):
        if (key in stored and key not in failed) or key in seen:
            results[i] = RunResult(spec, key, "skipped")
        else:
            todo.append(i)
            seen.add(key)
    if max_runs is not None and len(todo) > max_runs:
        for i in todo[max_runs:]:
            results[i] = RunResult(specs[i], keys[i], "not_run")
        todo = todo[:max_runs]
        outcome.stopped = "max_runs"
    for i in (i for i in range(len(specs)) if results[i] is not None and results[i].status == "skipped"):
        if on_result:
            on_result(results[i])

    served = {m.name for m in ladder.models()}  #: models with a server of their own (a chain policy's has none)
    policies = dict.fromkeys(specs[i].policy for i in todo)
    policy_models = {p: policy_model(ladder, p) for p in policies if p != "fixed"}  #: resolved once, not per run
    semaphores = {m.name: asyncio.Semaphore(_slots(m, concurrency))
                  for m in [*ladder.models(), *policy_models.values()]}
    sandbox = contextlib.ExitStack()  # episode workspaces: a private 0700 folder of this call, removed at the end
    root = sandbox.enter_context(private_root(workdir))
    sandbox.enter_context(unsandboxed_allowed(allow_unsandboxed))
    base_settings = {"limits": None, "sampling": {**DEFAULT_SAMPLING, **(sampling or {})},
                     "concurrency": concurrency, "judge": getattr(getattr(judge, "model", None), "name", None),
                     "sandbox": sandbox_mode(allow_unsandboxed)}

    streaks: dict[str, int] = {}

    async def check_server(model: Any) -> None:
        """After `server_error_streak` backend errors in a row on a rung, ask its server whether it is ready."""
        client = client_for_rung(model)
        if outcome.stopped == "server_down":
            return
        try:
            if await asyncio.wait_for(client.server_ready(), SERVER_CHECK_S):
                return
        except asyncio.TimeoutError:
            pass
        outcome.stopped = "server_down"
        # no count here: the runs left are counted once, when the probe ends ("N not run (server_down)")
        outcome.stop_note = (f"the server at {client.endpoint} is not ready after {streaks[model.name]} "
                             f"backend errors in a row on {model.name}: stopped starting runs (the runs not started "
                             "are counted as 'not run (server_down)'; runs in flight are stored unscored); restart "
                             "it and rerun to retry them")

    async def one(i: int) -> None:
        spec, key = specs[i], keys[i]
        fixed = spec.policy == "fixed"
        model = ladder.rung(spec.rung) if fixed else policy_models[spec.policy]
        async with semaphores[model.name]:
            if outcome.stopped == "server_down":
                results[i] = RunResult(spec, key, "not_run")
                return
            if max_cost is not None and outcome.cost_usd >= max_cost:
                results[i] = RunResult(spec, key, "not_run")
                outcome.stopped = "max_cost"
                return
            task = suite.task(spec.task_id)
            seed = spec.seed(suite_hash, ladder_hash)
            record, turns, criteria, calls = await run_one(
                spec, task, model, suite=suite, ladder=ladder,
                client=client_for_rung(model) if fixed else None, seed=seed,  # a policy calls through its client_for
                run_key=key, suite_hash=suite_hash, ladder_hash=ladder_hash, thresholds=thresholds, judge=judge,
                root=root, sampling={**base_settings["sampling"], "seed": seed}, settings=base_settings,
                version=__version__, episode=None if fixed else episode_for(spec.policy))
            outcome.cost_usd += record.cost_usd  # spent, whatever happens to the commit
            outcome.judge_cost_usd += record.judge_cost_usd
            failed_now = record.stop_reason == StopReason.BACKEND_ERROR
            streaks[model.name] = streaks.get(model.name, 0) + 1 if failed_now else 0
            if server_error_streak and streaks[model.name] >= server_error_streak and model.name in served:
                await check_server(model)
        # committed outside the rung's semaphore: the rung's next episode starts meanwhile
        retried = key in failed
        await asyncio.get_running_loop().run_in_executor(writer, _commit, store, record, turns, criteria, retried, calls)
        results[i] = RunResult(spec, key, "done", record, retried)
        if on_result:
            on_result(results[i])

    # One writer thread commits runs in order, so a slow commit (fsync) never stalls the episodes in flight.
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-store")
    tasks = [asyncio.ensure_future(one(i)) for i in todo]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:  # an unexpected error (or Ctrl-C): stop the runs in flight, store nothing half-done
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        writer.shutdown(wait=True)  # a commit in progress finishes before the caller may close the store
        outcome.results = [r if r is not None else RunResult(specs[i], keys[i], "not_run")
                           for i, r in enumerate(results)]
        outcome.elapsed_s = time.monotonic() - started
        sandbox.close()
    return outcome


def _commit(store: Any, record: RunRecord, turns: Any, criteria: Any, retried: bool, calls: Any = ()) -> None:
    """Store one finished run (replacing its stored backend_error run when retried); runs in the writer thread."""
    if retried:
        store.delete_runs([record.run_key])
    store.add_run(record, turns, criteria, policy_calls=calls)


async def run_one(spec: RunSpec, task: Any, model: Any, *, suite: Any, ladder: Any, client: Any, seed: int,
                  run_key: str, suite_hash: str, ladder_hash: str, thresholds: Thresholds, judge: Any,
                  root: Path, sampling: dict[str, Any], settings: dict[str, Any], version: str,
                  episode: Callable | None = None):
    """One episode: sandbox, agent loop (or a policy's `episode` function), scoring; returns (RunRecord, turns,
    criteria, policy calls) ready to store (the calls: a policy run's model calls, stored in policy_calls; none
    for a fixed rung)."""
    limits = suite.limits_for(task)
    started_at = now()
    env = Environment.create(task.for_condition(spec.condition), root)
    try:
        res = await (episode or run_episode)(task, model, client, env, limits, condition=spec.condition, sampling=sampling,
                                request_id=run_key[:12])
        ep = res.episode
        if ep.stop_reason in UNSCORABLE_STOPS:
            card, criteria, unscored_reason = None, [], f"backend_error ({ep.failure or 'down'}): {ep.error}"
        else:
            try:
                card = await score_episode(task, ep, judge)
                criteria, unscored_reason = card.criteria, card.unscored_reason
            except Exception as exc:  # noqa: BLE001 - a scoring bug leaves the run unscored, never 0
                card, criteria, unscored_reason = None, [], f"scoring failed: {type(exc).__name__}: {exc}"
    finally:
        env.close()
    scored = card is not None and unscored_reason is None
    errors = [e for e in [ep.error if ep.stop_reason != StopReason.FINAL else None, *res.notes] if e]
    record = RunRecord(
        run_key=run_key, kind=spec.kind, suite_name=suite.name, suite_hash=suite_hash, task_id=task.id,
        task_class=task.task_class, ladder_name=ladder.name, ladder_hash=ladder_hash, rung=model.name,
        rung_position=ladder.index(model.name) if spec.policy == "fixed" else -1, condition=spec.condition, replica=spec.replica, seed=seed,
        policy=spec.policy, prompt_hash=task.prompt_hash(), stop_reason=ep.stop_reason, turns=res.model_calls,
        model_calls=res.model_calls, input_tokens=res.input_tokens, output_tokens=res.output_tokens,
        tokens_from_server=res.tokens_from_server, cost_usd=res.cost(model),
        cost_estimated=not res.tokens_from_server,
        judge_input_tokens=card.judge_input_tokens if card else 0,
        judge_output_tokens=card.judge_output_tokens if card else 0,
        judge_cost_usd=card.judge_cost_usd if card else 0.0, latency_s=res.latency_s,
        if_score=card.if_score if scored else None, tc_score=card.tc_score if scored else None,
        overall=card.overall if scored else None, scenario_score=card.scenario_score if scored else None,
        unscored=not scored, unscored_reason=unscored_reason,
        bar=thresholds.bar, near_zero=thresholds.near_zero, simulated=model.simulated, advisor_version=version,
        settings_json=json.dumps({**settings, **getattr(episode, "settings", {}), "limits": limits.model_dump()},
                                 sort_keys=True, default=str),
        error="; ".join(errors) or None, failure=ep.failure if ep.stop_reason in UNSCORABLE_STOPS else None,
        started_at=started_at, finished_at=now())
    return record, res.turns, criteria, list(getattr(res, "calls", ()))
