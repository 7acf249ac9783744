"""Import of Tessl scenarios and tiles: nested walk, readable ids, classes, inline files, skill documents,
original weights and the scenario score, the explicit IF/TC assignment, derived checks."""

import asyncio
import json
import shutil
from pathlib import Path

import pytest
import yaml

from advisor.checks.judge import JudgeGrade
from advisor.checks.scoring import score_episode
from advisor.cli import main
from advisor.records import Episode
from advisor.errors import DataError
from advisor.importers.tessl import import_tessl
from advisor.importers.tessl_criteria import classify, rescale, split_inline_files
from advisor.suite import load_suite

FIXTURES = Path(__file__).parent / "fixtures" / "tessl"

TASK_WITH_FILES = """Fix the parser in inputs/parse.py so that it accepts empty lines.

=============== FILE: inputs/parse.py ===============
def parse(text):
    return [int(x) for x in text.splitlines()]

=============== FILE: inputs/data.txt ===============
1

2
"""


def _tile(root: Path, tile: str, skills: list[str], scenarios: dict[str, tuple[str, list[dict]]]) -> Path:
    """Write a tile folder: tile.json, skills/<s>/SKILL.md (+ references/, scripts/), evals/<scenario>/."""
    root.mkdir(parents=True)
    (root / "tile.json").write_text(json.dumps({"name": f"owner/{tile}", "version": "1.0.0", "skills": {
        s: {"path": f"skills/{s}/SKILL.md"} for s in skills}}))
    for s in skills:
        d = root / "skills" / s
        (d / "references").mkdir(parents=True)
        (d / "scripts").mkdir()
        (d / "SKILL.md").write_text(f"# {s}\nRead references/guide.md before you start.\n")
        (d / "references" / "guide.md").write_text(f"# {s} guide\nAlways call helper() first.\n")
        (d / "scripts" / "check.py").write_text("print('ok')\n")
    for name, (task, checklist) in scenarios.items():
        d = root / "evals" / name
        d.mkdir(parents=True)
        (d / "task.md").write_text(task)
        (d / "capability.txt").write_text(f"Capability of {tile} {name}: a long description that must not be cut "
                                          "anywhere at all even past sixty characters\n")
        (d / "criteria.json").write_text(json.dumps({"type": "weighted_checklist", "context": f"{tile} context",
                                                     "checklist": checklist}))
    return root


CHECKLIST = [
    {"name": "Uses helper", "description": "Uses the skill's helper() instead of hand-rolled code", "max_score": 10},
    {"name": "Follows naming", "description": "Names follow the documented convention", "max_score": 30},
    {"name": "Parser correct", "description": "parse() returns the right list and the tests pass", "max_score": 60},
]


@pytest.fixture()
def tree(tmp_path):
    """A collection laid out owner/repo/tile: 2 tiles, 5 scenarios, tiles two levels below the root."""
    root = tmp_path / "collection"
    _tile(root / "acme" / "tools" / "parsing", "parsing", ["parse-skill"], {
        "scenario-1": (TASK_WITH_FILES, CHECKLIST),
        "scenario-2": ("Write a parser.\n", CHECKLIST),
        "scenario-10": ("Write another parser.\n", [
            {"name": "Report file", "description": "A file named `report.md` exists", "max_score": 5,
             "checklist": "tc"},
            {"name": "Result", "description": "The output is correct", "max_score": 5, "checklist": "if"}]),
    })
    _tile(root / "beta" / "misc" / "web", "web", ["web-a", "web-b"], {
        "scenario-1": ("Build it with web-a.\n", CHECKLIST),
        "scenario-2": ("Build it with web-b.\n", CHECKLIST),
    })
    return root


def test_nested_tree_imports_every_scenario_with_readable_ids(tree, tmp_path):
    out = tmp_path / "out" / "suite.yaml"
    summary = import_tessl(tree, out)
    suite = load_suite(out)
    assert summary.tasks == 5 == len(suite.tasks)
    assert [t.id for t in suite.tasks] == ["parsing-scenario-1", "parsing-scenario-2", "parsing-scenario-10",
                                           "web-scenario-1", "web-scenario-2"]
    assert summary.with_skill == 5


