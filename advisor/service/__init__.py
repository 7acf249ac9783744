"""The routing service: an OpenAI-compatible HTTP front for the ladder's rungs on Triton (``advisor serve``).

Modules, one concept each: `request` (what is accepted), `chat` (messages to a rung's prompt and back),
`config` (the service config file), `auth` (API keys), `verification` (verifiers), `dispatch` (decide, call,
verify, retry, escalate, fail over), `streaming` (SSE), `recording` (segments and ingest), `metrics`
(Prometheus), `runtime` (one worker's state), `app` (the Starlette routes) and `launch` (``advisor serve``).
"""

from advisor.service.config import ServiceConfig, load_config
from advisor.service.launch import ServeOptions, serve
from advisor.service.recording import ingest, spool_for

__all__ = ["ServiceConfig", "load_config", "ServeOptions", "serve", "ingest", "spool_for"]
