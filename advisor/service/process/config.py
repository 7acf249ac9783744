"""The service config file: per task class its verifier and routing, request bounds, limits and recording.

A YAML file validated like the ladder (``version: 1``, unknown keys are errors naming file, key and line)::

    version: 1
    default_class: chat            # class of a request that names none and matches no rule
    classes:
      extraction:
        match: ['(?i)extract', '(?i)\\bjson\\b']   # regexes on the request text: how a class is predicted
        verifier:
          checks:                  # the suite's deterministic check types, applied to the reply
            - {type: json_schema, schema: {type: object, required: [name]}}
          false_accept: 0.05       # the verifier's error rates the policy uses until `advisor verifier
          false_reject: 0.02       # measure` has measured them on probe runs (advisor.verifier.calibration)
        retries: 2                 # attempts on one rung before escalating (k)
      chat:
        verifier: none
    routing: {target: 0.0, max_chain: 3}
    limits: {max_body_bytes: 1048576, max_messages: 256, max_tokens: 4096, concurrency: 64, deadline_s: 60}
                                   # (all limits and their defaults: docs/service.md, "Limits")
    record: {store_prompts: false}
    sessions: {derive: true, tool_errors: 2, step_budget: 30}   # advisor.service.sessions.latch
    api: {strict: false, step_retries: 1}   # unhonoured fields: ignored (x-advisor-ignored) or 400; broken steps
    capture: {enabled: true, sample: 0.2, keep_days: 30}   # live steps kept, redacted (advisor.service.records.capture)

Without a file every class has no verifier (single-shot routing) and the bounds below apply.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, PlainValidator, SerializeAsAny, field_validator, model_validator

from advisor.checks.base import CheckSpec, validate_check
from advisor.errors import ConfigError, did_you_mean
from advisor.registry import UnknownNameError
from advisor.router.routing.policies import POLICIES, batch_policies
from advisor.strict import StrictModel
from advisor.verifier.base import VERIFIERS
from advisor.yamlio import line_of, load_model, read_yaml

CONFIG_VERSION = 1

#: Suite check types that make sense on a single reply (its final text and the tool calls it holds).
REPLY_CHECKS = ("regex", "json_schema", "json_equals", "tool_call")


def _reply_check(value: Any) -> CheckSpec:
    spec = validate_check(value)
    if spec.type not in REPLY_CHECKS:
        raise ValueError(f"check type {spec.type!r} does not apply to a reply; use one of {', '.join(REPLY_CHECKS)} "
                         "(or a judge verifier)")
    for where, problem in spec.problems(None):  # what the suite loader checks too: a pattern that compiles, ...
        raise ValueError(f"{'.'.join(where)}: {problem}")
    return spec


ReplyCheck = Annotated[SerializeAsAny[CheckSpec], PlainValidator(_reply_check)]



def regexes(what: str, patterns: list[str]) -> list[str]:
    """`patterns` when each compiles as a regex; ValueError naming `what` and the pattern otherwise."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{what} {pattern!r} is not a regex ({exc})") from None
    return patterns

class JudgeVerifier(StrictModel):
    """Ask the ladder's judge role to grade the reply against a rubric."""

    rubric: str = Field(description="What an acceptable reply does.")
    threshold: float = Field(default=0.5, ge=0, le=1, description="Accept when the judge's score reaches this.")


class VerifierConfig(StrictModel):
    """How replies of one class are verified: deterministic checks, the judge, a registered verifier (`type`),
    or none (`verifier: none`)."""

    type: str | None = Field(default=None, description="A verifier registered in advisor.verifier.base.VERIFIERS "
                             "(default: judge when a judge is given, else checks).")
    options: dict[str, Any] = Field(default_factory=dict, description="Settings the `type`'s verifier reads.")
    checks: list[ReplyCheck] = Field(default_factory=list, description="All must pass for the reply to be accepted.")
    judge: JudgeVerifier | None = None
    false_accept: float = Field(default=0.0, ge=0, le=1, description="P(accept | not usable), used by the policy "
                                "when not measured (`advisor verifier measure`).")
    false_reject: float = Field(default=0.0, ge=0, le=1, description="P(reject | usable), used by the policy "
                                "when not measured (`advisor verifier measure`).")

    @field_validator("type")
    @classmethod
    def _registered(cls, value: str | None) -> str | None:
        if value is not None and value not in VERIFIERS:
            raise ValueError(f"unknown verifier {value!r}.{did_you_mean(value, VERIFIERS.names())}")
        return value

    @model_validator(mode="after")
    def _some(self) -> "VerifierConfig":
        if not self.checks and self.judge is None and self.type in (None, "checks", "judge"):
            raise ValueError("a verifier needs checks or a judge (write `verifier: none` for no verifier)")
        return self


