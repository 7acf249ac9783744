"""The ``router`` and ``cascade`` policies as probe runs: a chain of rung episodes per task, decided up front.

``advisor probe --policy router|cascade`` stores one run per (task, condition, replica) under the policy's
name (``runs.policy`` and ``runs.rung`` = ``router`` / ``cascade``, ``rung_position`` -1). Which rungs the run
calls comes from the routing policies registry (`advisor.router.routing.policies.POLICIES`), decided once for every
task of the suite in one vectorised batch (``decide``), by a router artifact: ``--router FILE``, or one trained
at the start of the policy runs from the store's fixed-rung runs of the same suite and ladder. Trained here,
``router`` decides each task out-of-sample (cross-fitted without the task's runs, `plan_chains`); the
``cascade`` and suites too small to cross-fit use the router trained on everything (in-sample: it has seen
these tasks' outcomes; ``settings_json``'s ``router_source`` says which).

The chain is walked by the seam's attempt walker (`advisor.backends.walk`), as the routing service walks its
chains: one attempt per rung, no deadline, no failover (an episode that ends in a backend error ends the run).
Each attempt of a chain is a fresh episode of the rung (its own workspace and fixture API, the task's limits),
exactly as a fixed-rung run; the run is scored on its **last** attempt, and its cost is every attempt's
tokens at its rung's price (one `PolicyCall` per attempt, role ``attempt``, in ``policy_calls``), so cost per
usable result counts escalations the same way it counts retries for a rung.

What decides escalation (the probe's scorer is a verifier no production service has, so it is never used):

- ``router`` is **single-shot**: the rung the router picks for the task (the ``router`` rule in single mode:
  lowest predicted cost per usable result), one attempt, no verifier. This is what the routing service does
  for a class without a verifier.
- ``cascade`` escalates **cheapest-first** over every rung (the ``cascade`` rule: ordered by mean training
  cost) while the **verifier** rejects. The verifier is the task's deterministic task-completion checklist
  (`VERIFIER`): accept when its TC score reaches the bar. It sees the goal, not how the work was done (no
  instruction-following checks), so it can accept an unusable attempt; it is applied only in classes whose
  suite entry says ``verifier: true``; elsewhere the cascade stops after its first rung. Every verified attempt
  stores the verdict and whether the attempt was in fact usable, so the verifier's false-accept and
  false-reject rates are measured (`advisor.report.analysis`).
"""

from __future__ import annotations

import time
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from advisor.agent.loop import EpisodeResult, run_episode
from advisor.backends import FailureKind, walk_attempts
from advisor.errors import ConfigError, RouterError
from advisor.orchestrator.loop import PolicyCall
from advisor.router.model.artifact import load_router
from advisor.router.routing.policies import Context, POLICIES, Requests, make_policy, probe_chain_policies
from advisor.router.routing.rule import PolicyConfig, Preferences
from advisor.router.training.crossfit import crossfitted, fit_quietly
from advisor.router.training.fit import training_data_from_store
from advisor.tools.environment import Environment
from advisor.verifier.base import VerifiedText, VerifierContext, make_verifier

VERIFIER = "deterministic task-completion checks (TC >= bar), in classes with verifier: true"
CROSSFIT_FOLDS = 5  #: grouped folds of the router policy's out-of-sample decisions


@dataclass(frozen=True)
class PolicyArm:
    """What a chain policy's runs are stored under (no single model answers them)."""

    name: str
    simulated: bool


@dataclass
class ChainResult(EpisodeResult):
    """The last attempt's episode, with every attempt's tokens and cost (each at its own rung's price)."""

    calls: list[PolicyCall] = field(default_factory=list)

    def cost(self, model: Any = None) -> float:
        """USD of every attempt (`model` is ignored)."""
        return sum(c.cost_usd for c in self.calls)


def arm_of(ladder: Any, policy: str) -> PolicyArm:
    """The pseudo-model a chain policy's runs are stored under."""
    return PolicyArm(policy, bool(ladder.simulated))


