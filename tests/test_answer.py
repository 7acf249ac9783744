"""The answer in one vocabulary everywhere: probe summary, `advisor floors` (text and --json), the report's
floors.json and report.md agree per class on one store; skipped classes are named with the reason and the fix;
every next line is runnable (`advisor probe --more CLASS`) or names a measurable change; a rerun that runs nothing
says so; progress lines when stderr is not a terminal; everything within 80 columns."""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO

import pytest

from advisor.cli import main

TASKS = ["api-refund-order", "api-create-invoice", "api-update-subscription", "docs-retention-business",
         "docs-backup-retention", "extract-invoice-email", "extract-cv", "code-slugify"]
NO_BWRAP = "bubblewrap (bwrap) is not installed or not on PATH"


def _no_sandbox(monkeypatch):
    import advisor.probe.session as session
    import advisor.tools.sandbox as sandbox

    monkeypatch.setattr(sandbox, "sandbox_status", lambda: (None, NO_BWRAP))
    monkeypatch.setattr(session, "sandbox_status", lambda: (None, NO_BWRAP))


def _rows(text: str, classes) -> dict[str, str]:
    """Answer-table rows by class (a wide terminal: one line per row)."""
    answer = text[text.index("The answer, per class"):]
    return {m.group(1): m.group(0) for m in re.finditer(r"^ (\w+)\s{2,}(?!plan).*$", answer, re.M)
            if m.group(1) in classes}


def _describe(plan: dict) -> str:
    return ", then ".join(f"{s['rung']} x{s['attempts']}" for s in plan["steps"])


def _pct(plan: dict) -> str:
    lo, hi = plan["interval"]
    return f"{100 * plan['usable']:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]"


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """One adaptive probe of a few example tasks on the embedded stand-ins, without a sandbox (the code task and
    whole classes skipped); its stdout at 160 and 80 columns and stderr."""
    mp = pytest.MonkeyPatch()
    base = tmp_path_factory.mktemp("answer")
    mp.chdir(base)
    _no_sandbox(mp)
    db = base / "a.duckdb"
    args = ["probe", "--store", str(db), "--replicas", "2", *[a for t in TASKS for a in ("--task", t)]]
    out, err = StringIO(), StringIO()
    mp.setenv("COLUMNS", "160")
    with redirect_stdout(out), redirect_stderr(err):  # in-process: the sandbox patch must apply
        code = main(args)
    assert code == 0, err.getvalue()
    yield base, db, out.getvalue(), err.getvalue(), mp
    mp.undo()


@pytest.mark.triton
@pytest.mark.slow
def test_probe_floors_and_report_agree_per_class(probed, capsys):
    base, db, out, err, mp = probed
    doc = json.loads(next((base / "reports").glob("*/floors.json")).read_text())
    decision = {c["task_class"]: c for c in doc["decision"]["classes"]}
    skipped = {k["task_class"]: k for k in doc["decision"]["skipped"]}
    assert {"code_change", "multi_step"} <= set(skipped) and "sandbox" in skipped["code_change"]["short"]
    code = skipped["code_change"]
    assert "bubblewrap" in code["reason"] and "apt-get install bubblewrap" in code["fix"]
    classes = set(decision) | set(skipped)
    probe_rows = _rows(out, classes)
    assert main(["floors", "--store", str(db)]) == 0
    floors_text = capsys.readouterr().out
    floors_rows = _rows(floors_text, classes)
    assert main(["floors", "--store", str(db), "--json"]) == 0
    fj = json.loads(capsys.readouterr().out)
    plans = {(p["task_class"], p["condition"]): p for p in fj["plans"]}
    md = next((base / "reports").glob("*/report.md")).read_text()
    assert set(probe_rows) == set(floors_rows) == classes, (probe_rows, floors_rows)
    assert {k["task_class"] for k in fj["skipped"]} == set(skipped)
    assert all("recommended" not in cf for cf in fj["classes"]) and "recommended:" not in floors_text
    for cls, c in decision.items():
        o = c["chosen"]
        p = plans[(cls, o["condition"])]
        shown = p["plan"] or p["best"]
        md_row = next(line for line in md.splitlines() if line.startswith(f"| {cls} |"))
        for row in (probe_rows[cls], floors_rows[cls], md_row):
            assert _describe(shown) in row and _pct(shown) in row, (cls, row)
            assert ("none clears" in row) == (p["plan"] is None), row
        assert (o["plan"] or o["best_plan"]) == _describe(shown)
        single = o["floor"] or "none"
        assert re.search(rf"\b{re.escape(single)}\b", probe_rows[cls].split("]")[-1]), probe_rows[cls]
        cond = "with skill" if o["condition"] == "skill" else "no skill"  # one name for a condition everywhere
        assert f"({cond})" in probe_rows[cls] and f"({cond})" in md_row
        lines = floors_text.splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{cls} [{cond}]"))
        header = lines[at]
        assert f"plan: {'none clears yet (best: ' if p['plan'] is None else ''}{_describe(shown)}, {_pct(shown)}" \
            in header and "single attempt: " in header
        rows = lines[at + 2:next(i for i in range(at, len(lines)) if lines[i].startswith("  note:"))]
        for step in (p["plan"] or {}).get("steps", []) if isinstance(p["plan"], dict) else []:
            row = next(r for r in rows if r.split()[0] == step["rung"])
            assert f"in the plan (x{step['attempts']})" in row and "below" not in row, row  # never "below"
        for row in rows:
            if "usable too rarely" not in row and "poor results" in row:
                mean = float(row.split("mean overall ")[1].split(",")[0].split()[0])
                assert mean < 75, row  # a rung above the bar is never "poor results"
    for cls in skipped:
        for text in (probe_rows[cls], floors_rows[cls]):
            assert "skipped: " in text
        assert f"next for {cls}: skipped: " in out.replace("\n", " ") or f"next for {cls}: skipped:" in out
        assert re.search(rf"\| {cls} \| skipped: ", md)
    assert "Per rung, tasks with a skill (0)" not in out


