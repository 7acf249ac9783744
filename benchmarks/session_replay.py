"""Benchmark: does routing the session pay? The suite's agent tasks through the routing service, as an agent client.

Starts the embedded Triton (`advisor triton serve`: by default the demo ladder's SIMULATED stand-ins), probes
the suite's tasks (`--probe-replicas` per rung, baseline: the router's training data and the session figures of
`advisor.service.sessions.costs`; the router is trained once and given to every service), then starts `advisor
serve --url` three times: sessions off (`sessions: {enabled: false}`: per-request routing), sessions on (the
default: each session started on the least expected USD per usable trajectory), and sessions on with `start:
router` (started by the router's policy), each with time limits a CPU model's slow steps fit in (`LIMITS`).
Each episode is the agent loop (`advisor.agent.loop.run_episode`) pointed at a service through
`ServiceClient`: every step is one ``POST /v1/chat/completions`` with the conversation so far (OpenAI messages,
tool calls as ``tool_calls``), the task's tools, the task's class as ``advisor.task_class`` (unless
`--no-class`) and the episode's seed; the episode is scored with the suite's checks as the probe scores it,
before its workspace is closed (usable: overall >= 75; judge criteria unscored). Arms, on the same tasks and
seeds (the stand-ins draw one plan per rung, task and seed: common random numbers):

  * fixed <rung>:          ``model: <rung>`` (pinned) for every step;
  * per-request:           ``model: auto`` on the service with sessions off;
  * session:               ``model: auto`` with ``x-advisor-session: <episode id>``: started, latched, escalated;
  * session, router start: the same with ``sessions: {start: router}``.

Per arm: episodes, usable rate with its Wilson 95% interval, USD (summed ``usage.advisor.cost_usd`` of every
step), USD per usable trajectory, steps, and for the session arm the escalations by reason and the predicted
session cost from the probe's runs. The goal line checks: session usable rate inside the best fixed rung's
interval at <= 60% of its USD, and session USD per usable below per-request routing's; the bound line gives the
cheapest one-fixed-rung-per-class assignment that reaches that interval with this replay's outcomes known (an
oracle, not a policy). `--holdout` probes every other task of each class and replays the others. The first
line says whether the rungs were SIMULATED stand-ins or real models.

    .venv/bin/python benchmarks/session_replay.py [--replicas 2] [--concurrency 4] [--json FILE] [--sessions YAML]
        [--probe-replicas 3] [--holdout] [--no-class] [--no-router-start] [--ladder FILE --suite FILE]

`--ladder ladders/cpu.yaml --suite suites/tiny/suite.yaml` runs it on the real small CPU models (after `make
cpu-models`): the figures are then real, and labelled so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from load_test import DEMO, KEY, SUITE, start_service, start_triton, stop  # noqa: E402

FORMAT = "hermes"  #: how the client's loop writes tool calls to itself (the service re-renders them per rung)
#: time limits for CPU models that take tens of seconds a step (a timed-out step would fail over to another rung)
LIMITS = "limits: {attempt_timeout_s: 600, deadline_s: 1200}"
SEED0 = 1000  #: replay seeds are SEED0 + replica (the probe's seeds are hashed: no overlap)


class JsonTemplate:
    """The loop's 'chat template': the messages as JSON, read back by `ServiceClient` (no rendering)."""

    def render(self, messages, add_generation_prompt: bool = True) -> str:
        """The messages as JSON text."""
        return json.dumps(messages)


@dataclass
class ServiceModel:
    """What the agent loop reads of a model: here the service's model name (``auto`` or a rung)."""

    name: str
    tool_call_format: str = FORMAT
    max_output_tokens: int = 1024
    simulated: bool = True

    @property
    def model_id(self) -> str:
        """The model name sent to the service."""
        return self.name

    triton_model = model_id  #: the same, under the name the Triton package uses


