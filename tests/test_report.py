"""The sizing report: every table number equals a query over the store; banner iff simulated; clear errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from synthetic import demo_oracle, make_run

from advisor.cli import main
from advisor.errors import AdvisorError, DataError, StoreError
from advisor.floors import FloorSettings
from advisor.report import open_store, parse_volumes, write_report
from advisor.money import usd as fmt_usd
from advisor.report.tables import fmt_score, fmt_share
from advisor.store import Store

WHERE = "suite_name = 'synth' AND policy = 'fixed' AND kind IN ('probe', 'imported')"


def _demo_store(path: Path, simulated: bool) -> Path:
    runs = demo_oracle(simulated=simulated).full_grid(replicas=3)
    runs += [make_run("lookup", "lookup-00", "mid", "baseline", 7, unscored=True, stop_reason="backend_error",
                      simulated=simulated),
             make_run("multi_step", "multi_step-03", "small", "skill", 7, unscored=True, stop_reason="timeout",
                      simulated=simulated)]
    # a task without a skill: baseline runs only (left out of the paired baseline -> skill table)
    runs += [make_run("lookup", "lookup-solo", rung, "baseline", rep, overall=o, simulated=simulated)
             for rung, o in (("small", 95.0), ("mid", 5.0), ("large", 50.0)) for rep in range(3)]
    with Store.open(path) as s:
        s.add_runs_bulk(runs)
    return path


@pytest.fixture(scope="module")
def sim_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("rep")
    store = _demo_store(base / "sim.duckdb", simulated=True)
    with open_store(store) as s:
        files = write_report(s, base / "reports", "sim", volumes={"lookup": 20000, "multi_step": 5000})
    return store, files


def _md_table(md: str, title_start: str) -> list[list[str]]:
    block = md.split(f"## {title_start}", 1)[1].split("\n## ", 1)[0]
    lines = [l for l in block.splitlines() if l.startswith("| ")]
    return [[c.strip() for c in re.split(r"(?<!\\)\|", l)[1:-1]] for l in lines[1:]]


def test_rung_table_equals_sql(sim_report):
    store, files = sim_report
    doc = json.loads(files.json.read_text())
    with Store.open(store, read_only=True) as s:
        want = s.query(f"""SELECT rung, condition, count(*) AS n,
                sum(CASE WHEN unscored THEN 1 ELSE 0 END) AS u,
                sum(tc_score) FILTER (WHERE NOT unscored) / count(tc_score) FILTER (WHERE NOT unscored) AS tc,
                sum(if_score) FILTER (WHERE NOT unscored) / count(if_score) FILTER (WHERE NOT unscored) AS ifs,
                sum(overall) FILTER (WHERE NOT unscored) / count(overall) FILTER (WHERE NOT unscored) AS ov,
                sum(cost_usd) / count(*) AS usd,
                count(*) FILTER (WHERE overall < 25) / count(overall) AS nz
            FROM runs WHERE {WHERE} AND task_id IN (SELECT task_id FROM runs WHERE condition = 'skill')
            GROUP BY rung, condition""")
    got = {(r["rung"], r["condition"]): r for r in doc["rung_table"]}
    assert doc["paired_tasks"] == 24
    assert len(got) == len(want) == 6
    for w in want:
        g = got[(w["rung"], w["condition"])]
        assert g["runs"] == w["n"] and g["unscored"] == w["u"]
        for gk, wk in (("goal_completion", "tc"), ("instruction_following", "ifs"), ("overall", "ov"),
                       ("usd_per_task", "usd"), ("near_zero_share", "nz")):
            assert g[gk] == pytest.approx(w[wk]), (w["rung"], w["condition"], gk)
    # the Markdown table shows the same numbers, formatted
    md_rows = {r[0]: r for r in _md_table(files.markdown.read_text(), "Per rung")}
    for rung in ("small", "mid", "large"):
        b, k = next(w for w in want if w["rung"] == rung and w["condition"] == "baseline"), \
            next(w for w in want if w["rung"] == rung and w["condition"] == "skill")
        assert md_rows[rung][3] == f"{fmt_score(b['ov'])} -> {fmt_score(k['ov'])}"
        assert md_rows[rung][4] == f"{fmt_usd(b['usd'])} -> {fmt_usd(k['usd'])}"
        assert md_rows[rung][5] == f"{fmt_share(b['nz'])} -> {fmt_share(k['nz'])}"
    # lift = skill - baseline
    lift = {r["rung"]: r for r in doc["lift"]}
    for rung in ("small", "mid", "large"):
        b = next(w for w in want if w["rung"] == rung and w["condition"] == "baseline")
        k = next(w for w in want if w["rung"] == rung and w["condition"] == "skill")
        assert lift[rung]["overall"] == pytest.approx(k["ov"] - b["ov"])


def test_floor_cells_equal_sql(sim_report):
    store, files = sim_report
    doc = json.loads(files.json.read_text())
    with Store.open(store, read_only=True) as s:
        want = {(r["task_class"], r["condition"], r["rung"]): r for r in s.query(f"""
            SELECT task_class, condition, rung, count(*) AS runs, count(*) FILTER (WHERE unscored) AS unscored,
                   count(*) FILTER (WHERE overall >= 75) AS usable, count(*) FILTER (WHERE overall < 25) AS nz,
                   count(*) FILTER (WHERE stop_reason IN ('max_turns','max_tokens','timeout','stuck','invalid_output'))
                       AS noconv,
                   avg(cost_usd) FILTER (WHERE NOT unscored AND overall IS NOT NULL) AS cpa, avg(overall) AS ov,
                   avg(turns) FILTER (WHERE overall >= 75) AS t_ok, avg(turns) FILTER (WHERE overall < 75) AS t_bad
            FROM runs WHERE {WHERE} GROUP BY ALL""")}
    seen = 0
    for cf in doc["floors"]["classes"]:
        for v in cf["rungs"]:
            c = v["stats"]
            w = want[(cf["task_class"], cf["condition"], c["rung"])]
            assert (c["runs"], c["unscored"], c["usable"], c["near_zero"], c["nonconverged"]) == \
                (w["runs"], w["unscored"], w["usable"], w["nz"], w["noconv"])
            assert c["cost_per_attempt"] == pytest.approx(w["cpa"])
            assert c["mean_overall"] == pytest.approx(w["ov"])
            assert c["usable_rate"] == pytest.approx(w["usable"] / (w["runs"] - w["unscored"]))
            if w["t_ok"] is not None:
                assert c["turns_success"] == pytest.approx(w["t_ok"])
            if w["t_bad"] is not None:
                assert c["turns_failure"] == pytest.approx(w["t_bad"])
            seen += 1
    assert seen == len(want) == 18
    assert want[("lookup", "baseline", "small")]["runs"] == 8 * 3 + 3  # the task without a skill counts here


def test_summary_and_gaps(sim_report):
    store, files = sim_report
    doc = json.loads(files.json.read_text())
    decision = {r["task_class"]: r for r in doc["decision"]["classes"]}
    lookup, multi = decision["lookup"], decision["multi_step"]
    assert lookup["chosen"]["rung"] == "mid" and multi["chosen"]["rung"] == "large"
    assert lookup["volume"] == 20000 and not lookup["volume_assumed"]
    assert lookup["monthly"] == pytest.approx(20000 * lookup["chosen"]["cost_per_usable"])
    assert lookup["monthly_largest"] > lookup["monthly"]
    # a class without --volume assumes the stated default volume
    assert decision["api_call"]["volume_assumed"] and decision["api_call"]["volume"] == doc["decision"]["default_volume"]
    # the total is the sum over classes, against always the largest rung
    assert doc["decision"]["total_monthly"] == pytest.approx(sum(c["monthly"] for c in decision.values()))
    assert doc["decision"]["total_monthly_largest"] == pytest.approx(
        sum(c["monthly_largest"] for c in decision.values()))
    # the decision's cost per usable result is the recommended rung's in floors.json
    for cf in doc["floors"]["classes"]:
        if cf["task_class"] == "lookup" and cf["condition"] == lookup["chosen"]["condition"]:
            v = next(v for v in cf["rungs"] if v["stats"]["rung"] == "mid")
            assert lookup["chosen"]["cost_per_usable"] == pytest.approx(v["cost_per_usable"])
    # gaps: per task mean overall, recomputed in Python from raw rows
    with Store.open(store, read_only=True) as s:
        rows = s.query(f"SELECT task_id, condition, rung, overall FROM runs WHERE {WHERE} AND NOT unscored")
    means: dict = {}
    for r in rows:
        means.setdefault((r["task_id"], r["condition"], r["rung"]), []).append(r["overall"])
    m = {k: sum(v) / len(v) for k, v in means.items()}
    order = ["small", "mid", "large"]
    want = {(t, c, a, b) for (t, c, a) in m for b in order
            if order.index(b) == order.index(a) + 1 and (t, c, b) in m and m[(t, c, a)] < 25 and m[(t, c, b)] >= 75}
    got = {(g["task_id"], g["condition"], g["smaller"], g["larger"]) for g in doc["gaps"]}
    assert got == want and len(got) > 10
    # unscored runs counted apart
    assert sum(u["runs"] for u in doc["unscored"]) == 2
    assert "Unscored runs (2, left out of every rate)" in files.html.read_text()


def test_html_self_contained_and_banner(sim_report, tmp_path):
    _, files = sim_report
    page = files.html.read_text()
    assert 'id="simulated-banner"' in page and "SIMULATED" in page
    assert "SIMULATED" in files.markdown.read_text()
    assert json.loads(files.json.read_text())["simulated"] is True
    assert page.count("data:image/png;base64,") == 3
    assert "<script" not in page
    for url in re.findall(r'(?:src|href)="([^"]*)"', page):
        assert url.startswith(("data:", "#")), url  # inline images and links within the page only
    # a store of real (non-simulated) runs gets no banner
    store = _demo_store(tmp_path / "real.duckdb", simulated=False)
    with open_store(store) as s:
        real = write_report(s, tmp_path / "reports", "real")
    assert "SIMULATED" not in real.html.read_text() and "SIMULATED" not in real.markdown.read_text()
    assert json.loads(real.json.read_text())["simulated"] is False


def test_settings_and_provenance_recorded(sim_report, tmp_path):
    store, _ = sim_report
    with open_store(store) as s:
        files = write_report(s, tmp_path, "strict", settings=FloorSettings(bar=85, target=0.9, k=2))
    doc = json.loads(files.json.read_text())
    assert doc["settings"]["bar"] == 85 and doc["settings"]["k"] == 2
    assert doc["provenance"]["ladders"] == [{"ladder_name": "synthladder", "ladder_hash": "ladderhash"}]
    assert doc["provenance"]["suite_hashes"] == ["suitehash-synth"]
    page = files.html.read_text()
    assert "overall &gt;= 85" in page and "ladderhash" in page


def test_parse_volumes():
    assert parse_volumes(["a=20000/month", "b = 1,500", "c=3_000"]) == {"a": 20000, "b": 1500, "c": 3000}
    with pytest.raises(DataError, match="expected CLASS=N"):
        parse_volumes(["a:20"])


def test_bad_inputs_give_one_line_messages(sim_report, tmp_path, capsys):
    store, _ = sim_report
    cases = [
        (["--store", str(tmp_path / "none.duckdb")], "no store here yet"),
        (["--store", str(store), "--suite-name", "synht"], "Did you mean 'synth'"),
        (["--store", str(store), "--class", "lookpu"], "no runs of class 'lookpu'"),
        (["--store", str(store), "--volume", "nosuch=10"], "does not have"),
        (["--store", str(store), "--volume", "lookup"], "expected CLASS=N"),
        (["--store", str(store), "--name", "../escape"], "report name"),
    ]
    empty = tmp_path / "empty.duckdb"
    Store.open(empty).close()
    cases.append((["--store", str(empty)], "no probe or imported runs"))
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    cases.append((["--store", str(junk)], "not a DuckDB store"))
    for args, msg in cases:
        assert main(["report", "--out", str(tmp_path / "r"), *args]) != 0, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and msg in err, (args, err)
        assert len(err.splitlines()) == 1


def test_older_schema_is_migrated_forward(tmp_path, capsys):
    # a DuckDB file from before the store had migrations: opening for a report migrates it, then says it is empty
    import duckdb

    old = tmp_path / "old.duckdb"
    con = duckdb.connect(str(old))
    con.execute("CREATE TABLE legacy (x INTEGER)")
    con.close()
    assert main(["report", "--store", str(old), "--out", str(tmp_path / "r")]) != 0
    assert "no probe or imported runs" in capsys.readouterr().err
    with Store.open(old, read_only=True) as s:
        assert s.applied_migrations()[0] == "m001_initial"


def test_cli_report_writes_folder(sim_report, tmp_path, capsys):
    store, _ = sim_report
    assert main(["report", "--store", str(store), "--out", str(tmp_path), "--name", "cli",
                 "--volume", "lookup=1000/month", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert Path(out["html"]).exists() and Path(out["json"]).exists() and Path(out["markdown"]).exists()
    assert main(["report", "--store", str(store), "--out", str(tmp_path), "--name", "cli2"]) == 0
    assert capsys.readouterr().out.startswith("SIMULATED")
    assert isinstance(AdvisorError("x"), Exception) and StoreError  # the hierarchy the CLI turns into messages


def test_runs_to_decide_uses_the_same_interval():
    from advisor.floors import wilson_interval
    from advisor.report.decision import runs_to_decide

    # 19/21 usable: undecided at 80% / 90%; the count is the first n whose lower bound clears at the same rate
    extra = runs_to_decide(19, 21, 0.8, 0.9)
    n = 21 + extra
    assert wilson_interval(round(19 / 21 * n), n, 0.9)[0] >= 0.8
    assert wilson_interval(round(19 / 21 * (n - 1)), n - 1, 0.9)[0] < 0.8
    # 14/21 below the target: the runs after which the upper bound drops under it
    extra = runs_to_decide(14, 21, 0.8, 0.9)
    assert wilson_interval(round(14 / 21 * (21 + extra)), 21 + extra, 0.9)[1] < 0.8
    assert runs_to_decide(0, 0, 0.8, 0.9) is None
    assert runs_to_decide(8, 10, 0.8, 0.9) is None  # sits on the target: never decides


def test_next_steps_are_the_classes_without_a_plan(sim_report):
    """Every class whose answer has no plan gets a next step (advisor.plans); a class with a plan needs no runs."""
    _, files = sim_report
    doc = json.loads(files.json.read_text())
    steps = doc["decision"]["next_steps"]
    without = {c["task_class"] for c in doc["decision"]["classes"] if c["chosen"]["plan"] is None}
    stepped = {s["task_class"] for s in steps if s["kind"] != "keep_skill"}
    assert stepped == without
    assert {p["task_class"] for p in doc["floors"]["plans"]} == {c["task_class"] for c in doc["decision"]["classes"]}
    page = files.html.read_text()
    for s in steps:
        assert s["text"].split(":")[0] in page


def test_frontier_helpers():
    from advisor.report.plots import _plt, place_labels

    plt = _plt()
    fig, ax = plt.subplots(figsize=(4, 3))
    items = [(1.0, 0.0, "nano-12b", "k"), (1.05, 0.0, "nano-12b", "k"), (1.1, 0.02, "nano-30b", "k"),
             (1.0, 1.0, "super-120b", "k"), (1.02, 0.98, "super-120b", "k")]
    ax.set_xlim(0.8, 1.4)
    ax.set_ylim(-0.2, 1.2)
    fig.canvas.draw()
    texts = place_labels(ax, items)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    assert len(boxes) == 5
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(fig)


def _renderer(fig):
    """A renderer of a figure that _png already closed (as it was saved)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    return fig.canvas.get_renderer()