class ClassConfig(StrictModel):
    """Routing and verification of one task class."""

    match: list[str] = Field(default_factory=list, description="Regexes on the request text that predict this class.")
    verifier: VerifierConfig | None = Field(default=None, description="`none` (or absent) for no verifier.")
    retries: int = Field(default=1, ge=1, le=10, description="Attempts on one rung before escalating (k).")
    chain: list[str] | None = Field(default=None, description="A fixed cascade for this class instead of the "
                                    "router's decision (rung names, tried in this order).")

    @field_validator("verifier", mode="before")
    @classmethod
    def _none(cls, value: Any) -> Any:
        if isinstance(value, str) and value != "none":
            raise ValueError(f"{value!r} is not a verifier: write `none`, or a mapping with `checks` and/or `judge`")
        return None if value == "none" else value

    @field_validator("match")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return regexes("match pattern", value)

    @property
    def verifier_config(self) -> VerifierConfig | None:
        """The verifier, or None for `verifier: none`."""
        return self.verifier


class RoutingConfig(StrictModel):
    """Defaults of the routing policy (a request's `advisor` preferences override target and value)."""

    policy: str | None = Field(default=None, description="A policy of the router's registry (router, value, default, "
                               "class_floor, threshold, cascade, always, ...); default: the artifact's choice.")

    target: float = Field(default=0.0, ge=0, le=1, description="Minimum P(usable) of the delivered answer.")

    @field_validator("policy")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                POLICIES.get(value)
            except UnknownNameError as exc:  # a KeyError: as a ValueError it is named with file, key and line
                raise ValueError(exc.args[0]) from None
            if value not in batch_policies():
                raise ValueError(f"{value!r} routes inside an episode, not per request; use one of "
                                 f"{', '.join(batch_policies())}")
        return value

    max_chain: int = Field(default=3, ge=1, description="At most this many rungs in an escalation chain.")
    order: Literal["ladder", "probability"] = "ladder"


class Limits(StrictModel):
    """Bounds that keep one request, and the service, from running away."""

    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="Larger bodies get 413.")
    max_messages: int = Field(default=256, ge=1, description="More messages get 400.")
    max_tokens: int = Field(default=4096, ge=1, description="A larger max_tokens gets 400.")
    concurrency: int = Field(default=64, ge=1, description="Requests in flight per worker; more get 429.")
    deadline_s: float = Field(default=60.0, gt=0, description="End-to-end time limit of one request (504 past it).")
    attempt_timeout_s: float = Field(default=30.0, gt=0, description="Time limit of one attempt on one rung.")
    read_timeout_s: float = Field(default=30.0, gt=0, description="Time to receive a whole request, headers and "
                                  "body, from its first byte; a slower one gets 408 and its connection is closed.")
    max_header_bytes: int = Field(default=32_768, ge=1024, description="Request line and headers together; more get "
                                  "431 (checked while they arrive).")
    max_label_chars: int = Field(default=256, ge=16, description="Longest x-advisor-* header value and stored label "
                                 "(advisor.class, user, a rung name); longer gets 400.")
    max_json_depth: int = Field(default=64, ge=8, le=128, description="Deepest nesting of arrays and objects in a "
                                "body, checked before parsing (tool schemas included); deeper gets 400.")
    max_tools: int = Field(default=128, ge=1, description="Most tools in one request; more get 400.")
    max_tool_schema_bytes: int = Field(default=32_768, ge=256, description="Largest tool `parameters` schema (as "
                                       "JSON); larger gets 400.")


