"""What a session is expected to cost and deliver, from probe runs; the rung a session starts on.

A session latched to rung ``s`` stays there until an escalation signal fires, then moves up. How often that
happens, and what it costs, is measured on the probe's runs: `escalation_step` replays the service's own rule
(`advisor.service.sessions.latch.signals` and the step budget) over a run's recorded turns as the service would see
them, one request per step, and gives the step at which a session on that rung would have moved up (None: it
stays to the end) and the USD spent on the rung by then. Per class and rung (`SessionCell`):

- ``q``: the share of runs that would escalate;
- ``keep``: the share of the usable runs that would not (an escalation also cuts off a run that would have
  ended usable: a false alarm, e.g. a document read twice);
- ``stay``: the mean USD of the runs that stay; ``pre``: the mean USD spent before moving up by those that don't;
  ``full``: the mean USD of all runs, paid in full (the top rung is never left: there a run ends as the client
  ends it).

For a session started on ``s``, with ``s'`` the rung it escalates to (`rung_above`: ``escalate_by`` up among the
allowed rungs; none above the top):

    U(s) = p(s) keep(s) + q(s) U(s')          E(s) = (1 - q(s)) stay(s) + q(s) (pre(s) + E(s'))

``p(s)``: the router's P(usable) of the task on ``s``. On the top allowed rung ``U = p``, ``E = full``. The
escalated part is counted as a fresh episode on ``s'`` (its own probe figures), not as the rest of one. The
**start rung** (`start_rung`) is the allowed rung with the least ``E / U``, the expected USD per usable
trajectory; when no start has ``U > 0``, the one with the least ``E``. A request without a class starts from
every class's runs pooled (`ANY_CLASS`). The service (`advisor.service.sessions.steps.session_start`) leaves a
class with fewer than ``start_min_runs`` probe runs on an allowed rung to the ordinary decision.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Any, Iterable

from advisor.service.api.request import Message
from advisor.service.sessions.latch import rung_above, signals, step_budget

#: the cells of every class pooled: what a request without a class starts from
ANY_CLASS = "*"
_NO_CALL = ("final", "invalid")  #: turn actions that are not tool calls (the loop's final answer, an unparseable reply)


@dataclass(frozen=True)
class SessionCell:
    """A (class, rung)'s session figures from its probe runs (see the module docstring)."""

    n: int
    q: float
    keep: float
    stay: float
    pre: float
    full: float

    def to_list(self) -> list[float]:
        """The cell as a JSON list (ServeSettings carries it to the workers)."""
        return list(astuple(self))


def parse_cells(lists: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, SessionCell]]:
    """`cells_from_store`'s JSON lists by class and rung as `SessionCell` s."""
    return {cls: {rung: SessionCell(int(c[0]), *c[1:]) for rung, c in by_rung.items()}
            for cls, by_rung in lists.items()}


@dataclass(frozen=True)
class StartOption:
    """A session started on `rung`: expected USD `usd`, expected P(usable) `p_usable`."""

    rung: str
    usd: float
    p_usable: float

    @property
    def usd_per_usable(self) -> float:
        """Expected USD per usable trajectory (inf when nothing usable is expected)."""
        return self.usd / self.p_usable if self.p_usable > 0 else float("inf")


def turn_messages(turn: dict[str, Any], index: int) -> list[Message]:
    """One recorded probe turn as the service sees it in the next request: the assistant's reply (a tool call,
    or text), then the observation as a tool result."""
    action = turn["action"]
    if action in _NO_CALL:
        out = [Message(role="assistant", content=turn.get("arguments_json") or "")]
    else:
        call = {"id": f"call_{index}", "type": "function",
                "function": {"name": action, "arguments": turn.get("arguments_json") or "{}"}}
        out = [Message.model_validate({"role": "assistant", "content": None, "tool_calls": [call]})]
    if action != "final":
        out.append(Message(role="tool", tool_call_id=f"call_{index}", content=turn.get("observation") or ""))
    return out


