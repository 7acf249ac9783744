"""A session's expected cost and usable rate from probe runs, and its start rung (`advisor.service.sessions.costs`),
without a server: the service's escalation rule replayed over recorded turns, the figures per class and rung,
and the start maths against hand-computed values."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from advisor.service.process.config import SessionConfig
from advisor.service.sessions.costs import (ANY_CLASS, SessionCell, StartOption, escalation_step, session_cells,
                                           start_options, start_rung)


def _turn(action, args=None, obs="ok", tin=100, tout=10):
    return {"action": action, "arguments_json": json.dumps(args or {}), "observation": obs,
            "input_tokens": tin, "output_tokens": tout}


def test_escalation_step_replays_the_service_signals():
    cfg = SessionConfig()
    read = _turn("read_file", {"path": "a"})
    # the same call twice: the request of step 3 holds both, and stuck_repeats is 2
    assert escalation_step([read, read, _turn("final")], "r", cfg) == 3
    assert escalation_step([read, _turn("read_file", {"path": "b"}), _turn("final")], "r", cfg) is None
    errors = [_turn("http_request", {"u": i}, obs="HTTP 404 not found") for i in range(2)] + [_turn("final")]
    assert escalation_step(errors, "r", cfg) == 3  # two tool errors in a row
    assert escalation_step(errors, "r", SessionConfig(tool_errors=0)) is None
    bad = [_turn("invalid", obs="could not parse your reply: a tag is not closed"), _turn("final")]
    assert escalation_step(bad, "r", cfg) == 2
    many = [_turn("read_file", {"path": str(i)}) for i in range(6)]
    assert escalation_step(many, "r", SessionConfig(step_budget=4)) == 5
    assert escalation_step(many, "small", SessionConfig(step_budget_by_rung={"small": 2})) == 3
    assert escalation_step([_turn("final")], "r", cfg) is None


def test_session_cells_count_escalations_cut_usable_runs_and_costs():
    price = SimpleNamespace(attempt_cost=lambda i, o: i * 1e-6 + o * 1e-5)  # 100 in + 10 out = 0.0002 USD a turn
    read = _turn("read_file", {"path": "a"})
    runs = [  # two runs stay (one usable), one usable run escalates at step 3 (pays 2 turns of 3), one escalates
        {"task_class": "docs", "rung": "small", "usable": True, "turns": [read, _turn("final")]},
        {"task_class": "docs", "rung": "small", "usable": False, "turns": [_turn("final")]},
        {"task_class": "docs", "rung": "small", "usable": True, "turns": [read, read, _turn("final")]},
        {"task_class": "docs", "rung": "small", "usable": False, "turns": [read, read, read]},
        {"task_class": "other", "rung": "small", "usable": False, "turns": [_turn("final")]},
    ]
    cells = session_cells(runs, {"small": price}, SessionConfig())
    c = cells["docs"]["small"]
    assert c.n == 4 and c.q == pytest.approx(0.5) and c.keep == pytest.approx(0.5)
    assert c.stay == pytest.approx((0.0004 + 0.0002) / 2) and c.pre == pytest.approx(0.0004)
    assert c.full == pytest.approx((0.0004 + 0.0002 + 0.0006 + 0.0006) / 4)
    assert cells[ANY_CLASS]["small"].n == 5 and cells["other"]["small"].q == 0.0
    assert session_cells(runs, {}, SessionConfig()) == {}  # a rung the ladder does not have is left out


def test_start_options_chain_escalations_up_the_allowed_rungs():
    cells = {"s": SessionCell(n=10, q=0.5, keep=0.8, stay=1.0, pre=0.4, full=0.9),
             "m": SessionCell(n=10, q=0.2, keep=1.0, stay=2.0, pre=1.0, full=1.8),
             "l": SessionCell(n=10, q=0.3, keep=1.0, stay=5.0, pre=2.0, full=4.0)}
    p = {"s": 0.1, "m": 0.3, "l": 0.6}
    opts = {o.rung: o for o in start_options(["s", "m", "l"], ["s", "m", "l"], p, cells, 1)}
    assert opts["l"].usd == pytest.approx(4.0) and opts["l"].p_usable == pytest.approx(0.6)  # the top: full, p
    m_usd, m_u = 0.8 * 2.0 + 0.2 * (1.0 + 4.0), 0.3 * 1.0 + 0.2 * 0.6
    assert opts["m"].usd == pytest.approx(m_usd) and opts["m"].p_usable == pytest.approx(m_u)
    assert opts["s"].usd == pytest.approx(0.5 * 1.0 + 0.5 * (0.4 + m_usd))
    assert opts["s"].p_usable == pytest.approx(0.1 * 0.8 + 0.5 * m_u)
    # escalate_by 2 skips m; a rung not allowed is skipped too (s escalates straight to l)
    two = {o.rung: o for o in start_options(["s", "m", "l"], ["s", "l"], p, cells, 1)}
    assert set(two) == {"s", "l"} and two["s"].usd == pytest.approx(0.5 * 1.0 + 0.5 * (0.4 + 4.0))
    assert start_options(["s", "m", "l"], ["s", "m", "l"], p, cells, 2)[0].usd == two["s"].usd


def test_a_session_start_is_never_expected_usable_more_than_always():
    # the router sure the lower rung is usable, its probe runs escalating half the time (the demo ladder's
    # nano-30b on the documentation tasks): P(usable) of a start there was 1.024 in x-advisor-p-usable
    cells = {"m": SessionCell(n=4, q=0.5, keep=1.0, stay=1.0, pre=0.5, full=1.0),
             "l": SessionCell(n=4, q=0.0, keep=1.0, stay=3.0, pre=0.0, full=3.0)}
    opts = {o.rung: o for o in start_options(["m", "l"], ["m", "l"], {"m": 0.999, "l": 0.999}, cells, 1)}
    assert opts["m"].p_usable == pytest.approx(0.5 + 0.5 * 0.999) and opts["m"].p_usable <= 1.0


def test_start_rung_least_usd_per_usable_else_cheapest():
    a, b = StartOption("a", usd=1.0, p_usable=0.1), StartOption("b", usd=3.0, p_usable=0.5)
    assert start_rung([a, b]).rung == "b"  # 6.0 per usable against 10.0
    assert start_rung([a, StartOption("b", usd=3.0, p_usable=0.2)]).rung == "a"
    none = [StartOption("a", 2.0, 0.0), StartOption("b", 1.0, 0.0)]
    assert start_rung(none).rung == "b" and start_rung([]) is None