def _figure_texts(monkeypatch, data, plot):
    """Draw `plot(data)` and return its figure and the rung labels placed on each panel."""
    from advisor.report import plots

    placed, orig = [], plots.place_labels

    def spy(ax, items, taken=None):
        texts = orig(ax, items, taken)
        placed.append((ax, texts))
        return texts

    monkeypatch.setattr(plots, "place_labels", spy)
    plot(data)
    return placed


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_frontier_labels_do_not_overlap_on_the_saved_figure(monkeypatch, tmp_path, seed):
    """Labels are placed on the final layout: after tight_layout and the legend room, no two rung labels of a
    panel overlap (they did when the layout moved the panels after placement)."""
    import random

    from matplotlib.text import Text

    from advisor.report.data import collect
    from advisor.report.plots import frontier

    rng = random.Random(seed)  # crowded panels: six points per class, close in cost and rate
    runs = [make_run(cls, f"{cls}-{t}", rung, cond, rep, overall=rng.choice([0.0, 10.0, 80.0, 95.0]),
                     cost=0.0001 * (1 + rng.random()))
            for cls in ("a", "b", "c", "d", "e") for t in range(3) for rung in ("small", "mid", "large")
            for cond in ("baseline", "skill") for rep in range(2)]
    with Store.open(tmp_path / "crowd.duckdb") as s:
        s.add_runs_bulk(runs)
    with open_store(tmp_path / "crowd.duckdb") as s:
        data = collect(s)
    placed = _figure_texts(monkeypatch, data, frontier)
    assert placed
    for ax, texts in placed:
        renderer = _renderer(ax.figure)
        boxes = [Text.get_window_extent(t, renderer) for t in texts]  # the text alone, without its leader line
        clashes = [(texts[i].get_text(), texts[j].get_text()) for i in range(len(boxes))
                   for j in range(i + 1, len(boxes)) if boxes[i].overlaps(boxes[j])]
        assert not clashes, (ax.get_title(), clashes)