@pytest.mark.triton
@pytest.mark.slow
def test_output_fits_80_columns_and_next_lines_are_runnable(probed, capsys, monkeypatch):
    base, db, out, err, mp = probed
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["probe", "--store", str(db), "--replicas", "2", "--no-report",
                 *[a for t in TASKS for a in ("--task", t)]]) == 0
    captured = capsys.readouterr()
    assert "adaptive probing: nothing new to run" in captured.err and "0 runs in 0 waves" not in captured.err
    assert "saved 100%" not in captured.err
    for line in captured.out.splitlines():  # the tables and the answer (stderr's one-line notes may be longer)
        assert len(line) <= 80, line
    nexts = " ".join(captured.out.split()).split("next for ")[1:]
    assert nexts
    for n in nexts:
        n = n.split(" plan: the recommendation")[0]
        assert (re.search(r"`advisor probe (--\w+ \S+ )*--more \w+`", n) or "a verifier that accepts >=" in n
                or "usable >= " in n
                or "use the skill" in n or "apt-get install bubblewrap" in n or "`advisor probe" in n), n
        assert "a target of" not in n
    assert main(["floors", "--store", str(db)]) == 0
    text = capsys.readouterr().out
    answer = text[text.index("The answer, per class"):]
    assert all(len(line) <= 80 for line in answer.splitlines()), answer


@pytest.mark.triton
@pytest.mark.slow
def test_more_buys_runs_or_says_why_not(probed, capsys):
    base, db, out, err, mp = probed
    assert main(["floors", "--store", str(db), "--json"]) == 0
    fj = json.loads(capsys.readouterr().out)
    runs_before = fj["runs"]
    decided = [p["task_class"] for p in fj["plans"] if p["plan"] is not None]
    waiting = [p["task_class"] for p in fj["plans"] if p["next_kind"] == "more_runs" and p["plan"] is None
               and p["task_class"] not in decided]  # a class decided in one condition has nothing to buy
    probe = ["probe", "--store", str(db), "--no-report", *[a for t in TASKS for a in ("--task", t)]]
    if decided:
        assert main([*probe, "--more", decided[0]]) == 0
        said = capsys.readouterr()
        assert f"--more {decided[0]}: nothing to buy: its plan " in said.err
    assert main([*probe, "--more", "extraction", "--more", "api_calls", "--more", "doc_retrieval"]) == 0
    said = capsys.readouterr()
    assert all(f"--more {c}:" in said.err for c in ("extraction", "api_calls", "doc_retrieval"))
    assert main(["floors", "--store", str(db), "--json"]) == 0
    after = json.loads(capsys.readouterr().out)
    if waiting:  # the runs it named were bought: the store grew and the answer moved
        assert after["runs"] > runs_before
        assert [p for p in after["plans"] if p["task_class"] in waiting] != \
            [p for p in fj["plans"] if p["task_class"] in waiting]
    assert main(["floors", "--store", str(db)]) == 0  # the printed command runs as printed
    printed = re.search(r"`(advisor probe --store \S+ --more \w+)`", " ".join(capsys.readouterr().out.split()))
    if printed:
        assert main([*shlex.split(printed.group(1))[1:], "--no-report"]) == 0
        assert "--more " in capsys.readouterr().err
    assert main([*probe, "--more", "nosuchclass"]) != 0
    assert "no class 'nosuchclass'" in capsys.readouterr().err


