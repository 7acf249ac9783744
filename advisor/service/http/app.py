"""The ASGI app (Starlette): OpenAI-compatible chat completions, models, health, readiness and metrics.

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses`` (`advisor.service.http.responses`), ``GET /v1/models``
(and ``/v1/models/{id}``), ``GET /healthz`` (process up), ``GET /readyz`` (router loaded and at least one rung ready on Triton), ``GET /metrics`` (Prometheus). Errors
use OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``. Response headers say what happened
(``x-advisor-*``, see docs/service.md). Run it with uvicorn through ``advisor serve``; `create_app(settings)` builds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import time
from typing import Any

from starlette.responses import Response, StreamingResponse

from advisor.errors import StoreError, did_you_mean
from advisor.redaction import without_urls
from advisor.service.routing.dispatch import decide, run_with_deadline
from advisor.service.routing.orchestrated import MODEL_ID, serves_orchestrator
from advisor.service.records.recording import ROTATE_S
from advisor.service.routing.reload import on_sighup, pin, watch
from advisor.service.process.http_protocol import STATE_KEY
from advisor.service.api.limits import check_header_values, parse_bounded
from advisor.service.api.request import RequestError
from advisor.service.http.response import error_response, finish, json_response, note_request, said_ignored
from advisor.service.http.responses import finish_responses, parse_responses
from advisor.service.process.runtime import SETTINGS_ENV, Runtime, ServeSettings
from advisor.service.http.streaming import stream_response
from advisor.service.process.supervision import worker_started
from advisor.store import now as _now


def create_app(settings=None):
    """The Starlette app for `settings` (a `ServeSettings`; default: from ``ADVISOR_SERVE_SETTINGS``)."""
    # heavy dependency, imported on use: starlette
    from starlette.applications import Starlette
    from starlette.routing import Route

    if settings is None:
        settings = ServeSettings.from_json(os.environ[SETTINGS_ENV])
    worker_started()  # a worker of `advisor serve --workers N` dies with it
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        rt = state["rt"] = Runtime(settings)  # a bad shadow artifact (advisor.service.routing.shadow) stops the start

        gc.collect()
        gc.freeze()  # the start-up heap (router, ladder, libraries) is never garbage: keep the collector off it

        async def rotate():
            while True:
                await asyncio.sleep(ROTATE_S)
                rt.writer.rotate_if_old()
                rt.count_connections()

        hup = asyncio.Event()
        on_sighup(hup)
        task = asyncio.ensure_future(rotate())
        watcher = asyncio.ensure_future(watch(rt, hup))
        try:
            yield {STATE_KEY: rt.config.limits}  # the server's protocol reads the header and read-time limits here
        finally:
            task.cancel()
            watcher.cancel()
            await rt.close()

    async def chat(request):
        pin(state["rt"])  # one router for the whole request, even across a hot reload
        return await chat_completions(state["rt"], request)

    async def responses(request):
        pin(state["rt"])
        return await chat_completions(state["rt"], request, responses_api=True)

    async def stored_response(request):  # GET / DELETE /v1/responses/{id}: the tenant's own stored responses
        rt = state["rt"]
        key, refused = _caller(rt, request)
        if refused is not None:
            return refused
        tenant, rid = (key.name if key is not None else ""), request.path_params["response_id"]
        try:
            found = rt.responses.get(tenant, rid) if rt.responses is not None else None
        except StoreError as exc:  # the database that keeps them is away
            return error_response(503, f"stored responses cannot be read now: {without_urls(str(exc))}",
                                  kind="service_unavailable",
                                  code="store_unavailable", headers={"retry-after": "5"})
        if found is None:
            return error_response(404, f"No response found with id {rid!r}.", param="response_id", code="not_found")
        if request.method == "DELETE":
            rt.responses.delete(tenant, rid)
            return json_response({"id": rid, "object": "response", "deleted": True})
        return json_response(found["response"])

    def model_cards() -> list[dict[str, Any]]:
        rt = state["rt"]
        created = int(time.time())
        data = [{"id": "auto", "object": "model", "created": created, "owned_by": "advisor",
                 "advisor": {"policy": rt.policy_name or "artifact default",
                             "router": rt.router.version_tag}}]
        data += [{"id": r.name, "object": "model", "created": created, "owned_by": "advisor",
                  "advisor": {"hf_id": r.hf_id, "triton_model": r.model_id, "simulated": rt.simulated(r.name),
                              "self_hosted": r.self_hosted}} for r in rt.ladder.rungs]

        if serves_orchestrator(rt):
            orch = rt.ladder.roles.orchestrator
            data.append({"id": MODEL_ID, "object": "model", "created": created, "owned_by": "advisor",
                         "advisor": {"policy": "orchestrator", "hf_id": orch.hf_id, "triton_model": orch.model_id,
                                     "simulated": rt.simulated(orch.name)}})
        return data

    async def models(request):
        refused = _unauthorized(state["rt"], request)
        return refused or json_response({"object": "list", "data": model_cards()})

    async def model(request):  # GET /v1/models/{id}: what the openai client's `models.retrieve` asks
        refused = _unauthorized(state["rt"], request)
        if refused is not None:
            return refused
        cards = model_cards()
        wanted = request.path_params["model"]
        card = next((c for c in cards if c["id"] == wanted), None)
        if card is None:
            ids = [c["id"] for c in cards]
            return error_response(404, f"the model {wanted!r} does not exist.{did_you_mean(wanted, ids)}",
                                  param="model", code="model_not_found")
        return json_response(card)

    async def healthz(request):
        return json_response({"status": "ok"})

    async def readyz(request):  # records not reaching PostgreSQL: still ready (they wait in the spool), "degraded"
        rt = state["rt"]
        ok, why = await rt.readiness()
        records = rt.writer.health()
        latch_trouble = rt.latches.trouble()
        if latch_trouble:  # the session latch could not be written a moment ago
            records = {**records, "records": "degraded", "records_detail": latch_trouble}
        status = ("degraded" if records.get("records") == "degraded" else "ready") if ok else "not ready"
        if _unauthorized(rt, request, count=False) is not None:  # keys configured, none given: the status only
            return json_response({"status": status}, status=200 if ok else 503)
        body = {"status": status, "detail": why, **rt.serving.describe(), **records}
        return json_response({k: without_urls(v) if isinstance(v, str) else v for k, v in body.items()},
                             status=200 if ok else 503)  # rungs named, never the addresses behind them

    async def metrics(request):
        refused = _unauthorized(state["rt"], request)
        if refused is not None:
            return refused
        body, ctype = state["rt"].metrics.render()
        return Response(body, media_type=ctype)

    routes = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/responses", responses, methods=["POST"]),
              Route("/v1/responses/{response_id}", stored_response, methods=["GET", "DELETE"]),
              Route("/v1/models", models, methods=["GET"]),
              Route("/v1/models/{model}", model, methods=["GET"]),
              Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]

    async def server_error(request, exc):  # a bug in advisor: OpenAI's error shape; the server logs the traceback
        return error_response(500, f"internal error in advisor ({type(exc).__name__}: {exc}); the service's log "
                              f"has the traceback", kind="server_error", code="internal_error")

    async def http_error(request, exc):  # an unknown path or method (the client's mistake): OpenAI's error shape
        paths = ", ".join(f"{'/'.join(sorted(r.methods - {'HEAD'}))} {r.path}" for r in routes)
        return error_response(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}; advisor serves "
                              f"{paths}", code="unknown_url" if exc.status_code == 404 else "method_not_allowed",
                              headers=getattr(exc, "headers", None))

    # heavy dependency, imported on use: starlette
    from starlette.exceptions import HTTPException

    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: http_error, Exception: server_error})


def _caller(rt, request, count: bool = True):
    """(the request's API key, None) when it may be served (key None without auth), else (None, the 401 response
    for a request without a valid key, counted unless `count` is false)."""
    if rt.settings.no_auth:
        return None, None
    key = rt.keys.lookup(request.headers.get("authorization"))
    if key is not None:
        return key, None
    if count:
        rt.metrics.child(rt.metrics.rejected, "401").inc()
    return None, error_response(401, "missing or unknown API key: send 'Authorization: Bearer <key>'",
                                kind="authentication_error", code="invalid_api_key")


def _unauthorized(rt, request, count: bool = True):
    """The 401 response for a request without a valid key (when keys are configured), else None."""
    return _caller(rt, request, count)[1]


async def _read_body(rt, request) -> bytes:
    """The raw body, bounded in size (413); the time it may take is bounded by the server
    (`advisor.service.process.http_protocol`: 408), and ``x-advisor-*`` header values are checked first."""
    # heavy dependency, imported on use: starlette
    from starlette.requests import ClientDisconnect

    limits = rt.config.limits
    check_header_values(request.headers, limits)
    limit = limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestError(f"request body of {declared} bytes is larger than the limit of {limit} bytes",
                           status=413, code="body_too_large")
    body = b""
    try:
        async for piece in request.stream():
            body += piece
            if len(body) > limit:
                raise RequestError(f"request body is larger than the limit of {limit} bytes", status=413,
                                   code="body_too_large")
    except ClientDisconnect:  # the client left, or the server ended a read past limits.read_timeout_s (408 sent)
        raise RequestError("the request body did not arrive", status=408, code="request_timeout") from None
    return body


def _check_bounds(rt, req) -> None:
    limits = rt.config.limits
    if req.ignored and rt.config.api.strict:
        raise RequestError(f"advisor does not honour {', '.join(req.ignored)} (the service config's api.strict "
                           f"refuses such requests: remove them)", param=req.ignored[0], code="unsupported_parameter")
    if len(req.messages) > limits.max_messages:
        raise RequestError(f"{len(req.messages)} messages: at most {limits.max_messages} are accepted",
                           param="messages", code="too_many_messages")
    asked = req.max_completion_tokens or req.max_tokens
    if asked is not None and asked > limits.max_tokens:
        field = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        raise RequestError(f"{field} {asked} is above the limit of {limits.max_tokens}", param=field,
                           code="max_tokens_too_large")


async def chat_completions(rt, request, responses_api: bool = False):
    """``POST /v1/chat/completions``: authenticate, bound, decide, run (or stream), record, answer. With
    `responses_api`, ``POST /v1/responses``: the body is translated into a chat request
    (`advisor.service.http.responses`), routed the same way, and answered as a ``response``."""
    m = rt.metrics
    key, refused = _caller(rt, request)
    if refused is not None:
        return refused
    started, started_at = time.perf_counter(), _now()
    try:  # the body is read before a concurrency slot is taken: a slow client holds no slot
        raw = await _read_body(rt, request)
    except RequestError as exc:  # a refused body: the connection is closed after the answer, not kept alive
        m.child(m.rejected, str(exc.status)).inc()
        return error_response(exc.status, str(exc), exc.kind, exc.param, exc.code, headers={"connection": "close"})
    cannot = rt.writer.refusal()
    if cannot:  # the disk is full: answer nothing that could not be recorded (advisor.service.records.recording)
        m.child(m.rejected, "503").inc()
        return error_response(503, f"cannot record requests now: {cannot}", kind="service_unavailable",
                              code="cannot_record", headers={"retry-after": "5"})
    if not rt.take_slot():
        m.child(m.rejected, "429").inc()
        return error_response(429, f"too many requests in flight (limit {rt.semaphore_limit} per worker); retry "
                              f"shortly", kind="rate_limit_error", code="concurrency_limit", headers={"retry-after": "1"})
    response = None
    try:
        response = await _answer(rt, request, raw, key, responses_api, started, started_at)
        return response
    finally:
        _slot_back_when_sent(rt, response)


async def _answer(rt, request, raw: bytes, key, responses_api: bool, started: float, started_at):
    """A request that holds a slot: parse -> decide -> walk the attempts (or stream them) -> the response, which
    settles and records the request (`advisor.service.http.response`)."""
    m = rt.metrics
    try:
        if responses_api:
            req, translation = await parse_responses(raw, request.headers, rt.config.limits, rt.responses,
                                                     key.name if key is not None else "")
        else:
            req = await parse_bounded(raw, request.headers, rt.config.limits)
        _check_bounds(rt, req)
        plan = decide(rt, req, key)
    except RequestError as exc:
        m.child(m.rejected, str(exc.status)).inc()
        return error_response(exc.status, str(exc), exc.kind, exc.param, exc.code)
    except StoreError as exc:  # the session latch cannot be written (its disk is full)
        m.child(m.rejected, "503").inc()
        return error_response(503, f"cannot record requests now: {exc}", kind="service_unavailable",
                              code="cannot_record", headers={"retry-after": "5"})
    note_request(plan, req)
    if req.stream and plan.verifier is None and plan.check is None and not responses_api:
        return said_ignored(await stream_response(rt, req, plan, key, started, started_at), req)
    out = await run_with_deadline(rt, req, plan)
    if responses_api:
        return said_ignored(finish_responses(rt, req, translation, out, key, started, started_at), req)
    return said_ignored(finish(rt, req, out, key, started, started_at), req)


def _slot_back_when_sent(rt, response) -> None:
    """The one place a request's in-flight slot is given back: at once, or for a streamed response once its body
    has ended (sent whole, failed, or the client gone), after the body's own ending (its records)."""
    if not isinstance(response, StreamingResponse):
        rt.release_slot()
        return
    body = response.body_iterator

    async def then_release():
        try:
            async for piece in body:
                yield piece
        finally:
            try:
                await body.aclose()
            finally:
                rt.release_slot()

    response.body_iterator = then_release()