def test_classes_by_skill_tile_and_capability(tree, tmp_path):
    by_skill = load_suite(_imported(tree, tmp_path / "a.yaml", class_by="skill"))
    assert {t.id: t.task_class for t in by_skill.tasks} == {
        "parsing-scenario-1": "parse_skill", "parsing-scenario-2": "parse_skill", "parsing-scenario-10": "parse_skill",
        "web-scenario-1": "web_a", "web-scenario-2": "web_b"}
    by_tile = load_suite(_imported(tree, tmp_path / "b.yaml", class_by="tile"))
    assert sorted({t.task_class for t in by_tile.tasks}) == ["parsing", "web"]
    by_cap = load_suite(_imported(tree, tmp_path / "c.yaml", class_by="capability"))
    assert len(by_cap.classes) == 5
    assert all(c.description.endswith("even past sixty characters") for c in by_cap.classes)  # never truncated


def _imported(tree, out, **kw):
    import_tessl(tree, out, **kw)
    return out


def test_inline_files_become_fixtures_and_leave_the_instructions(tree, tmp_path):
    suite = load_suite(_imported(tree, tmp_path / "s.yaml"))
    task = suite.task("parsing-scenario-1")
    assert task.fixtures.files["inputs/parse.py"].startswith("def parse(text):")
    assert task.fixtures.files["inputs/data.txt"] == "1\n\n2\n"
    assert "FILE:" not in task.instructions and "def parse" not in task.instructions
    assert "`inputs/parse.py` is in your workspace" in task.instructions


def test_split_inline_files_end_marker_and_unsafe_path(tmp_path):
    text, files = split_inline_files("A\n=== FILE: a.txt ===\nx\n=====\nB\n", tmp_path)
    assert files == {"a.txt": "x\n"} and "B" in text
    with pytest.raises(DataError, match="unsafe path"):
        split_inline_files("=== FILE: ../etc/passwd ===\nx\n", tmp_path)


def test_skill_folder_files_are_documents_of_the_skill_condition_only(tree, tmp_path):
    suite = load_suite(_imported(tree, tmp_path / "s.yaml"))
    task = suite.task("parsing-scenario-2")
    assert set(task.fixtures.skill_docs) == {"references/guide.md", "scripts/check.py"}
    assert task.fixtures.docs == {} and "read_doc" not in task.tools
    with_skill = task.for_condition("skill")
    assert "Always call helper()" in with_skill.fixtures.docs["references/guide.md"]
    assert {"search_docs", "read_doc"} <= set(with_skill.tools)
    assert task.for_condition("baseline").fixtures.docs == {}


class _ScriptedJudge:
    def __init__(self, scores):
        self.scores = scores

    async def grade(self, criterion, task, episode):
        return JudgeGrade(self.scores[criterion.name])


def test_original_weights_kept_and_scenario_score_is_the_weighted_checklist(tree, tmp_path):
    suite = load_suite(_imported(tree, tmp_path / "s.yaml"))
    task = suite.task("parsing-scenario-2")
    crits = [*task.instruction_following, *task.task_completion]
    assert {c.name: c.original_weight for c in crits} == {"uses_helper": 10, "follows_naming": 30,
                                                          "parser_correct": 60}
    assert [c.name for c in task.task_completion] == ["parser_correct"]
    scores = {"uses_helper": 1.0, "follows_naming": 0.5, "parser_correct": 0.0}
    card = asyncio.run(score_episode(task, Episode(final="done", stop_reason="final"), _ScriptedJudge(scores)))
    assert card.scenario_score == pytest.approx((10 * 1.0 + 30 * 0.5 + 60 * 0.0) / 100 * 100)  # 25
    assert card.overall == pytest.approx((4 * card.if_score + 3 * card.tc_score) / 7)
    assert card.overall != pytest.approx(card.scenario_score)  # why both are reported


