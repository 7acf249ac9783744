"""uvicorn's httptools protocol with two bounds of the service config: header bytes (431) and read time (408).

httptools (llhttp) buffers a request's line and headers without limit until they are complete (a 64 MB header
took 16-33 s and 200 MB), and uvicorn gives a request that trickles in, headers or body, all the time it likes (200
connections sending a byte every 5 s held every concurrency slot). `LimitedHttpToolsProtocol` counts the bytes
of the request head as they arrive and answers 431 past ``limits.max_header_bytes``; it gives every request
``limits.read_timeout_s`` from its first byte (and a new connection as long for its first byte) to arrive whole,
else it answers 408 and closes the connection. The app sees such a request as a client that left.

**`/healthz` is answered ahead of work**: a ``GET`` (or ``HEAD``) of ``/healthz`` is answered by the protocol
itself as soon as its head is parsed, with no ASGI task, middleware or app (liveness says the process and its
event loop answer; `/readyz` is the app's), so a liveness probe does not queue behind hundreds of requests' tasks.

`advisor serve` runs uvicorn with ``http=HTTP_PROTOCOL`` (this class); the limits come from the app's lifespan
state (``advisor_limits``, a `advisor.service.process.config.Limits`), the defaults before it has started.
"""

from __future__ import annotations

import json

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from advisor.service.process.config import Limits

#: what `advisor serve` passes to uvicorn as ``http``
HTTP_PROTOCOL = "advisor.service.process.http_protocol:LimitedHttpToolsProtocol"
#: the key of the app's lifespan state that holds the limits
STATE_KEY = "advisor_limits"

_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}
HEALTH_PATH = "/healthz"
HEALTH_BODY = b'{"status":"ok"}'


class LimitedHttpToolsProtocol(HttpToolsProtocol):
    """`HttpToolsProtocol` bounding the request head's size and the time a request takes to arrive."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._head_bytes: int | None = 0  #: bytes of the current request's head so far; None while its body comes
        self._begun = False  #: a request has begun arriving and is not complete
        self._read_timer = None
        self._refused = False

    def _limits(self):
        limits = self.app_state.get(STATE_KEY)
        if limits is None:
            limits = self.app_state[STATE_KEY] = Limits()
        return limits

    # uvicorn's protocol interface ---------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing is closed too

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._head_bytes is not None:
            self._head_bytes += len(data)
        super().data_received(data)
        most = self._limits().max_header_bytes
        if not self._refused and self._head_bytes is not None and self._head_bytes > most:  # still no end of head
            self._refuse(431, f"the request line and headers are larger than the limit limits.max_header_bytes = "
                              f"{most} bytes")

    # parser callbacks -----------------------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        if self._refused:
            return
        super().on_message_begin()
        self._begun = True
        self._arm()

    def on_headers_complete(self) -> None:
        most = self._limits().max_header_bytes
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > most:
            self._refuse(431, f"the request line and headers are {size} bytes: the limit is "
                              f"limits.max_header_bytes = {most} bytes")
            return
        self._head_bytes = None
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if self._refused:
            return
        self._disarm()
        self._begun, self._head_bytes = False, 0
        super().on_message_complete()

    def _start_asgi_task(self, cycle, app) -> None:
        scope = cycle.scope
        if scope.get("path") == HEALTH_PATH and scope.get("method") in ("GET", "HEAD"):
            self._answer_health(cycle, scope["method"] == "HEAD")
            return
        super()._start_asgi_task(cycle, app)

    # internals ------------------------------------------------------------------------------------------------
    def _answer_health(self, cycle, head_only: bool) -> None:
        """Answer a liveness probe here (see the module docstring), keeping the connection as HTTP/1.1 says."""
        head = [b"HTTP/1.1 200 OK", b"content-type: application/json", b"content-length: %d" % len(HEALTH_BODY)]
        head += [b"%s: %s" % (name, value) for name, value in self.server_state.default_headers]
        if not cycle.keep_alive:
            head.append(b"connection: close")
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + (b"" if head_only else HEALTH_BODY))
        cycle.response_started = cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self._limits().read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and self.cycle.response_started:  # answered already (413, 401, ...): just close
            self.transport.close()
            return
        if not self._begun:  # an idle new connection: nothing to answer
            self.transport.close()
            return
        self._refuse(408, f"the request did not arrive whole within limits.read_timeout_s = "
                          f"{self._limits().read_timeout_s:g} s")

    def _refuse(self, status: int, message: str) -> None:
        """Answer `status` with `message` (OpenAI's error shape) and close the connection; the app, if it runs,
        sees a client that left and its response is dropped."""
        self._refused = True
        self._disarm()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        if cycle is not None and cycle.response_started:
            self.transport.close()
            return
        code = "request_timeout" if status == 408 else "headers_too_large"
        body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                     "code": code}}).encode()
        head = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(body)]
        self.transport.write(b"".join(head) + body)
        self.transport.close()

