"""The one place clients are built: `client_for(model, ...)` for one ladder model, `BackendPool` for many.

The rung's ``backend:`` (default ``triton``) picks the registered `BackendKind`; its endpoint is, in order, the
caller's override for that model (``urls``: ``--url``, an embedded server), the rung's ``url``, the ladder's.
A pool shares one client per (backend, endpoint) for shared backends (Triton: one gRPC channel per server) and
keeps one per model otherwise, and closes them all.
"""

from __future__ import annotations

import contextlib
from typing import Any

from advisor.backends.base import BACKENDS, BackendKind, BackendOptions, ModelBackend


def backend_name(model: Any) -> str:
    """The backend a ladder model names (``triton`` when it names none)."""
    return getattr(model, "backend", None) or "triton"


def backend_kind(model: Any) -> BackendKind:
    """The registered backend of a ladder model: its capabilities (`BackendKind`), read instead of its name."""
    return BACKENDS.get(backend_name(model))


def endpoint_of(model: Any, ladder: Any = None, url: str | None = None) -> str:
    """Where `model` is reached: `url` when given, else its own ``url``, else the ladder's."""
    if url:
        return url
    if getattr(model, "url", None):
        return model.url
    if ladder is not None:
        return ladder.url_of(model) if hasattr(ladder, "url_of") else ladder.url
    raise ValueError(f"model {getattr(model, 'name', model)!r} has no endpoint: give its url or the ladder")


def client_for(model: Any, ladder: Any = None, *, url: str | None = None,
               options: BackendOptions | None = None) -> ModelBackend:
    """A new client for `model` (a ladder rung or role) through its registered backend (the caller closes it)."""
    kind = BACKENDS.get(backend_name(model))
    return kind.create(endpoint_of(model, ladder, url), model, options or BackendOptions())


class BackendPool:
    """Clients for the models of one ladder, built on first use and closed together.

    `urls` overrides endpoints per model name (an embedded Triton, ``--url``); `url` overrides every one.
    """

    def __init__(self, ladder: Any = None, *, urls: dict[str, str] | None = None, url: str | None = None,
                 options: BackendOptions | None = None):
        self.ladder = ladder
        self.urls = dict(urls or {})
        self.url = url
        self.options = options or BackendOptions()
        self._clients: dict[tuple, ModelBackend] = {}

    def endpoint(self, model: Any) -> str:
        """The endpoint `model` is reached at through this pool."""
        return endpoint_of(model, self.ladder, self.url or self.urls.get(getattr(model, "name", "")))

    def __call__(self, model: Any) -> ModelBackend:
        """The client of `model` (the same object for every model a shared backend serves at one endpoint)."""
        name = backend_name(model)
        kind = BACKENDS.get(name)
        endpoint = self.endpoint(model)
        key = (name, endpoint) if kind.shared else (name, endpoint, getattr(model, "name", ""))
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = kind.create(endpoint, model, self.options)
        return client

    def connections(self) -> dict[str, tuple[int, int]]:
        """Per model with a client of its own that reports them (the ``openai`` backend's `connections`): its
        (open, busy) upstream connections."""
        return {key[2]: client.connections() for key, client in self._clients.items()
                if len(key) == 3 and hasattr(client, "connections")}

    async def close(self) -> None:
        """Close every client (best effort); the pool can be used again afterwards."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):
                await client.close()

    async def __aenter__(self) -> "BackendPool":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
