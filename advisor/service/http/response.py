"""The response of a finished chat completion: OpenAI's JSON and error shapes, the ``x-advisor-*`` headers, the
usage block, the server-sent-event chunks of a delivered answer, and the request's records written after the send.

Shared by the app (`advisor.service.http.app`) and the token stream (`advisor.service.http.streaming`).
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from starlette.background import BackgroundTask
from starlette.responses import JSONResponse, Response, StreamingResponse

from advisor.redaction import without_urls
from advisor.service.api.chat import Reply
from advisor.service.routing.dispatch import records
from advisor.service.routing.load import load_headers
from advisor.service.sessions.steps import after_step, session_headers
from advisor.service.checks.step_check import broken_kinds
from advisor.store import now as _now


def sse(obj: Any) -> bytes:
    """One server-sent event."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
#: Failed outcomes that the same request would meet again (no rung can hold the prompt; every rung allowed, each
#: retried and escalated inside the request, gave no well-formed step): answered with ``x-should-retry: false``,
#: which the OpenAI SDKs read before retrying a 5xx.
REPEATS = (400, 502)


def chunk(cid: str, created: int, model: str, delta: dict, finish: str | None = None) -> dict:
    """One chat.completion.chunk."""
    return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def reply_chunks(cid: str, created: int, model: str, reply: Reply, finish: str) -> list[dict]:
    """A complete reply as chunks (used when a verifier had to see it first)."""
    out = [chunk(cid, created, model, {"role": "assistant", "content": ""})]
    if reply.content:
        out.append(chunk(cid, created, model, {"content": reply.content}))
    if reply.tool_calls:
        out.append(chunk(cid, created, model, {"tool_calls": [{"index": i, **c} for i, c in enumerate(reply.tool_calls)]}))
    out.append(chunk(cid, created, model, {}, finish))
    return out


def error_response(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                   code: str | None = None, headers: dict | None = None):
    """An error in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` (no address in it: an
    upstream's URL or host:port is ``(upstream)``)."""
    return JSONResponse({"error": {"message": without_urls(message), "type": kind, "param": param, "code": code}},
                        status_code=status, headers=headers)



def json_response(obj: Any, status: int = 200, headers: dict | None = None, background=None):
    """A JSON response (values JSON cannot hold written as strings)."""
    return Response(json.dumps(obj, default=str), status_code=status, media_type="application/json", headers=headers,
                    background=background)



def note_request(plan, req) -> None:
    """Record with the decision (its explanation) what the request said that is not routing: its metadata, its
    seed, the response_format asked, the fields it sent that advisor ignored."""
    facts = {k: v for k, v in (("metadata", req.metadata), ("seed", req.seed), ("ignored", req.ignored or None),
                               ("response_format", req.response_format and req.response_format.type))
             if v is not None}
    if facts:
        plan.explanation = {**(plan.explanation or {}), "request": facts}


def said_ignored(response, req):
    """`response` with the ``x-advisor-ignored`` header naming the fields of `req` advisor did not honour."""
    if req.ignored:
        response.headers["x-advisor-ignored"] = header_text(",".join(req.ignored))
    return response


def fingerprint(rt, rung: str | None) -> str:
    """The ``system_fingerprint`` of an answer: says whether a simulated stand-in wrote it."""
    return "fp_advisor_simulated" if rung and rt.simulated(rung) else "fp_advisor"


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
    h.update(load_headers(plan))
    broken = broken_kinds(out.attempts)
    if broken:
        h["x-advisor-broken-steps"] = ",".join(broken)
    simulated = any(rt.simulated(a.rung) for a in out.attempts) or (plan.chain and rt.simulated(plan.chain[0]))
    h["x-advisor-simulated"] = "true" if simulated else "false"  # said either way: a real answer says so too
    return h


def header_text(value: str) -> str:
    """A value the request chose (a class name, a rule's pattern) as a header can carry it: printable ASCII as it
    is, anything else (non-ASCII, a line break) and ``%`` percent-encoded as UTF-8 (`urllib.parse.unquote` reads
    it back). Headers are Latin-1 and one line: a class such as "分类" or a line break could not be sent as it is."""
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


def conclude(rt, req, out, key, started: float, started_at):
    """The step is over, whichever way it was answered (buffered, streamed, the Responses API), and this is the one
    place that says so: what its outcome says for the session's next step (`sessions.steps.after_step`, before
    the answer's headers are built and before a stream's last event, so the client's next step meets the moved
    latch), the request counted, and the no-argument function that builds and writes its records later
    (`finish` runs it once the response is sent, so that neither building the rows nor the segment's flush is on
    the request's latency). The latency recorded is the one measured here. With capture on, the rows end with
    the step's capture record (`advisor.service.records.capture`; `req` is the chat request)."""
    after_step(rt, req, out)
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
        captured = rt.capture.record(rt, req, out, key, started_at) if rt.capture is not None else None
        rt.writer.write(rows if captured is None else [*rows, captured])
        return rows

    return write_rows


def answering(rt, req, out, key, started: float, started_at):
    """What every answer of an outcome needs: (the background task that writes its records once the response is
    sent, or None when the writer wants them on disk first and they are written now; the ``x-advisor-*``
    headers; the error response when the request failed, else None)."""
    async def write(write_rows):  # async: runs on the loop after the send (a sync task would hop to a thread)
        write_rows()

    write_rows = conclude(rt, req, out, key, started, started_at)
    later = BackgroundTask(write, write_rows)
    if rt.writer.before_reply:  # on disk before the answer: a killed process loses none
        write_rows()
        later = None
    headers = headers_of(rt, out)
    if out.status == 200:
        return later, headers, None
    kind, code = ("timeout_error", "no_rung_answered") if out.status == 504 else (
        ("server_error", "no_well_formed_step") if out.status == 502 else ("service_unavailable", "no_rung_answered"))
    param = None
    if out.status == 400:
        kind, code, param = "invalid_request_error", out.code, "messages"
    if out.status in REPEATS:  # the same request would fail the same way: the SDKs' retry loop is told not to
        headers = {**headers, "x-should-retry": "false"}
    response = error_response(out.status, out.error or "failed", kind=kind, param=param, code=code, headers=headers)
    response.background = later
    return later, headers, response


def finish(rt, req, out, key, started: float, started_at):
    """Record the outcome and build the response (JSON, or the delivered answer as SSE chunks).

    The records are built and written right after the response is sent (a background task the server awaits,
    also while draining on SIGTERM), so neither is on the request's latency.
    """
    later, headers, failed = answering(rt, req, out, key, started, started_at)
    if failed is not None:
        return failed
    last = out.attempts[-1] if out.attempts else None
    finish_reason = "length" if last is not None and last.finish_reason == "length" else out.reply.finish_reason
    cid, created = "chatcmpl-" + out.plan.decision_id[4:], int(time.time())
    if req.stream:
        chunks = [sse(c) for c in reply_chunks(cid, created, out.rung, out.reply, finish_reason)]
        if req.stream_options and req.stream_options.include_usage:
            chunks.append(sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": out.rung,
                               "choices": [], "usage": usage_of(rt, out)}))
        chunks.append(DONE)

        async def body():
            for c in chunks:
                yield c

        return StreamingResponse(body(), media_type="text/event-stream", headers=headers, background=later)
    return json_response({"id": cid, "object": "chat.completion", "created": created, "model": out.rung,
                          "system_fingerprint": fingerprint(rt, out.rung),
                          "choices": [{"index": 0, "message": out.reply.message(), "finish_reason": finish_reason,
                                       "logprobs": None}],
                          "usage": usage_of(rt, out)}, headers=headers, background=later)
