"""Render the report's index.html in headless Chromium: no console errors, and a non-blank screenshot.

Skipped (with the reason) when no Chromium is on PATH; CI installs it (`apt-get install -y chromium`).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.report import open_store, write_report
from advisor.store import Store
from synthetic import demo_oracle

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="headless Chromium is not installed (no `chromium`, "
                                "`chromium-browser` or `google-chrome` on PATH); install it with "
                                "`apt-get install -y chromium` to render the report")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0"]


def _render(html: Path, tmp_path: Path, width: int = 1280, height: int = 1600) -> tuple[Path, str]:
    shot = tmp_path / "shot.png"
    proc = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}",
                           f"--window-size={width},{height}", html.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    return shot, proc.stderr


def _console_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if ":CONSOLE" in line or "Failed to load resource" in line]


def test_console_check_catches_errors(tmp_path):
    # the check below is only worth something if it sees a console error when there is one
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body>x<script>console.error('boom')</script></body></html>")
    _, log = _render(bad, tmp_path)
    assert any("boom" in line for line in _console_lines(log))


def test_report_renders_without_console_errors(tmp_path):
    from PIL import Image

    store = tmp_path / "s.duckdb"
    with Store.open(store) as s:
        s.add_runs_bulk(demo_oracle(simulated=True).full_grid(replicas=2))
    with open_store(store) as s:
        files = write_report(s, tmp_path / "reports", "chromium", volumes={"lookup": 10000})
    shot, log = _render(files.html, tmp_path)
    assert _console_lines(log) == []
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 1600)
    colors = img.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50  # text, tables and plots, not a blank page
    # the red SIMULATED banner is at the top of the page
    top = img.crop((0, 0, 1280, 200))
    red = sum(n for n, (r, g, b) in top.getcolors(maxcolors=1 << 20) if r > 150 and g < 40 and b < 60)
    assert red > 5000


@pytest.mark.triton
@pytest.mark.slow
def test_probe_writes_a_report_that_renders(tmp_path, monkeypatch, capsys):
    """`advisor probe` (embedded Triton, stand-ins) leaves reports/<name>/index.html, which renders cleanly."""
    from advisor.cli import main
    from synthetic import TINY_SUITE

    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.yaml").write_text(TINY_SUITE)
    ladder = Path(__file__).resolve().parent.parent / "ladders" / "demo.yaml"
    assert main(["probe", "--full-grid", "--suite", "suite.yaml", "--ladder", str(ladder), "--store", "p.duckdb",
                 "--replicas", "2", "--json"]) == 0
    assert "report written: reports/" in capsys.readouterr().err.replace("\n", "")
    pages = list((tmp_path / "reports").glob("*/index.html"))
    assert len(pages) == 1 and (pages[0].parent / "floors.json").exists()
    assert 'id="simulated-banner"' in pages[0].read_text()
    shot, log = _render(pages[0], tmp_path)
    assert _console_lines(log) == []
