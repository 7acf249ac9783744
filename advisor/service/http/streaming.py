"""``stream: true``: server-sent events in OpenAI's chunk format, ending with ``data: [DONE]``.

Without a verifier for the request's class, tokens are relayed from the rung's stream as they arrive
(`ModelBackend.generate_stream`), on the first rung of the plan's walk (`advisor.service.routing.attempts.walk_plan`)
that opens one. A rung that fails before its first token is failed over like any attempt;
once tokens have been sent, an error ends the stream with an error event. Text is held back from the first
``<`` on (a tool call may be starting); at the end a tool call is sent as a ``tool_calls`` delta.

With a verifier the whole answer must be checked before anything is sent: the service runs the request to
the end (retries, escalation) and then sends the delivered answer as chunks. The plan's per-step check
(`RequestPlan.check`) is not applied here: a request that needs it is run that way too.
"""

from __future__ import annotations

import time
from contextlib import aclosing
from typing import AsyncIterator

from starlette.responses import StreamingResponse

from advisor.backends import BackendError, Try, failure_kind
from advisor.redaction import without_urls
from advisor.service.routing.attempts import (Attempt, AttemptError, Outcome, RequestPlan, deliver, generation_args,
                                              recorded, settle, unanswered, walk_plan)
from advisor.service.api.chat import chat_inputs, parse_reply, render_prompt, stream_shown
from advisor.service.http.response import DONE, chunk, conclude, finish, headers_of, sse, usage_of


async def open_stream(rt, req, plan: RequestPlan, out: Outcome, deadline: float):
    """Start streaming on the first rung that answers: (rung, first part, parts iterator, started, prompt).

    Rungs that fail before their first part are recorded as failover attempts. Returns None when none answers.
    """
    async def first_part(rung: str, remaining: float):
        model = rt.rungs[rung]
        started = time.perf_counter()
        prompt = render_prompt(model, req)
        parts = rt.client_for(model).generate_stream(model.model_id, prompt,
                                                     **generation_args(rt, req, plan, model, remaining),
                                                     **chat_inputs(model, req))
        try:
            first = await parts.__anext__()
        except StopAsyncIteration:
            first = None
        return first, parts, started, prompt

    async with aclosing(walk_plan(rt, plan, deadline, first_part, checked=False)) as tries:
        async for t in tries:
            if t.answered:
                return (t.rung, *t.answer)
            out.attempts.append(recorded(rt, t))
    return None


async def relay(rt, req, out: Outcome, opened, cid: str, created: int) -> AsyncIterator[bytes]:
    """Relay an opened stream as SSE chunks; fill `out` with the attempt and the reply as it ends."""
    rung, first, parts, started, prompt = opened
    model = rt.rungs[rung]
    attempt = Attempt(rung)
    out.attempts.append(attempt)
    collected, text, shown, sent = [], "", "", 0
    yield sse(chunk(cid, created, rung, {"role": "assistant", "content": ""}))
    try:
        part = first
        while part is not None:
            collected.append(part)
            text += part.text
            shown = stream_shown(model, text)
            if len(shown) > sent:
                yield sse(chunk(cid, created, rung, {"content": shown[sent:]}))
                sent = len(shown)
            try:
                part = await parts.__anext__()
            except StopAsyncIteration:
                part = None
    except BackendError as exc:
        attempt.fail(AttemptError.STREAM_BROKE, str(exc), backend=failure_kind(exc))  # tokens were sent: no failover
        attempt.latency_s = time.perf_counter() - started
        rt.metrics.count_call(attempt, rt.simulated(rung))
        out.status, out.error = 502, f"rung {rung!r} failed mid-stream: {without_urls(str(exc))}"
        yield sse({"error": {"message": out.error, "type": "server_error", "param": None, "code": "rung_failed"}})
        return
    # the ended stream is recorded, counted and settled as every mode's attempt is (`recorded`, `settle`)
    latency_s = time.perf_counter() - started
    result = rt.client_for(model).result(model.model_id, prompt, collected, latency_s)
    attempt = out.attempts[-1] = recorded(rt, Try(rung, 1, answer=result, latency_s=latency_s), model, result)
    reply = parse_reply(model, text, req)
    deliver(out, rung, reply, await settle(rt, out.plan, attempt, reply))
    if reply.content and len(reply.content) > sent and reply.content.startswith(shown[:sent]):
        yield sse(chunk(cid, created, rung, {"content": reply.content[sent:]}))
    if reply.tool_calls:
        yield sse(chunk(cid, created, rung, {"tool_calls": [{"index": i, **c} for i, c in enumerate(reply.tool_calls)]}))
    finish = "length" if attempt.finish_reason == "length" else reply.finish_reason
    yield sse(chunk(cid, created, rung, {}, finish))


async def stream_response(rt, req, plan: RequestPlan, key, started: float, started_at):
    """The SSE response of a streamed request without a verifier (headers name the rung that answers)."""
    out = Outcome(plan, [])
    deadline = time.monotonic() + rt.config.limits.deadline_s
    opened = await open_stream(rt, req, plan, out, deadline)
    if opened is None:
        unanswered(rt, out)
        return finish(rt, req, out, key, started, started_at)
    out.rung = opened[0]
    cid, created = "chatcmpl-" + plan.decision_id[4:], int(time.time())

    async def body():
        write_rows = None
        try:
            async for piece in relay(rt, req, out, opened, cid, created):
                yield piece
            write_rows = conclude(rt, req, out, key, started, started_at)  # before the last events: see conclude
            if out.status == 200 and req.stream_options and req.stream_options.include_usage:
                yield sse({"id": cid, "object": "chat.completion.chunk", "created": created, "model": out.rung,
                           "choices": [], "usage": usage_of(rt, out)})
            yield DONE
        finally:
            await opened[2].aclose()
            if write_rows is None:  # the client went away (or the relay failed) before the stream ended
                if out.attempts and out.attempts[-1].rung == out.rung and out.reply is None and out.status == 200:
                    out.status, out.error = 499, "the client went away mid-stream"
                    if not out.attempts[-1].error:
                        out.attempts[-1].fail(AttemptError.CLIENT_GONE)
                write_rows = conclude(rt, req, out, key, started, started_at)
            write_rows()

    headers = headers_of(rt, out)
    headers["x-advisor-attempts"] = str(len(out.attempts) + 1)  # the streaming attempt is added as it ends
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)