#: A tool result that reports an error, as agent frameworks write one by default: a text that starts with Error /
#: Exception / Traceback (LangGraph's ToolNode: "Error: ... Please fix your mistakes."), an HTTP 4xx/5xx status, the
#: OpenAI Agents SDK's "An error occurred while running the tool. Please try again.", or a JSON object whose first
#: key is "error" ({"error": "file not found"}).
TOOL_ERROR_PATTERN = (r"(?i)^\s*(error|exception|traceback)\b|\bHTTP [45]\d\d\b"
                      r"|an error occurred while running the tool|^\s*\{\s*\"error\"\s*:")


class SessionConfig(StrictModel):
    """Agent sessions: routed once, latched, escalated on failure signals (`advisor.service.sessions.latch`)."""

    enabled: bool = Field(default=True, description="Route sessions (model auto); off: every request on its own.")
    derive: bool = Field(default=True, description="Derive a session id from the first system and user messages "
                         "and the tools when the request names none (x-advisor-session / advisor.session).")
    escalate_by: int = Field(default=1, ge=1, description="Rungs a session moves up on an escalation signal.")
    on_database_outage: Literal["refuse", "local"] = Field(
        default="refuse", description="With a PostgreSQL store, while its database is away: refuse (503, "
        "retry-after) a step of a session already running, since replicas latching it on their own local stand-bys "
        "would split it (its step numbers, its rung); 'local': latch it in this host's stand-by anyway (one "
        "replica). A session's first step is served either way.")
    start: Literal["cost_per_usable", "router"] = Field(
        default="cost_per_usable", description="How a session's first step with tools picks its rung: the least "
        "expected USD per usable trajectory, escalations counted, from the store's probe runs "
        "(advisor.service.sessions.costs), else the router's policy as for any request ('router').")
    start_min_runs: int = Field(default=3, ge=1, description="Probe runs of the class needed on every allowed rung "
                                "before cost_per_usable starts a session (fewer: the router's policy).")
    tool_errors: int = Field(default=2, ge=0, description="Tool results in a row matching tool_error_pattern that "
                             "escalate (0: off).")
    tool_error_pattern: str = Field(default=TOOL_ERROR_PATTERN, description="Regex on a tool result's text that "
                                    "marks a tool error (the default knows the agent frameworks' error texts).")
    stuck: bool = Field(default=True, description="Repeated or alternating tool calls (the agent loop's rule, "
                        "advisor.agent.loop.is_stuck) escalate.")
    stuck_repeats: int = Field(default=2, ge=2, description="Identical tool calls in a row that count as stuck (the "
                               "agent loop stops at 3: the session moves up before the client gives up).")
    stuck_cycles: int = Field(default=2, ge=2, description="Full A-B cycles of two alternating calls that count as "
                              "stuck.")
    unparseable: int = Field(default=1, ge=0, description="Unparseable tool calls that escalate (0: off).")
    verifier: bool = Field(default=True, description="A verifier rejecting the delivered answer escalates.")
    step_budget: int | None = Field(default=None, ge=1, description="Steps on one rung before escalating "
                                    "(none: no budget).")
    step_budget_by_rung: dict[str, int] = Field(default_factory=dict, description="Per-rung step budgets.")
    ttl_s: float = Field(default=86400.0, gt=0, description="A session idle this long is forgotten.")
    max_sessions: int = Field(default=100_000, ge=1, description="Most sessions latched at once (each a few hundred "
                              "bytes); a new session past it evicts the least recently used.")

    @field_validator("tool_error_pattern")
    @classmethod
    def _regex(cls, value: str) -> str:
        return regexes("tool_error_pattern", [value])[0]


