"""Capture of live agent steps, opt-in and bounded: what the model saw and answered, kept to size from traffic.

With ``capture: {enabled: true}`` in the service config, each answered request of a captured tenant and class
(and sampled session) becomes one more record beside its decision and attempts: the conversation up to the step
as the rung read it (turns, the tools offered, the instructions that went with them: `advisor.agent.conversation`),
the reply delivered (its text and calls), the rung that answered, the verdict, whether the reply may serve as a
reference (delivered as well-formed and not rejected), the session and step, the tenant (the key's name; without
keys ``default``). Every text is redacted before the record is built (`advisor.redaction.Redactor`: the rungs'
keys, credential-shaped values, well-known key shapes, the team's ``capture.redact`` patterns).

The record is built and written after the response is sent, with the request's other records
(`advisor.service.http.response.conclude`), so capture adds no latency to the answer and cannot fail it: a step
larger than ``max_step_bytes`` is written as a drop (``too_large``), and the store's bounds (``keep_steps`` per
tenant, ``keep_days``) are applied when the records are ingested (`advisor.store._capture_queries`), where a step
past the bound is a counted drop (``full``). ``advisor suite from-traffic`` turns the captured steps into a suite.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from advisor.redaction import Redactor
from advisor.service.api.chat import conversation_of
from advisor.service.checks.step_check import broken_kind

NO_KEY_TENANT = "default"  #: the tenant of a service that runs without keys


class Capture:
    """One worker's capture: its config and its redactor (built once)."""

    def __init__(self, config, ladder):
        self.config = config
        secrets = [os.environ.get(m.api_key_env) for m in ladder.models() if getattr(m, "api_key_env", None)]
        self.redact = Redactor(secrets, config.redact)

    def wants(self, tenant: str, task_class: str | None, session_key: str) -> bool:
        """Is this step captured: its tenant and class chosen, its session sampled."""
        cfg = self.config
        if not cfg.enabled or (cfg.tenants is not None and tenant not in cfg.tenants):
            return False
        if cfg.classes is not None and (task_class or "") not in cfg.classes:
            return False
        if cfg.sample >= 1.0:
            return True
        draw = int.from_bytes(hashlib.sha256(session_key.encode()).digest()[:8], "big") / 2 ** 64
        return draw < cfg.sample

    def record(self, rt, req, out, key, started_at) -> dict[str, Any] | None:
        """The capture record of a finished request (a step, or a drop saying why it is not kept), or None when
        the step is not captured (not chosen, or no reply was delivered)."""
        plan = out.plan
        tenant = key.name if key is not None else NO_KEY_TENANT
        session = plan.session
        if out.status != 200 or out.reply is None or not self.wants(
                tenant, plan.task_class, session.session_id if session is not None else plan.decision_id):
            return None
        delivered = next((a for a in reversed(out.attempts) if a.rung == out.rung and a.error is None), None)
        reply = out.reply
        request_json = json.dumps(self._redacted({**conversation_of(req).to_json(), "sampling": req.sampling()}),
                                  separators=(",", ":"), default=str)
        reply_json = json.dumps(self._redacted({"content": reply.content, "final": reply.final,
                                                "calls": [[n, a] for n, a in reply.calls]}),
                                separators=(",", ":"), default=str)
        size = len(request_json) + len(reply_json)
        if size > self.config.max_step_bytes:
            return {"record": "capture", "tenant": tenant, "dropped": "too_large"}
        return {"record": "capture", "decision_id": plan.decision_id, "tenant": tenant, "created_at": started_at,
                "task_class": plan.task_class, "session_id": session.session_id if session is not None else None,
                "session_step": session.step if session is not None else None, "rung": out.rung,
                "status": "ok" if out.verdict != "rejected" else "rejected", "verdict": out.verdict,
                "reference_ok": bool(out.verdict != "rejected" and delivered is not None
                                     and broken_kind(delivered.verdict) is None and reply.problem is None),
                "simulated": rt.simulated(out.rung), "cost_usd": out.cost_usd, "request_json": request_json,
                "reply_json": reply_json, "size_bytes": size, "keep_steps": self.config.keep_steps,
                "keep_days": self.config.keep_days}

    def _redacted(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self._redacted(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redacted(v) for k, v in value.items()}
        return value