def test_assignment_is_explicit_overridable_and_written(tree, tmp_path):
    out = tmp_path / "s.yaml"
    summary = import_tessl(tree, out)
    task = load_suite(out).task("parsing-scenario-10")
    # both items carry a "checklist" field in criteria.json; "Report file" is an exactly checkable form
    assert [c.name for c in task.instruction_following] == ["result"]
    assert task.task_completion[0].check.type == "file" and task.task_completion[0].check.path == "report.md"
    assert summary.derived == 1 and summary.rules["criterion"] == 2
    written = yaml.safe_load(summary.assignment_file.read_text())
    assert written["parsing-scenario-2"] == {"Uses helper": "if", "Follows naming": "if", "Parser correct": "tc"}
    mapping = tmp_path / "map.yaml"
    mapping.write_text(yaml.safe_dump({"*": {"Follows naming": "tc"}, "web-scenario-1": {"Uses helper": "tc"}}))
    summary2 = import_tessl(tree, tmp_path / "t.yaml", assign_file=mapping)
    suite2 = load_suite(tmp_path / "t.yaml")
    assert [c.name for c in suite2.task("parsing-scenario-2").task_completion] == ["follows_naming", "parser_correct"]
    assert [c.name for c in suite2.task("web-scenario-1").task_completion] == ["uses_helper", "follows_naming",
                                                                              "parser_correct"]
    assert summary2.rules["mapping"] == 5  # 4 tasks x "Follows naming" + 1 "Uses helper"
    # web-scenario-1's IF side is now empty: one importer-added criterion, stated, with no source weight
    assert "web-scenario-1/if" in summary2.added
    added = suite2.task("web-scenario-1").instruction_following[0]
    assert added.original_weight is None and "NOT part of the scenario" in added.check.rubric


def test_cli_import_of_a_collection_root(tree, tmp_path, capsys):
    out = tmp_path / "s.yaml"
    assert main(["suite", "import", "tessl", str(tree), "--out", str(out), "--class-by", "tile"]) == 0
    text = capsys.readouterr().out
    assert "imported 5 scenario(s)" in text and "classes by tile: parsing (3), web (2)" in text
    assert "deterministic checks derived: 1" in text
    assert main(["suite", "validate", str(out)]) == 0


def test_single_scenario_and_bundled_fixtures(tmp_path):
    out = tmp_path / "out" / "suite.yaml"
    summary = import_tessl(FIXTURES / "scenario-auth", out, class_by="capability")
    (task,) = load_suite(out).tasks
    assert summary.tasks == 1 and summary.with_skill == 1
    assert task.id == "scenario-auth" and task.task_class == "authentication"
    assert task.has_skill and "sessions.create" in task.skill_text and "server.py" in task.fixtures.files
    assert [c.weight for c in task.instruction_following] == [60.0, 40.0]
    assert [c.original_weight for c in task.instruction_following] == [30.0, 20.0]
    summary = import_tessl(FIXTURES, tmp_path / "all.yaml")
    assert summary.tasks == 3 and "payments-skills-scenario-1" in {t.id for t in load_suite(tmp_path / "all.yaml").tasks}


def test_split_rule_and_rescale():
    assert classify("Uses the helper", "instead of hand-rolled cookies") == "if"
    assert classify("Output correct", "returns the right total and the tests pass") == "tc"
    assert classify("Something", "") == "if"  # ties go to instruction following
    weights = rescale([1, 1, 1])
    assert abs(sum(weights) - 100) < 1e-9 and weights[0] == pytest.approx(33.3333)


def test_bad_inputs_name_the_file(tmp_path):
    bad = tmp_path / "scenario-1"
    shutil.copytree(FIXTURES / "scenario-auth", bad)
    (bad / "criteria.json").write_text(json.dumps({"type": "checklist", "items": []}))
    with pytest.raises(DataError, match=r"scenario-1/criteria.json: expected"):
        import_tessl(bad, tmp_path / "o.yaml")
    (bad / "criteria.json").write_text('{"type": "weighted_checklist", "checklist": [{"name": "a", "max_score": -1}]}')
    with pytest.raises(DataError, match=r"checklist\[0\].max_score"):
        import_tessl(bad, tmp_path / "o.yaml")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="no Tessl scenarios found"):
        import_tessl(empty, tmp_path / "o.yaml")
    tile = tmp_path / "tile"
    shutil.copytree(FIXTURES / "tile-payments", tile)
    shutil.rmtree(tile / "skills")
    with pytest.raises(DataError, match="skill file not found"):
        import_tessl(tile, tmp_path / "o.yaml")


