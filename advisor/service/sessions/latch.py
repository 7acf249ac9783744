"""Agent sessions: one routing decision per trajectory, latched, escalated (never demoted) on failure signals.

An agent client calls ``/v1/chat/completions`` once per step with the growing conversation. A **session** is
named by the ``x-advisor-session`` header or ``advisor.session`` in the body; without one (and unless the service
config says ``sessions: {derive: false}``) its id is **derived** (`derived_id`): ``drv_`` + the SHA-256 of the
conversation's opening (every message before the first assistant message that called tools), its tools and the
request's ``user`` field, so every step of one agent trajectory carries the same id and two conversations share
one only while they are identical; once a reply has called tools, the id also covers the ids of those calls
(`continued_id`: advisor writes them, the client sends them back), so concurrent runs of one task that open the
same way never share a latch (a conversation whose first calls advisor did not write keeps the first id). A
conversation without tool calls (a chat) is a new session at each user turn. A derived session whose conversation has no assistant message yet starts afresh
(identical one-shot prompts from different users must not share a latch); a named one continues.

The **first step** is decided from the task by the ordinary decision (the class's cascade, else the router's
policy: `advisor.service.routing.dispatch.decide_auto`); its first rung is **latched**. Later steps go to the latched
rung, unless an **escalation signal** fires (`signals`), each looked for only in the messages that arrived since
the session's last escalation (evidence is used once):

- ``tool_errors``: `SessionConfig.tool_errors` tool results in a row matching `SessionConfig.tool_error_pattern`
  (by default the agent frameworks' own error texts too: `advisor.service.process.config.TOOL_ERROR_PATTERN`);
- ``stuck``: the assistant's tool calls repeat or alternate by the agent loop's rule (`advisor.agent.loop.is_stuck`,
  with `stuck_repeats` and `stuck_cycles`: by default 2 and 2, a step before the loop's own 3 would stop the client);
- ``unparseable_tool_call``: a tool result saying the reply could not be parsed (the agent loop's observation),
  or a reply of the latched rung that held a tool call advisor could not parse (noted after the step);
- ``step_budget``: more steps on one rung than its budget (`step_budget`, `step_budget_by_rung`);
- ``verifier_rejected``: the class's verifier rejected the delivered answer, or accepted it only on a rung above
  the latch (noted after the step);
- ``broken_step``: the step was answered only on a rung above the latch, after broken steps below it
  (`advisor.service.checks.step_check`; the latch moves to that rung after the step);
- ``gave_up``: the same, where every broken step below was a give-up or refusal (`advisor.service.checks.give_ups`).

A session belongs to the **tenant** that sent it (the API key's name): the same id, given or derived, sent with
two keys names two sessions (`latch_key`).

The session then moves `escalate_by` rungs up the ladder (among the rungs the request may use), stays there, and
the reason is returned in ``x-advisor-escalation`` and recorded with the decision. It never moves down.

**Where the latch lives**: with a PostgreSQL store, in that database (`advisor.store.pg_latches`): every
replica on every host reads and writes the same row, one atomic conditional write per step, so a step may land
on any replica and no sticky sessions are needed. With a DuckDB store, in a small SQLite file beside the spool
(``<store>.live.sessions.sqlite``), shared by every worker of the service: a request may land on any worker,
and an in-process map per worker would lose the latch. Each step is one read-modify-write in an ``IMMEDIATE``
transaction (WAL journal, no fsync per commit: a crash loses at most the last steps' latch, which the next step
re-decides); replicas of a DuckDB-store service on several hosts need sticky sessions at the load balancer (a
file on shared storage is not safe for SQLite). Sessions idle for `SessionConfig.ttl_s` are forgotten, and
past `SessionConfig.max_sessions` the least recently used.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from advisor.agent.loop import call_signature, is_stuck
from advisor.store.latch_fallback import FallbackLatches
from advisor.store.latches import LatchStore
from advisor.store.pg_latches import PgLatchStore

DERIVED_PREFIX = "drv_"
_UNPARSEABLE = re.compile(r"(?i)could not parse your reply|unparseable|invalid tool call")


@dataclass
class SessionState:
    """What the service remembers of one session between its steps."""

    rung: str  #: the latched rung
    start_rung: str
    task_class: str | None
    step: int = 1  #: steps seen so far (this one included)
    since_step: int = 1  #: the step at which the latched rung was reached
    seen: int = 0  #: messages of the conversation already used as evidence (up to the last escalation)
    escalations: list[list[Any]] = field(default_factory=list)  #: [step, reason, from rung, to rung]
    pending: str | None = None  #: a signal noted after the last step (used by the next one)
    updated: float = 0.0


@dataclass
class SessionStep:
    """The session facts of one request (carried on the plan, recorded with the decision and attempts)."""

    session_id: str
    source: str  #: header | body | derived
    step: int
    start_rung: str
    escalation: str | None = None  #: "reason from->to" when this step escalated
    first: bool = False
    tenant: str = ""  #: the API key's name ("" without keys): the latch is the tenant's own (`latch_key`)

    @property
    def latch_key(self) -> str:
        """The key of this session's latch (`latch_key`)."""
        return latch_key(self.tenant, self.session_id)


