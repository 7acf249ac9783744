"""A whole probe as the CLI runs it: resolve files, serve or reach the rungs, run the grid, summarize.

`run_probe(config, planner)` is the library function behind ``advisor probe``: the planner
(`advisor.probe.planners`) chooses the runs, wave by wave (the full grid, or adaptive). Without a URL and with a simulated
ladder it starts the embedded Triton (`advisor.triton.server.EmbeddedTriton`) with stand-ins that know the
suite; with a URL (or a real ladder) it talks to that Triton. Either way the runs go through the same
`advisor.probe.runner.execute` and the same Triton client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterator, Sequence

from advisor.backends import BackendOptions, BackendPool
from advisor.checks.base import needs_judge
from advisor.checks.judge import TritonJudge
from advisor.errors import ConfigError
from advisor.ladder import load_ladder
from advisor.probe.chain import chain_runner
from advisor.probe.planners import FullGridPlanner, run_waves
from advisor.probe.runner import DEFAULT_CONCURRENCY, ProbeOutcome, RunResult, execute
from advisor.probe.summary import summarize
from advisor.records import RunKind
from advisor.router.routing.policies import POLICIES, probe_chain_policies
from advisor.store import RunStore, open_store
from advisor.suite import load_suite
from advisor.tools.base import available_tools
from advisor.tools.sandbox import require_sandbox, runs_code, sandbox_status
from advisor.triton.server import EmbeddedTriton

DEFAULT_LADDER = "ladders/demo.yaml"
DEFAULT_SUITE = "suites/example/suite.yaml"
#: Backend errors in a row on one rung after which the probe asks the server whether it is still ready.
SERVER_ERROR_STREAK = 3


def default_file(relative: str) -> Path:
    """`relative` under the current directory, else under the repository next to the installed package."""
    here = Path.cwd() / relative
    if here.exists():
        return here

    repo = Path(__file__).resolve().parents[2] / relative
    if repo.exists():
        return repo
    raise ConfigError(f"{relative}: not found in {Path.cwd()} nor in {repo.parent.parent}; "
                      "pass the file explicitly")


@dataclass
class ProbeConfig:
    """Everything one probe needs (the CLI's options)."""

    ladder_path: Path | None = None  #: default: ladders/demo.yaml
    suite_path: Path | None = None  #: default: suites/example/suite.yaml
    store_path: Path = Path("advisor.duckdb")
    url: str | None = None  #: a running Triton's gRPC address; None: embedded (simulated ladder) or the ladder's
    replicas: int = 3
    concurrency: int = DEFAULT_CONCURRENCY
    max_cost: float | None = None
    max_runs: int | None = None
    conditions: tuple[str, ...] = ("baseline", "skill")
    rungs: list[str] | None = None
    tasks: list[str] | None = None
    client_timeout_s: float = 60.0
    client_retries: int = 2
    workdir: Path | None = None  #: parent of the probe's private workspace folder (default: the temp folder)
    allow_unsandboxed: bool = False  #: run code without bubblewrap where it is unavailable (trusted suites)
    policies: tuple[str, ...] = ("rung",)  #: rung (each rung itself), orchestrator, router, cascade
    policy_options: dict[str, Any] = field(default_factory=dict)  #: e.g. prefs, config for the orchestrator
    router_path: Path | None = None  #: router artifact of --policy router/cascade (default: trained from the store)


@dataclass
class ProbeRun:
    """What `run_probe` returns."""

    outcome: ProbeOutcome
    summary: dict[str, Any]
    ladder: Any
    suite: Any
    planned: int
    served_by: str  #: "embedded" or the URL
    notes: list[str] = field(default_factory=list)
    already_stored: int = 0  #: planned runs found in the store when the probe started
    adaptive: Any = None  #: the `AdaptiveResult` of an adaptive probe (None for a full grid)


def _suite_of(path: Path):
    """The suite file, loaded once per process while it is unchanged (a probe's CLI reads it for the plan, the
    sandbox check, the probe and the answer; the example suite takes a second to parse)."""
    st = path.stat()
    return _loaded_suite(str(path.resolve()), st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _loaded_suite(path: str, mtime_ns: int, size: int):
    return load_suite(Path(path), known_tools=set(available_tools()))


def load_inputs(config: ProbeConfig):
    """(ladder, suite, ladder file, suite file) with defaults resolved and suite tools checked."""
    if config.url and config.ladder_path is None:
        raise ConfigError("--url needs --ladder: the ladder that Triton serves (rung names, prices, formats)")
    ladder_path = Path(config.ladder_path) if config.ladder_path else default_file(DEFAULT_LADDER)
    suite_path = Path(config.suite_path) if config.suite_path else default_file(DEFAULT_SUITE)
    ladder = load_ladder(ladder_path)
    suite = _suite_of(suite_path)
    return ladder, suite, ladder_path, suite_path


#: `ProbeRun.served_by` when every planned run was stored already: no server was started
NOT_STARTED = "nothing (every planned run was stored already)"


def run_probe(config: ProbeConfig, planner: Any = None, on_start: Callable[[int, str], None] | None = None,
              on_result: Callable[[RunResult], None] | None = None,
              on_wave: Callable[[int, list], None] | None = None) -> ProbeRun:
    """Run a probe end to end and return its outcome and summary (store written as it goes).

    `planner` chooses the runs (`advisor.probe.planners`: `FullGridPlanner`, the default, or
    `AdaptivePlanner`). `on_start(planned, served_by)` is called once the rungs are reachable; `on_result`
    after every run; `on_wave(n, specs)` before every wave. The `max_runs` and `max_cost` guards apply to the
    whole probe; after `SERVER_ERROR_STREAK` backend errors in a row on a rung whose server is no longer
    ready, no more runs start (`ProbeOutcome.stopped == "server_down"`, the line in ``ProbeRun.notes``).
    """
    planner = planner or FullGridPlanner()
    ladder, suite, _, suite_path = load_inputs(config)
    config, skipped = without_code_tasks(config, suite)
    require_sandbox(suite, config.allow_unsandboxed, config.tasks)  # refused before any server starts
    planned = planner.start(suite, ladder, config)
    with open_store(config.store_path, role=RunStore) as store:
        def load_rows():
            return store.floor_rows(suite_hash=suite.config_hash(), ladder_hash=ladder.config_hash(),
                                    kinds=[RunKind.PROBE])

        rows = load_rows()
        stored = planner.already_stored(rows)
        first = planner.next_wave(rows)  # decided before any server starts: nothing to run, nothing started
        if first:
            # a suite of replayed live steps: the stand-ins also know the suite `advisor serve` embeds by default, so
            # that they answer a replayed step as the service's stand-ins answered it live
            known = (default_file(DEFAULT_SUITE),) if any(t.replay is not None for t in suite.tasks) else ()
            with serving(config.url, ladder, suite_path, known) as (urls, served_by):
                if on_start:
                    on_start(planned, served_by)
                outcome, result = asyncio.run(_drive(planner, ladder, suite, store, urls, config, load_rows,
                                                     on_result, on_wave, first))
        else:
            served_by = NOT_STARTED
            if on_start:
                on_start(planned, served_by)
            outcome, result = ProbeOutcome(), planner.finish(list(rows), 0)
        summary = summarize(store, suite_hash=suite.config_hash(), ladder_hash=ladder.config_hash(), ladder=ladder)
    notes = [*planner.notes(result), *(n for n in (skipped, judge_note(ladder, suite), outcome.stop_note) if n)]
    return ProbeRun(outcome, summary, ladder, suite, planned, served_by, notes=notes, already_stored=stored,
                    adaptive=result)


def without_code_tasks(config: ProbeConfig, suite) -> tuple[ProbeConfig, str | None]:
    """The default suite where no sandbox works: (config without the tasks that run code, one line saying so).

    So that the first ``advisor probe`` on a machine without bubblewrap runs what it can instead of refusing. A
    suite given explicitly, ``--allow-unsandboxed``, or a working bwrap: ``(config, None)``, unchanged (an
    explicit suite that runs code is refused by `require_sandbox`, naming the fix).
    """
    if config.suite_path is not None or config.allow_unsandboxed:
        return config, None
    wanted = None if config.tasks is None else set(config.tasks)
    selected = [t for t in suite.tasks if wanted is None or t.id in wanted]
    code = [t for t in selected if runs_code(t)]
    if not code or len(code) == len(selected):
        return config, None
    bw, problem = sandbox_status()
    if bw is not None:
        return config, None
    per_class: dict[str, list[int]] = {}
    for t in selected:
        counts = per_class.setdefault(t.task_class, [0, 0])
        counts[0] += runs_code(t)
        counts[1] += 1
    where = ", ".join(f"{cls} {n}/{total}" for cls, (n, total) in sorted(per_class.items()) if n)
    line = (f"sandbox: {problem}: skipped the {len(code)} task{'' if len(code) == 1 else 's'} that run code "
            f"(run_python or python checks; {where}); to run them: apt-get install bubblewrap, then probe again")
    return replace(config, tasks=[t.id for t in selected if not runs_code(t)]), line


async def _drive(planner, ladder, suite, store, urls: dict[str, str], config: ProbeConfig, load_rows, on_result,
                 on_wave, first: list | None = None) -> tuple[ProbeOutcome, Any]:
    """Run the planner's waves through `execute` with one set of clients; the guards span every wave."""
    total = ProbeOutcome()

    async def execute_wave(specs) -> ProbeOutcome:
        max_runs = None if config.max_runs is None else config.max_runs - total.count("done")
        max_cost = None if config.max_cost is None else config.max_cost - total.cost_usd
        out = await execute(specs, ladder=ladder, suite=suite, store=store, client_for_rung=client_for_rung,
                            judge=judge_for(ladder, suite, client_for_rung), concurrency=config.concurrency,
                            max_cost=max_cost, max_runs=max_runs, workdir=config.workdir,
                            allow_unsandboxed=config.allow_unsandboxed, on_result=on_result,
                            server_error_streak=SERVER_ERROR_STREAK, episode_for=episode_for)
        total.merge(out)
        return out

    options = BackendOptions(timeout_s=config.client_timeout_s, retries=config.client_retries)
    async with clients_for(urls, options) as client_for_rung:
        episode_for = _episode_functions(config, ladder, suite, store, client_for_rung)
        result = await run_waves(planner, execute_wave, load_rows, on_wave=on_wave, first=first)
    return total, result


def embeds(url: str | None, ladder) -> bool:
    """True when advisor starts the embedded Triton for `ladder`: no ``--url``, and every model is one it can
    serve (stand-ins, or GGUF models on llama.cpp)."""
    return not url and (ladder.simulated or ladder.embeddable)


@contextlib.contextmanager
def serving(url: str | None, ladder, suite_path: Path,
            also_known: Sequence[Path] = ()) -> Iterator[tuple[dict[str, str], str]]:
    """Where each model (rungs and roles) is served, as ``(url by model name, served_by)``.

    With ``--url`` every rung is at that address; a ladder the embedded Triton can serve (`embeds`) gets one,
    whose stand-ins know the suite and `also_known` (started here, stopped on exit); any other uses each rung's
    own address.
    """
    if url:
        yield {m.name: url for m in ladder.models()}, url
    elif embeds(url, ladder):
        with EmbeddedTriton(ladder, suite_paths=(str(suite_path), *map(str, also_known))) as server:
            yield {m.name: server.grpc_url for m in ladder.models()}, "embedded"
    else:
        urls = {m.name: ladder.url_of(m) for m in ladder.models()}
        yield urls, ", ".join(sorted({urls[m.name] for m in ladder.rungs}))


@contextlib.asynccontextmanager
async def clients_for(urls: dict[str, str], options: BackendOptions) -> AsyncIterator[Callable[[Any], Any]]:
    """A `BackendPool` over the models' endpoints (one client per address for Triton, each with `options`: the
    probe's client timeout and retries), closed on exit; yields ``client_for_rung(model)`` for `execute`."""
    pool = BackendPool(urls=urls, options=options)
    try:
        yield pool
    finally:
        await pool.close()


def judge_for(ladder, suite, client_for_rung: Callable[[Any], Any]):
    """The ladder's judge role as a `TritonJudge`, when the suite has judge-graded criteria and the ladder a judge.

    Without a judge role such criteria leave their runs unscored (never 0), which `judge_note` says up front.
    """
    if ladder.roles.judge is None or not suite_needs_judge(suite):
        return None

    return TritonJudge(client_for_rung(ladder.roles.judge), ladder.roles.judge)


def suite_needs_judge(suite) -> bool:
    """True when some criterion of the suite is graded by a judge model."""
    return any(needs_judge(c.check) for t in suite.tasks for c in t.criteria())


def judge_note(ladder, suite) -> str | None:
    """A warning line when the suite needs a judge the ladder does not have."""
    if suite_needs_judge(suite) and ladder.roles.judge is None:
        return (f"note: suite {suite.name!r} has judge-graded criteria but ladder {ladder.name!r} has no judge "
                "role: those runs are stored unscored (add roles.judge to the ladder)")
    return None


def _episode_functions(config: ProbeConfig, ladder, suite, store, client_for_rung) -> Callable[[str], Any]:
    """The episode function of each policy of the probe (built once, before any run): the orchestrator's from
    its registered policy; ``router`` and ``cascade`` chains from `advisor.probe.chain` (deciding with the
    registered rules)."""
    runners = {}
    chains = probe_chain_policies()
    for p in config.policies:
        if p in chains:
            runners[p] = chain_runner(p, ladder, client_for_rung, store=store, suite=suite,
                                      router_path=config.router_path, prefs=config.policy_options.get("prefs"))
        elif p != "rung":
            runners[p] = POLICIES.get(p).runner(ladder, client_for_rung, store=store, **config.policy_options)
    return runners.__getitem__
