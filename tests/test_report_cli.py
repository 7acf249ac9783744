"""CLI output: the per-class answer table that `floors` and `report` end with, the money format, `--volume`
validation against the store's classes, `ladder show` at 80 columns, `ladder validate` warnings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.store import Store
from synthetic import demo_oracle

LADDERS = Path(__file__).resolve().parent.parent / "ladders"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "s.duckdb"
    with Store.open(path) as s:
        s.add_runs_bulk(demo_oracle(simulated=True).full_grid(replicas=3))
    return path


def _answer_rows(out: str) -> dict[str, list[str]]:
    block = out.split("The answer, per class", 1)[1]
    rows = {}
    for line in block.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if cells and cells[0] in ("api_call", "lookup", "multi_step"):
            rows[cells[0]] = cells
    return rows


def test_floors_ends_with_the_answer(store, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["floors", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "The answer, per class [SIMULATED]" in out.split("\n\n")[-1] or "The answer, per class [SIMULATED]" in out
    tail = out[out.index("The answer, per class"):]
    assert all(len(line) <= 80 for line in tail.splitlines()), tail
    rows = _answer_rows(out)
    assert set(rows) == {"api_call", "lookup", "multi_step"}
    assert main(["floors", "--store", str(store), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["simulated"] is True  # floors --json says SIMULATED too
    plans = [p for p in doc["plans"] if p["task_class"] == "lookup" and p["plan"]]
    plan = min(plans, key=lambda p: p["plan"]["cost_per_usable"])["plan"]
    lo, hi = plan["interval"]
    first = f"{plan['steps'][0]['rung']} x{plan['steps'][0]['attempts']}"
    assert rows["lookup"][1].startswith(first)  # the plan (folded over lines after its first step)
    assert f"{100 * plan['usable']:.0f}% [{100 * lo:.0f}-{100 * hi:.0f}]" in rows["lookup"][2]


def test_money_is_significant_figures_everywhere(store, capsys):
    from advisor.money import usd

    assert main(["floors", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "$0.0001 " not in out and not re.search(r"\$0\.0000\b", out)
    doc_money = re.findall(r"\$[0-9][0-9,.]*", out)
    assert doc_money and all(usd(float(m[1:].replace(",", ""))) == m for m in doc_money), doc_money


def test_report_volume_validated_with_did_you_mean(store, tmp_path, capsys):
    assert main(["report", "--store", str(store), "--out", str(tmp_path), "--volume", "lokup=100/month"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "Did you mean 'lookup'" in err and len(err.splitlines()) == 1
    assert main(["report", "--store", str(store), "--out", str(tmp_path), "--volume", "lookup"]) != 0
    err = capsys.readouterr().err
    assert "expected CLASS=N" in err and "api_calls=20000/month" in err  # the bundled suite's class
    assert main(["report", "--store", str(store), "--out", str(tmp_path), "--name", "v", "--volume",
                 "lookup=20000/month", "--default-volume", "500"]) == 0
    out = capsys.readouterr().out
    assert "The answer, per class [SIMULATED]" in out and "report: " in out
    doc = json.loads((tmp_path / "v" / "floors.json").read_text())
    vols = {c["task_class"]: (c["volume"], c["volume_assumed"]) for c in doc["decision"]["classes"]}
    assert vols == {"lookup": (20000, False), "api_call": (500, True), "multi_step": (500, True)}
    assert "Assumption: 500 usable results per month for api_call, multi_step" in (tmp_path / "v" / "report.md").read_text()


def test_readme_volume_example_uses_bundled_classes():
    import yaml

    suite = yaml.safe_load((LADDERS.parent / "suites" / "example" / "suite.yaml").read_text())
    classes = {t["class"] for t in suite["tasks"]}
    text = (LADDERS.parent / "reports" / "README.md").read_text()
    named = set(re.findall(r"--volume (\w+)=", text))
    assert named and named <= classes, (named, classes)


def test_ladder_show_fits_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["ladder", "show", str(LADDERS / "nemotron.yaml")]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines())
    assert "…" not in out  # nothing cut: long values wrap
    # read the second table column by column (wrapped cells continue on the next lines)
    block = out.split("where each model comes from", 1)[1].splitlines()
    header = next(line for line in block if "hf id" in line)
    starts = [header.index(h) for h in ("name", "hf id", "model id", "price basis")] + [None]
    columns = ["".join(line[a:b].strip() for line in block if not line.strip().startswith(("─", "name")))
               for a, b in zip(starts, starts[1:])]
    assert "nvidia/NVIDIA-Nemotron-Nano-12B-v2" in columns[1]
    assert "nemotron_nano_12b_v2" in columns[2]
    assert "Nano 9B v2 list" in " ".join(block) or "Nano9Bv2listpriceusedasproxy" in columns[3].replace(" ", "")
    assert "$0.10" in out and "$0.50" in out and "super-120b" in out


def test_ladder_validate_warns_on_real_rungs_without_tokenizer(capsys):
    assert main(["ladder", "validate", str(LADDERS / "nemotron.yaml")]) == 0
    captured = capsys.readouterr()
    assert ": ok:" in captured.out
    assert "nano-12b: no tokenizer_path" in captured.err
    assert main(["ladder", "validate", str(LADDERS / "demo.yaml")]) == 0  # stand-ins need no tokenizer
    assert "warning" not in capsys.readouterr().err


def test_every_option_has_help():
    import click
    import typer

    from advisor.cli import build_app

    missing = []

    def walk(c, path):
        if isinstance(c, click.Group):
            for n, sub in c.commands.items():
                walk(sub, [*path, n])
            return
        missing.extend(f"{' '.join(path)} {p.name}" for p in c.params if not getattr(p, "help", None))

    walk(typer.main.get_command(build_app()), [])
    assert missing == []


def test_probe_help_first_line_describes_the_adaptive_default(capsys):
    from advisor.cli.probe_cmd import probe

    first = probe.__doc__.strip().splitlines()[0]
    assert "adaptive" in first.lower() and "every task x rung" not in first
