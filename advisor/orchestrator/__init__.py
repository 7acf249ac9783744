"""The orchestrator policy: Nemotron-Orchestrator-8B (the ladder's orchestrator role) directing the ladder.

In the style of ToolOrchestra's agent evaluation, the orchestrator sees the task's own tools plus one tool,
``call_expert(expert)``, whose ``expert`` argument is an enum of aliases for the ladder's rungs; the tool's
description says what each expert is (from the ladder and, with a store, from probe results) and ends with a
price/latency table. Each turn it acts itself (a task tool, or its final answer) or hands the turn to an
expert, whose reply **replaces** the orchestrator's turn (`advisor.orchestrator.loop`).

- `experts`: the expert aliases, capability prose, price table and the ``call_expert`` tool spec;
- `prompt`: the system prompt and the user's `Preferences` rendered into it (`PREFS_MODES`);
- `loop`: one orchestrated episode, with per-call (per-rung) token and cost accounting;
- `policy`: the ``orchestrator`` routing policy (registered in `advisor.router.routing.policies.POLICIES`) and the
  episode function the probe runs for ``advisor probe --policy orchestrator``;
- `compare`: fixed rungs vs policies per class and condition (``advisor policies``).
"""
