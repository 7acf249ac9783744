"""The ASGI app (Starlette): OpenAI-compatible chat completions, models, health, readiness and metrics.

Routes: ``POST /v1/chat/completions``, ``GET /v1/models`` (and ``/v1/models/{id}``), ``GET /healthz`` (process
up), ``GET /readyz`` (router loaded and at least one rung ready on Triton), ``GET /metrics`` (Prometheus). Errors
use OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``. Response headers say what happened
(``x-advisor-*``, see docs/service.md). Run it with uvicorn through ``advisor serve``; `create_app(settings)` builds it.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any
from urllib.parse import quote

from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response

from advisor.errors import did_you_mean
from advisor.service.dispatch import decide, records, run_with_deadline
from advisor.service.request import RequestError, decode_body, parse_request
from advisor.service.session_routing import after_step, session_headers
from advisor.service.shadow import shadow_of
from advisor.store import now as _now


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
           code: str | None = None, headers: dict | None = None):
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": code}},
                        status_code=status, headers=headers)


def create_app(settings=None):
    """The Starlette app for `settings` (a `ServeSettings`; default: from ``ADVISOR_SERVE_SETTINGS``)."""
    import contextlib

    from starlette.applications import Starlette
    from starlette.routing import Route

    from advisor.service.runtime import SETTINGS_ENV, Runtime, ServeSettings

    if settings is None:
        settings = ServeSettings.from_json(os.environ[SETTINGS_ENV])
    state: dict[str, Any] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app):
        import asyncio

        from advisor.service.recording import ROTATE_S

        rt = state["rt"] = Runtime(settings)
        shadow_of(rt)  # a shadow candidate (advisor.service.shadow) is loaded now: a bad artifact stops the start
        import gc

        gc.collect()
        gc.freeze()  # the start-up heap (router, ladder, libraries) is never garbage: keep the collector off it

        async def rotate():
            while True:
                await asyncio.sleep(ROTATE_S)
                rt.writer.rotate_if_old()

        from advisor.service.reload import on_sighup, watch

        hup = asyncio.Event()
        on_sighup(hup)
        task = asyncio.ensure_future(rotate())
        watcher = asyncio.ensure_future(watch(rt, hup))
        try:
            yield
        finally:
            task.cancel()
            watcher.cancel()
            await rt.close()

    from advisor.service.reload import pin

    async def chat(request):
        pin(state["rt"])  # one router for the whole request, even across a hot reload
        return await chat_completions(state["rt"], request)

    def model_cards() -> list[dict[str, Any]]:
        rt = state["rt"]
        created = int(time.time())
        data = [{"id": "auto", "object": "model", "created": created, "owned_by": "advisor",
                 "advisor": {"policy": rt.policy_name or "artifact default",
                             "router": rt.router.version_tag}}]
        data += [{"id": r.name, "object": "model", "created": created, "owned_by": "advisor",
                  "advisor": {"hf_id": r.hf_id, "triton_model": r.triton_model, "simulated": rt.simulated(r.name),
                              "self_hosted": r.self_hosted}} for r in rt.ladder.rungs]
        from advisor.service.orchestrated import MODEL_ID, serves_orchestrator

        if serves_orchestrator(rt):
            orch = rt.ladder.roles.orchestrator
            data.append({"id": MODEL_ID, "object": "model", "created": created, "owned_by": "advisor",
                         "advisor": {"policy": "orchestrator", "hf_id": orch.hf_id, "triton_model": orch.triton_model,
                                     "simulated": rt.simulated(orch.name)}})
        return data

    async def models(request):
        return _json({"object": "list", "data": model_cards()})

    async def model(request):  # GET /v1/models/{id}: what the openai client's `models.retrieve` asks
        cards = model_cards()
        wanted = request.path_params["model"]
        card = next((c for c in cards if c["id"] == wanted), None)
        if card is None:
            ids = [c["id"] for c in cards]
            return _error(404, f"the model {wanted!r} does not exist.{did_you_mean(wanted, ids)}", param="model",
                          code="model_not_found")
        return _json(card)

    async def healthz(request):
        return _json({"status": "ok"})

    async def readyz(request):  # records not reaching PostgreSQL: still ready (they wait in the spool), "degraded"
        rt = state["rt"]
        ok, why = await rt.readiness()
        records = rt.writer.health() if hasattr(rt.writer, "health") else {}
        status = ("degraded" if records.get("records") == "degraded" else "ready") if ok else "not ready"
        return _json({"status": status, "detail": why, **rt.serving.describe(), **records},
                     status=200 if ok else 503)

    async def metrics(request):
        body, ctype = state["rt"].metrics.render()
        return Response(body, media_type=ctype)

    routes = [Route("/v1/chat/completions", chat, methods=["POST"]), Route("/v1/models", models, methods=["GET"]),
              Route("/v1/models/{model}", model, methods=["GET"]),
              Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"]),
              Route("/metrics", metrics, methods=["GET"])]

    async def server_error(request, exc):  # a bug in advisor: OpenAI's error shape; the server logs the traceback
        return _error(500, f"internal error in advisor ({type(exc).__name__}: {exc}); the service's log has the "
                           f"traceback", kind="server_error", code="internal_error")

    async def http_error(request, exc):  # an unknown path or method (the client's mistake): OpenAI's error shape
        paths = ", ".join(f"{'/'.join(sorted(r.methods - {'HEAD'}))} {r.path}" for r in routes)
        return _error(exc.status_code, f"{request.method} {request.url.path}: {exc.detail}; advisor serves {paths}",
                      code="unknown_url" if exc.status_code == 404 else "method_not_allowed",
                      headers=getattr(exc, "headers", None))

    from starlette.exceptions import HTTPException

    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: http_error, Exception: server_error})


def _json(obj: Any, status: int = 200, headers: dict | None = None, background=None):
    return Response(json.dumps(obj, default=str), status_code=status, media_type="application/json", headers=headers,
                    background=background)


async def _read_body(rt, request) -> Any:
    limit = rt.config.limits.max_body_bytes
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestError(f"request body of {declared} bytes is larger than the limit of {limit} bytes",
                           status=413, code="body_too_large")
    body = b""
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise RequestError(f"request body is larger than the limit of {limit} bytes", status=413,
                               code="body_too_large")
    return decode_body(body)


def _check_bounds(rt, req) -> None:
    limits = rt.config.limits
    if len(req.messages) > limits.max_messages:
        raise RequestError(f"{len(req.messages)} messages: at most {limits.max_messages} are accepted",
                           param="messages", code="too_many_messages")
    asked = req.max_completion_tokens or req.max_tokens
    if asked is not None and asked > limits.max_tokens:
        field = "max_completion_tokens" if req.max_completion_tokens else "max_tokens"
        raise RequestError(f"{field} {asked} is above the limit of {limits.max_tokens}", param=field,
                           code="max_tokens_too_large")


async def chat_completions(rt, request):
    """``POST /v1/chat/completions``: authenticate, bound, decide, run (or stream), record, answer."""
    m = rt.metrics
    key = None
    if not rt.settings.no_auth:
        key = rt.keys.lookup(request.headers.get("authorization"))
        if key is None:
            m.child(m.rejected, "401").inc()
            return _error(401, "missing or unknown API key: send 'Authorization: Bearer <key>'",
                          kind="authentication_error", code="invalid_api_key")
    if rt.in_flight >= rt.semaphore_limit:
        m.child(m.rejected, "429").inc()
        return _error(429, f"too many requests in flight (limit {rt.semaphore_limit} per worker); retry shortly",
                      kind="rate_limit_error", code="concurrency_limit", headers={"retry-after": "1"})
    rt.in_flight += 1
    m.in_flight.inc()
    streaming = False
    try:
        started, started_at = time.perf_counter(), _now()
        try:
            req = parse_request(await _read_body(rt, request), request.headers)
            _check_bounds(rt, req)
            plan = decide(rt, req, key)
        except RequestError as exc:
            m.child(m.rejected, str(exc.status)).inc()
            return _error(exc.status, str(exc), exc.kind, exc.param, exc.code)
        if req.stream and plan.verifier is None:
            from advisor.service.streaming import stream_response

            streaming = True
            return await stream_response(rt, req, plan, key, started, started_at)
        out = await run_with_deadline(rt, req, plan)
        if plan.session is not None:
            after_step(rt, req, out)
        return finish(rt, req, out, key, started, started_at)
    finally:
        if not streaming:
            rt.in_flight -= 1
            m.in_flight.dec()


def headers_of(rt, out) -> dict[str, str]:
    """The ``x-advisor-*`` response headers of an outcome."""
    plan = out.plan
    h = {"x-advisor-decision-id": plan.decision_id, "x-advisor-chain": ",".join(plan.chain),
         "x-advisor-attempts": str(len(out.attempts)), "x-advisor-policy": plan.policy,
         "x-advisor-class": header_text(plan.task_class or ""),
         "x-advisor-class-source": header_text(plan.class_source),
         "x-advisor-verdict": out.verdict,
         "x-advisor-failovers": str(sum(a.failover for a in out.attempts))}
    if plan.p_usable is not None:
        h["x-advisor-p-usable"] = f"{plan.p_usable:.4f}"
    if out.rung:
        h["x-advisor-rung"] = out.rung
    if plan.session is not None:
        h.update(session_headers(plan))
    if any(rt.simulated(a.rung) for a in out.attempts) or (plan.chain and rt.simulated(plan.chain[0])):
        h["x-advisor-simulated"] = "true"
    return h


def header_text(value: str) -> str:
    """A value the request chose (a class name, a rule's pattern) as a header can carry it: printable ASCII as it
    is, anything else (non-ASCII, a line break) and ``%`` percent-encoded as UTF-8 (`urllib.parse.unquote` reads
    it back). Unencoded, a class such as "分类" failed the finished request with a 500 (headers are Latin-1) and a
    line break would have been refused by the server."""
    if value.isascii() and value.isprintable() and "%" not in value:
        return value
    return quote(value, safe="".join(c for c in map(chr, range(0x20, 0x7F)) if c != "%"))


def usage_of(rt, out) -> dict[str, Any]:
    """OpenAI usage (tokens summed over every attempt, from the server) plus advisor's cost extension."""
    n_in = sum(a.input_tokens for a in out.attempts)
    n_out = sum(a.output_tokens for a in out.attempts)
    return {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
            "advisor": {"cost_usd": out.cost_usd,
                        "attempts": [{"rung": a.rung, "cost_usd": a.cost_usd, "prompt_tokens": a.input_tokens,
                                      "completion_tokens": a.output_tokens, "verdict": a.verdict,
                                      "accepted": a.accepted, "error": a.error, "failover": a.failover,
                                      "simulated": rt.simulated(a.rung)} for a in out.attempts]}}


def record(rt, out, key, started: float, started_at) -> list[dict]:
    """Count the request and write its records now (a stream, once it has ended); the rows written."""
    return record_later(rt, out, key, started, started_at)()


def record_later(rt, out, key, started: float, started_at):
    """Count the request now and return the no-argument function that builds and writes its records later
    (`finish` runs it once the response is sent, so that neither building the rows nor the segment's flush is on
    the request's latency). The latency recorded is the one measured here."""
    latency = time.perf_counter() - started
    attempts_at = _now()  # the attempt rows' created_at, as if they were built now
    outcome = "error" if out.status != 200 else out.verdict
    m = rt.metrics
    label = m.class_label(out.plan.task_class)
    m.child(m.requests, out.rung or "", label, outcome, "true" if out.rung and rt.simulated(out.rung) else "false").inc()
    m.request_seconds.observe(latency)
    if out.plan.p_usable is not None and out.plan.mode != "pinned":
        m.child(m.predicted, label).inc(out.plan.p_usable)

    def write_rows() -> list[dict]:
        rows = records(rt, out, key, started_at, latency, attempts_at)
        rt.writer.write(rows)
        return rows

    return write_rows


def finish(rt, req, out, key, started: float, started_at):
    """Record the outcome and build the response (JSON, or the delivered answer as SSE chunks).

    The records are built and written right after the response is sent (a background task the server awaits,
    also while draining on SIGTERM), so neither is on the request's latency.
    """
    async def write(write_rows):  # async: runs on the loop after the send (a sync task would hop to a thread)
        write_rows()

    write_rows = record_later(rt, out, key, started, started_at)
    later = BackgroundTask(write, write_rows)
    if getattr(rt.writer, "before_reply", False):  # on disk before the answer: a killed process loses none
        write_rows()
        later = None
    headers = headers_of(rt, out)
    if out.status != 200:
        kind = "timeout_error" if out.status == 504 else "service_unavailable"
        response = _error(out.status, out.error or "failed", kind=kind, code="no_rung_answered", headers=headers)
        response.background = later
        return response
    last = out.attempts[-1] if out.attempts else None
    finish_reason = "length" if last is not None and last.finish_reason == "length" else out.reply.finish_reason
    cid, created = "chatcmpl-" + out.plan.decision_id[4:], int(time.time())
    if req.stream:
        from starlette.responses import StreamingResponse

        from advisor.service.streaming import DONE, reply_chunks, sse

        chunks = [sse(c) for c in reply_chunks(cid, created, out.rung, out.reply, finish_reason)]
        if req.stream_options and req.stream_options.include_usage:
            chunks.append(sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": out.rung,
                               "choices": [], "usage": usage_of(rt, out)}))
        chunks.append(DONE)

        async def body():
            for c in chunks:
                yield c

        return StreamingResponse(body(), media_type="text/event-stream", headers=headers, background=later)
    return _json({"id": cid, "object": "chat.completion", "created": created, "model": out.rung,
                  "choices": [{"index": 0, "message": out.reply.message(), "finish_reason": finish_reason,
                               "logprobs": None}],
                  "usage": usage_of(rt, out)}, headers=headers, background=later)