@dataclass
class ServiceClient:
    """The loop's model client: each generation is one chat completion on the service (see the module doc)."""

    http: object
    tools: list[dict]
    specs: list
    session: str | None = None
    task_class: str | None = None  #: sent as ``advisor.task_class`` (None: the service's class rules decide)
    cost: float = 0.0
    rungs: list[str] = field(default_factory=list)
    escalations: list[str] = field(default_factory=list)

    def openai_messages(self, messages: list[dict]) -> list[dict]:
        """The loop's messages as an OpenAI client sends them: tool calls as ``tool_calls``, their results as
        ``tool`` messages; an unparseable reply and the loop's note on it as assistant and user text."""
        from advisor.agent.chat import system_prompt
        from advisor.agent.formats import format_for

        fmt, out, pending = format_for(FORMAT), [], None
        for i, m in enumerate(messages):
            if m["role"] == "system":
                out.append({"role": "system", "content": system_prompt("", None)})
            elif m["role"] == "assistant":
                parsed = fmt.parse(m["content"], self.specs)
                if parsed.kind == "call":
                    pending = f"call_{i}"
                    out.append({"role": "assistant", "content": None, "tool_calls": [
                        {"id": pending, "type": "function",
                         "function": {"name": parsed.name, "arguments": json.dumps(parsed.arguments)}}]})
                else:
                    pending = None
                    out.append({"role": "assistant", "content": m["content"]})
            elif m["role"] == "tool" and pending:
                out.append({"role": "tool", "tool_call_id": pending, "content": m["content"]})
                pending = None
            else:
                out.append({"role": "user", "content": m["content"]})
        return out

    async def generate(self, model: str, prompt: str, *, max_tokens: int, sampling: dict | None = None,
                       timeout_s: float | None = None, request_id: str | None = None,
                       messages: list | None = None, tools: list | None = None):
        """One step through the service; the reply as the loop's format writes it."""
        from advisor.agent.formats import format_for
        from advisor.errors import BackendError

        body = {"model": model, "messages": self.openai_messages(json.loads(prompt)), "tools": self.tools,
                "max_tokens": max_tokens}
        if sampling and "seed" in sampling:
            body["seed"] = sampling["seed"]
        if self.task_class and model == "auto":
            body["advisor"] = {"task_class": self.task_class}
        headers = {"x-advisor-session": self.session} if self.session else {}
        resp = await self.http.post("/v1/chat/completions", json=body, headers=headers, timeout=60)
        if resp.status_code != 200:
            raise BackendError(f"service answered {resp.status_code}: {resp.text[:300]}")
        data = resp.json()
        choice, usage = data["choices"][0], data["usage"]
        self.cost += usage["advisor"]["cost_usd"]
        self.rungs.append(resp.headers.get("x-advisor-rung", ""))
        if resp.headers.get("x-advisor-escalation"):
            self.escalations.append(resp.headers["x-advisor-escalation"])
        msg = choice["message"]
        calls = msg.get("tool_calls") or []
        text = "\n".join([*filter(None, [msg.get("content")]),
                          *(format_for(FORMAT).render_call(c["function"]["name"], json.loads(c["function"]["arguments"]))
                            for c in calls)])
        return SimpleNamespace(text=text, finish_reason=choice["finish_reason"], input_tokens=usage["prompt_tokens"],
                               output_tokens=usage["completion_tokens"], tokens_from_server=True)


