"""Write a sizing report folder: ``index.html`` (self-contained), ``report.md``, ``floors.json`` and PNG figures."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from advisor import jsonout
from advisor.errors import DataError
from advisor.floors import FloorSettings
from advisor.report.data import collect
from advisor.report.decision import DEFAULT_VOLUME, decide
from advisor.report.plots import all_plots
from advisor.report.render import to_html, to_json, to_markdown


@dataclass
class ReportFiles:
    """Where a report was written."""

    folder: Path
    html: Path
    markdown: Path
    json: Path
    simulated: bool
    decision: Any = None  #: the first screen's content (`advisor.report.decision.Decision`)


def default_name(suite: str, ladder: str | None = None) -> str:
    """The report folder of a suite on a ladder, ``<suite>-<ladder>``: the same folder each time (a new report
    overwrites the last one; `advisor report --name` keeps another)."""
    return f"{suite}-{ladder}" if ladder else suite


def write_report(store, out: str | Path = "reports", name: str | None = None, suite: str | None = None,
                 settings: FloorSettings | None = None, classes: Sequence[str] | None = None,
                 volumes: dict[str, int] | None = None, default_volume: int | None = None) -> ReportFiles:
    """Collect the report's content from `store` and write ``<out>/<name>/``; return the files.

    `volumes` gives usable results per month for some classes; the others assume `default_volume`
    (`advisor.report.decision.DEFAULT_VOLUME` when None), and the page says so.
    """
    data = collect(store, suite, settings, classes, volumes)
    dec = decide(data, volumes, DEFAULT_VOLUME if default_volume is None else default_volume)
    prices = rung_prices(store, data)
    ladders = sorted({lad["ladder_name"] for lad in data.provenance.get("ladders", []) if lad.get("ladder_name")})
    name = name or default_name(data.suite, ladders[0] if len(ladders) == 1 else None)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise DataError(f"report name {name!r}: use letters, digits, '.', '_' and '-' only")
    folder = Path(out) / name
    folder.mkdir(parents=True, exist_ok=True)
    images = all_plots(data)
    for old in folder.glob("*.png"):  # the folder is reused: no figure of an earlier report stays behind
        old.unlink()
    for key, png in images.items():
        (folder / f"{key}.png").write_bytes(png)
    title = f"Sizing report: {data.suite}"
    html_path, md_path, json_path = folder / "index.html", folder / "report.md", folder / "floors.json"
    html_path.write_text(to_html(data, dec, images, title, prices), encoding="utf-8")
    md_path.write_text(to_markdown(data, dec, title, {k: f"{k}.png" for k in images}, prices), encoding="utf-8")
    json_path.write_text(jsonout.dumps(to_json(data, dec, prices), indent=2, default=str), encoding="utf-8")
    return ReportFiles(folder, html_path, md_path, json_path, data.simulated, dec)


def rung_prices(store, data) -> list[dict]:
    """Each rung's price as recorded with the ladder the runs used (empty when the ladder was not recorded)."""
    out = []
    for lad in data.provenance.get("ladders", []):
        config = store.ladder_config(lad["ladder_hash"]) or {}
        for rung in config.get("rungs", []):
            if rung.get("name") in data.rung_order:
                out.append({"rung": rung["name"], "ladder": lad["ladder_name"], "price": rung.get("price")})
    return out
