"""Live outcomes as training and evaluation data: the routing service's verified attempts, read from the store.

A live attempt is one call of one rung for one request, verified by the class's verifier. Its label is the
verifier's verdict, which is a *noisy* label of usability: the verifier accepts an unusable answer with
probability ``fa`` (false accept) and rejects a usable one with probability ``fr`` (false reject). Training
uses the **posterior** that the answer was usable given the verdict, by Bayes with a prior ``pi`` for the
rung in the class::

    P(usable | accepted) = (1 - fr) pi / ((1 - fr) pi + fa (1 - pi))
    P(usable | rejected) = fr pi / (fr pi + (1 - fa)(1 - pi))

as a soft label (the trainer turns a fraction into a weighted positive and a weighted negative row). With a
perfect verifier (fa = fr = 0) this is the verdict itself. The rates are the service verifier's measured on
probe runs (`advisor verifier measure`, `advisor.verifier.calibration`) when the store holds them for the verifier
as configured, else for a judge verifier the last `advisor judge agreement` measurement
(`advisor.checks.agreement.latest_verifier`), else the service config's (``false_accept``, ``false_reject``).

**The prior** is the mean of a Beta posterior over the rung's usable rate in the class (`label_prior`):
a uniform Beta(1, 1) updated with the probe's counts (u usable of n scored runs) and with the live verdicts
de-noised by the verifier's rates (the Rogan-Gladen estimate ``(accept rate - fa) / (1 - fa - fr)``, clipped
to [0, 1], counted over the m live training attempts)::

    pi = (1 + u + m x live usable estimate) / (2 + n + m)

so a rung the probe never saw pass (u = 0) still learns from live accepts (a probe-rate prior of 0 would
multiply every accept to a label of 0), and a rung the probe found good but the live verifier rejects is
pulled down. A verifier with fa + fr >= 1 carries no information: its verdicts add nothing to the prior.

Only requests whose prompt text was stored can be used (the featuriser needs the text): under the default
privacy setting (``record: {store_prompts: false}``) the service stores the prompt's hash only, **no features**,
so no live request is trainable; set ``record.store_prompts: true`` in the service config to make them so.
Attempts that failed over (a rung down or timed out), errors and unverified attempts carry no label.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from advisor.checks.agreement import latest_verifier
from advisor.records import text_hash
from advisor.scores import VerifierErrors
from advisor.verifier.calibration import policy_rates

if TYPE_CHECKING:
    from advisor.store.protocols import LiveRecords

LABEL_METHOD = ("posterior P(usable | verdict) under the verifier's false-accept/false-reject rates; prior = "
                "Beta(1, 1) updated with the rung's probe counts in the class and its de-noised live verdicts "
                "(a soft label)")


def live_attempts(store: LiveRecords) -> tuple[list[dict[str, Any]], int]:
    """(verified attempts of requests whose prompt was stored, in time order; decisions skipped for lacking one)."""
    rows = store.live_attempt_rows()
    kept = [r for r in rows if r["prompt_text"]]
    skipped = len({r["decision_id"] for r in rows if not r["prompt_text"]})
    return kept, skipped


def split_by_time(rows: Sequence[dict[str, Any]], holdout: int) -> tuple[list[dict], list[dict]]:
    """(older rows, rows of the `holdout` most recent decisions): a time-based split on decision time."""
    order = list(dict.fromkeys(r["decision_id"] for r in rows))  # rows are in time order
    held = set(order[len(order) - holdout:]) if holdout > 0 else set()
    return [r for r in rows if r["decision_id"] not in held], [r for r in rows if r["decision_id"] in held]


def verifier_rates(config, store=None) -> dict[str, VerifierErrors]:
    """Per class the verifier's error rates under the loaded service `config` (`advisor.service.process.config.load_config`):
    measured by `advisor verifier measure` for this verifier when stored, else a judge verifier's last
    `advisor judge agreement`, else the config's."""
    out: dict[str, VerifierErrors] = {}
    if config is None:
        return out
    measured = None
    if store is not None:
        measured = latest_verifier(store)

    served = policy_rates(config, store)  # measured on probe runs by `advisor verifier measure`, else the config's
    for name, cls in config.classes.items():
        v = cls.verifier_config
        if v is None:
            continue
        if served[name].source == "config" and v.judge is not None and measured is not None:
            out[name] = measured[0]
        else:
            out[name] = served[name].verifier
    return out


def posterior(accepted: bool, prior: float, verifier: VerifierErrors) -> float:
    """P(usable | verdict) under the verifier's flip rates (see the module docstring)."""
    fa, fr, pi = verifier.false_accept, verifier.false_reject, min(max(prior, 1e-6), 1 - 1e-6)
    num = (1 - fr) * pi if accepted else fr * pi
    den = num + (fa if accepted else 1 - fa) * (1 - pi)
    return float(num / den) if den > 0 else float(accepted)


def label_prior(probe_usable: float, probe_runs: float, live_accepted: float, live_attempts: float,
                verifier: VerifierErrors) -> float:
    """The Beta-posterior mean prior of a (class, rung) for the soft labels (see the module docstring)."""
    fa, fr = verifier.false_accept, verifier.false_reject
    alpha, n = 1.0 + probe_usable, 2.0 + probe_runs
    if live_attempts > 0 and fa + fr < 1.0:
        est = min(max((live_accepted / live_attempts - fa) / (1.0 - fa - fr), 0.0), 1.0)
        alpha, n = alpha + live_attempts * est, n + live_attempts
    return alpha / n


