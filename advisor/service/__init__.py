"""The routing service: an OpenAI-compatible HTTP front for the ladder's rungs on Triton (``advisor serve``).

Modules, one concept each: `request` (what is accepted), `chat` (messages to a rung's prompt and back),
`config` (the service config file), `auth` (API keys), `attempts` (one call of a rung and its verdict),
`dispatch` (decide, walk the chain: retry, escalate, fail over), `response` (OpenAI's shapes, headers, usage),
`streaming` (SSE), `recording` (segments and ingest), `metrics`
(Prometheus), `runtime` (one worker's state), `app` (the Starlette routes) and `launch` (``advisor serve``).
"""
