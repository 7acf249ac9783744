"""Benchmark: real agent frameworks running tool tasks through `advisor serve`, and what reached them.

Starts the embedded Triton on a ladder (default the demo's SIMULATED stand-ins), probes a few example tasks so the
service can train its router, starts `advisor serve --url` to it, and runs the example suite's documentation tasks
(search the docs, read a page, answer) with each framework's own agent loop and its own tools, `model: auto`, no
session header (the sessions are derived):

  * ``openai-sdk``: the `openai` package's chat completions in a plain loop (parallel_tool_calls on);
  * ``agents-responses`` / ``agents-chat``: the OpenAI Agents SDK's `Runner.run` with its default Responses model
    and with its Chat Completions model;
  * ``langgraph``: LangGraph's `create_react_agent` over `langchain-openai`'s `ChatOpenAI`;
  * ``pydantic-ai``: pydantic-ai's `Agent` over its `OpenAIChatModel`, the tools plain functions;
  * ``inspect-ai``: inspect_ai's `eval` of one sample, ``use_tools`` then ``generate`` (its own tool loop), through
    its OpenAI-compatible provider.

Per framework: runs completed (a final answer after both tools ran, no error), tool calls round-tripped (tool
functions the framework ran), broken steps that reached the client (goal 0: a tool call whose arguments the
tool's schema refuses, a call of a tool that was not offered, call text, a ``FINAL ANSWER:`` marker in any case
or a stand-in label in an answer, an empty answer, a 4xx answer), in-request retries (the broken steps named in
``x-advisor-broken-steps``, an error answer's too), in-request escalations (the step answered on a rung above the
session's latch), session escalations (``x-advisor-escalation``), rungs per session (mean distinct rungs a run's
steps were answered on) and wall time per run.

    .venv/bin/python benchmarks/agent_frameworks.py [--ladder ladders/demo.yaml] [--runs 3]
        [--frameworks openai-sdk agents-responses agents-chat langgraph pydantic-ai inspect-ai]
        [--config SERVICE.yaml] [--json]
        [--store FILE] [--probe-per-class 2]

A ladder of real models (``ladders/cpu.yaml``: llama.cpp on CPU) is probed and served the same way, the service
given `REAL_LIMITS` (a CPU step takes seconds to a minute on two shared cores, past the default 30 s per attempt)
and the clients `CLIENT_TIMEOUT_S`; ``--store FILE`` keeps the probe, so a second run with another ``--config``
skips it. ``--json`` adds each run's answer and the advisor headers of each of its steps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load_test import DEMO, KEY, SUITE, start_service, start_triton, stop  # noqa: E402

FRAMEWORKS = ("openai-sdk", "agents-responses", "agents-chat", "langgraph", "pydantic-ai", "inspect-ai")
#: A real ladder's service limits: a step of a CPU model takes tens of seconds (a minute with a long prompt on busy
#: cores), past the service's default 30 s per attempt and 60 s per request.
REAL_LIMITS = {"deadline_s": 900.0, "attempt_timeout_s": 420.0}
CLIENT_TIMEOUT_S = 960.0
LEAKS = re.compile(r"<tool_call>|<TOOLCALL>|<function=|(?i:FINAL ANSWER:)|\[SIMULATED ")


class Observer:
    """What one run saw: statuses and advisor headers of every answer, tool calls, broken steps."""

    def __init__(self, schemas: dict[str, dict]):
        self.schemas = schemas
        self.headers: list[dict[str, str]] = []
        self.statuses: list[int] = []
        self.tool_calls = 0
        self.tools_run: set[str] = set()
        self.broken: list[str] = []
        self.final: str | None = None

    def sync(self, response):
        self.statuses.append(response.status_code)
        self.headers.append({k: v for k, v in response.headers.items() if k.startswith("x-advisor-")})
        if 400 <= response.status_code < 500:
            self.broken.append(f"HTTP {response.status_code}")

    async def async_(self, response):
        self.sync(response)

    def tool(self, name: str, args: dict) -> None:
        """A tool the framework ran: its arguments must be what the offered schema accepts."""
        from advisor.service.checks.step_check import schema_violation

        self.tool_calls += 1
        self.tools_run.add(name)
        if name not in self.schemas:
            self.broken.append(f"call of {name!r}, not offered")
        elif schema_violation(self.schemas[name], args) is not None:
            self.broken.append(f"{name} arguments {args}")

    def answer(self, text) -> None:
        self.final = text if isinstance(text, str) else repr(text)
        if not isinstance(text, str) or not text.strip():
            self.broken.append("empty answer")
        elif LEAKS.search(text):
            self.broken.append(f"leaked text: {text[:60]!r}")


SCHEMAS = {"search_docs": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
                           "additionalProperties": False},
           "read_doc": {"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"],
                        "additionalProperties": False}}


def docs_tools(obs: Observer):
    """search_docs and read_doc as plain functions that report to `obs`."""

    def search_docs(query: str) -> str:
        """Search the Larkspur documentation; returns matching page ids and titles."""
        obs.tool("search_docs", {"query": query})
        return json.dumps([{"doc_id": "kb-backups", "title": "Backups"}, {"doc_id": "kb-audit", "title": "Audit"}])

    def read_doc(doc_id: str) -> str:
        """Read one documentation page by its id."""
        obs.tool("read_doc", {"doc_id": doc_id})
        return f"Page {doc_id}: entries are kept for 35 days."

    return search_docs, read_doc


def run_openai_sdk(base: str, task, obs: Observer) -> None:
    import httpx
    import openai

    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT_S,
                           http_client=httpx.Client(event_hooks={"response": [obs.sync]}, timeout=CLIENT_TIMEOUT_S))
    fns = {f.__name__: f for f in docs_tools(obs)}
    tools = [{"type": "function", "function": {"name": n, "description": f.__doc__, "parameters": SCHEMAS[n]}}
             for n, f in fns.items()]
    messages = [{"role": "user", "content": task.instructions}]
    for _ in range(10):
        message = client.chat.completions.create(model="auto", messages=messages, tools=tools,
                                                 parallel_tool_calls=True).choices[0].message
        if not message.tool_calls:
            return obs.answer(message.content)
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            try:
                args = json.loads(call.function.arguments)
                out = fns[call.function.name](**args) if call.function.name in fns else "Error: no such tool"
            except (ValueError, TypeError) as exc:
                obs.broken.append(f"arguments {call.function.arguments!r}: {exc}")
                out = f"Error: {exc}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": out})
    raise RuntimeError("no answer in 10 steps")


def run_agents(base: str, task, obs: Observer, api: str) -> None:
    import httpx
    from agents import (Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                        set_tracing_disabled)
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT_S,
                         http_client=httpx.AsyncClient(event_hooks={"response": [obs.async_]},
                                                       timeout=CLIENT_TIMEOUT_S))
    model = (OpenAIResponsesModel if api == "responses" else OpenAIChatCompletionsModel)(model="auto",
                                                                                          openai_client=client)
    agent = Agent(name="docs", instructions="You answer questions from the Larkspur documentation.", model=model,
                  tools=[function_tool(f) for f in docs_tools(obs)])
    obs.answer(asyncio.run(Runner.run(agent, task.instructions, max_turns=10)).final_output)


def run_langgraph(base: str, task, obs: Observer) -> None:
    import httpx
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    model = ChatOpenAI(model="auto", base_url=base + "/v1", api_key=KEY, max_retries=0, timeout=CLIENT_TIMEOUT_S,
                       http_client=httpx.Client(event_hooks={"response": [obs.sync]}, timeout=CLIENT_TIMEOUT_S))
    agent = create_react_agent(model, [tool(f) for f in docs_tools(obs)],
                               prompt="You answer questions from the Larkspur documentation.")
    state = agent.invoke({"messages": [("user", task.instructions)]}, {"recursion_limit": 22})
    obs.answer(state["messages"][-1].content)


def run_pydantic_ai(base: str, task, obs: Observer) -> None:
    import httpx
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    http = httpx.AsyncClient(event_hooks={"response": [obs.async_]}, timeout=CLIENT_TIMEOUT_S)
    model = OpenAIChatModel("auto", provider=OpenAIProvider(base_url=base + "/v1", api_key=KEY, http_client=http))
    agent = Agent(model, system_prompt="You answer questions from the Larkspur documentation.",
                  tools=list(docs_tools(obs)))
    obs.answer(agent.run_sync(task.instructions).output)


def inspect_tools(search, read):
    """`search` and `read` (plain functions) as inspect_ai tools (it reads each one's schema from its docstring)."""
    from inspect_ai.tool import tool

    @tool
    def search_docs():
        async def execute(query: str) -> str:
            """Search the Larkspur documentation; returns matching page ids and titles.

            Args:
                query: What to search for.
            """
            return search(query)
        return execute

    @tool
    def read_doc():
        async def execute(doc_id: str) -> str:
            """Read one documentation page by its id.

            Args:
                doc_id: The page's id.
            """
            return read(doc_id)
        return execute

    return search_docs, read_doc


def run_inspect(base: str, task, obs: Observer) -> None:
    """inspect_ai's own tool loop (``use_tools`` then ``generate``: it calls tools until the model answers), one
    sample, its OpenAI-compatible provider pointed at the service; headers seen through the provider's client."""
    import tempfile

    import httpx
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.model import get_model
    from inspect_ai.solver import generate, system_message, use_tools

    search_docs, read_doc = inspect_tools(*docs_tools(obs))

    with tempfile.TemporaryDirectory(prefix="advisor-inspect-") as logs:
        done = inspect_eval(
            Task(dataset=[Sample(input=task.instructions)],
                 solver=[system_message("You answer questions from the Larkspur documentation."),
                         use_tools([search_docs(), read_doc()]), generate()]),
            model=get_model("openai-api/advisor/auto", base_url=base + "/v1", api_key=KEY, memoize=False,
                            http_client=httpx.AsyncClient(event_hooks={"response": [obs.async_]},
                                                          timeout=CLIENT_TIMEOUT_S)),
            log_dir=logs, display="none", max_retries=0)  # not memoized: each run's client on its own loop
        sample = done[0].samples[0]  # read while its log file is still there
        if sample.error is not None:
            raise RuntimeError(sample.error.message)
        obs.answer(sample.output.completion)


def run_one(framework: str, base: str, task) -> dict:
    """One run of `task` by `framework`: what it saw."""
    obs = Observer(SCHEMAS)
    started = time.perf_counter()
    error = None
    try:
        if framework == "openai-sdk":
            run_openai_sdk(base, task, obs)
        elif framework == "langgraph":
            run_langgraph(base, task, obs)
        elif framework == "pydantic-ai":
            run_pydantic_ai(base, task, obs)
        elif framework == "inspect-ai":
            run_inspect(base, task, obs)
        else:
            run_agents(base, task, obs, "responses" if framework == "agents-responses" else "chat")
    except Exception as exc:  # noqa: BLE001 - a run that fails is counted, with why
        error = f"{type(exc).__name__}: {str(exc)[:160]}"
    steps = [h for h in obs.headers if "x-advisor-rung" in h]
    skipped = sorted(set(SCHEMAS) - obs.tools_run)
    if error is None and skipped:  # an answer without searching and reading is no completed task
        error = f"answered without calling {' and '.join(skipped)}"
    return {"framework": framework, "task": task.id, "completed": error is None and not obs.broken,
            "error": error, "tool_calls": obs.tool_calls, "broken_to_client": obs.broken,
            "statuses": sorted(set(obs.statuses)), "steps": len(steps),
            "retries": sum(len(h["x-advisor-broken-steps"].split(",")) for h in obs.headers  # a 502 too
                           if h.get("x-advisor-broken-steps")),
            "in_request_escalations": sum(h["x-advisor-rung"] != h["x-advisor-chain"].split(",")[0] for h in steps),
            "session_escalations": sum("x-advisor-escalation" in h for h in steps),
            "rungs": sorted({h["x-advisor-rung"] for h in steps}), "wall_s": time.perf_counter() - started,
            "answer": (obs.final or "")[:300], "headers": obs.headers}


def probe(url: str, ladder: Path, store: Path, per_class: int) -> None:
    """A small probe (the router's training data): `per_class` example tasks of each class, baseline only (where
    no sandbox works, without the tasks that run code)."""
    from advisor.probe import ProbeConfig, run_probe
    from advisor.suite import load_suite
    from advisor.tools.sandbox import runs_code, sandbox_status

    chosen, count = [], defaultdict(int)
    sandbox = sandbox_status()[0] is not None
    for t in load_suite(SUITE).tasks:
        if count[t.task_class] < per_class and (sandbox or not runs_code(t)):
            count[t.task_class] += 1
            chosen.append(t.id)
    run_probe(ProbeConfig(ladder_path=ladder, suite_path=SUITE, url=url, store_path=store, replicas=1,
                          conditions=("baseline",), tasks=chosen))


def service_config(given: Path | None, ladder: Path, tmp: Path) -> Path | None:
    """The service config: `given` as it is on a simulated ladder; on a real one, with `REAL_LIMITS` for the limits
    it does not set itself (a file in `tmp`)."""
    from advisor.ladder import load_ladder
    from advisor.yamlio import read_yaml

    if load_ladder(ladder).simulated:
        return given
    body = dict(read_yaml(given)) if given else {"version": 1}
    body["limits"] = {**REAL_LIMITS, **(body.get("limits") or {})}
    out = tmp / "service.yaml"
    out.write_text(json.dumps(body))  # JSON is YAML
    return out


def table(rows: list[dict], ladder: str) -> str:
    """The per-framework Markdown table."""
    out = ["| ladder | framework | runs completed | tool calls | broken steps to client | in-request retries | "
           "in-request escalations | session escalations | rungs per session | wall s per run |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    by = defaultdict(list)
    for r in rows:
        by[r["framework"]].append(r)
    for name, rs in by.items():
        out.append(f"| {ladder} | {name} | {sum(r['completed'] for r in rs)}/{len(rs)} | "
                   f"{sum(r['tool_calls'] for r in rs)} | {sum(len(r['broken_to_client']) for r in rs)} | "
                   f"{sum(r['retries'] for r in rs)} | {sum(r['in_request_escalations'] for r in rs)} | "
                   f"{sum(r['session_escalations'] for r in rs)} | "
                   f"{statistics.mean(len(r['rungs']) for r in rs):.2f} | "
                   f"{statistics.median(r['wall_s'] for r in rs):.1f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ladder", type=Path, default=DEMO)
    parser.add_argument("--runs", type=int, default=3, help="Runs per framework (over the docs tasks in turn).")
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--probe-per-class", type=int, default=2, help="Example tasks per class in the probe.")
    parser.add_argument("--config", type=Path, default=None,
                        help="The service config (default none: sessions start on the least expected USD per "
                             "usable trajectory); e.g. one with sessions: {start: router}.")
    parser.add_argument("--json", action="store_true", help="Every run as JSON lines after the table.")
    parser.add_argument("--store", type=Path, default=None,
                        help="Keep the probe and the service's records in this DuckDB file (default: a temporary "
                             "one); a file that exists is served as it is, not probed again.")
    args = parser.parse_args()
    from advisor.suite import load_suite

    tasks = [t for t in load_suite(SUITE).tasks if t.task_class == "doc_retrieval"]
    triton, url = start_triton(args.ladder)
    rows = []
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="advisor-frameworks-") as tmp:
            store = args.store or Path(tmp) / "frameworks.duckdb"
            if not store.exists():
                probe(url, args.ladder, store, args.probe_per_class)
            config = service_config(args.config, args.ladder, Path(tmp))
            extra = ["--ingest-every", "0", *(["--config", str(config)] if config else [])]
            service, base = start_service(url, store, 1, extra, ladder=args.ladder)
            try:
                for framework in args.frameworks:
                    for i in range(args.runs):
                        rows.append(run_one(framework, base, tasks[i % len(tasks)]))
                        print(json.dumps({k: rows[-1][k] for k in ("framework", "task", "completed", "error",
                                                                   "tool_calls", "rungs")}), file=sys.stderr)
            finally:
                stop(service)
    finally:
        stop(triton)
    print(f"agent frameworks through advisor serve: ladder {args.ladder.name}, config "
          f"{args.config.name if args.config else 'none'}, {args.runs} run(s) per framework "
          f"over the example suite's doc_retrieval tasks, {time.time() - started:.0f} s in all, load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores at the end")
    print(table(rows, args.ladder.stem))
    for r in rows:
        if r["error"] or r["broken_to_client"]:
            print(f"  {r['framework']} {r['task']}: {r['error'] or ''} {r['broken_to_client'] or ''}")
    if args.json:
        for r in rows:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
