"""Service verifier error rates measured on probe runs (`advisor verifier measure`) against a small probe on the
embedded Triton stored in a real DuckDB file, read back by the service's policy (measured, else the config's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from advisor.cli import main
from advisor.service.process.config import load_config
from advisor.store import Store
from advisor.verifier.calibration import policy_rates, service_rates, verifier_hash

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "ladders" / "demo.yaml"
TINY = REPO / "tests" / "probe_data" / "suite.yaml"

CONFIG = """version: 1
classes:
  narrow:
    verifier:
      checks: [{type: regex, pattern: heron}]
      false_accept: 0.31
      false_reject: 0.29
  multi:
    retries: 2
    verifier:
      checks: [{type: regex, pattern: '^done$'}]
  unprobed:
    verifier:
      checks: [{type: regex, pattern: x}]
      false_accept: 0.11
      false_reject: 0.12
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory, triton_server):
    """The tiny suite probed on every demo rung, both conditions, 4 replicas (48 SIMULATED runs)."""
    from advisor.probe import ProbeConfig, run_probe

    tmp = tmp_path_factory.mktemp("verifier")
    run_probe(ProbeConfig(ladder_path=DEMO, suite_path=TINY, url=triton_server.grpc_url,
                          store_path=tmp / "probe.duckdb", replicas=4))
    (tmp / "service.yaml").write_text(CONFIG)
    return tmp


def _expected(store_path: Path, task_class: str, pattern: str, bar: float = 75.0) -> dict[str, list[int]]:
    """Per rung [positives, negatives, false accepts, false rejects], computed here from the stored runs' final
    answers (independently of the code under test)."""
    out: dict[str, list[int]] = {}
    with Store.open(store_path, read_only=True) as s:
        runs = s.query("SELECT run_key, rung, overall FROM runs WHERE task_class = ? AND NOT unscored", [task_class])
        for run in runs:
            finals = s.query("SELECT observation FROM turns WHERE run_key = ? AND action = 'final'", [run["run_key"]])
            accepted = bool(finals) and re.search(pattern, finals[-1]["observation"] or "") is not None
            usable = run["overall"] >= bar
            c = out.setdefault(run["rung"], [0, 0, 0, 0])
            c[0 if usable else 1] += 1
            c[2] += (not usable) and accepted
            c[3] += usable and not accepted
    return out