def _check_rungs(model: Any, ladder: Any, source: str) -> Any:
    unknown = [n for n in model.rung_names if n not in {m.name for m in ladder.rungs}]
    if unknown:
        raise ConfigError(f"router {source} knows rungs {', '.join(unknown)} that ladder {ladder.name!r} does not "
                          "have; train it on this ladder's runs")
    return model  # a rung the router never saw is never chosen


def training_data(store: Any, suite: Any, ladder: Any) -> Any:
    """The store's fixed-rung runs of this suite and ladder as router training data (ConfigError when none)."""
    try:
        return training_data_from_store(store, suite_name=suite.name, ladder_name=ladder.name)
    except RouterError as exc:
        raise ConfigError(f"--policy router/cascade needs a router: {exc}. Run --policy rung first (same suite and "
                          "ladder), or pass --router FILE") from None


def plan_chains(policy: str, store: Any, suite: Any, ladder: Any, router_path: str | Path | None = None,
                prefs: Any = None) -> tuple[dict[str, list[str]], Any, str]:
    """(rung chain per task id, the router, how it was obtained).

    With `router_path`, that artifact decides every task. Otherwise a router is trained from the store's
    fixed-rung runs of the suite and ladder; for a single-shot policy (``probe_mode`` ``single``: ``router``,
    where the choice of rung is the whole policy) each task is decided by a router **cross-fitted** without that
    task's runs (`CROSSFIT_FOLDS` grouped folds, `advisor.router.training.crossfit`), so the comparison is
    out-of-sample; tasks without runs, and escalating policies (``cascade``, which only takes the rung order by
    mean cost from the router), use the router trained on everything.
    """
    if router_path is not None:
        router = _check_rungs(load_router(router_path), ladder, str(router_path))
        return decide_chains(policy, router, suite.tasks, prefs), router, f"router file {router_path}"
    data = training_data(store, suite, ladder)
    try:
        router = _check_rungs(fit_quietly(data), ladder, "(trained)")
    except RouterError as exc:
        raise ConfigError(f"--policy {policy}: cannot train a router from the store ({exc}); probe more tasks "
                          "with --policy rung, or pass --router FILE") from None
    prompts = len(set(data.groups))
    if POLICIES.get(policy).probe_mode != "single" or prompts < CROSSFIT_FOLDS + 1:
        return decide_chains(policy, router, suite.tasks, prefs), router, "trained on the store's rung runs (in-sample)"
    chains: dict[str, list[str]] = {}
    for held, model in crossfitted(data, CROSSFIT_FOLDS, seed=0):
        chains.update(decide_chains(policy, model, [t for t in suite.tasks if t.prompt_hash() in held], prefs))
    rest = [t for t in suite.tasks if t.id not in chains]
    chains.update(decide_chains(policy, router, rest, prefs) if rest else {})
    return chains, router, (f"cross-fitted on the store's rung runs: each task routed by a router trained without "
                            f"it ({CROSSFIT_FOLDS} grouped folds)")


def decide_chains(policy: str, router: Any, tasks: Any, prefs: Any = None) -> dict[str, list[str]]:
    """Per task id: the rung names the policy calls, in order (one vectorised decision over the tasks)."""
    tasks = list(tasks)
    if not tasks:
        return {}
    mode = POLICIES.get(policy).probe_mode
    ctx = Context(router, PolicyConfig(mode=mode), prefs or Preferences())
    batch = Requests.score(router, [t.instructions for t in tasks], [t.task_class for t in tasks])
    choice = make_policy(policy, ctx).decide(batch)
    names = router.rung_names
    return {t.id: [names[j] for j in choice.chains[i] if j >= 0] for i, t in enumerate(tasks)}


