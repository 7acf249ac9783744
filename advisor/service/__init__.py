"""The routing service: an OpenAI-compatible HTTP front for the ladder's rungs on Triton (``advisor serve``).

Sub-packages by concern, lowest first (each imports only those before it): `api` (the request accepted, its
tools and bounds, messages to a rung's prompt and back), `checks` (is a reply a usable step), `sessions` (the
latch and its signals), `routing` (decide, walk the attempts: retry, escalate, fail over), `records` (segments,
shipping, capture, metrics), `process` (one worker's runtime, config, keys) and `http` (the routes, the response,
streaming). `launch` starts it all (``advisor serve``). A live request reads top to bottom in `http.app`.
"""
