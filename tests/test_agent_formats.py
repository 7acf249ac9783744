"""Tool-call formats: rendering the tool list, round-tripping calls, and parse failures per format."""

import pytest

from advisor.agent.formats import FINAL_MARKER, FORMATS, format_for
from advisor.errors import ConfigError


class Spec:
    def __init__(self, name, parameters):
        self.name, self.description, self.parameters = name, f"the {name} tool", parameters


SPECS = [
    Spec("read_file", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    Spec("http_request", {"type": "object", "properties": {
        "method": {"type": "string"}, "path": {"type": "string"}, "body": {"type": "object"},
        "retries": {"type": "integer"}}}),
]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_round_trip_every_format(name):
    fmt = format_for(name)
    args = {"method": "POST", "path": "/v1/items", "body": {"a": [1, 2], "b": "x"}, "retries": 3}
    text = "I will create it.\n" + fmt.render_call("http_request", args)
    parsed = fmt.parse(text, SPECS)
    assert parsed.kind == "call"
    assert parsed.name == "http_request"
    assert parsed.arguments == args


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_tool_list_names_every_tool(name):
    text = format_for(name).render_tools(SPECS)
    assert "read_file" in text and "http_request" in text and FINAL_MARKER in text


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_final_answer_convention(name):
    fmt = format_for(name)
    parsed = fmt.parse("Thinking done.\nFINAL ANSWER: 42 widgets", SPECS)
    assert parsed.kind == "final" and parsed.final == "42 widgets"
    plain = fmt.parse("  The answer is blue.  ", SPECS)
    assert plain.kind == "final" and plain.final == "The answer is blue."
    assert fmt.parse("   ", SPECS).kind == "invalid"
    assert fmt.parse("FINAL ANSWER:   ", SPECS).kind == "invalid"
    qwen = fmt.parse("Final ANSWER: 42 widgets", SPECS)  # the marker as Qwen2.5-Coder writes it
    assert qwen.kind == "final" and qwen.final == "42 widgets"


def test_string_parameter_stays_a_string_in_xml():
    fmt = format_for("qwen3_coder")
    parsed = fmt.parse(fmt.render_call("read_file", {"path": "42"}), SPECS)
    assert parsed.arguments == {"path": "42"}
    multi = fmt.parse("<tool_call><function=read_file><parameter=path>\na\nb\n</parameter></function></tool_call>",
                      SPECS)
    assert multi.arguments == {"path": "a\nb"}


@pytest.mark.parametrize("name,text,fragment", [
    ("hermes", '<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>', "not valid JSON"),
    ("hermes", '<tool_call>{"name": "read_file"', "not closed"),
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>', "no 'name'"),
    ("hermes", '<tool_call>{"name": "x", "arguments": [1]}</tool_call>', "must be an object"),
    ("nemotron_json", '<TOOLCALL>[{"name": "read_file", "arguments": {]</TOOLCALL>', "not valid JSON"),
    ("nemotron_json", "<TOOLCALL>[]</TOOLCALL>", "empty list"),
    ("nemotron_json", '<TOOLCALL>[{"name": "x"}', "not closed"),
    ("qwen3_xml", "<tool_call><function=read_file><parameter=path>a</function></tool_call>", "not closed"),
    ("qwen3_xml", "<tool_call>read_file(path=a)</tool_call>", "no complete"),
    ("qwen3_coder", "<function=read_file><parameter=path>a</parameter></function>", "not closed"),
])
def test_malformed_calls_are_invalid_with_a_reason(name, text, fragment):
    parsed = format_for(name).parse(text, SPECS)
    assert parsed.kind == "invalid"
    assert fragment in parsed.error


def test_several_calls_run_the_first_and_count_the_rest():
    fmt = format_for("hermes")
    text = fmt.render_call("read_file", {"path": "a"}) + fmt.render_call("read_file", {"path": "b"})
    parsed = fmt.parse(text, SPECS)
    assert parsed.arguments == {"path": "a"} and parsed.extra_calls == 1
    nem = format_for("nemotron_json")
    parsed = nem.parse('<TOOLCALL>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]</TOOLCALL>')
    assert parsed.name == "a" and parsed.extra_calls == 1


def test_double_encoded_arguments_are_accepted():
    parsed = format_for("hermes").parse('<tool_call>{"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}'
                                        "</tool_call>")
    assert parsed.kind == "call" and parsed.arguments == {"path": "a"}


def test_unknown_format_names_the_choices():
    with pytest.raises(ConfigError, match="hermes"):
        format_for("mystery")
