"""Benchmark: tokens/s of a real CPU model through advisor + the embedded Triton, beside the same model's bare
llama.cpp tokens/s, in the same run (ladders/cpu.yaml; needs `make cpu-models`).

For each rung asked for, one process holds both: the embedded Triton serving the rung (llama.cpp inside a
PyTriton-bound model, `advisor.triton.llama_model`) reached through advisor's `triton` backend
(`advisor.backends.client_for`), and a second, bare `llama_cpp.Llama` on the same GGUF file with the same
threads and context. Rounds alternate bare/advisor; each round generates `--max-tokens` tokens at temperature 0
from the same chat-templated prompt. Generation tokens/s = output tokens / wall time of the whole call (prompt
processing included, for both). Prints per-round rates, the median advisor/bare ratio and its spread (goal >= 0.80).

    .venv/bin/python benchmarks/cpu_models.py [--rung smollm2-135m] [--rounds 3] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MESSAGES = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Write a short paragraph about why the sea is salty."}]


def bare_rate(llama, prompt: str, max_tokens: int) -> tuple[float, int]:
    """(tokens/s, tokens) of one bare llama.cpp completion."""
    started = time.perf_counter()
    out = llama.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, seed=0)
    n = out["usage"]["completion_tokens"]
    return n / (time.perf_counter() - started), n


async def advisor_rate(client, model: str, prompt: str, max_tokens: int) -> tuple[float, int]:
    """(tokens/s, tokens) of one generation through advisor's triton backend and the embedded Triton."""
    started = time.perf_counter()
    result = await client.generate(model, prompt, max_tokens=max_tokens, sampling={"temperature": 0.0, "seed": 0})
    assert result.tokens_from_server, result.note
    return result.output_tokens / (time.perf_counter() - started), result.output_tokens


def bench_rung(ladder, rung_name: str, rounds: int, max_tokens: int) -> dict:
    from advisor.agent.chat import template_for
    from advisor.backends import client_for
    from advisor.triton.llama_model import load_llama
    from advisor.triton.server import EmbeddedTriton

    rung = ladder.rung(rung_name)
    one = ladder.model_copy(update={"rungs": [rung], "roles": ladder.roles.model_copy(update={"judge": None,
                                                                                              "orchestrator": None})})
    prompt = template_for(rung).render(MESSAGES)
    bare = load_llama(rung)
    rows = []
    with EmbeddedTriton(one) as server:
        client = client_for(rung, one, url=server.grpc_url)

        async def run():
            await advisor_rate(client, rung.model_id, prompt, 4)  # contract check, warm caches
            bare_rate(bare, prompt, 4)
            for i in range(rounds):
                b, nb = bare_rate(bare, prompt, max_tokens)
                a, na = await advisor_rate(client, rung.model_id, prompt, max_tokens)
                rows.append((b, a, nb, na))
                print(f"  {rung_name} round {i + 1}: bare {b:6.1f} tok/s ({nb} tokens)   advisor+Triton {a:6.1f} "
                      f"tok/s ({na} tokens)   ratio {a / b:.2f}", flush=True)
            await client.close()

        asyncio.run(run())
    ratios = [a / b for b, a, _, _ in rows]
    return {"rung": rung_name, "bare": statistics.median(r[0] for r in rows),
            "advisor": statistics.median(r[1] for r in rows), "ratio": statistics.median(ratios),
            "min": min(ratios), "max": max(ratios)}


def main() -> None:
    from advisor.ladder import load_ladder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladder", type=Path, default=ROOT / "ladders" / "cpu.yaml")
    parser.add_argument("--rung", action="append", help="Rung(s) to measure (default: every rung).")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    ladder = load_ladder(args.ladder)
    results = [bench_rung(ladder, name, args.rounds, args.max_tokens) for name in (args.rung or [r.name for r in ladder.rungs])]
    print("\nrung                  bare tok/s  advisor+Triton tok/s  ratio (min-max)")
    for r in results:
        print(f"{r['rung']:<22}{r['bare']:>10.1f}{r['advisor']:>22.1f}  {r['ratio']:.2f} ({r['min']:.2f}-{r['max']:.2f})")


if __name__ == "__main__":
    main()
