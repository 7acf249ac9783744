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
    # a rerun (everything stored) without --json ends with the per-class answer and the report's path
    assert main(["probe", "--full-grid", "--suite", "suite.yaml", "--ladder", str(ladder), "--store", "p.duckdb",
                 "--replicas", "2"]) == 0
    out = capsys.readouterr().out
    assert "The answer, per class [SIMULATED]" in out and "report: reports/" in out.replace("\n", "")


#: Test-only probe appended to a copy of the page (the report itself has no scripts): it measures where things
#: are at a 1280x900 window and writes the findings into the DOM, which --dump-dom prints.
PROBE = """<script>
const r = {};
const answer = document.querySelector('#answer table');
r.answerText = answer ? answer.innerText : '';
const total = document.querySelector('#total');
r.totalText = total ? total.innerText : '';
r.totalBottom = total ? total.getBoundingClientRect().bottom : 1e9;
r.nextBottom = document.querySelector('#next').getBoundingClientRect().bottom;
r.terms = [...document.querySelectorAll('#glossary dt')].map(e => e.innerText);
r.figures = [...document.querySelectorAll('figure')].map(f => f.innerText.includes('SIMULATED'));
r.tables = [...document.querySelectorAll('section.tbl')].map(s => [s.id, s.querySelector('h2').innerText]);
const pre = document.createElement('pre'); pre.id = 'probe-result'; pre.textContent = JSON.stringify(r);
document.body.appendChild(pre);
</script>"""


def _measure(html: Path, tmp_path: Path) -> dict:
    import json
    import re

    probe = tmp_path / "probe.html"
    probe.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}", "--window-size=1280,900",
                           "--dump-dom", probe.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="probe-result">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    import html as html_lib

    return json.loads(html_lib.unescape(m.group(1)))


def test_first_screen_gives_the_answer(tmp_path):
    """At 1280x900 the first screen holds each class's plan and its interval and the total; glossary; SIMULATED."""
    import json

    store = tmp_path / "s.duckdb"
    with Store.open(store) as s:
        s.add_runs_bulk(demo_oracle(simulated=True).full_grid(replicas=3))
    with open_store(store) as s:
        files = write_report(s, tmp_path / "reports", "first", volumes={"lookup": 20000})
    doc = json.loads(files.json.read_text())
    got = _measure(files.html, tmp_path)
    for c in doc["decision"]["classes"]:
        o = c["chosen"]
        lo, hi = o["plan_interval"]
        assert c["task_class"] in got["answerText"]
        assert f"{o['plan'] or o['best_plan']} (" in got["answerText"]
        assert f"{100 * o['plan_usable']:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]" in got["answerText"]
    assert got["totalText"].startswith("Total: $") and "always running large" in got["totalText"]
    assert got["totalBottom"] <= 900 and got["nextBottom"] <= 900  # the answer and what to do next: first screen
    for term in ("skill", "IF", "TC", "overall", "usable", "near-zero", "floor", "decided", "points/$",
                 "usable first time", "cost per usable result", "SIMULATED"):
        assert term in got["terms"], term
    assert len(got["figures"]) == 3 and all(got["figures"])
    assert got["tables"] and all("SIMULATED" in title for key, title in got["tables"]
                                 if key not in ("gaps", "unscored", "prices")), got["tables"]


def _dom(html: Path, tmp_path: Path) -> str:
    proc = subprocess.run([BROWSER, *FLAGS, f"--user-data-dir={tmp_path / 'dom-profile'}", "--dump-dom",
                           html.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert "<body" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def test_a_manager_reads_the_plan_in_each_class_heading_and_no_cli_flag_in_the_prose(tmp_path):
    """As Chromium renders it: every per-class table names the class's plan in its heading and never calls a rung
    the plan uses "below"; no bare command-line flag in the prose (commands are written whole, in code). The
    screenshots of the first screen and of the figures are kept in docs/ by `python tests/test_report_chromium.py`."""
    import re

    store = tmp_path / "s.duckdb"
    with Store.open(store) as s:
        s.add_runs_bulk(demo_oracle(simulated=True).full_grid(replicas=3))
    with open_store(store) as s:
        files = write_report(s, tmp_path / "reports", "manager")
    dom = _dom(files.html, tmp_path)
    text = re.sub(r"<code>.*?</code>", "", dom, flags=re.S)
    text = re.sub(r"`[^`]*`", "", re.sub(r"<[^>]+>", " ", text))  # a command written whole, in backticks
    headings = re.findall(r"\(no skill\): plan [^;]+;|\(with skill\): plan [^;]+;", text)
    assert headings, "no per-class heading names its plan"
    assert not re.search(r"(?<![\w`-])--[a-z][a-z-]+", text), re.findall(r".{40}(?<![\w`-])--[a-z][a-z-]+.{20}", text)
    for row in re.findall(r"<tr>.*?</tr>", dom, flags=re.S):
        if "in the plan (x" in row:
            assert ">below:" not in row, row


if __name__ == "__main__":  # refresh the screenshots in docs/ (the demo probe's report, as Chromium shows it)
    import sys
    import tempfile

    out = Path(__file__).resolve().parent.parent / "docs"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(sys.argv[1] if len(sys.argv) > 1 else "reports/example-demo/index.html")
        shot, _ = _render(report, Path(tmp), 1280, 900)
        shutil.copy(shot, out / "report-first-screen.png")
        for name in ("frontier", "turns"):
            shutil.copy(report.parent / f"{name}.png", out / f"report-{name}.png")