def test_measure_stores_per_rung_and_pooled_rates_matching_the_runs(probed, capsys):
    store = probed / "probe.duckdb"
    code = main(["verifier", "measure", "--config", str(probed / "service.yaml"), "--store", str(store),
                 "--ladder", str(DEMO), "--json"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["measurement_id"] for r in rows} and len({r["measurement_id"] for r in rows}) == 1
    for cls, pattern in (("narrow", "heron"), ("multi", "^done$")):
        expected = _expected(store, cls, pattern)
        got = {r["rung"]: r for r in rows if r["task_class"] == cls}
        assert set(got) == {"*", *expected}, cls
        for rung, (pos, neg, fa, fr) in expected.items():
            r = got[rung]
            assert [r["positives"], r["negatives"], r["false_accepts"], r["false_rejects"]] == [pos, neg, fa, fr]
            assert r["false_accept"] == (fa / neg if neg else None) and r["simulated"] is True
        pooled = got["*"]
        assert pooled["runs"] == sum(p + n for p, n, _, _ in expected.values())
        assert pooled["false_accepts"] == sum(c[2] for c in expected.values())
    narrow = {r["rung"]: r for r in rows if r["task_class"] == "narrow"}["*"]
    # the probe has usable and unusable narrow runs, and the regex accepts some unusable ones (heron without
    # listing the files first): a verifier with a real false-accept rate to measure
    assert narrow["positives"] > 0 and narrow["negatives"] > 0 and narrow["false_accepts"] > 0
    assert not [r for r in rows if r["task_class"] == "unprobed"], "no runs: nothing stored for it"
    with Store.open(store, read_only=True) as s:
        assert s.query("SELECT count(*) AS n FROM verifier_rates")[0]["n"] == len(rows)
    assert main(["verifier", "show", "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "SIMULATED runs" in shown and "narrow" in shown and "all rungs" in shown


def test_the_service_uses_measured_rates_and_the_config_as_fallback(probed, capsys):
    store = probed / "probe.duckdb"
    config = load_config(probed / "service.yaml")
    assert main(["verifier", "measure", "--config", str(probed / "service.yaml"), "--store", str(store),
                 "--class", "narrow", "--json"]) == 0
    narrow = next(r for r in json.loads(capsys.readouterr().out) if r["rung"] == "*")
    with Store.open(store, read_only=True) as s:
        rates = policy_rates(config, s)
    assert rates["narrow"].verifier.false_accept == pytest.approx(narrow["false_accept"])
    assert rates["narrow"].source in ("measured", "partly measured")
    assert rates["unprobed"].source == "config" and rates["unprobed"].as_pair() == [0.11, 0.12]
    # a changed verifier no longer matches the measurement: the config's rates again
    changed = load_config(probed / "service.yaml").model_copy(deep=True)
    vcfg = changed.classes["narrow"].verifier
    other = vcfg.model_copy(update={"checks": [vcfg.checks[0].model_copy(update={"pattern": "crane"})]})
    assert verifier_hash(other) != verifier_hash(vcfg)
    changed.classes["narrow"] = changed.classes["narrow"].model_copy(update={"verifier": other})
    with Store.open(store, read_only=True) as s:
        assert policy_rates(changed, s)["narrow"].as_pair() == [0.31, 0.29]
    # what `advisor serve` prints at startup, and hands its workers
    served, lines = service_rates(config, store)
    assert served["narrow"].as_pair() == rates["narrow"].as_pair()
    assert served["narrow"].source in ("measured", "partly measured")
    assert any(ln.startswith(("verifier rates of class 'narrow': measured",
                              "verifier rates of class 'narrow': partly measured")) for ln in lines)
    assert ("verifier rates of class 'unprobed': config: false accept 0.11 / false reject 0.12 (not measured for "
            "this verifier)") in lines
    # `router train --live` labels live attempts with the same rates
    from advisor.router.feedback.live import verifier_rates

    with Store.open(store, read_only=True) as s:
        labels = verifier_rates(load_config(probed / "service.yaml", None), s)
    assert labels["narrow"] == rates["narrow"].verifier and labels["unprobed"].false_accept == 0.11
    missing, lines = service_rates(config, probed / "absent.duckdb")
    assert missing["narrow"].as_pair() == [0.31, 0.29] and all("config" in ln for ln in lines)


def test_measure_errors_name_what_is_wrong(probed, tmp_path, capsys):
    store = probed / "probe.duckdb"
    assert main(["verifier", "measure", "--config", str(probed / "service.yaml"), "--store", str(store),
                 "--class", "narow"]) != 0
    assert "did you mean 'narrow'" in capsys.readouterr().err.lower().replace('"', "'")
    (tmp_path / "none.yaml").write_text("version: 1\nclasses: {chat: {verifier: none}}\n")
    assert main(["verifier", "measure", "--config", str(tmp_path / "none.yaml"), "--store", str(store)]) != 0
    assert "no class with a verifier" in capsys.readouterr().err


@pytest.mark.slow
def test_a_judge_verifier_is_measured_with_the_ladders_judge_on_triton(probed, tmp_path, capsys):
    """The demo ladder plus a stand-in judge role on its own embedded Triton: the judge is really called and
    costed; the stand-in judge does not answer the rubric's JSON, so every run is unverifiable, left out of the
    rates (never counted as a rejection), and the config's rates stay in use."""
    from test_probe_judge import JUDGE_ROLE

    from advisor.ladder import load_ladder
    from advisor.triton.server import EmbeddedTriton

    (tmp_path / "judged.yaml").write_text(DEMO.read_text() + JUDGE_ROLE)
    (tmp_path / "judge.yaml").write_text("""version: 1
classes:
  narrow:
    verifier:
      judge: {rubric: "Names the code word from notes.txt", threshold: 0.5}
      false_accept: 0.2
      false_reject: 0.1
""")
    store = probed / "probe.duckdb"
    assert main(["verifier", "measure", "--config", str(tmp_path / "judge.yaml"), "--store", str(store)]) != 0
    assert "pass --ladder" in capsys.readouterr().err
    server = EmbeddedTriton(load_ladder(tmp_path / "judged.yaml")).start()
    try:
        assert main(["verifier", "measure", "--config", str(tmp_path / "judge.yaml"), "--store", str(store),
                     "--ladder", str(tmp_path / "judged.yaml"), "--url", server.grpc_url, "--json"]) == 0
    finally:
        server.stop()
    pooled = next(r for r in json.loads(capsys.readouterr().out) if r["rung"] == "*")
    with Store.open(store, read_only=True) as s:
        narrow_runs = s.query("SELECT count(*) AS n FROM runs WHERE task_class = 'narrow' AND NOT unscored")[0]["n"]
        rates = policy_rates(load_config(tmp_path / "judge.yaml"), s)
    assert pooled["unverifiable"] == narrow_runs and pooled["runs"] == 0
    assert pooled["judge_cost_usd"] > 0, "the judge's tokens are costed"
    assert rates["narrow"].source == "config" and rates["narrow"].as_pair() == [0.2, 0.1]
