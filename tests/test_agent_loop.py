"""The agent loop against the scripted `FakeModel` and a fake environment: every stop reason."""

import asyncio
from types import SimpleNamespace

import pytest

from advisor.agent.chat import parse_default
from advisor.agent.fake import FakeModel, Reply, Sleep
from advisor.agent.formats import format_for
from advisor.agent.loop import is_stuck, run_episode
from advisor.records import ToolCall
from advisor.errors import BackendError
from advisor.suite import Limits


class FakeEnv:
    workspace = None

    def __init__(self):
        self.api_log = [{"method": "GET", "path": "/x"}]
        self.calls = []

    def specs(self):
        return [SimpleNamespace(name="read_file", description="read",
                                parameters={"type": "object", "properties": {"path": {"type": "string"}}})]

    async def call(self, name, args):
        self.calls.append((name, args))
        if name != "read_file":
            return ToolCall(name, args, f"unknown tool {name!r}", ok=False)
        return ToolCall(name, args, f"contents of {args.get('path')}")


TASK = SimpleNamespace(instructions="Read a.txt and report its first word.", skill_text="Always read README first.")
MODEL = SimpleNamespace(name="m", model_id="m_triton", tool_call_format="hermes", tokenizer_path=None,
                        max_output_tokens=256)
CALL = format_for("hermes").render_call


def run(replies, limits=Limits(), condition="baseline", model=MODEL):
    client = FakeModel(replies, input_tokens=10, output_tokens=5)
    env = FakeEnv()
    res = asyncio.run(run_episode(TASK, model, client, env, limits, condition=condition, sampling={"seed": 7},
                                  request_id="r1"))
    return res, client, env


def test_valid_calls_then_final():
    res, client, env = run([CALL("read_file", {"path": "a.txt"}), CALL("read_file", {"path": "b.txt"}),
                            "FINAL ANSWER: hello"])
    ep = res.episode
    assert ep.stop_reason == "final" and ep.final == "hello"
    assert [c.arguments["path"] for c in ep.calls] == ["a.txt", "b.txt"]
    assert [t.action for t in res.turns] == ["read_file", "read_file", "final"]
    assert res.model_calls == 3 and res.input_tokens == 30 and res.output_tokens == 15
    assert ep.api_log == [{"method": "GET", "path": "/x"}]
    # The observation is fed back in the next prompt, as a tool message.
    msgs = parse_default(client.prompts[1])
    assert msgs[-1] == {"role": "tool", "content": "contents of a.txt"}
    assert client.sampling[0] == {"seed": 7}


def test_skill_goes_into_system_prompt_only_with_skill_condition():
    _, base, _ = run(["done"])
    _, skill, _ = run(["done"], condition="skill")
    assert "Always read README first." not in base.prompts[0]
    assert "Always read README first." in parse_default(skill.prompts[0])[0]["content"]


def test_malformed_calls_end_in_invalid_output_after_max_invalid():
    res, client, _ = run(['<tool_call>{"name": "read_file", </tool_call>'], Limits(max_invalid=3))
    assert res.episode.stop_reason == "invalid_output"
    assert res.model_calls == 3
    assert [t.action for t in res.turns] == ["invalid"] * 3
    # The model saw the parse error as an observation.
    assert "could not parse your reply" in parse_default(client.prompts[1])[-1]["content"]


def test_a_parse_error_is_recoverable():
    res, _, _ = run(["<tool_call>oops</tool_call>", CALL("read_file", {"path": "a"}), "<tool_call>bad",
                     "FINAL ANSWER: ok"], Limits(max_invalid=2))
    assert res.episode.stop_reason == "final"
    assert [t.action for t in res.turns] == ["invalid", "read_file", "invalid", "final"]


def test_repeated_identical_action_is_stuck():
    res, _, env = run([CALL("read_file", {"path": "a"})])
    assert res.episode.stop_reason == "stuck" and len(env.calls) == 3


def test_alternating_actions_are_stuck():
    replies = [CALL("read_file", {"path": p}) for p in ["a", "b"] * 5]
    res, _, env = run(replies, Limits(max_turns=20))
    assert res.episode.stop_reason == "stuck" and len(env.calls) == 6


