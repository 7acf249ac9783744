"""The package's `FakeModel`: scripted replies, recorded calls, and the in-process stand-in mode, which must
answer exactly as the embedded Triton serving the same stand-ins does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from advisor.agent.fake import FakeModel, Reply, Sleep
from advisor.agent.loop import run_episode
from advisor.records import ToolCall
from advisor.errors import BackendError
from advisor.suite import Limits, load_suite
from advisor.triton.client import GenerationResult, TritonClient


async def test_script_in_order_then_the_last_reply_repeats():
    fake = FakeModel(["one", Reply("two", finish_reason="length", input_tokens=7, output_tokens=3)])
    first = await fake.generate("m", "a prompt", max_tokens=5, sampling={"seed": 1}, request_id="r")
    assert isinstance(first, GenerationResult) and first.text == "one" and first.model == "m"
    assert first.input_tokens == 2 and first.output_tokens == 1  # estimated: words and punctuation
    second = await fake.generate("m", "p", max_tokens=5)
    third = await fake.generate("m", "p", max_tokens=5)
    assert (second.text, second.finish_reason, second.input_tokens, second.output_tokens) == ("two", "length", 7, 3)
    assert third.text == "two"
    assert [c.max_tokens for c in fake.calls] == [5, 5, 5] and fake.sampling[0] == {"seed": 1}
    assert fake.calls[0].request_id == "r" and fake.prompts == ["a prompt", "p", "p"]


async def test_default_counts_exceptions_sleep_and_a_scripting_function():
    fake = FakeModel([BackendError("down"), Sleep(0.01, "late")], input_tokens=10, output_tokens=5)
    with pytest.raises(BackendError, match="down"):
        await fake.generate("m", "p", max_tokens=4)
    late = await fake.generate("m", "p", max_tokens=4)
    assert late.text == "late" and (late.input_tokens, late.output_tokens) == (10, 5) and late.latency_s >= 0.01
    echo = FakeModel(lambda call: f"{call.model}:{call.max_tokens}")
    assert (await echo.generate("judge", "p", max_tokens=9)).text == "judge:9"
    with pytest.raises(ValueError):
        FakeModel([])


async def test_failing_models_raise_backend_error():
    fake = FakeModel(["ok"], fail={"big"})
    with pytest.raises(BackendError, match="cannot reach Triton for big"):
        await fake.generate("big", "p", max_tokens=2)
    assert (await fake.generate("small", "p", max_tokens=2)).text == "ok" and len(fake.calls) == 2


class _Env:
    workspace = None
    api_log: list = []

    def specs(self):
        return [SimpleNamespace(name=n, description=n, parameters={"type": "object", "properties": {}})
                for n in ("read_file", "list_files", "write_file")]

    async def call(self, name, args):
        return ToolCall(name, args, f"ok {name}")


@pytest.mark.triton
def test_standin_mode_answers_as_the_served_standins_do(triton_server):
    from conftest import KNOWN_SUITES

    suite = load_suite(KNOWN_SUITES[1])
    ladder = triton_server.ladder
    fake = FakeModel.standin(ladder, KNOWN_SUITES)

    async def both(rung, task, seed):
        async with TritonClient(triton_server.grpc_url) as client:
            served = await run_episode(task, rung, client, _Env(), Limits(max_turns=30), condition="skill",
                                       sampling={"seed": seed})
        local = await run_episode(task, rung, fake, _Env(), Limits(max_turns=30), condition="skill",
                                  sampling={"seed": seed})
        return served, local

    for rung in ladder.rungs:
        for task in suite.tasks:
            served, local = asyncio.run(both(rung, task, 3))
            a, b = served.episode, local.episode
            assert (a.stop_reason, a.final, [(c.name, c.arguments) for c in a.calls]) == \
                   (b.stop_reason, b.final, [(c.name, c.arguments) for c in b.calls]), (rung.name, task.id)
            assert (served.input_tokens, served.output_tokens) == (local.input_tokens, local.output_tokens)
