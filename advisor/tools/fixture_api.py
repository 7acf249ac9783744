"""The fixture HTTP API, served in-process per episode, and the http_request tool.

Each task lists its routes (`fixtures.api`). Requests go to ``API_BASE`` (or a bare path such as
``/v1/invoices``); any other host is refused, so no request ever leaves the process. Every request that
reaches the API is recorded in the episode's ``api_log`` with its method, path, query, headers (names in
lower case), JSON body and the status returned, which is what `state` checks read afterwards.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from advisor.tools.base import ToolError, ToolSpec, object_schema, register_tool

API_BASE = "https://api.example.test"  #: the only host the http_request tool reaches
_API_HOST = urlsplit(API_BASE).netloc
MAX_BODY_CHARS = 100_000


def header_matches(expected: str, actual: str | None) -> bool:
    """A header value matches when it equals `expected` or fully matches it as a regex (used by the fixture
    API's required headers and by the state checks alike)."""
    if actual is None:
        return False
    if actual == expected:
        return True
    try:
        return re.fullmatch(expected, actual) is not None
    except re.error:
        return False


class FixtureApi:
    """The task's routes plus the log of every request received."""

    def __init__(self, routes, log: list[dict[str, Any]]):
        self.routes = list(routes)
        self.log = log

    def _match(self, method: str, path: str):
        allowed = []
        for route in self.routes:
            if route.path.startswith("^"):
                hit = re.fullmatch(route.path, path) is not None
            else:
                hit = route.path.rstrip("/") == path.rstrip("/")
            if hit:
                if route.method.upper() == method:
                    return route, allowed
                allowed.append(route.method.upper())
        return None, allowed

    def handle(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: Any) -> tuple[int, Any]:
        """Answer one request and record it; returns (status, JSON body)."""
        route, allowed = self._match(method, path)
        if route is None and allowed:
            status, response = 405, {"error": f"method {method} not allowed on {path}", "allowed": sorted(set(allowed))}
        elif route is None:
            status, response = 404, {"error": f"no route {method} {path}"}
        else:
            missing = [name for name, value in route.require_headers.items()
                       if not header_matches(value, headers.get(name.lower()))]
            if missing:
                status, response = 401, {"error": f"missing or invalid header(s): {', '.join(missing)}"}
            else:
                status, response = route.status, route.response
        self.log.append({"method": method, "path": path, "query": query, "headers": headers, "json": body,
                         "status": status})
        return status, response


@register_tool
class HttpRequest:
    """Send an HTTP request to the task's fixture API."""

    spec = ToolSpec(
        name="http_request",
        description=f"Send an HTTP request to the API at {API_BASE} (the only reachable host). "
        "Returns the status code and the JSON response body.",
        parameters=object_schema({
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "url": {"type": "string", "description": f"Full URL under {API_BASE}, or a path such as /v1/items."},
            "headers": {"type": "object", "additionalProperties": {"type": "string"},
                        "description": "Request headers."},
            "json": {"description": "JSON request body (for POST, PUT, PATCH)."},
        }, ["method", "url"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Route the request in-process and return ``{"status": ..., "body": ...}`` as JSON text."""
        url = arguments["url"].strip()
        parts = urlsplit(url)
        if parts.scheme or parts.netloc:
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != _API_HOST:
                raise ToolError(f"sandbox: network access refused: {parts.netloc or url!r} is not reachable; "
                                f"only the fixture API at {API_BASE} is")
        elif not url.startswith("/"):
            raise ToolError(f"url must be a full URL under {API_BASE} or a path starting with '/'")
        body = arguments.get("json")
        if body is not None and len(json.dumps(body)) > MAX_BODY_CHARS:
            raise ToolError(f"request body too large (limit {MAX_BODY_CHARS} characters)")
        headers = {str(k).lower(): str(v) for k, v in (arguments.get("headers") or {}).items()}
        query = dict(parse_qsl(parts.query))
        status, response = env.api.handle(arguments["method"].upper(), parts.path or "/", query, headers, body)
        return json.dumps({"status": status, "body": response}, ensure_ascii=False)

