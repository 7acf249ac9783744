"""The step check: is a rung's reply a well-formed step for the client that asked, before the client sees it.

An OpenAI-style agent framework runs whatever step it receives: a truncated call becomes the run's final
output, a call whose arguments are a JSON Schema is executed. So every reply to a request that offers tools or
asks for JSON is checked here, and a broken one is retried on the same rung or escalated within the same
request (`advisor.service.routing.dispatch`), counted as an attempt, its reason in the attempt's ``verdict`` (the
store), the ``x-advisor-broken-steps`` header and the ``advisor_broken_steps`` metric. A step is broken when:

- ``empty``: the reply says nothing and calls nothing;
- ``truncated``: it stopped at the length limit inside a tool call (or inside the JSON it was asked for);
- ``unparseable``: it opened a tool call that cannot be parsed (bad JSON, an unclosed tag), or a second call
  of the reply cannot be;
- ``not_offered``: it calls a function the request did not offer (or tool_choice ruled out);
- ``invalid_arguments``: a call's arguments do not validate against the offered tool's JSON Schema;
- ``no_call``: tool_choice demands a call (``required``, a named function) and the reply has none;
- ``not_json`` / ``schema``: a ``json_object`` / ``json_schema`` response_format was asked and the content is no
  JSON object / does not validate against the schema. JSON wrapped in a code fence or prose is unwrapped (the
  content becomes the JSON alone): that is honouring the format, not a broken step;
- ``gave_up``: the request offers tools and the reply is a final answer saying the task was not done (a give-up
  or a refusal: `advisor.service.checks.give_ups`);
- ``skipped_tool``: the request offers tools and the reply is a final answer although a tool the latest user
  message names by its verb (``read`` for ``read_doc``) was never called in the conversation
  (`advisor.service.checks.skipped_tools`);
- ``cut_at_cap``: the reply stopped at the length limit though the client set none (``max_tokens`` /
  ``max_completion_tokens`` / ``max_output_tokens``): it was cut at the rung's own output cap, which the client
  never asked for (a Responses client reads it as ``incomplete`` and ends its run). A cut the client asked for is
  the client's answer.
The last three are well-formed steps: when every rung the request may use gives one, the last is delivered
(`SOFT_KINDS`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from advisor.service.checks.give_ups import gave_up
from advisor.service.checks.skipped_tools import skipped
from advisor.service.api.request import call_required, offered_names

KINDS = ("empty", "truncated", "unparseable", "not_offered", "invalid_arguments", "no_call", "not_json", "schema",
         "gave_up", "skipped_tool", "cut_at_cap")
#: Kinds of a well-formed reply that a better rung may improve on: delivered when no rung does better.
SOFT_KINDS = ("gave_up", "skipped_tool", "cut_at_cap")


@dataclass(frozen=True)
class BrokenStep:
    """Why a reply is no well-formed step: `kind` (one of `KINDS`) and a one-line `detail`."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def needs_check(req, api) -> bool:
    """Whether replies to `req` are checked (it offers tools, or asks for JSON, and the service config's
    ``api.step_check`` is on): such a request is answered whole, also when streamed, since a broken step must not
    reach the client."""
    if not api.step_check:
        return False
    fmt = req.response_format
    return bool(req.tools) or (fmt is not None and fmt.type != "text")


def check_step(req, reply, finish_reason: str | None, api=None) -> BrokenStep | None:
    """The reason `reply` (an `advisor.service.api.chat.Reply`) is a broken step for `req`, else None. A JSON
    reply asked for by response_format is normalised in place (its content becomes the JSON alone). `api` (the
    service config's ``api``) says whether give-ups are checked, with which extra patterns (default: on)."""
    if reply.problem is not None:
        kind = "truncated" if finish_reason == "length" else "unparseable"
        return BrokenStep(kind, reply.problem)
    if not reply.tool_calls and not (reply.content or "").strip():
        return BrokenStep("empty", "the reply holds no content and no tool call")
    if reply.tool_calls:
        return _calls_problem(req, reply)
    if call_required(req) and offered_names(req):
        return BrokenStep("no_call", "tool_choice demands a tool call and the reply has none")
    problem = _format_problem(req, reply, finish_reason)
    if problem is None and finish_reason == "length" and not (req.max_completion_tokens or req.max_tokens):
        return BrokenStep("cut_at_cap", "the reply was cut at the rung's own output limit (the client set none)")
    if problem is None and req.tools and getattr(api, "give_ups", True):
        words = gave_up(reply.final if reply.final is not None else reply.content,
                        getattr(api, "give_up_patterns", ()) or ())
        if words is not None:
            return BrokenStep("gave_up", f"the answer gives up on the task ({words!r})")
    if problem is None and req.tools and getattr(api, "skipped_tools", True):
        missing = skipped(offered_names(req), called_names(req), latest_user_text(req))
        if missing:
            return BrokenStep("skipped_tool", f"the answer comes before any call of {', '.join(missing)}, which "
                                              "the user's message asks for")
    return problem