def test_score_histograms_have_no_legend_over_the_bars(sim_report):
    """One legend above the panels (figure level), none inside a panel; run counts in the panel titles."""
    from advisor.report import plots

    store, _ = sim_report
    from advisor.report.data import collect

    with open_store(store) as s:
        data = collect(s)
    figures = []
    real_png = plots._png
    plots._png = lambda fig: (figures.append(fig), real_png(fig))[1]
    try:
        plots.score_distributions(data)
        plots.turns_by_outcome(data)
    finally:
        plots._png = real_png
    hist, turns = figures
    assert len(hist.legends) == 1 and all(ax.get_legend() is None for ax in hist.axes)
    assert all("n=" in ax.get_title() for ax in hist.axes)
    (ax,) = turns.axes
    renderer = _renderer(turns)
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.y0 >= ax.get_window_extent(renderer).y1 - 1  # above the plotting area


def test_report_md_has_one_unit_no_malformed_rows_and_readable_headings(sim_report):
    """Every cost per usable result is in $ per 1k usable results; a class without a floor is not headed
    'floor none (none)'; points per dollar to three figures; an empty table is a line, not '| none |'."""
    from advisor.report.tables import Table, table_md

    _, files = sim_report
    md = files.markdown.read_text()
    headers = [line for line in md.splitlines() if line.startswith("| ") and "usable result" in line]
    assert headers and all("$ per usable result" not in h for h in headers)
    assert all("$ per 1k usable results" in h for h in headers if "$ per" in h and "usable result" in h)
    assert "floor none" not in md and "(none), recommended" not in md
    points = [row[12] for row in _md_table(md, "lookup (no skill)")]
    assert points and all(re.fullmatch(r"-|\d{1,3}(\.\d+)?[kM]?", p) for p in points), points
    empty = table_md(Table("x", "Unscored runs (0)", ["rung", "runs"], []))
    assert "| none |" not in empty and "None." in empty and "|" not in empty


def test_money_compact_and_per_1k_usable():
    from advisor.money import compact, per_1k_usable

    assert [compact(x) for x in (250641, 1_234_567, 999, 12.5, None)] == ["251k", "1.23M", "999", "12.5", "-"]
    assert per_1k_usable(0.000532) == "$0.532" and per_1k_usable(None) == "-"