async def episode(base: str, arm: str, task, suite, seed: int, root: Path, send_class: bool = True) -> dict:
    """One scored episode of `task` on `arm` through the service at `base`."""
    import httpx

    from advisor.agent.loop import run_episode
    from advisor.checks import score_episode
    from advisor.tools.environment import Environment

    env = Environment.create(task.for_condition("baseline"), root)
    specs = list(env.specs())
    tools = [{"type": "function", "function": {"name": s.name, "description": s.description,
                                               "parameters": s.parameters}} for s in specs]
    routed = arm == "per-request" or arm.startswith("session")
    model = "auto" if routed else arm
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as http:
        client = ServiceClient(http, tools, specs, session=f"{task.id}:{seed}" if arm.startswith("session") else None,
                               task_class=task.task_class if send_class else None)
        try:
            res = await run_episode(task, ServiceModel(model), client, env, suite.limits_for(task),
                                    sampling={"seed": seed}, template=JsonTemplate())
            card = await score_episode(task, res.episode, None)  # before close: checks read the workspace
        finally:
            env.close()
    return {"arm": arm, "task": task.id, "task_class": task.task_class, "seed": seed,
            "stop": str(res.episode.stop_reason), "steps": res.model_calls, "cost": client.cost,
            "usable": card.overall is not None and card.overall >= 75.0, "unscored": card.overall is None,
            "start": client.rungs[0] if client.rungs else None, "final": client.rungs[-1] if client.rungs else None,
            "rungs": client.rungs,
            "escalations": client.escalations}


async def run_arm(base: str, arm: str, tasks, suite, replicas: int, concurrency: int, root: Path,
                  send_class: bool = True) -> list[dict]:
    """Every task x replica of one arm, `concurrency` episodes at a time."""
    gate = asyncio.Semaphore(concurrency)

    async def one(task, r):
        async with gate:
            return await episode(base, arm, task, suite, SEED0 + r, root, send_class)

    return await asyncio.gather(*(one(t, r) for t in tasks for r in range(replicas)))


def summary(rows: list[dict]) -> dict:
    """Usable rate (Wilson 95%), USD, USD per usable trajectory, steps, escalations of one arm's episodes."""
    from advisor.floors import wilson_interval

    n, u = len(rows), sum(r["usable"] for r in rows)
    cost = sum(r["cost"] for r in rows)
    reasons = Counter(e.split(" ", 1)[0] for r in rows for e in r["escalations"])
    return {"episodes": n, "usable": u, "rate": u / n if n else 0.0, "ci": wilson_interval(u, n, 0.95),
            "usd": cost, "usd_per_usable": cost / u if u else None, "steps": sum(r["steps"] for r in rows) / max(n, 1),
            "escalated": sum(bool(r["escalations"]) for r in rows), "reasons": dict(reasons),
            "unscored": sum(r["unscored"] for r in rows),
            "start_final": dict(Counter(f"{r['start']}->{r['final']}" for r in rows))}


def predicted_session_usd(store_path: Path, rows: list[dict], ladder, sessions: str) -> float:
    """Predicted USD of the session arm's episodes from the probe: per episode, the expected USD of a session of
    its class started on its start rung (`advisor.service.sessions.costs`: the service's escalation rule replayed
    over the probe's runs, escalations counted)."""
    from advisor.service.process.config import SessionConfig
    from advisor.service.sessions.costs import cells_from_store, parse_cells, start_options
    from advisor.store import Store
    import yaml

    config = SessionConfig.model_validate(yaml.safe_load(sessions) or {})
    with Store.open(store_path, read_only=True) as s:
        cells = parse_cells(cells_from_store(s, ladder, config))
    names = [r.name for r in ladder.rungs]
    total = 0.0
    for r in rows:
        by = cells.get(r["task_class"], {})
        if r["start"] not in by or any(n not in by for n in names):
            continue
        options = start_options(names, names, {n: 0.0 for n in names}, by, config.escalate_by)
        total += next(o.usd for o in options if o.rung == r["start"])
    return total