# ----------------------------------------------------------------------------------------------- identity
def session_of(req, config) -> tuple[str, str] | None:
    """(id, source) of a request's session: source ``given`` (header or body) or ``derived``; None when sessions
    are off, or the request names none and deriving is off, or it would be derived from a conversation without
    tools (none offered, none called): every message of such a request is its opening, so the next turn's id
    differs and no step could ever read its latch (a chat turn is decided on its own, with no latch written)."""
    if not config.enabled:
        return None
    prefs = req.advisor
    if prefs is not None and prefs.session:
        return prefs.session, "given"
    if not config.derive or not (req.tools or first_call_ids(req)):
        return None  # no tools offered and none called: no later step can share this id (its opening is all of it)
    return derived_id(req), "derived"


def latch_key(tenant: str, session_id: str) -> str:
    """The latch of a session is its tenant's (the API key's name): the same id sent with two keys, given or
    derived, names two sessions, so one tenant can neither read nor move another's latch."""
    return json.dumps([tenant, session_id], ensure_ascii=False)


def continued_id(base: str, call_ids: list[str]) -> str:
    """The derived id of a conversation whose first reply held tool calls with these ids: ``drv_`` + SHA-256
    of its base id (`derived_id`) and the ids. advisor wrote the ids (unique per reply) and the client sends them
    back with every later step, so concurrent runs that open the same way (same system prompt, first user
    message and tools) are told apart from their second step on."""
    blob = json.dumps([base, call_ids], separators=(",", ":"))
    return DERIVED_PREFIX + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def first_call_ids(req) -> list[str]:
    """The tool-call ids of the conversation's first assistant message that called tools ([] when none did)."""
    first = next((m for m in req.messages if m.role == "assistant" and m.tool_calls), None)
    return [c.id for c in first.tool_calls or ()] if first is not None else []


def derived_id(req) -> str:
    """``drv_`` + SHA-256 of the conversation's **opening**: every message before its first assistant message that
    called tools (all of them while none has), the tools (names, parameters) and the request's ``user`` field.

    So two conversations share a derived session only while they are identical: two people who both open with
    "Hello" and get the same greeting back part at their next message, and once a reply calls tools the ids
    advisor gave those calls part them too (`continued_id`). An agent run's later steps add assistant calls and
    tool results, not opening, so every step of one run keeps one id."""
    opening = []
    for m in req.messages:
        if m.role == "assistant" and m.tool_calls:
            break
        opening.append([m.role, m.text()])
    tools = [[t.function.name, t.function.parameters] for t in req.tools or []]
    blob = json.dumps([opening, tools, req.user or ""], sort_keys=True, separators=(",", ":"))
    return DERIVED_PREFIX + hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# ----------------------------------------------------------------------------------------------- signals
