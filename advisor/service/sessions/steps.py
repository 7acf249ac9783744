"""The session hooks of the dispatch path: latch or escalate a step's plan, note the step's outcome, count it.

`route_session` is called by `advisor.service.routing.dispatch.decide` for ``model: "auto"`` requests (a fresh session
with tools starts where `session_start` says); `after_step` once the step's outcome is known, from the one place a
step concludes (`advisor.service.http.response.conclude`: buffered, streamed and Responses API steps alike; a streamed
step has no verifier, so only an unparseable tool call is noted). The rules are in `advisor.service.sessions.latch`.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from advisor.errors import StoreError

from advisor.service.sessions.costs import ANY_CLASS, start_options, start_rung
from advisor.service.sessions.latch import (SessionState, SessionStep, continued_id, first_call_ids, latch_key,
                                      rung_above, session_of, signals, step_budget)
from advisor.service.checks.step_check import broken_kinds

log = logging.getLogger("advisor.service.sessions.latch")
_LOG_EVERY_S = 10.0  #: refused steps are logged at most this often


def route_session(rt, req, plan, key, decide_auto: Callable[[], None]) -> bool:
    """Fill `plan` for a session step (True), or leave it to the caller (False: no session). `decide_auto` runs
    the ordinary decision on `plan` (the first step's)."""
    cfg = rt.config.sessions
    who = session_of(req, cfg)
    if who is None:
        return False
    sid, source = who
    tenant = key.name if key is not None else ""
    lid = latch_key(tenant, sid)
    store = rt.latches
    fresh = source == "derived" and not any(m.role == "assistant" for m in req.messages)
    state = None
    calls = first_call_ids(req) if source == "derived" and not fresh else []
    if calls:  # this run's own latch (continued_id)
        own = continued_id(sid, calls)
        state = store.get(latch_key(tenant, own))
        if state is not None:
            sid, lid = own, latch_key(tenant, own)
    if state is None and not fresh:
        state = store.get(lid)  # (tries the shared latch: a database found away is noted there)
    if not fresh and cfg.on_database_outage == "refuse" and store.primary_away():
        refuse_while_away(rt)
    if state is None or state.rung not in plan.allowed:
        decide_auto()
        if not plan.chain:
            return True
        session_start(rt, req, plan)
        first = SessionState(plan.chain[0], plan.chain[0], plan.task_class)
        store.put(lid, first)
        plan.session = SessionStep(sid, source, 1, first.start_rung, first=True, tenant=tenant)
        rt.session_metrics.count_step(plan.session, first.rung, None)
        return True
    names = [r.name for r in rt.ladder.rungs]
    moved: list[Any] = []

    def step(old: SessionState | None) -> SessionState:
        st = old or state
        st.step += 1
        reasons = [st.pending] if st.pending else []
        st.pending = None
        reasons += signals(req.messages[min(st.seen, len(req.messages)):], cfg)
        budget = step_budget(cfg, st.rung)
        if budget is not None and st.step - st.since_step >= budget:
            reasons.append("step_budget")
        if reasons:
            up = rung_above(names, plan.allowed, st.rung, cfg.escalate_by)
            moved.append([st.step, reasons[0], st.rung, up])
            st.escalations.append(moved[0])
            st.rung, st.since_step, st.seen = up or st.rung, st.step, len(req.messages)
        return st

    st = store.update(lid, step)
    escalation = None
    if moved:
        _, reason, old_rung, up = moved[0]
        escalation = f"{reason} {old_rung}->{up}" if up else f"{reason} {old_rung} (no rung above: stays)"
    plan.session = SessionStep(sid, source, st.step, st.start_rung, escalation, tenant=tenant)
    latched_plan(rt, plan, st)
    rt.session_metrics.count_step(plan.session, st.rung, moved[0] if moved else None)
    return True


def session_start(rt, req, plan) -> None:
    """A session's first step with tools starts on the allowed rung with the least expected USD per usable
    trajectory (`advisor.service.sessions.costs`: the router's P(usable) of the task, the probe's escalation
    figures of its class); without tools, with a class cascade, with `start: router`, or when the probe has
    fewer than `start_min_runs` runs of the class on an allowed rung, the ordinary decision's first rung stays."""
    cfg = rt.config.sessions
    router = rt.router
    allowed = [n for n in plan.allowed if n in router.rung_names]
    if cfg.start != "cost_per_usable" or not req.tools or len(allowed) < 2 or \
            rt.config.class_config(plan.task_class).chain:
        return
    cells = rt.session_cells.get(plan.task_class or ANY_CLASS, {})
    if any(n not in cells or cells[n].n < cfg.start_min_runs for n in allowed):
        return
    known = (plan.explanation or {}).get("probabilities") or {}
    if not all(n in known for n in allowed):
        probs = router.predict_one(plan.text, plan.task_class)
        known = {n: float(probs[router.rung_names.index(n)]) for n in allowed}
    options = start_options([r.name for r in rt.ladder.rungs], allowed, known, cells, cfg.escalate_by)
    best = start_rung(options)
    if best is None:
        return
    set_chain(rt, plan, best.rung)
    plan.policy, plan.p_usable, plan.expected_cost = f"session-start:{router.version_tag}", best.p_usable, best.usd
    plan.explanation = {**(plan.explanation or {}), "session_start": {
        o.rung: {"expected_usd": o.usd, "p_usable": o.p_usable} for o in options}}


def set_chain(rt, plan, rung: str) -> None:
    """A session step's chain: `rung`, then the allowed rungs above it when the class verifies answers."""
    chain = [rung]
    if plan.verifier is not None:
        names = [r.name for r in rt.ladder.rungs]
        above = [n for n in names[names.index(rung) + 1:] if n in plan.allowed]
        chain += above[: rt.config.routing.max_chain - 1]
    plan.chain = chain
    plan.mode = "escalate" if plan.verifier is not None else "single"


def latched_plan(rt, plan, st: SessionState) -> None:
    """The plan of a later step: the latched rung (then the rungs above it, when the class verifies answers)."""
    if plan.class_source != "given" and st.task_class != plan.task_class:
        plan.task_class, plan.class_source = st.task_class, "session: the class of its first step"
        plan.verifier = rt.verifier_for(st.task_class)
        plan.k = rt.config.class_config(st.task_class).retries if plan.verifier else 1
    set_chain(rt, plan, st.rung)
    plan.policy = "session"
    router = rt.router
    if st.rung in router.rung_names:
        plan.p_usable = float(router.predict_one(plan.text, plan.task_class)[router.rung_names.index(st.rung)])


def after_step(rt, req, out) -> None:
    """Note what the step's outcome says for the session's next step: the verifier rejected the answer, or
    accepted it only above the latch, or a broken step (`advisor.service.checks.step_check`) was answered only above
    it (the latch moves up to that rung now), or the reply held a tool call that could not be parsed."""
    s = getattr(out.plan, "session", None)
    if s is None or out.status != 200 or not out.rung:
        return
    if s.first and s.source == "derived" and out.reply is not None and out.reply.tool_calls and \
            not first_call_ids(req):  # the run's first reply with calls: they name it from now on
        own_latch(rt, out.plan, s, [c["id"] for c in out.reply.tool_calls])
    cfg = rt.config.sessions
    names = [r.name for r in rt.ladder.rungs]
    reason = None
    if cfg.verifier and out.verdict == "rejected":
        reason = "verifier_rejected"
    elif cfg.unparseable and req.tools and out.reply is not None and not out.reply.tool_calls \
            and out.reply.final is None:
        reason = "unparseable_tool_call"
    broke_below = bool(broken_kinds(out.attempts))  # a broken step moved the request up (step_check)
    rejected_below = broke_below or (
        cfg.verifier and out.verdict == "accepted" and any(a.accepted is False for a in out.attempts))
    if reason is None and not rejected_below:
        return
    moved: list[Any] = []
    kinds = {k.split("@", 1)[0] for k in broken_kinds(out.attempts)}
    why = ("gave_up" if kinds == {"gave_up"} else "broken_step") if broke_below else "verifier_rejected"

    def note(old: SessionState | None) -> SessionState | None:
        if old is None:
            return None
        if rejected_below and out.rung in names and old.rung in names and \
                names.index(out.rung) > names.index(old.rung):
            moved.append([old.step, why, old.rung, out.rung])
            old.escalations.append(moved[0])
            old.rung, old.since_step, old.seen = out.rung, old.step, len(req.messages)
        elif reason is not None:
            old.pending = reason
        return old

    try:
        rt.latches.update(s.latch_key, note)
    except StoreError:  # the latch's disk is full: the answer stands, and the next step decides afresh
        return
    if moved:
        s.escalation = f"{why} {moved[0][2]}->{moved[0][3]}"
        rt.session_metrics.escalated(moved[0])


def refuse_while_away(rt) -> None:
    """Refuse a running session's step while its shared latch is away (StoreError: the app answers 503 with
    retry-after): counted, and logged at most every `_LOG_EVERY_S`."""
    if rt.session_metrics.refused():
        log.warning("session steps refused: the shared session latch (PostgreSQL) is away; running sessions are "
                    "answered 503 until it is back (sessions.on_database_outage: refuse)")
    raise StoreError("the shared session latch is away (the PostgreSQL database does not answer): a step of a "
                     "running session is refused rather than latched where the other replicas cannot see it; "
                     "retry shortly")


def own_latch(rt, plan, s: SessionStep, call_ids: list[str]) -> None:
    """A derived session's first step answered with tool calls: from now on it is named by `continued_id` (its
    base id and the ids of these calls, which the client sends back), and its latch is written under that name,
    so that a concurrent run that opened the same way has a latch of its own."""
    first = SessionState(plan.chain[0], s.start_rung, plan.task_class)
    s.session_id = continued_id(s.session_id, call_ids)
    rt.latches.put(s.latch_key, first)


# ----------------------------------------------------------------------------------------------- records
def session_headers(plan) -> dict[str, str]:
    """The ``x-advisor-session*`` and ``x-advisor-escalation`` response headers of a step."""
    s = getattr(plan, "session", None)
    if s is None:
        return {}
    h = {"x-advisor-session": s.session_id, "x-advisor-session-step": str(s.step),
         "x-advisor-session-source": s.source}
    if s.escalation:
        h["x-advisor-escalation"] = s.escalation
    return h


def session_columns(plan) -> dict[str, Any]:
    """The session columns of a decision row (all None outside a session)."""
    s = getattr(plan, "session", None)
    if s is None:
        return {}
    return {"session_id": s.session_id, "session_step": s.step, "session_source": s.source,
            "session_start_rung": s.start_rung, "escalation": s.escalation}


class SessionMetrics:
    """Prometheus series of sessions: started by rung, steps by start and latched rung, escalations by reason."""

    def __init__(self, metrics):
        # heavy dependency, imported on use: prometheus_client
        from prometheus_client import Counter

        reg = metrics.registry
        self.metrics = metrics
        self.started = Counter("advisor_sessions_started", "Sessions started, by their first rung.", ["rung"],
                               registry=reg)
        self.steps = Counter("advisor_session_steps", "Session steps, by the session's start rung and the rung it "
                             "is latched to (a session's final rung is that of its last step).",
                             ["start_rung", "rung"], registry=reg)
        self.escalations = Counter("advisor_session_escalations", "Session escalations, by reason.",
                                   ["reason", "from_rung", "to_rung"], registry=reg)
        self._logged_at = -_LOG_EVERY_S  #: when a refused step was last logged (monotonic)
        self.refused_steps = Counter("advisor_session_steps_refused", "Steps of running sessions refused (503) "
                                     "while the shared latch's database was away (sessions.on_database_outage).",
                                     registry=reg)

    def refused(self) -> bool:
        """A running session's step refused (its shared latch is away), counted; True when it is time to log it
        (at most every `_LOG_EVERY_S`)."""
        self.refused_steps.inc()
        now = time.monotonic()
        if now - self._logged_at < _LOG_EVERY_S:
            return False
        self._logged_at = now
        return True

    def count_step(self, s: SessionStep, rung: str, moved: list | None) -> None:
        """One step of a session (and its escalation, if any)."""
        m = self.metrics
        if s.first:
            m.child(self.started, rung).inc()
        m.child(self.steps, s.start_rung, rung).inc()
        if moved is not None:
            self.escalated(moved)

    def escalated(self, moved: list) -> None:
        """One escalation ([step, reason, from, to])."""
        self.metrics.child(self.escalations, moved[1], moved[2], moved[3] or moved[2]).inc()
