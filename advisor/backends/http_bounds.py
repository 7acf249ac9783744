"""An HTTP answer read within bounds: its bytes, the time to its first byte and between its chunks, and in all.

An endpoint the ladder names is still a stranger's server: it may send 200 MB, stream forever, or drip a byte
every few seconds. `Bounds` holds the limits of one generation (`max_bytes`, the rung's `max_response_bytes`;
`deadline`, the request's, on the monotonic clock; `stall_s`, the longest wait for the next chunk), and every
read here stops at the first one passed: `ResponseTooLarge` (an attempt error: the bytes are never buffered
past the limit) or `asyncio.TimeoutError` (the caller says which rung timed out). The answer's decoded bytes
are counted (a compressed answer cannot expand past the limit either).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import AsyncIterator

from advisor.errors import BackendError

#: What an error answer (4xx/5xx) is read up to: enough for any message, never the whole of a hostile one
ERROR_BYTES = 65_536


class ResponseTooLarge(BackendError):
    """The endpoint sent more bytes than the rung's ``max_response_bytes``."""


@dataclass(frozen=True)
class Bounds:
    """The limits of one generation's HTTP exchange."""

    deadline: float  #: `time.monotonic()` by which everything must have arrived
    stall_s: float  #: the longest wait for the answer's head or its next chunk
    max_bytes: int  #: the most (decoded) bytes the answer may hold

    @classmethod
    def within(cls, seconds: float, stall_s: float, max_bytes: int) -> "Bounds":
        """Bounds ending `seconds` from now."""
        return cls(time.monotonic() + seconds, stall_s, max_bytes)

    def wait_s(self) -> float:
        """How long the next wait may take (asyncio.TimeoutError when the deadline has passed)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise asyncio.TimeoutError
        return min(left, self.stall_s)


async def within(bounds: Bounds, awaitable):
    """`awaitable`'s result, within the next wait `bounds` allow (asyncio.TimeoutError past it). It is awaited in
    the caller's own task (an async generator's next item must not move to another task)."""
    if hasattr(asyncio, "timeout"):
        async with asyncio.timeout(bounds.wait_s()):
            return await awaitable
    return await asyncio.wait_for(awaitable, bounds.wait_s())  # pragma: no cover - Python 3.10


async def chunks(response, bounds: Bounds, where: str, max_bytes: int | None = None) -> AsyncIterator[bytes]:
    """The answer's body, chunk by chunk, each within the bounds' next wait; `ResponseTooLarge` past
    `max_bytes` (the bounds' by default)."""
    most = bounds.max_bytes if max_bytes is None else max_bytes
    body = response.aiter_bytes()
    total = 0
    try:
        while True:
            try:
                piece = await within(bounds, body.__anext__())
            except StopAsyncIteration:
                return
            total += len(piece)
            if total > most:
                raise ResponseTooLarge(f"{where} sent more than {most:,} bytes (the rung's max_response_bytes): "
                                       "the answer is refused, not buffered")
            yield piece
    finally:
        await body.aclose()


async def read_body(response, bounds: Bounds, where: str, max_bytes: int | None = None) -> bytes:
    """The whole body within the bounds (see `chunks`)."""
    return b"".join([piece async for piece in chunks(response, bounds, where, max_bytes)])


async def error_text(response, bounds: Bounds, where: str) -> str:
    """The first `ERROR_BYTES` of an error answer, as text (the rest is not read)."""
    kept = bytearray()
    try:
        async for piece in chunks(response, bounds, where, max_bytes=1 << 62):
            kept += piece[: ERROR_BYTES - len(kept)]
            if len(kept) >= ERROR_BYTES:
                break
    except (asyncio.TimeoutError, BackendError):
        pass  # what arrived is the message
    return bytes(kept).decode("utf-8", errors="replace")


async def sse_payloads(response, bounds: Bounds, where: str) -> AsyncIterator[str]:
    """The payloads of a server-sent-events body's ``data:`` lines, read within the bounds."""
    pending = b""
    async for piece in chunks(response, bounds, where):
        pending += piece
        if b"\n" not in piece:
            continue
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip().decode("utf-8", errors="replace")
    if pending.startswith(b"data:"):
        yield pending[5:].strip().decode("utf-8", errors="replace")


async def closed(response) -> None:
    """Close an answer, also while the caller is being cancelled (an attempt's time limit): the close runs to the
    end in a task of its own, so the connection is released to the pool or shut, never left open with its body
    unread (a stalled upstream would otherwise hold one socket per timed-out attempt until the pool is full)."""
    await asyncio.shield(asyncio.ensure_future(response.aclose()))
