"""Judge-graded criteria in a probe: the ladder's judge role is called through Triton, or the runs stay unscored."""

from pathlib import Path

import pytest

from advisor.probe.session import ProbeConfig, run_probe
from advisor.store import Store

REPO = Path(__file__).resolve().parent.parent

SUITE = """\
version: 1
name: judged
classes: [{name: prose}]
tasks:
  - id: j1
    class: prose
    instructions: Read notes.txt and summarise it in one sentence.
    tools: [read_file]
    fixtures: {files: {notes.txt: "The deploy is frozen until Friday."}}
    instruction_following:
      - {name: one sentence, weight: 100, check: {type: judge, rubric: "One sentence only."}}
    task_completion:
      - {name: mentions freeze, weight: 100, check: {type: regex, pattern: "(?i)frozen|freeze"}}
    reference:
      steps: [{tool: read_file, arguments: {path: notes.txt}}]
      final: "The deploy is frozen until Friday."
"""

JUDGE_ROLE = """\
  judge:
    name: judge-standin
    hf_id: nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-FP8
    params_total_b: 120
    triton_model: standin_judge
    price: {basis: tokens, usd_per_m_input: 0.10, usd_per_m_output: 0.50, source: test, as_of: "2026-11"}
    context_length: 32768
    max_output_tokens: 256
    tool_call_format: hermes
    standin: {capability: 3.0, seed: 7}
"""


def _probe(tmp_path: Path, ladder_text: str):
    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "ladder.yaml").write_text(ladder_text)
    cfg = ProbeConfig(ladder_path=tmp_path / "ladder.yaml", suite_path=tmp_path / "suite.yaml",
                      store_path=tmp_path / "j.duckdb", replicas=1, rungs=["super-120b"])
    run = run_probe(cfg)
    with Store.open(tmp_path / "j.duckdb", read_only=True) as store:
        return run, store.runs()


@pytest.mark.triton
@pytest.mark.slow
def test_judge_role_is_called_through_triton(tmp_path):
    """The demo ladder plus a stand-in judge: the judge is really called (tokens and cost recorded apart). A
    stand-in judge does not answer the rubric's JSON, so the run is unscored with that reason, never 0."""
    run, rows = _probe(tmp_path, (REPO / "ladders" / "demo.yaml").read_text() + JUDGE_ROLE)
    assert len(rows) == 1  # one rung x baseline (no skill) x one replica
    for r in rows:
        assert r["judge_input_tokens"] > 0 and r["judge_cost_usd"] > 0
        assert r["unscored"] and r["overall"] is None and "judge" in r["unscored_reason"]
    assert run.notes == []


@pytest.mark.triton
@pytest.mark.slow
def test_no_judge_role_means_unscored_and_a_note(tmp_path):
    run, rows = _probe(tmp_path, (REPO / "ladders" / "demo.yaml").read_text())
    assert rows and all(r["unscored"] and r["overall"] is None and r["judge_input_tokens"] == 0 for r in rows)
    assert any("no judge role" in n for n in run.notes)