def class_oracle(results: dict[str, list[dict]], fixed: list[str], rate: float) -> tuple[float, dict] | None:
    """The cheapest assignment of one fixed rung per class whose usable rate, on this replay's own fixed-rung
    episodes, reaches `rate`: (USD, class -> rung), or None when none does. Not a policy (it knows the
    outcomes): a bound on what any per-class start can reach on these episodes."""
    from itertools import product

    cells: dict[str, dict[str, tuple[int, float]]] = {}
    for arm in fixed:
        for r in results[arm]:
            u, c = cells.setdefault(r["task_class"], {}).get(arm, (0, 0.0))
            cells[r["task_class"]][arm] = (u + r["usable"], c + r["cost"])
    classes = sorted(cells)
    episodes = len(results[fixed[0]])
    best = None
    for choice in product(fixed, repeat=len(classes)):
        usable = sum(cells[c][a][0] for c, a in zip(classes, choice))
        cost = sum(cells[c][a][1] for c, a in zip(classes, choice))
        if usable / episodes >= rate and (best is None or cost < best[0]):
            best = (cost, dict(zip(classes, choice)))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2, help="Episodes per task and arm (seeds 1000, 1001, ...).")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--tasks", type=int, default=0, help="Only the first N tasks (0: all).")
    ap.add_argument("--json", type=Path, help="Write every episode and the summaries here.")
    ap.add_argument("--sessions", default="{}", help="The session arm's `sessions:` config (YAML flow mapping), "
                    "e.g. '{stuck_repeats: 3}'.")
    ap.add_argument("--probe-replicas", type=int, default=3, help="Replicas of the baseline probe the router and "
                    "the session figures are trained on (its seeds differ from the replay's).")
    ap.add_argument("--ladder", type=Path, default=DEMO, help="Ladder (default: the demo ladder's stand-ins; "
                    "ladders/cpu.yaml runs real small models, after `make cpu-models`).")
    ap.add_argument("--suite", type=Path, default=SUITE, help="Suite whose tasks are probed and replayed.")
    ap.add_argument("--no-router-start", dest="router_start", action="store_false", help="Leave out the 'session, "
                    "router start' arm (sessions: {start: router}).")
    ap.add_argument("--holdout", action="store_true", help="Probe (train on) every other task of each class and "
                    "replay only the others: the router and the session figures never saw the replayed tasks.")
    ap.add_argument("--no-class", dest="send_class", action="store_false", help="The client names no class "
                    "(advisor.task_class); the service's class rules (none here) decide.")
    args = ap.parse_args()

    from advisor.ladder import load_ladder
    from advisor.probe import ProbeConfig, run_probe
    from advisor.suite import load_suite

    ladder, suite = load_ladder(args.ladder), load_suite(args.suite)
    tasks = suite.tasks[: args.tasks] if args.tasks else suite.tasks
    trained = tasks
    if args.holdout:  # the probe sees every other task of each class; the replay runs the rest
        by_class: dict[str, list] = {}
        for t in tasks:
            by_class.setdefault(t.task_class, []).append(t)
        trained = [t for ts in by_class.values() for t in ts[0::2]]
        tasks = [t for ts in by_class.values() for t in ts[1::2]]
    started = time.monotonic()
    triton, url = start_triton(args.ladder, args.suite)
    tmp = Path(tempfile.mkdtemp(prefix="session-replay-"))
    services = []
    try:
        probe = tmp / "probe.duckdb"
        run_probe(ProbeConfig(ladder_path=args.ladder, suite_path=args.suite, url=url, store_path=probe,
                              replicas=args.probe_replicas,
                              conditions=("baseline",), tasks=[t.id for t in trained]))
        from advisor.service.launch import train_from_store

        router = train_from_store(probe, ladder).save(tmp / "router.json")  # one router for every service
        results: dict[str, list[dict]] = {}
        import yaml

        router_start = yaml.safe_dump({**(yaml.safe_load(args.sessions) or {}), "start": "router"},
                                      default_flow_style=True).strip()
        services_run = [("off", "{enabled: false}"), ("on", args.sessions)]
        if args.router_start:
            services_run.append(("router-start", router_start))
        for label, sessions in services_run:
            cfg = tmp / f"service-{label}.yaml"
            cfg.write_text(f"version: 1\nsessions: {sessions}\n{LIMITS}\n")
            store = tmp / f"live-{label}.duckdb"
            shutil.copy(probe, store)
            proc, base = start_service(url, store, 1, ["--config", str(cfg), "--ingest-every", "0",
                                                       "--router", str(router)], ladder=args.ladder)
            services.append(proc)
            arms = {"off": [r.name for r in ladder.rungs] + ["per-request"], "on": ["session"],
                    "router-start": ["session, router start"]}[label]
            for arm in arms:
                results[arm] = asyncio.run(run_arm(base, arm, tasks, suite, args.replicas, args.concurrency, tmp,
                                                   args.send_class))
            stop(proc)
        summaries = {arm: summary(rows) for arm, rows in results.items()}
        predicted = predicted_session_usd(probe, results["session"], ladder, args.sessions)
    finally:
        for proc in services:
            stop(proc)
        stop(triton)
    kind = ("SIMULATED (stand-in rungs)" if any(r.simulated for r in ladder.rungs)
            else "REAL models (no stand-in rung)")
    print(f"{kind}: ladder {ladder.name!r}, suite {suite.name!r}: {len(tasks)} tasks x {args.replicas} seeds per arm, "
          f"{time.monotonic() - started:.0f} s; router and session figures from a {args.probe_replicas}-replica "
          + (f"baseline probe of {len(trained)} other tasks (HELD OUT: the replayed tasks were not probed); the client "
             if args.holdout else "baseline probe of the same tasks (other seeds); the client ")
          + ("names each task's class" if args.send_class else "names no class"))
    print(f"{'arm':<21} {'episodes':>8} {'usable':>7} {'rate':>6} {'95% CI':>15} {'USD':>10} {'USD/usable':>11} "
          f"{'steps':>6} {'escalated':>9}")
    for arm, s in summaries.items():
        per = f"{s['usd_per_usable']:.5f}" if s["usd_per_usable"] is not None else "-"
        print(f"{arm:<21} {s['episodes']:>8} {s['usable']:>7} {s['rate']:>6.3f} {s['ci'][0]:>7.3f}..{s['ci'][1]:.3f} "
              f"{s['usd']:>10.5f} {per:>11} {s['steps']:>6.1f} {s['escalated']:>9}")
    sess = summaries["session"]
    print(f"session escalations by reason: {sess['reasons'] or 'none'}; start->final rung: {sess['start_final']}")
    print(f"session USD predicted from the probe's rates (expected escalations): {predicted:.5f}; measured "
          f"{sess['usd']:.5f}")
    fixed = [r.name for r in ladder.rungs]
    best = max(fixed, key=lambda a: (summaries[a]["rate"], -summaries[a]["usd"]))
    b = summaries[best]
    within = sess["rate"] >= b["ci"][0]
    share = sess["usd"] / b["usd"] if b["usd"] else float("nan")
    pr = summaries["per-request"]
    beats = (sess["usd_per_usable"] or float("inf")) < (pr["usd_per_usable"] or float("inf"))
    print(f"goal: usable rate within the best fixed rung's ({best}: {b['rate']:.3f}, CI {b['ci'][0]:.3f}..) "
          f"interval: {'met' if within else 'MISSED'} ({sess['rate']:.3f}); USD <= 60% of it: "
          f"{'met' if share <= 0.6 else 'MISSED'} ({share:.0%}); USD per usable below per-request routing's: "
          f"{'met' if beats else 'MISSED'}")
    bound = class_oracle(results, fixed, b["ci"][0])
    if bound:
        print(f"bound (an oracle that knows this replay's outcomes, one fixed rung per class): the cheapest such "
              f"assignment reaching {b['ci'][0]:.3f} costs {bound[0] / b['usd']:.0%} of {best}'s USD "
              f"({', '.join(f'{c}: {r}' for c, r in sorted(bound[1].items()))})")
    if args.json:
        args.json.write_text(json.dumps({"summaries": summaries, "episodes": results, "predicted_session_usd": predicted},
                                        indent=1, default=str))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