def escalation_step(turns: list[dict[str, Any]], rung: str, config) -> int | None:
    """The step (1-based model call) at which a session on `rung` would have moved up, replaying the service's
    signals over a probe run's turns (the request of step k holds turns 1..k-1); None when it would not."""
    budget = step_budget(config, rung)
    messages: list[Message] = []
    for k in range(2, len(turns) + 1):
        messages += turn_messages(turns[k - 2], k - 2)  # before an escalation every message is evidence
        if signals(messages, config) or (budget is not None and k - 1 >= budget):
            return k
    return None


def session_cells(runs: Iterable[dict[str, Any]], prices: dict[str, Any], config) -> dict[str, dict[str, SessionCell]]:
    """Per class and rung, the `SessionCell` of probe runs (and per rung under `ANY_CLASS`, all classes pooled).
    Each run: ``task_class``, ``rung``, ``usable``
    (bool) and ``turns`` (dicts with action, arguments_json, observation, input_tokens, output_tokens, in
    order); `prices`: rung name -> its ladder model (`attempt_cost`)."""
    acc: dict[tuple[str, str], list[Any]] = {}
    for run in runs:
        model = prices.get(run["rung"])
        if model is None:
            continue
        turns = run["turns"]
        at = escalation_step(turns, run["rung"], config)
        priced = [model.attempt_cost(t.get("input_tokens") or 0, t.get("output_tokens") or 0) for t in turns]
        full = sum(priced)
        usd = full if at is None else sum(priced[: at - 1])
        for cls in (run["task_class"], ANY_CLASS):
            a = acc.setdefault((cls, run["rung"]), [0, 0, 0, 0, 0.0, 0.0, 0.0])
            # n, escalating, usable, usable and kept, $ of the staying runs, $ before moving up, $ in full
            a[0] += 1
            a[1] += at is not None
            a[2] += bool(run["usable"])
            a[3] += bool(run["usable"]) and at is None
            a[4 if at is None else 5] += usd
            a[6] += full
    out: dict[str, dict[str, SessionCell]] = {}
    for (cls, rung), (n, esc, usable, kept, stay, pre, full) in acc.items():
        out.setdefault(cls, {})[rung] = SessionCell(
            n=n, q=esc / n, keep=kept / usable if usable else 1.0,
            stay=stay / (n - esc) if n > esc else 0.0, pre=pre / esc if esc else 0.0, full=full / n)
    return out


def cells_from_store(store, ladder, config) -> dict[str, dict[str, list[float]]]:
    """`session_cells` of the store's fixed-rung probe runs of `ladder`'s rungs, as JSON lists by class and rung
    (empty when the store has none)."""
    prices = {r.name: r for r in ladder.rungs}
    return {cls: {rung: cell.to_list() for rung, cell in cells.items()}
            for cls, cells in session_cells(store.probe_run_turns(ladder.name), prices, config).items()}


def start_options(names: list[str], allowed: list[str], p_usable: dict[str, float],
                  cells: dict[str, SessionCell], escalate_by: int) -> list[StartOption]:
    """The expected USD and P(usable) of a session started on each allowed rung (ladder order)."""
    memo: dict[str, tuple[float, float]] = {}

    def expect(rung: str) -> tuple[float, float]:
        if rung not in memo:
            c, p = cells[rung], p_usable[rung]
            up = rung_above(names, allowed, rung, escalate_by)
            if up is None:  # the top allowed rung is never left
                memo[rung] = (c.full, p)
            else:
                e_up, u_up = expect(up)
                # usable and kept, or moved up and usable there: disjoint, so at most 1 - q of the first (the
                # router's P(usable) and the probe's escalation share are estimated apart and may disagree)
                memo[rung] = ((1 - c.q) * c.stay + c.q * (c.pre + e_up), min(p * c.keep, 1 - c.q) + c.q * u_up)
        return memo[rung]

    return [StartOption(r, *expect(r)) for r in names if r in allowed]


def start_rung(options: list[StartOption]) -> StartOption | None:
    """The option with the least expected USD per usable trajectory; with none expected usable, the cheapest."""
    if not options:
        return None
    usable = [o for o in options if o.p_usable > 0]
    if usable:
        return min(usable, key=lambda o: (o.usd_per_usable, o.usd))
    return min(options, key=lambda o: o.usd)
