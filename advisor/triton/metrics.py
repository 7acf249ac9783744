"""Scraping and parsing Triton's Prometheus metrics (port 8002 by default)."""

from __future__ import annotations

import math

from advisor.errors import BackendError


async def scrape(url: str, timeout_s: float = 10.0, client=None) -> str:
    """GET the Prometheus text at `url` (``/metrics`` is appended when the path is empty); `client`: an
    ``httpx.AsyncClient`` to reuse (a poller's: building one loads the TLS trust store, milliseconds of CPU),
    else one for this call."""
    # heavy dependency, imported on use: httpx
    import httpx

    if "://" not in url:
        url = f"http://{url}"
    if url.rstrip("/").count("/") == 2:
        url = url.rstrip("/") + "/metrics"
    try:
        if client is not None:
            resp = await client.get(url, timeout=timeout_s)
        else:
            async with httpx.AsyncClient(timeout=timeout_s) as own:
                resp = await own.get(url)
    except httpx.HTTPError as exc:
        raise BackendError(f"cannot reach Triton metrics at {url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code != 200:
        raise BackendError(f"Triton metrics at {url} answered HTTP {resp.status_code}")
    return resp.text


def parse_prometheus(text: str) -> dict[str, float]:
    """Parse Prometheus text exposition into ``{series: value}``; series keep their labels as printed."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "}" in line:
            series, _, rest = line.rpartition("}")
            series += "}"
        else:
            series, _, rest = line.partition(" ")
        fields = rest.split()
        if not fields:
            continue
        try:
            out[series.strip()] = float(fields[0])
        except ValueError:
            out[series.strip()] = math.nan
    return out


def metric_total(metrics: dict[str, float], name: str, **labels: str) -> float:
    """Sum of every series of metric `name` whose labels include `labels` (0.0 when there is none)."""
    total = 0.0
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for series, value in metrics.items():
        base = series.split("{", 1)[0]
        if base == name and all(w in series for w in want) and not math.isnan(value):
            total += value
    return total