async def verify(task: Any, episode: Any, bar: float) -> tuple[bool, bool | None, str]:
    """(accepted, usable, verdict) of one attempt: `VERIFIER` decides; the full score says if it was usable."""
    verifier = make_verifier("task_completion", ctx=VerifierContext(options={"task": task, "bar": bar}))
    reply = VerifiedText(episode.final, [(c.name, c.arguments) for c in episode.calls], episode)
    verdict = await verifier.verify(reply, task.instructions)
    return verdict.accepted, verdict.usable, verdict.detail


def chain_runner(policy: str, ladder: Any, client_for: Callable[[Any], Any], *, store: Any, suite: Any,
                 router_path: str | Path | None = None, prefs: Any = None, bar: float = 75.0):
    """The probe's episode function for `policy` (``router`` or ``cascade``), with `run_episode`'s signature."""
    if policy not in probe_chain_policies():
        raise ConfigError(f"{policy!r} is not a chain policy; use one of {', '.join(probe_chain_policies())}")
    chains, router, how = plan_chains(policy, store, suite, ladder, router_path, prefs)
    mode = POLICIES.get(policy).probe_mode  #: "single" (one attempt, no verifier) or "escalate" (verified)
    verified = {c.name for c in suite.classes if c.verifier} if mode == "escalate" else set()

    async def episode(task, model, client, env, limits, *, condition="baseline", sampling=None, request_id=None):
        res = ChainResult(episode=None)  # type: ignore[arg-type] - set from the last attempt below
        envs = [env]  # each attempt of the chain: a fresh episode in its own workspace (the first: the run's)

        async def attempt(name: str, remaining: float | None) -> EpisodeResult:
            i = len(res.calls)
            if i:
                envs.append(Environment.create(task.for_condition(condition), Path(env.workspace).parent))
            rung = ladder.rung(name)
            return await run_episode(task, rung, client_for(rung), envs[-1], limits, condition=condition,
                                     sampling=sampling, request_id=f"{request_id}:{i}" if request_id else None)

        start = time.monotonic()
        async with aclosing(walk_attempts(chains[task.id], attempt, failed=_backend_failure)) as tries:
            async for t in tries:
                r, rung, i = t.answer, ladder.rung(t.rung), len(res.calls)
                call = PolicyCall(i, i, rung.name, "attempt", r.input_tokens, r.output_tokens, r.cost(rung),
                                  r.latency_s)
                last = t.last or task.task_class not in verified
                if not last and t.answered:
                    call.accepted, call.usable, call.verdict = await verify(task, r.episode, bar)
                    last = call.accepted
                _absorb(res, r, call)
                if last or not t.answered:
                    break  # accepted, or the last attempt: it is the one scored (its workspace stays open)
                if envs[-1] is not env:
                    envs[-1].close()
        res.latency_s = time.monotonic() - start
        return res

    episode.settings = {"policy": policy, "router": router.version_tag, "router_file": str(router_path or ""),
                        "router_source": how,
                        "mode": mode, "verifier": VERIFIER if mode == "escalate" else None,
                        "verified_classes": sorted(verified)}
    return episode


def _backend_failure(r: EpisodeResult) -> FailureKind | None:
    """An episode that ended in a backend error failed on its rung, with the kind its backend gave (the walk stops
    there: no failover)."""
    if r.episode.stop_reason != "backend_error":
        return None
    return FailureKind(r.episode.failure) if r.episode.failure else FailureKind.DOWN


def _absorb(res: ChainResult, r: EpisodeResult, call: PolicyCall) -> None:
    """Add one attempt to the chain's result (its episode becomes the one scored)."""
    res.episode = r.episode
    offset = len(res.turns)
    for t in r.turns:
        t.turn += offset
        res.turns.append(t)
    res.model_calls += r.model_calls
    res.input_tokens += r.input_tokens
    res.output_tokens += r.output_tokens
    res.tokens_from_server = res.tokens_from_server and r.tokens_from_server
    res.notes += [n for n in r.notes if n not in res.notes]
    res.calls.append(call)
