"""The one attempt walker: a chain of rungs tried in order, within a deadline, with failover and failure kinds.

`walk_attempts(chain, call, ...)` is an async iterator of `Try`s, one per attempt as it ends. The routing service's
buffered path (`advisor.service.routing.dispatch.run`), its streamed path (`advisor.service.http.streaming.open_stream`), its
orchestrator mode (`advisor.service.routing.attempts.call_model`) and the probe's cascade (`advisor.probe.chain`) all
consume it; each keeps only what it does with an answer. The walk:

- Each rung of `chain` is tried up to `tries` times; then the next rung is tried (an escalation, reported to
  `on_escalate(rung, next_rung)`).
- Before each attempt the `deadline` (a `time.monotonic()` time; None: none) is checked: past it, one last
  `Try` with ``out_of_time`` set ends the walk.
- ``await call(rung, remaining_s)`` makes the attempt (`remaining_s`: seconds to the deadline, None without
  one) and returns what the rung answered. A `BackendError` it raises is a failed `Try` whose ``failure`` is
  the seam's `FailureKind` (`advisor.backends.failure_kind`: each backend classified it), ``error`` its
  message. An answer for which ``failed(answer)`` names a kind is a failed `Try` that keeps its answer (a probe
  episode that ended in a backend error).
- After a failed `Try` the walk goes on with ``failover(tried, rung)`` (the rungs to try instead, in order,
  `tried` the names tried so far), or ends when `failover` is None (a pinned rung; the probe).
- An answered `Try` is the consumer's to judge: **leaving the loop accepts it** (``break``/``return``);
  **asking for the next `Try` rejects it** (a verifier said no): the walk retries the rung, up to `tries`,
  then escalates. A consumer that may leave early walks inside ``contextlib.aclosing`` (the walk is closed
  there and then, not by the event loop's finalizer later); `one_attempt` is the walk of one rung, one try.

The per-step check (``check``), for what must hold before anyone may see a step: ``check(answer)`` returns
None when the answer is fine, else the reason it is not (it may also be a coroutine function). It runs on every
answer before the consumer gets it; a reason makes the `Try` **rejected** (``rejected`` holds the reason, which
the consumer records on its attempt; ``answered`` is False, so the answer is never delivered) and the walk
retries the same rung or escalates, as for a verifier's rejection. A rung is left after `check_tries` such
rejections (default 1: escalate at once), or after `tries` answers the consumer rejected. Examples: an
unparseable or truncated tool call, arguments that do not validate against the tool's schema, an empty reply::

    def well_formed(answer) -> str | None:
        if answer.result.finish_reason == "length" and answer.reply.tool_calls:
            return "the tool call was cut off at max_tokens"
        return None

    async for t in walk_attempts(chain, call, tries=2, check=well_formed, check_tries=2, ...):
        ...  # t.rejected == "the tool call was cut off at max_tokens" for an attempt the check refused
"""

from __future__ import annotations

import inspect
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable

from advisor.backends.failures import FailureKind, failure_kind
from advisor.errors import BackendError

#: ``call(rung, remaining_s)``: one attempt on a rung, returning its answer (raises `BackendError` on failure)
Call = Callable[[str, "float | None"], Awaitable[Any]]
#: ``check(answer)``: None when the answer may be seen, else why not (or an awaitable of that)
Check = Callable[[Any], "str | None | Awaitable[str | None]"]


@dataclass
class Try:
    """One attempt of the walk, as it ended."""

    rung: str
    number: int  #: 1 for the first attempt on this rung, 2 for its retry, ...
    answer: Any = None  #: what `call` returned (None when it raised)
    failure: FailureKind | None = None  #: how the backend failed (None: it answered)
    error: str = ""  #: the failure's message
    rejected: str | None = None  #: why the per-step check refused the answer
    out_of_time: bool = False  #: the deadline was past before the attempt: nothing was called
    latency_s: float = 0.0  #: wall time of `call`
    last: bool = False  #: no further attempt follows if the consumer rejects this one

    @property
    def answered(self) -> bool:
        """The rung answered and the check (if any) let the answer through: the consumer's to accept or reject."""
        return self.failure is None and self.rejected is None and not self.out_of_time


async def walk_attempts(chain: list[str], call: Call, *, tries: int = 1, deadline: float | None = None,
                        failover: Callable[[set[str], str], list[str]] | None = None,
                        failed: Callable[[Any], FailureKind | None] | None = None,
                        check: Check | None = None, check_tries: int = 1,
                        on_escalate: Callable[[str, str], None] | None = None) -> AsyncIterator[Try]:
    """Attempts of `chain` in order as `Try`s (see the module docstring for the rules)."""
    queue, tried = list(chain), set()
    while queue:
        rung = queue.pop(0)
        tried.add(rung)
        number = checked_out = 0
        while True:
            number += 1
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                yield Try(rung, number, out_of_time=True, error="no time left for this attempt", last=True)
                return
            t = await _attempt(rung, number, call, remaining, failed)
            if t.failure is not None:
                t.last = failover is None
                yield t
                queue = failover(tried, rung) if failover is not None else []
                break
            if check is not None:
                t.rejected = await _checked(check, t.answer)
            if t.rejected is not None:
                checked_out += 1
            t.last = not queue and (number - checked_out >= tries or checked_out >= check_tries)
            yield t  # the consumer leaves the loop to accept an answer; coming back here rejects it
            if number - checked_out >= tries or checked_out >= check_tries:
                if queue and on_escalate is not None:
                    on_escalate(rung, queue[0])
                break


async def one_attempt(rung: str, call: Call, *, deadline: float | None = None) -> Try:
    """The walk of one rung, one try (a call of one model that classifies its failure as the walk does)."""
    async with aclosing(walk_attempts([rung], call, deadline=deadline)) as tries:
        async for t in tries:
            return t
    raise AssertionError("a walk of one rung yields one try")  # pragma: no cover


async def _attempt(rung: str, number: int, call: Call, remaining: float | None,
                   failed: Callable[[Any], FailureKind | None] | None) -> Try:
    started = time.perf_counter()
    try:
        answer = await call(rung, remaining)
    except BackendError as exc:
        return Try(rung, number, failure=failure_kind(exc), error=str(exc), latency_s=time.perf_counter() - started)
    t = Try(rung, number, answer, latency_s=time.perf_counter() - started)
    if failed is not None:
        t.failure = failed(answer)
    return t


async def _checked(check: Check, answer: Any) -> str | None:
    reason = check(answer)
    return await reason if inspect.isawaitable(reason) else reason