def test_is_stuck_rules():
    assert not is_stuck(["a", "a"])
    assert is_stuck(["x", "a", "a", "a"])
    assert not is_stuck(["a", "b", "a", "b", "a"])
    assert is_stuck(["a", "b", "a", "b", "a", "b"])
    assert not is_stuck(["a", "b", "c", "a", "b", "c"])


def test_giving_up_is_a_final_answer():
    res, _, env = run(["I cannot do this task."])
    assert res.episode.stop_reason == "final" and res.episode.final == "I cannot do this task."
    assert env.calls == []


def test_max_turns():
    replies = [CALL("read_file", {"path": str(i)}) for i in range(10)]
    res, _, _ = run(replies, Limits(max_turns=4))
    assert res.episode.stop_reason == "max_turns" and res.model_calls == 4 and res.episode.final is None


def test_overlong_output_is_cut_and_then_invalid():
    long = Reply("blah " * 300, finish_reason="length", output_tokens=256)
    res, client, _ = run([long, long], Limits(max_invalid=2))
    assert res.episode.stop_reason == "invalid_output"
    assert "cut off at the 256-token output limit" in parse_default(client.prompts[1])[-1]["content"]


def test_token_budget_is_max_tokens():
    big = Reply(CALL("read_file", {"path": "a"}), input_tokens=900, output_tokens=200)
    res, _, _ = run([big, Reply(CALL("read_file", {"path": "b"}), input_tokens=900, output_tokens=200)],
                    Limits(max_tokens=2000))
    assert res.episode.stop_reason == "max_tokens" and res.model_calls == 2


def test_slow_model_is_timeout():
    res, _, _ = run([CALL("read_file", {"path": "a"}), Sleep(10)], Limits(timeout_s=0.3))
    assert res.episode.stop_reason == "timeout" and res.model_calls == 1
    assert 0.25 < res.latency_s < 2


def test_backend_error_ends_the_episode_with_the_error():
    res, _, _ = run([CALL("read_file", {"path": "a"}), BackendError("connection refused")])
    assert res.episode.stop_reason == "backend_error"
    assert "connection refused" in res.episode.error


def test_tool_error_is_an_observation_not_an_end():
    res, client, _ = run([CALL("nope", {}), "FINAL ANSWER: x"])
    assert res.episode.stop_reason == "final"
    assert res.episode.calls[0].ok is False
    assert parse_default(client.prompts[1])[-1]["content"].startswith("ERROR: unknown tool")


def test_token_fallback_is_recorded():
    res, _, _ = run([Reply("FINAL ANSWER: x", tokens_from_server=False, note="estimated locally")])
    assert res.tokens_from_server is False and res.notes == ["estimated locally"]


@pytest.mark.parametrize("fmt", ["qwen3_coder", "qwen3_xml", "nemotron_json"])
def test_each_format_drives_the_loop(fmt):
    model = SimpleNamespace(**{**vars(MODEL), "tool_call_format": fmt})
    call = format_for(fmt).render_call("read_file", {"path": "a.txt"})
    res, client, _ = run([call, "FINAL ANSWER: done"], model=model)
    assert res.episode.stop_reason == "final" and res.episode.calls[0].arguments == {"path": "a.txt"}
    assert "read_file" in parse_default(client.prompts[0])[0]["content"]


def test_a_task_without_tools_is_told_so_and_the_hermes_json_format_reminds_how_to_finish():
    class NoToolsEnv(FakeEnv):
        def specs(self):
            return []

    client = FakeModel(["FINAL ANSWER: 42"])
    asyncio.run(run_episode(TASK, MODEL, client, NoToolsEnv(), Limits()))
    system = parse_default(client.prompts[0])[0]["content"]
    assert "You have no tools for this task" in system and "<tools>" not in system
    small = SimpleNamespace(**{**vars(MODEL), "tool_call_format": "hermes_json"})
    res, client, _ = run(['{"name": "read_file", "arguments": {"path": "a.txt"}}', "FINAL ANSWER: hello"],
                         model=small)
    assert res.episode.stop_reason == "final" and res.episode.calls[0].arguments == {"path": "a.txt"}
    observation = parse_default(client.prompts[1])[-1]["content"]
    assert observation.startswith("contents of a.txt\n(If this result answers the task, reply now with 'FINAL ANSWER:'")
