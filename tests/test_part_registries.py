"""The registries of checks, tools, tool-call formats and importers: builtins present, unknown names suggested,
YAML errors still name the file, key and line."""

import textwrap

import pytest

from advisor.agent.formats import FORMATS
from advisor.checks import CHECKS, CheckError, get_check
from advisor.errors import ConfigError
from advisor.importers import IMPORTERS, get_importer
from advisor.ladder import load_ladder
from advisor.registry import UnknownNameError
from advisor.suite import load_suite
from advisor.tools.base import TOOLS


def test_builtin_parts_are_registered():
    assert CHECKS.names() == ["file", "json_equals", "json_schema", "judge", "python", "regex", "same_step", "state",
                              "tool_call"]
    assert get_check("judge").needs_judge and not get_check("regex").needs_judge
    assert {"list_files", "read_file", "write_file", "search_docs", "read_doc", "http_request",
            "run_python"} <= set(TOOLS.names())
    assert FORMATS.names() == ["hermes", "hermes_json", "nemotron_json", "qwen3_coder", "qwen3_xml"]
    assert {"recorded": "runs", "tessl": "suite", "traffic": "suite"} == {n: i.produces for n, i in IMPORTERS.items().items()}


def test_unknown_names_say_did_you_mean():
    with pytest.raises(CheckError, match="unknown check type 'jugde'. Did you mean 'judge'"):
        get_check("jugde")
    with pytest.raises(UnknownNameError, match="Did you mean 'tessl'"):
        get_importer("tesl")


SUITE = """\
version: 1
name: tiny
classes: [{name: c}]
tasks:
  - id: t1
    class: c
    instructions: Say OK.
    instruction_following:
      - name: format
        weight: 100
        check: {type: regexp, pattern: "^OK"}
    task_completion:
      - name: ok
        weight: 100
        check:
          type: json_equals
          path: a
          valu: 1
"""


def test_suite_check_errors_name_file_line_and_key(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    with pytest.raises(ConfigError) as info:
        load_suite(path)
    lines = str(info.value).splitlines()
    assert lines[0].startswith(f"{path}:11: tasks.0.instruction_following.0.check: ")
    assert "unknown check type 'regexp'. Did you mean 'regex'?" in lines[0]
    # errors inside a check name the key without a union tag, at the check (missing) or the key (unknown)
    assert f"{path}:15: tasks.0.task_completion.0.check.value: required key is missing" in lines
    assert f"{path}:18: tasks.0.task_completion.0.check.valu: unknown key" in lines


def test_suite_check_dump_keeps_every_field(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE.replace("regexp", "regex").replace("valu:", "value:"))
    suite = load_suite(path)
    task = suite.model_dump(mode="json", by_alias=True)["tasks"][0]
    assert task["instruction_following"][0]["check"] == {"type": "regex", "target": "final", "pattern": "^OK",
                                                         "must_match": True, "flags": ""}
    assert task["task_completion"][0]["check"] == {"type": "json_equals", "target": "final", "path": "a", "value": 1}


LADDER = """\
version: 1
name: one
rungs:
  - name: small
    hf_id: x/small
    params_total_b: 1
    triton_model: small
    context_length: 4096
    tool_call_format: hermess
    price: {basis: tokens, usd_per_m_input: 0.1, usd_per_m_output: 0.2, source: t, as_of: 2026-11}
"""


def test_ladder_tool_call_format_is_checked_against_the_registry(tmp_path):
    path = tmp_path / "ladder.yaml"
    path.write_text(textwrap.dedent(LADDER))
    with pytest.raises(ConfigError) as info:
        load_ladder(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}:9: rungs.0.tool_call_format: ") and "Did you mean 'hermes'?" in msg
    path.write_text(LADDER.replace("hermess", "hermes"))
    assert load_ladder(path).rungs[0].tool_call_format == "hermes"


def test_import_advisor_stays_light_and_registers_nothing_eagerly():
    import subprocess
    import sys

    code = ("import sys, advisor; heavy = ('tritonclient', 'grpc', 'duckdb', 'sklearn', 'numpy', 'matplotlib', "
            "'torch', 'advisor.checks.text', 'advisor.checks.workspace', 'advisor.tools.files', "
            "'advisor.agent.formats', 'advisor.importers'); print([m for m in heavy if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
