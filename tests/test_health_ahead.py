"""`/healthz` is answered ahead of work: by the service's HTTP protocol itself, while the app is stuck on every
other request (a real uvicorn server with `advisor.service.process.http_protocol`, raw sockets)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest

from advisor.service.process.http_protocol import HEALTH_BODY, LimitedHttpToolsProtocol


async def stuck_app(scope, receive, send):
    """Every request waits forever (a worker whose loop is busy with requests' tasks, at the extreme)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await asyncio.sleep(3600)


@pytest.fixture(scope="module")
def server():
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(stuck_app, http=LimitedHttpToolsProtocol, loop="asyncio", log_level="error",
                            timeout_graceful_shutdown=1)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    end = time.monotonic() + 10
    while not srv.started:
        assert time.monotonic() < end
        time.sleep(0.02)
    yield port
    srv.should_exit = True
    thread.join(timeout=5)


def _exchange(port: int, raw: bytes, expect_close: bool = False) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(raw)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            if not expect_close and data.count(HEALTH_BODY) >= raw.count(b"GET /healthz"):
                break
        return data


def test_healthz_is_answered_while_every_other_request_is_stuck(server):
    with socket.create_connection(("127.0.0.1", server), timeout=5) as busy:
        busy.sendall(b"GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n")  # never answered: the app is stuck
        reply = _exchange(server, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nGET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    assert reply.count(b"HTTP/1.1 200 OK") == 2 and reply.count(HEALTH_BODY) == 2  # keep-alive: two on one socket
    assert b"content-type: application/json" in reply


def test_head_has_no_body_and_connection_close_closes(server):
    head = _exchange(server, b"HEAD /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n", expect_close=True)
    assert head.startswith(b"HTTP/1.1 200 OK") and HEALTH_BODY not in head and b"connection: close" in head
    old = _exchange(server, b"GET /healthz HTTP/1.0\r\n\r\n", expect_close=True)  # HTTP/1.0: closed after
    assert old.startswith(b"HTTP/1.1 200 OK") and old.endswith(HEALTH_BODY)


def test_other_paths_and_methods_still_reach_the_app(server):
    with socket.create_connection(("127.0.0.1", server), timeout=1) as s:
        s.sendall(b"POST /healthz HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n")
        with pytest.raises(socket.timeout):  # the stuck app has it: no answer from the protocol
            s.recv(100)