def test_progress_lines_when_not_on_a_terminal():
    """Not on a terminal: a line at every wave and one at least every `every_s` seconds even while no run ends."""
    from advisor.cli.probe_cmd import _Progress

    lines: list[str] = []

    class Sink:
        def print(self, text, **kw):
            lines.append(text)

    bar = _Progress(Sink(), every_s=0.05, tty=False, adaptive=True)
    bar.start(100, "embedded")
    bar.on_wave(1, [object()] * 10)
    time.sleep(0.2)  # a slow run: nothing finishes, the timer still reports
    ticks = [line for line in lines if "runs done (" in line]
    assert len(ticks) >= 2 and ticks[0].startswith("probe: 0 runs done (at most 100) (wave 1: 0/10)")

    class Done:
        status, record, spec = "done", None, None

    for _ in range(4):
        bar.advance(Done())
    time.sleep(0.1)
    bar.stop()
    assert lines[0].startswith("probe: wave 1: 10 runs")
    assert any("4 runs done" in line and "left in this wave" in line for line in lines), lines
    n = len(lines)
    time.sleep(0.1)
    assert len(lines) == n and not any(t.name == "probe-progress" for t in threading.enumerate())


def test_wave_time_left_follows_the_slowest_lane():
    """Two rungs side by side, one slot each: the small one's runs take 1 s, the large one's 4 s. Read every
    half second, the estimate is the true time left (the large rung's) once the large rung has finished a run,
    and a lower bound before; one overall rate (runs done over the wave's time) promised 12 s at 4 s, where 36 s
    were left, and rose from there as the small rung's runs ran out."""
    from advisor.cli.probe_cmd import wave_time_left

    finish = {"small": [float(t) for t in range(1, 11)], "large": [4.0 * k for k in range(1, 11)]}
    lanes = {name: [10, 0, 0.0] for name in finish}
    for tick in range(1, 80):
        now = tick / 2
        for name, times in finish.items():
            done = [t for t in times if t <= now]
            lanes[name][1:] = [len(done), max(done, default=0.0)]
        left, bound = wave_time_left(now, lanes)
        if now < 1:
            assert left is None
        elif now < 4:
            assert bound and left == pytest.approx(10 - int(now) - (now - int(now)))  # the small rung's
        else:
            assert not bound and left == pytest.approx(40 - now), now
    lanes["large"][1:] = [10, 40.0]
    assert wave_time_left(40.5, lanes) == (None, False)


def test_floors_columns_line_up_for_long_rung_names(tmp_path, capsys):
    """`advisor floors` on a ladder with `qwen2.5-coder-1.5b`: every row's columns start where the header's do."""
    from advisor.store import Store
    from synthetic import make_run

    rungs = ("smollm2-135m", "qwen2.5-coder-1.5b")
    runs = [make_run("two_tools", f"t{i}", rung, "baseline", rep, overall=90.0 if rung == rungs[1] else 10.0,
                     rungs=rungs) for i in range(4) for rung in rungs for rep in range(3)]
    with Store.open(tmp_path / "cpu.duckdb") as s:
        s.add_runs_bulk(runs)
    assert main(["floors", "--store", str(tmp_path / "cpu.duckdb")]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("rung "))
    rows = [line for line in lines if line.lstrip().startswith(rungs)]
    assert len(rows) == 2
    for row in rows:
        # the runs column is right-aligned under its header: both end at the same position
        assert row.index(" 12 ") + 3 == header.index("runs") + len("runs"), (header, row)
        assert row.split()[0] in rungs


