"""The ``orchestrator`` routing policy: registered with the other policies, run by the probe per episode.

Unlike the router's batch policies, which pick a rung chain for a batch of requests up front (``decide``), the
orchestrator routes **inside** an episode, turn by turn: an `EpisodicPolicy`, registered in
`advisor.router.routing.policies.POLICIES` under ``orchestrator`` (this module is one of the registry's built-in
modules, so the name is there on a fresh interpreter). It has no batch decision; the probe runs it for ``advisor
probe --policy orchestrator`` (`advisor.probe.runner.run_one` takes the episode function `runner` returns).
"""

from __future__ import annotations

from typing import Any, Callable

from advisor.errors import ConfigError
from advisor.orchestrator.experts import experts_for, probe_facts
from advisor.orchestrator.loop import OrchestratorConfig, run_orchestrated
from advisor.router.routing.policies import POLICIES, EpisodicPolicy


@POLICIES.register("orchestrator")
class OrchestratorPolicy(EpisodicPolicy):
    """Nemotron-Orchestrator-8B (the ladder's orchestrator role) hands each turn to a rung or acts itself."""

    name = "orchestrator"

    @staticmethod
    def model_of(ladder: Any) -> Any:
        """The model its runs are stored under: the ladder's orchestrator role."""
        return orchestrator_of(ladder)

    @staticmethod
    def runner(ladder: Any, client_for: Callable[[Any], Any], **options: Any):
        """The probe's episode function for this policy (`episode_runner`)."""
        return episode_runner(ladder, client_for, **options)


def orchestrator_of(ladder: Any) -> Any:
    """The ladder's orchestrator role (ConfigError naming the ladder when it has none)."""
    if ladder.roles.orchestrator is None:
        raise ConfigError(f"ladder {ladder.name!r} has no roles.orchestrator: add one (see ladders/demo.yaml) "
                          "to run --policy orchestrator")
    return ladder.roles.orchestrator


def episode_runner(ladder: Any, client_for: Callable[[Any], Any], *, store: Any = None, prefs: Any = None,
                   config: OrchestratorConfig = OrchestratorConfig()):
    """An episode function with `advisor.agent.loop.run_episode`'s signature that runs the orchestrator.

    The experts' capability prose and latencies come from the store's fixed-rung runs of this ladder, read
    once here (so every episode of a probe sees the same description).
    """
    orchestrator = orchestrator_of(ladder)
    experts = experts_for(ladder, probe_facts(store, ladder) if store is not None else None)

    async def episode(task, model, client, env, limits, *, condition="baseline", sampling=None, request_id=None):
        return await run_orchestrated(task, orchestrator, experts, client_for, env, limits, prefs=prefs,
                                      config=config, condition=condition, sampling=sampling, request_id=request_id)

    episode.settings = {"policy": "orchestrator", "orchestrator": orchestrator.name, "max_rounds": config.max_rounds,
                        "prefs_mode": config.prefs, "prefs": _prefs_dict(prefs)}
    return episode


def _prefs_dict(prefs: Any) -> dict[str, Any] | None:
    if prefs is None:
        return None
    return {"allowed": list(prefs.allowed) if prefs.allowed is not None else None,
            "self_hosted_only": prefs.self_hosted_only, "max_latency_s": prefs.max_latency_s,
            "weights": dict(prefs.weights)}
