"""Sizing reports: a folder with a self-contained ``index.html``, ``report.md`` and ``floors.json``.

`collect` gathers the content from a store (`data`), `plots` draws the figures (matplotlib, lazily), `render`
turns both into HTML, Markdown and JSON, and `write_report` writes the folder.
"""

from advisor.report.build import ReportFiles, default_name, write_report
from advisor.report.data import ReportData, collect, open_store, parse_volumes

__all__ = ["ReportData", "ReportFiles", "collect", "default_name", "open_store", "parse_volumes", "write_report"]