def test_frontier_has_no_empty_axis_and_no_negative_rates(tmp_path, monkeypatch):
    """A class without a usable run says so instead of an x axis around $0; no y axis runs below 0."""
    from advisor.report import open_store, plots
    from advisor.report.data import collect
    from advisor.store import Store
    from synthetic import make_run

    runs = [make_run(cls, f"{cls}-{i}", rung, "baseline", rep, overall=(90.0 if cls == "ok" and rung != "small"
                                                                        else 10.0))
            for cls in ("ok", "never") for i in range(4) for rung in ("small", "mid", "large") for rep in range(3)]
    with Store.open(tmp_path / "f.duckdb") as s:
        s.add_runs_bulk(runs)
    figs = []
    monkeypatch.setattr(plots, "_png", lambda fig: figs.append(fig) or b"")
    with open_store(tmp_path / "f.duckdb") as s:
        plots.frontier(collect(s))
    axes = {ax.get_title(): ax for ax in figs[0].axes if ax.get_visible()}
    assert set(axes) == {"ok", "never"}
    assert all(ax.get_ylim()[0] >= 0 for ax in axes.values())
    assert not list(axes["never"].get_xticks()) and any("no usable run" in t.get_text() for t in axes["never"].texts)
    assert list(axes["ok"].get_xticks()) and axes["ok"].get_xlim()[0] >= 0
    labels = [t.get_text() for t in axes["ok"].texts]
    assert any(" x" in label for label in labels), labels  # the plan is drawn beside the single attempts


def test_report_reuses_its_suite_and_ladder_folder(tmp_path):
    """Two reports of one store write one folder, `<suite>-<ladder>`, the second overwriting the first."""
    from advisor.report import open_store, write_report
    from advisor.store import Store
    from synthetic import demo_oracle

    with Store.open(tmp_path / "r.duckdb") as s:
        s.add_runs_bulk(demo_oracle().full_grid(replicas=1))
    with open_store(tmp_path / "r.duckdb") as s:
        first = write_report(s, tmp_path / "reports")
        (first.folder / "stale.png").write_bytes(b"x")
        second = write_report(s, tmp_path / "reports")
    assert first.folder == second.folder and first.folder.name == "synth-synthladder"
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["synth-synthladder"]
    assert not (second.folder / "stale.png").exists()


def test_summary_without_skills_has_no_empty_table_and_fits_80_columns():
    """A suite whose tasks have no skill (the CPU ladder's tiny suite): the per-rung table shows every task, not an
    all-dash 'tasks with a skill (0)' table; both tables fit 80 columns with long rung names."""
    from dataclasses import asdict

    from rich.console import Console

    from advisor.probe.summary import Cell, render

    full = asdict(Cell(runs=6, tc=80.0, if_=70.0, overall=74.3, usable=0.5, near_zero=0.1, cost_per_task=0.0,
                       turns=2.5))
    empty = asdict(Cell())
    rungs = ["smollm2-135m", "qwen2.5-coder-1.5b"]
    summary = {"suite": "tiny", "ladder": "cpu", "simulated": False, "runs": 12, "unscored": 0, "bar": 75,
               "near_zero": 25, "paired_tasks": 0,
               "rungs": [{"rung": r, "all_baseline": full, "paired_baseline": empty, "paired_skill": empty}
                         for r in rungs],
               "classes": [{"class": c, "rung": r, "baseline": full, "skill": empty}
                           for c in ("json_answer", "two_tools") for r in rungs]}
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    render(summary, console)
    text = console.export_text()
    assert "(0)" not in text and "every task (none has a skill)" in text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "74.3" in text and "qwen2.5-coder-1.5b" in text and " with " not in text


def test_printed_commands_name_this_advisor_when_its_venv_is_not_active(monkeypatch, tmp_path):
    """With `advisor` not on PATH (the venv not activated), a next step names this advisor's own script, so it runs
    as printed; with it on PATH, plain `advisor`."""
    import sys
    from pathlib import Path

    from advisor.report.answer import advisor_command

    script = Path(sys.executable).parent / "advisor"
    monkeypatch.setenv("PATH", str(tmp_path))
    shown = advisor_command()
    assert Path(shown).resolve() == script.resolve()
    monkeypatch.setenv("PATH", str(script.parent))
    assert advisor_command() == "advisor"