class ApiConfig(StrictModel):
    """How the OpenAI surface treats what clients send (`advisor.service.api.request`, `advisor.service.checks.step_check`)."""

    strict: bool = Field(default=False, description="Refuse (400) a request with a field advisor accepts but does "
                         "not honour (by default it is ignored and named in x-advisor-ignored).")
    step_retries: int = Field(default=1, ge=0, description="Retries on the same rung of a reply that is no "
                              "well-formed step (a broken tool call, invalid arguments, empty, JSON not as asked) "
                              "before the request moves up a rung.")
    step_check: bool = Field(default=True, description="Check the reply to a request that offers tools or asks for "
                             "JSON before the client sees it (such a request is answered whole, also when streamed); "
                             "false: replies are passed on as the rung wrote them, streamed as they come, broken "
                             "steps included.")
    give_ups: bool = Field(default=True, description="A final answer that gives up on the task or refuses it, to a "
                           "request that offers tools, is retried and escalated like a broken step (the last rung's "
                           "give-up is delivered): advisor.service.checks.give_ups.")
    skipped_tools: bool = Field(default=True, description="A final answer to a request that offers tools, before "
                                "any call of a tool the user's message names by its verb (read_doc: 'read'), is a "
                                "broken step (retried, then escalated): advisor.service.checks.skipped_tools.")
    give_up_patterns: list[str] = Field(default_factory=list, description="Regexes (case-insensitive) a team adds to "
                                        "the built-in give-up patterns (advisor.service.checks.give_ups.GIVE_UP_PATTERNS).")

    @field_validator("give_up_patterns")
    @classmethod
    def _patterns_compile(cls, value: list[str]) -> list[str]:
        return regexes("give_up_patterns:", value)


class ResponsesConfig(StrictModel):
    """Stored responses of ``/v1/responses`` (``store: true``, the API's default): `advisor.store.responses`."""

    store: bool = Field(default=True, description="Keep the responses a request asks to store (per tenant), so "
                        "previous_response_id continues them and GET / DELETE /v1/responses/{id} work; false: keep "
                        "none (previous_response_id is then a 400).")
    ttl_s: float = Field(default=30 * 86400.0, gt=0, description="A stored response older than this is forgotten.")
    max_bytes: int = Field(default=4 * 2**20, ge=1024, description="A response (with the conversation it continues) "
                           "larger than this is not kept (its store field says false).")
    max_responses: int = Field(default=100_000, ge=1, description="Most responses kept; past it the oldest go.")


class CaptureConfig(StrictModel):
    """Opt-in capture of live agent steps into the store, to size from real traffic (`advisor.service.records.capture`)."""

    enabled: bool = Field(default=False, description="Capture steps (off by default: nothing of a conversation is "
                          "kept unless a team turns this on).")
    tenants: list[str] | None = Field(default=None, description="Key names (from --keys) whose steps are captured; "
                                      "absent: every tenant ('default' without keys).")
    classes: list[str] | None = Field(default=None, description="Task classes captured; absent: every class.")
    sample: float = Field(default=1.0, ge=0, le=1, description="Share of sessions captured (a session is kept or "
                          "left whole; a request outside a session counts as its own session).")
    redact: list[str] = Field(default_factory=list, description="Regexes a team adds to the built-in redaction "
                              "(rung keys, credential-shaped values, well-known key shapes: advisor.redaction).")
    keep_days: float = Field(default=30.0, gt=0, description="Captured steps older than this are deleted.")
    keep_steps: int = Field(default=100_000, ge=1, description="Most steps kept per tenant; past it a step is a "
                            "counted drop.")
    max_step_bytes: int = Field(default=262_144, ge=1024, description="A larger step (conversation and reply, "
                                "as JSON) is a counted drop.")

    @field_validator("redact")
    @classmethod
    def _patterns(cls, value: list[str]) -> list[str]:
        return regexes("capture.redact pattern", value)


class ShadowConfig(StrictModel):
    """A candidate router that decides every routed request beside the serving one (`advisor.service.routing.shadow`)."""

    artifact: str = Field(description="The candidate router artifact (or a promotion pointer).")


class RecordConfig(StrictModel):
    """What the service records."""

    store_prompts: bool = Field(default=False, description="Store prompt text; by default only its hash.")


