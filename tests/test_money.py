"""The one money formatter: significant figures, a unit, per 1k where per-one would round to zeros."""

from __future__ import annotations

import pytest

from advisor.money import column_scale, monthly, per_item, per_label, usd, usd_delta


@pytest.mark.parametrize("x, want", [
    (0.000212, "$0.000212"), (0.00021249, "$0.000212"), (2.1449, "$2.14"), (21.449, "$21.4"), (1234.5, "$1,234"),
    (1235.5, "$1,236"), (9.996, "$10.0"), (0.0, "$0"), (-0.5, "-$0.500"), (None, "-"), (123456.0, "$123,456"),
])
def test_usd_significant_figures(x, want):
    assert usd(x) == want


def test_usd_never_prints_all_zeros():
    for x in (1e-7, 3.3e-5, 0.00049):
        assert usd(x).strip("$0.") != "", x


def test_per_item_switches_to_per_1k():
    assert per_item(0.0512, "task") == "$0.0512 per task"
    assert per_item(0.000212, "task") == "$0.212 per 1k tasks"
    assert per_item(None, "task") == "-"
    assert column_scale([0.0001, 0.0003, None]) == 1000
    assert column_scale([0.0001, 0.05]) == 1
    assert column_scale([None]) == 1
    assert per_label("usable result", 1000) == "per 1k usable results"


def test_delta_and_monthly():
    assert usd_delta(0.00123) == "+$0.00123" and usd_delta(-3.4) == "-$3.40"
    assert monthly(21.449) == "$21.4/month" and monthly(None) == "-"


def test_shares_print_whole_percentages_and_dashes_when_missing():
    from advisor.shares import interval, share

    assert share(0.884) == "88%" and share(None) == "-" and share(1.0) == "100%"
    assert interval((0.88, 1.0)) == "88-100%" and interval(None) == "-"