WEIGHTED_SUITE = """\
version: 1
name: weighted
classes: [{name: c}]
tasks:
  - id: w1
    class: c
    instructions: Write out.txt containing hello, then answer DONE.
    tools: [write_file, list_files]
    instruction_following:
      - {name: says_done, weight: 100, original_weight: 3, check: {type: regex, pattern: DONE}}
    task_completion:
      - {name: file, weight: 60, original_weight: 6, check: {type: file, path: out.txt}}
      - {name: hello, weight: 40, original_weight: 1, check: {type: file, path: out.txt, contains: hello}}
    reference:
      steps: [{tool: write_file, arguments: {path: out.txt, content: hello}}, {tool: list_files}]
      final: DONE
      final_wrong: not yet
"""


@pytest.mark.triton
@pytest.mark.slow
def test_probe_stores_the_scenario_score_beside_if_tc(tmp_path):
    """Through the real probe (embedded Triton, stand-ins): runs.scenario_score is the source-weighted
    checklist of the stored criterion results, reported beside IF/TC."""
    from advisor.probe.session import ProbeConfig, run_probe
    from advisor.store import Store

    (tmp_path / "suite.yaml").write_text(WEIGHTED_SUITE)
    run_probe(ProbeConfig(suite_path=tmp_path / "suite.yaml", store_path=tmp_path / "w.duckdb", replicas=3,
                          rungs=["nano-30b", "super-120b"]))
    original = {"says_done": 3, "file": 6, "hello": 1}
    with Store.open(tmp_path / "w.duckdb", read_only=True) as store:
        rows = [r for r in store.runs() if not r["unscored"]]
        assert rows
        for r in rows:
            crits = store.query("SELECT criterion, score FROM criterion_results WHERE run_key = ?", [r["run_key"]])
            expected = 100 * sum(original[c["criterion"]] * c["score"] for c in crits) / 10
            assert r["scenario_score"] == pytest.approx(expected)
            assert r["overall"] == pytest.approx((4 * r["if_score"] + 3 * r["tc_score"]) / 7)


def test_flat_tile_with_root_skill_and_categories(tmp_path):
    """A tile with SKILL.md at its root (no skills map): its references are skill documents, its evals are
    not; Tessl categories decide IF/TC before the keyword rule."""
    tile = tmp_path / "root" / "acme" / "change-brief"
    (tile / "references").mkdir(parents=True)
    (tile / "tile.json").write_text(json.dumps({"name": "acme/change-brief", "version": "0.1.0"}))
    (tile / "SKILL.md").write_text("# Change brief\nSee references/style.md.\n")
    (tile / "references" / "style.md").write_text("Use short sentences.\n")
    scen = tile / "evals" / "rollback-note"
    scen.mkdir(parents=True)
    (scen / "task.md").write_text("Write a rollback note in note.md.\n")
    (scen / "criteria.json").write_text(json.dumps({"type": "weighted_checklist", "context": "c", "checklist": [
        {"name": "Uses the template", "description": "The note uses the brief template", "max_score": 40,
         "category": "INTENT"},
        {"name": "Rollback works", "description": "The note's rollback steps are correct", "max_score": 60,
         "category": "MUST_NOT"}]}))
    out = tmp_path / "s.yaml"
    summary = import_tessl(tmp_path / "root", out)
    (task,) = load_suite(out).tasks
    assert task.id == "change-brief-rollback-note" and task.has_skill and task.task_class == "change_brief"
    assert set(task.fixtures.skill_docs) == {"references/style.md"}
    assert [c.name for c in task.task_completion] == ["uses_the_template"]  # INTENT -> TC despite "uses"
    assert [c.name for c in task.instruction_following] == ["rollback_works"]  # MUST_NOT -> IF despite "correct"
    assert summary.rules == {"category": 2}
