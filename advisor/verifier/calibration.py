"""The routing service's verifier error rates, measured on stored probe runs instead of stated in the config.

For each class of a service config that has a verifier, `measure_verifiers` applies that verifier (the same
`advisor.verifier.build` object the service uses) to every scored fixed-rung probe run of the class in
the store, and compares its verdict with the truth, the run's full score: usable when ``overall >= bar``.

- **What the verifier sees.** A probe run as one reply: its final answer as stored (the ``final`` target; none
  when the loop ended without one) and the tool calls the run made (``calls``), with the run's stored prompt
  (the task's instructions) as the request text. A service request is usually one step of such a run, so a
  ``tool_call`` check here asks "did the run make this call", which is looser than on one live reply.
- **The rates.** false accept = P(verifier accepts | not usable), false reject = P(verifier rejects | usable),
  per rung and pooled over the class's rungs (rung ``*``). A judge verifier that cannot grade a run leaves
  it out (``unverifiable``), where the service would reject.
- **Stored** in ``verifier_rates`` (one measurement id per call), with a hash of the verifier's definition, so a
  measurement stops applying as soon as the class's checks or rubric change.

The service (`policy_rates`) uses, per class, the pooled rates of the newest measurement of the verifier as
configured now; a rate that could not be measured (no usable, or no unusable, run of the class) and a class
never measured keep the config's ``false_accept`` / ``false_reject``. It says which at startup.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from advisor.checks.agreement import Rates
from advisor.errors import ConfigError, DataError, StoreError, did_you_mean
from advisor.records import now, text_hash
from advisor.scores import DEFAULT_BAR, VerifierErrors
from advisor.store import RunStore, open_store
from advisor.verifier.base import VerifiedText
from advisor.verifier.build import build_verifier

POOLED = "*"  #: the rung name of a class's pooled rates


def verifier_hash(verifier_config) -> str:
    """A short hash of what a verifier does (its checks and judge; not the error rates stated beside them)."""
    body = verifier_config.model_dump(mode="json", exclude={"false_accept", "false_reject"})
    for key, default in (("type", None), ("options", {})):  # a builtin kind hashes as its checks and judge
        if body.get(key) == default:
            body.pop(key, None)
    return text_hash(json.dumps(body, sort_keys=True))[:16]


def reply_of_run(turns: list[dict[str, Any]]):
    """A stored probe run as the verifier reads it: its final answer and the tool calls it made."""
    final, calls = None, []
    for t in turns:
        if t["action"] == "final":
            final = t["observation"] or ""
        elif t["action"] != "invalid":
            try:
                args = json.loads(t["arguments_json"] or "{}")
            except ValueError:
                args = {}
            calls.append((t["action"], args if isinstance(args, dict) else {}))
    return VerifiedText(final=final, calls=calls)


@dataclass
class ClassMeasurement:
    """One class's verifier against its probe runs."""

    task_class: str
    verifier_hash: str
    pooled: Rates = field(default_factory=Rates)
    rungs: dict[str, Rates] = field(default_factory=dict)
    runs: int = 0
    unverifiable: int = 0
    judge_cost_usd: float = 0.0
    simulated: bool = False
    suites: list[str] = field(default_factory=list)
    ladder: str | None = None

    def rows(self, measurement_id: str, measured_at, bar: float, config_path: str | None) -> list[dict[str, Any]]:
        """``verifier_rates`` rows: the pooled one (rung ``*``), then one per rung (none without any run)."""
        out: list[dict[str, Any]] = []
        if not self.runs and not self.unverifiable:
            return out
        for rung, r in [(POOLED, self.pooled), *self.rungs.items()]:
            out.append({"measurement_id": measurement_id, "measured_at": measured_at, "task_class": self.task_class,
                        "rung": rung, "verifier_hash": self.verifier_hash, "config_path": config_path,
                        "suite_name": ",".join(self.suites) or None, "ladder_name": self.ladder, "bar": bar,
                        "runs": r.positives + r.negatives, "unverifiable": self.unverifiable if rung == POOLED else 0,
                        "positives": r.positives, "negatives": r.negatives, "false_accepts": r.false_accepts,
                        "false_rejects": r.false_rejects, "false_accept": r.false_accept,
                        "false_reject": r.false_reject,
                        "judge_cost_usd": self.judge_cost_usd if rung == POOLED else 0.0,
                        "simulated": self.simulated})
        return out