def class_priors(data, rows: Sequence[dict[str, Any]],
                 rates: dict[str, VerifierErrors]) -> dict[tuple[str, str], float]:
    """Per (class, rung) the soft labels' prior from the probe data and the live rows (`label_prior`)."""
    cls = np.array([c or "" for c in data.classes])
    live: dict[tuple[str, str], list[int]] = {}
    for r in rows:
        cnt = live.setdefault((r["task_class"] or "", r["rung"]), [0, 0])
        cnt[0] += bool(r["accepted"])
        cnt[1] += 1
    out = {}
    for c in set(cls) | {k[0] for k in live}:
        m = cls == c
        for j, rung in enumerate(data.rungs):
            n = np.nan_to_num(data.runs[m, j])
            u = float((np.nan_to_num(data.usable[m, j]) * n).sum())
            acc, tot = live.get((c, rung.name), (0, 0))
            out[(c, rung.name)] = label_prior(u, float(n.sum()), acc, tot, rates.get(c, VerifierErrors()))
    return out


def merge_live(data, rows: Sequence[dict[str, Any]], rates: dict[str, VerifierErrors], weight: float = 1.0,
               skipped_no_prompt: int = 0, held_out: int = 0):
    """Probe/imported training data plus live attempts (soft labels, each attempt counted as `weight` runs)."""
    col = {r.name: j for j, r in enumerate(data.rungs)}
    priors = class_priors(data, [r for r in rows if r["rung"] in col], rates)
    index = {g: i for i, g in enumerate(data.groups)}
    R = len(data.rungs)
    texts, classes, groups = list(data.texts), list(data.classes), list(data.groups)
    add_u, add_n, add_c, tokens = [], [], [], list(data.input_tokens)
    extra_u = np.zeros_like(data.usable)
    extra_n = np.zeros_like(data.runs)
    extra_c = np.zeros_like(data.cost)
    used, off_ladder = set(), 0
    for r in rows:
        j = col.get(r["rung"])
        if j is None:
            off_ladder += 1
            continue
        cls = r["task_class"] or ""
        label = posterior(bool(r["accepted"]), priors[(cls, r["rung"])], rates.get(cls, VerifierErrors()))
        key = text_hash(r["prompt_text"])
        if key not in index:
            index[key] = len(groups)
            texts.append(r["prompt_text"])
            classes.append(r["task_class"])
            groups.append(key)
            tokens.append(float(r["input_tokens"] or 0))
            add_u.append(np.zeros(R))
            add_n.append(np.zeros(R))
            add_c.append(np.zeros(R))
        i = index[key]
        if i < len(data.groups):
            u, n, c = extra_u[i], extra_n[i], extra_c[i]
        else:
            k = i - len(data.groups)
            u, n, c = add_u[k], add_n[k], add_c[k]
        u[j] += weight * label
        n[j] += weight
        c[j] += weight * float(r["cost_usd"] or 0.0)
        used.add(r["decision_id"])
    old_n = np.nan_to_num(data.runs)
    old_u = np.nan_to_num(data.usable) * old_n
    old_c = np.nan_to_num(data.cost) * old_n
    tot_n = np.vstack([old_n + extra_n, np.array(add_n).reshape(-1, R)])
    tot_u = np.vstack([old_u + extra_u, np.array(add_u).reshape(-1, R)])
    tot_c = np.vstack([old_c + extra_c, np.array(add_c).reshape(-1, R)])
    with np.errstate(invalid="ignore", divide="ignore"):
        usable = np.where(tot_n > 0, tot_u / tot_n, np.nan)
        cost = np.where(tot_n > 0, tot_c / tot_n, np.nan)
    est = data.cost_estimated
    if est is not None:
        est = np.vstack([est, np.zeros((len(add_n), R))])
    prov = dict(data.provenance)
    digest = hashlib.sha256((prov.get("data_hash", "") + "\x1f".join(sorted(used))).encode()).hexdigest()
    live_rows = [r for r in rows if r["decision_id"] in used]
    prov.update({"data_hash": digest, "prompts": len(groups), "live": {
        "decisions": len(used), "attempts": len(live_rows), "weight": weight, "label": LABEL_METHOD,
        "verifier_rates": {c: [v.false_accept, v.false_reject] for c, v in rates.items()},
        "label_priors": {f"{c}/{rung}": round(p, 4) for (c, rung), p in sorted(priors.items())},
        "skipped_no_prompt": skipped_no_prompt, "attempts_off_ladder": off_ladder, "held_out_decisions": held_out,
        "live_from": str(min((r["created_at"] for r in live_rows), default="")) or None,
        "live_until": str(max((r["created_at"] for r in live_rows), default="")) or None}})
    return replace(data, texts=texts, classes=classes, groups=groups, usable=usable, runs=tot_n, cost=cost,
                   input_tokens=np.array(tokens), provenance=prov, cost_estimated=est)
