"""Suite loading: bad input gives one clear message naming the file and the place (line and key)."""

import textwrap

import pytest

from advisor.cli import main
from advisor.errors import ConfigError
from advisor.suite import load_suite
from advisor.tools import available_tools

GOOD = """\
version: 1
name: tiny
classes:
  - name: api_calls
tasks:
  - id: t1
    class: api_calls
    instructions: Refund order 1.
    skill: skills/refunds.md
    tools: [http_request, read_doc]
    instruction_following:
      - name: format
        weight: 100
        check: {type: regex, pattern: "^OK"}
    task_completion:
      - name: posted
        weight: 60
        check: {type: state, method: POST, path: /v1/refunds}
      - name: id
        weight: 40
        check: {type: regex, pattern: re_1}
"""


def _write(tmp_path, text, skill=True):
    if skill:
        (tmp_path / "skills").mkdir(exist_ok=True)
        (tmp_path / "skills/refunds.md").write_text("# Refunds\nUse Idempotency-Key.\n")
    path = tmp_path / "suite.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _error(path):
    with pytest.raises(ConfigError) as info:
        load_suite(path, set(available_tools()))
    return str(info.value)


def test_good_suite_loads_with_skill_text(tmp_path):
    suite = load_suite(_write(tmp_path, GOOD), set(available_tools()))
    task = suite.task("t1")
    assert task.has_skill and "Idempotency-Key" in task.skill_text and task.conditions() == ["baseline", "skill"]


def test_bad_key(tmp_path):
    path = _write(tmp_path, GOOD.replace("    tools: [http_request, read_doc]\n",
                                         "    tools: [http_request, read_doc]\n    tool_choice: auto\n"))
    msg = _error(path)
    assert msg.startswith(f"{path}:11: ") and "tasks.0.tool_choice: unknown key" in msg


def test_unknown_tool(tmp_path):
    path = _write(tmp_path, GOOD.replace("[http_request, read_doc]", "[http_request, read_docs]"))
    msg = _error(path)
    assert msg.startswith(f"{path}:10: ") and "tasks.0.tools.1: unknown tool 'read_docs'" in msg
    assert "Did you mean 'read_doc'" in msg


def test_checklist_not_summing_to_100(tmp_path):
    path = _write(tmp_path, GOOD.replace("weight: 40", "weight: 30"))
    msg = _error(path)
    assert msg.startswith(f"{path}:15: ") and "tasks.0.task_completion" in msg and "sum to 90" in msg


def test_missing_skill_file(tmp_path):
    path = _write(tmp_path, GOOD, skill=False)
    msg = _error(path)
    assert msg.startswith(f"{path}:9: ") and "tasks.0.skill: skill file not found" in msg and "refunds.md" in msg


def test_unknown_class(tmp_path):
    path = _write(tmp_path, GOOD.replace("    class: api_calls", "    class: api_call"))
    msg = _error(path)
    assert msg.startswith(f"{path}:7: ") and "unknown class 'api_call'" in msg and "Did you mean 'api_calls'" in msg


def test_unknown_check_type(tmp_path):
    path = _write(tmp_path, GOOD.replace("type: regex, pattern: \"^OK\"", "type: regexp, pattern: \"^OK\""))
    msg = _error(path)
    assert f"{path}:14: " in msg and "tasks.0.instruction_following.0.check" in msg


def test_cli_prints_one_line_and_fails(tmp_path, capsys):
    path = _write(tmp_path, GOOD.replace("[http_request, read_doc]", "[http_request, browse]"))
    assert main(["suite", "validate", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path}:10: ") and "unknown tool 'browse'" in err[0]


def test_cli_validate_and_show(tmp_path, capsys):
    path = _write(tmp_path, GOOD)
    assert main(["suite", "validate", str(path)]) == 0
    assert "ok: suite 'tiny', 1 tasks in 1 classes, 1 with a skill" in capsys.readouterr().out
    assert main(["suite", "show", str(path), "--json"]) == 0
    import json

    body = json.loads(capsys.readouterr().out)
    assert body["summary"]["classes"][0]["checks"] == {"regex": 2, "state": 1}
    assert body["tasks"][0]["class"] == "api_calls"