async def measure_verifiers(store, config, ladder, client_for: Callable | None = None, *, bar: float = DEFAULT_BAR,
                            suite_name: str | None = None, classes: list[str] | None = None) -> list[ClassMeasurement]:
    """Apply each class's verifier to the class's stored probe runs (see the module docstring).

    `ladder` (a `Ladder` or None) restricts the runs to that ladder and provides the judge role; `client_for`
    gives the Triton client of a ladder model (needed by judge verifiers only).
    """
    with_verifier = {n: c.verifier_config for n, c in config.classes.items() if c.verifier_config is not None}
    for name in classes or []:
        if name not in with_verifier:
            raise ConfigError(f"class {name!r} has no verifier in the service config."
                              f"{did_you_mean(name, list(with_verifier))}")
    if not with_verifier:
        raise ConfigError("the service config names no class with a verifier: nothing to measure")
    out = []
    for name, vcfg in with_verifier.items():
        if classes and name not in classes:
            continue
        if vcfg.judge is not None and ladder is None:
            raise ConfigError(f"class {name!r} has a judge verifier: pass --ladder (its roles.judge grades)")
        verifier = build_verifier(vcfg, ladder, client_for or _no_client)
        runs = store.verifier_probe_runs(name, ladder_name=ladder.name if ladder else None, suite_name=suite_name)
        ladders = sorted({r["ladder_name"] for r in runs})
        if len(ladders) > 1:
            raise DataError(f"{store.path}: class {name!r} has probe runs on several ladders ({', '.join(ladders)}); "
                            "name one with --ladder")
        m = ClassMeasurement(name, verifier_hash(vcfg), simulated=any(r["simulated"] for r in runs),
                             suites=sorted({r["suite_name"] for r in runs}), ladder=ladders[0] if ladders else None)
        turns = store.turns_of_runs(r["run_key"] for r in runs)
        for run in runs:
            verdict = await verifier.verify(reply_of_run(turns[run["run_key"]]), run["prompt_text"] or "")
            m.judge_cost_usd += verdict.cost_usd
            if verdict.undecided:
                m.unverifiable += 1
                continue
            truth = run["overall"] >= bar
            m.pooled.add(truth, verdict.accepted)
            m.rungs.setdefault(run["rung"], Rates()).add(truth, verdict.accepted)
            m.runs += 1
        out.append(m)
    return out


def _no_client(model):
    raise DataError(f"no Triton client for {model.name}: a judge verifier needs a running Triton (--url)")


def save_measurement(store, measurements: list[ClassMeasurement], *, bar: float,
                     config_path: str | None = None) -> str:
    """Store one measurement (every class, pooled and per rung) in one transaction; its id."""
    measurement_id, at = "vm_" + uuid.uuid4().hex[:16], now()
    store.add_verifier_rates([row for m in measurements for row in m.rows(measurement_id, at, bar, config_path)])
    return measurement_id


@dataclass(frozen=True)
class PolicyRates:
    """The error rates the service's policy uses for one class, and where each came from."""

    verifier: VerifierErrors
    source: str  #: "measured", "partly measured" or "config"
    detail: str

    def as_pair(self) -> list[float]:
        """[false_accept, false_reject] (how the rates travel to the workers)."""
        return [self.verifier.false_accept, self.verifier.false_reject]


def policy_rates(config, store=None) -> dict[str, PolicyRates]:
    """Per class with a verifier: the measured pooled rates when the store has them for this verifier, else the
    config's (per rate: a rate that could not be measured keeps the config's)."""
    vcfgs = {n: c.verifier_config for n, c in config.classes.items() if c.verifier_config is not None}
    latest = store.latest_verifier_rates({n: verifier_hash(v) for n, v in vcfgs.items()}) if store else {}
    out = {}
    for name, v in vcfgs.items():
        pooled = next((r for r in latest.get(name, []) if r["rung"] == POOLED), None)
        stated = f"false accept {v.false_accept:g} / false reject {v.false_reject:g}"
        if pooled is None:
            out[name] = PolicyRates(VerifierErrors(v.false_accept, v.false_reject), "config",
                                    f"{stated} (not measured for this verifier)")
            continue
        fa, fr = pooled["false_accept"], pooled["false_reject"]
        parts = [_measured("false accept", fa, pooled["false_accepts"], pooled["negatives"], v.false_accept),
                 _measured("false reject", fr, pooled["false_rejects"], pooled["positives"], v.false_reject)]
        source = "measured" if fa is not None and fr is not None else (
            "partly measured" if fa is not None or fr is not None else "config")
        sim = " on SIMULATED runs" if pooled["simulated"] else ""
        rates = VerifierErrors(v.false_accept if fa is None else fa, v.false_reject if fr is None else fr)
        out[name] = PolicyRates(rates, source, f"{', '.join(parts)} ({pooled['measurement_id']}, "
                                               f"{pooled['measured_at']:%Y-%m-%d %H:%M}{sim})")
    return out


def _measured(label: str, rate: float | None, errors: int, n: int, stated: float) -> str:
    if rate is None:
        return f"{label} {stated:g} from the config (no run to measure it on)"
    return f"{label} {rate:.3f} measured ({errors}/{n})"


def describe(rates: dict[str, PolicyRates]) -> list[str]:
    """One line per class: the rates the policy uses and their source (the service prints these at startup)."""
    return [f"verifier rates of class {name!r}: {r.source}: {r.detail}" for name, r in sorted(rates.items())]


def service_rates(config, store_path) -> tuple[dict[str, PolicyRates], list[str]]:
    """The rates `advisor serve` hands its workers, read once from the store at `store_path` (the config's when
    the store is missing or busy), and the startup lines that say which."""
    if not any(c.verifier_config for c in config.classes.values()):
        return {}, []
    note = []
    store = None
    if Path(store_path).is_file():
        try:
            store = open_store(store_path, read_only=True, role=RunStore)
        except StoreError as exc:
            note = [f"verifier rates: the store could not be read ({exc}); the config's rates are used"]
    try:
        rates = policy_rates(config, store)
    finally:
        if store is not None:
            store.close()
    return rates, note + describe(rates)