class LoadConfig(StrictModel):
    """Load as a term in the rung choice (`advisor.service.routing.load`): per-rung expected wait, deadline-bound moves."""

    enabled: bool = Field(default=True, description="Estimate each rung's wait before service and pass over a rung "
                          "whose wait breaks the request's deadline (false: no poller, no timing, decisions ignore "
                          "load).")
    poll_interval_s: float = Field(default=0.5, gt=0, description="How often each worker refreshes its estimate "
                                   "(a background task: decisions read the last estimate).")
    window_s: float = Field(default=2.0, gt=0, description="Calls that ended this recently give the observed "
                            "latency the wait is read from.")
    min_wait_s: float = Field(default=0.05, ge=0, description="Expected waits below this count as 0 (an idle ladder "
                              "decides as without load-awareness).")
    metrics_url: str | None = Field(default=None, description="Triton's metrics endpoint (default: port 8002 on "
                                    "the host of each Triton rung's gRPC address); unreachable: observed latencies "
                                    "only.")


class ServiceConfig(StrictModel):
    """The whole service config file."""

    version: int = Field(description=f"Config format version (this advisor reads {CONFIG_VERSION}).")
    default_class: str | None = Field(default=None, description="Class of a request that names none and matches no rule.")
    classes: dict[str, ClassConfig] = Field(default_factory=dict)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    limits: Limits = Field(default_factory=Limits)
    record: RecordConfig = Field(default_factory=RecordConfig)
    sessions: SessionConfig = Field(default_factory=SessionConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    responses: ResponsesConfig = Field(default_factory=ResponsesConfig)
    capture: CaptureConfig = Field(default_factory=CaptureConfig)
    shadow: ShadowConfig | None = Field(default=None, description="Shadow mode: a candidate router's decisions are "
                                        "recorded, not applied.")

    @model_validator(mode="after")
    def _check(self) -> "ServiceConfig":
        if self.version != CONFIG_VERSION:
            raise ValueError(f"unsupported service config version {self.version}; this advisor reads {CONFIG_VERSION}")
        if self.default_class is not None and self.default_class not in self.classes:
            raise ValueError(f"default_class {self.default_class!r} is not one of classes")
        return self

    def class_config(self, name: str | None) -> ClassConfig:
        """The config of class `name` (a class not in the file: no verifier, one attempt)."""
        return self.classes.get(name or "", _NO_CLASS)

    def predict_class(self, text: str) -> tuple[str | None, str]:
        """(class, how) for a request that names none: the first class whose `match` rule hits, else the default."""
        for name, cls in self.classes.items():
            for pattern in cls.match:
                if re.search(pattern, text):
                    return name, f"predicted: rule {pattern!r} of class {name!r}"
        if self.default_class:
            return self.default_class, "predicted: default_class (no rule matched)"
        return None, "none: no rule matched and no default_class"


_NO_CLASS = ClassConfig()


def default_config() -> ServiceConfig:
    """The config used without a file: no verifiers, default bounds."""
    return ServiceConfig(version=CONFIG_VERSION)


def load_config(path: str | Path | None, ladder=None) -> ServiceConfig:
    """Read and validate a service config (ConfigError naming file, key and line); None gives the default.

    With `ladder`, rung names in `chain` are checked against it, and a judge verifier needs its `roles.judge`.
    """
    if path is None:
        return default_config()
    config = load_model(ServiceConfig, path)
    if ladder is not None:
        names = [r.name for r in ladder.rungs]
        for cname, cls in config.classes.items():
            for i, rung in enumerate(cls.chain or []):
                if rung not in names:
                    line = line_of(read_yaml(path), ("classes", cname, "chain", i))
                    raise ConfigError(f"{path}:{line}: classes.{cname}.chain.{i}: ladder {ladder.name!r} has no rung "
                                      f"{rung!r}.{did_you_mean(rung, names)}")
            if cls.verifier is not None and cls.verifier.judge is not None and ladder.roles.judge is None:
                line = line_of(read_yaml(path), ("classes", cname, "verifier", "judge"))
                raise ConfigError(f"{path}:{line}: classes.{cname}.verifier.judge: ladder {ladder.name!r} has no "
                                  f"roles.judge to grade with (give the ladder a judge, or use checks)")
    return config
