"""A request handler served on a free loopback port in a thread: the OpenAI-compatible upstreams the tests stand up
(slow, refusing, breaking or hostile ones) all run on it."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer


class Loopback:
    """`handler` (a `BaseHTTPRequestHandler` class) served on 127.0.0.1 at a free port until `close` (or the end of
    a ``with`` block); `base` is its address, `url` its OpenAI-style ``/v1``."""

    def __init__(self, handler) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.base + "/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