def called_names(req) -> list[str]:
    """The functions the conversation's assistant messages called."""
    return [c.function.name for m in req.messages if m.role == "assistant" for c in m.function_calls()]


def latest_user_text(req) -> str:
    """The text of the latest user message ("" without one)."""
    return next((m.text() for m in reversed(req.messages) if m.role == "user"), "")


def _calls_problem(req, reply) -> BrokenStep | None:
    offered = set(offered_names(req))
    schemas = {t.function.name: t.function.parameters for t in req.tools or () if t.function is not None}
    for name, args in reply.calls:
        if name not in offered:
            why = "is not among the request's tools" if name not in schemas else "is ruled out by tool_choice"
            return BrokenStep("not_offered", f"the reply calls {name!r}, which {why}")
        problem = schema_violation(schemas[name], args)
        if problem is not None:
            return BrokenStep("invalid_arguments", f"the arguments of {name!r} do not validate: {problem}")
    return None


def _format_problem(req, reply, finish_reason: str | None) -> BrokenStep | None:
    fmt = req.response_format
    if fmt is None or fmt.type == "text":
        return None
    value, text = json_in(reply.content or "")
    if not isinstance(value, dict):
        kind = "truncated" if finish_reason == "length" else "not_json"
        return BrokenStep(kind, "response_format asks for a JSON object and the reply holds none")
    schema = fmt.json_schema.schema_ if fmt.type == "json_schema" and fmt.json_schema is not None else None
    if schema is not None:
        problem = schema_violation(schema, value)
        if problem is not None:
            return BrokenStep("schema", f"the reply does not validate against response_format's schema: {problem}")
    reply.content = text
    reply.final = text
    return None


def json_in(text: str) -> tuple[Any, str]:
    """(the JSON value, its text) a reply holds: the whole text, else the first JSON object in it (inside a
    code fence or after prose); (None, text) when there is none."""
    stripped = text.strip()
    try:
        return json.loads(stripped), stripped
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    at = stripped.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(stripped, at)
        except ValueError:
            at = stripped.find("{", at + 1)
            continue
        return value, stripped[at:end]
    return None, text


def schema_violation(schema: Any, value: Any) -> str | None:
    """Why `value` does not validate against the JSON Schema `schema` (the first error, with where), or None."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = next(iter(validator.iter_errors(value)), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message}" + (f" at {where!r}" if where else "")


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str):
    """A compiled validator of a schema (as canonical JSON; clients send the same tools every step)."""
    # heavy dependency, imported on use: jsonschema
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    return validator_for(schema)(schema)


def step_checker(req, api=None):
    """The per-step check of `req` for the attempt walk (`RequestPlan.check`): ``check(answer)`` is None for a
    well-formed step, else ``"<kind>: <why>"`` (the walk retries the rung, then escalates; the attempt's verdict
    is ``invalid: <kind>: <why>``)."""
    def check(answer) -> str | None:
        broken = check_step(req, answer.reply, answer.result.finish_reason, api)
        return None if broken is None else str(broken)
    return check


def broken_kind(reason: str | None) -> str | None:
    """The `KINDS` entry a check's reason (or a recorded ``invalid: ...`` verdict) names, else None."""
    if not reason:
        return None
    kind = reason.removeprefix("invalid: ").split(":", 1)[0]
    return kind if kind in KINDS else None


def count_broken(rt, rung: str, reason: str) -> None:
    """Count a broken step of `rung` (``advisor_broken_steps_total``)."""
    kind = broken_kind(reason)
    if kind is not None:
        rt.step_metrics.count(rung, kind)


def is_soft(reason: str | None) -> bool:
    """Whether a check's reason names a well-formed step that may still be delivered (`SOFT_KINDS`)."""
    return broken_kind(reason) in SOFT_KINDS


def broken_kinds(attempts) -> list[str]:
    """``kind@rung`` of each attempt whose reply was a broken step (the ``x-advisor-broken-steps`` header)."""
    return [f"{broken_kind(a.verdict)}@{a.rung}" for a in attempts if broken_kind(a.verdict)]


def retry_request(req, retry: int):
    """`req` as the `retry`-th retry of a broken step sends it: another seed (a model sampling the same seed
    would write the same broken step again); `req` itself for the first try."""
    if retry == 0:
        return req
    return req.model_copy(update={"seed": ((req.seed or 0) + retry) % 2 ** 63})


class StepMetrics:
    """The ``advisor_broken_steps`` counter: broken steps caught before the client, by rung and kind."""

    def __init__(self, metrics):
        # heavy dependency, imported on use: prometheus_client
        from prometheus_client import Counter

        self.metrics = metrics
        self.broken = Counter("advisor_broken_steps", "Replies that were no well-formed step (advisor.service."
                              "step_check), caught and retried or escalated before the client saw them.",
                              ["rung", "kind"], registry=metrics.registry)

    def count(self, rung: str, kind: str) -> None:
        """One broken step of `rung`."""
        self.metrics.child(self.broken, rung, kind).inc()