def _tool_error_run(messages, config) -> int:
    """The longest run of tool results in a row that read as errors (``sessions.tool_error_pattern``)."""
    pattern = re.compile(config.tool_error_pattern)
    longest = run = 0
    for m in messages:
        if m.role == "tool" and not _UNPARSEABLE.search(m.text()):
            run = run + 1 if pattern.search(m.text()) else 0
            longest = max(longest, run)
    return longest


def _stuck(messages, config) -> bool:
    """The run repeats one call, or cycles through a few (`advisor.agent.loop.is_stuck`)."""
    if not config.stuck:
        return False
    actions: list[str] = []
    for m in messages:
        for call in (m.tool_calls or []) if m.role == "assistant" else []:
            try:
                args = json.loads(call.function.arguments or "{}")
            except ValueError:
                args = {"_raw": call.function.arguments}
            actions.append(call_signature(call.function.name, args if isinstance(args, dict) else {"_": args}))
            if is_stuck(actions, config.stuck_repeats, config.stuck_cycles):
                return True
    return False


def _tool_errors(messages, config) -> bool:
    """``sessions.tool_errors`` tool results in a row were errors."""
    return bool(config.tool_errors) and _tool_error_run(messages, config) >= config.tool_errors


def _unparseable(messages, config) -> bool:
    """The client told the model ``sessions.unparseable`` times that it could not parse its tool call."""
    return bool(config.unparseable) and sum(
        1 for m in messages if m.role == "tool" and _UNPARSEABLE.search(m.text())) >= config.unparseable


#: A session signal: (the messages a step adds to the conversation, the service config's ``sessions`` block) ->
#: whether they show the run needs a larger rung. The escalation signals, strongest first: name -> test. The name
#: is the reason recorded with the escalation (`x-advisor-escalation`, the records, the metrics); a team
#: adds its own here (docs/extending.md, "A session signal").
SessionSignal = Callable[[Sequence[Any], Any], bool]
SIGNALS: dict[str, SessionSignal] = {"stuck": _stuck, "tool_errors": _tool_errors,
                                     "unparseable_tool_call": _unparseable}


def signals(messages, config) -> list[str]:
    """The escalation signals (`SIGNALS`) a run of new messages shows, strongest first."""
    return [name for name, shows in SIGNALS.items() if shows(messages, config)]


def step_budget(config, rung: str) -> int | None:
    """The steps a session may take on `rung` before it escalates (None: no budget)."""
    return config.step_budget_by_rung.get(rung, config.step_budget)


def rung_above(names: list[str], allowed: list[str], rung: str, by: int) -> str | None:
    """The rung `by` steps above `rung` among the allowed ones (the top allowed one when fewer), else None."""
    up = [n for n in names[names.index(rung) + 1:] if n in allowed] if rung in names else []
    return up[min(by, len(up)) - 1] if up else None


# ----------------------------------------------------------------------------------------------- latch store
def latch_path(spool: str | Path) -> Path:
    """The latch file of a service whose workers write to `spool`."""
    return Path(f"{spool}.sessions.sqlite")


def open_latches(spool: str | Path, store_url: str | None, cfg):
    """A worker's latch store (the runtime opens it at start): in the PostgreSQL store's database when the service
    has one (`advisor.store.pg_latches.PgLatchStore`, shared by every replica, connected on first use; while the
    database is away, the SQLite file stands in: `advisor.store.latch_fallback`), else the SQLite file beside the
    spool (`advisor.store.latches.LatchStore`, shared by this host's workers)."""
    local = LatchStore(latch_path(spool), SessionState, cfg.ttl_s, cfg.max_sessions)
    if store_url:
        return FallbackLatches(lambda: PgLatchStore(store_url, SessionState, cfg.ttl_s, cfg.max_sessions), local)
    return local
