"""Limits raised through environment variables are read one way (`advisor.env_limits`): unset is the default, a
positive number is taken, and anything else (zero, negative, not a number, infinite, NaN, non-ASCII digits) is one
error naming the variable, through every limit that reads one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisor.env_limits import count_limit, mib_limit
from advisor.errors import ConfigError, DataError

REPO = Path(__file__).resolve().parent.parent


def test_a_size_limit_is_mib_and_its_default_when_unset(monkeypatch):
    monkeypatch.delenv("ADVISOR_TEST_MB", raising=False)
    assert mib_limit("ADVISOR_TEST_MB", 32) == 32 * 2**20
    monkeypatch.setenv("ADVISOR_TEST_MB", " 0.5 ")
    assert mib_limit("ADVISOR_TEST_MB", 32) == 2**19


@pytest.mark.parametrize("raw", ["0", "-1", "x", "inf", "-inf", "nan", "1e400"])
def test_a_size_limit_that_is_not_a_positive_finite_number_is_one_error(monkeypatch, raw):
    monkeypatch.setenv("ADVISOR_TEST_MB", raw)
    with pytest.raises(DataError, match=r"ADVISOR_TEST_MB=.*expected a positive number of MiB"):
        mib_limit("ADVISOR_TEST_MB", 32, DataError)


def test_a_count_limit_is_a_whole_number_and_its_default_when_unset(monkeypatch):
    monkeypatch.delenv("ADVISOR_TEST_N", raising=False)
    assert count_limit("ADVISOR_TEST_N", 100, "levels") == 100
    monkeypatch.setenv("ADVISOR_TEST_N", "250")
    assert count_limit("ADVISOR_TEST_N", 100, "levels") == 250


@pytest.mark.parametrize("raw", ["0", "-3", "2.5", "1_000", "x", "\u0663"])
def test_a_count_limit_that_is_not_a_positive_whole_number_is_one_error(monkeypatch, raw):
    monkeypatch.setenv("ADVISOR_TEST_N", raw)
    with pytest.raises(ConfigError, match=r"ADVISOR_TEST_N=.*expected a positive whole number of levels"):
        count_limit("ADVISOR_TEST_N", 100, "levels")


@pytest.mark.parametrize("variable", ["ADVISOR_MAX_INPUT_MB", "ADVISOR_MAX_NESTING"])
def test_an_infinite_limit_is_one_line_through_the_cli(variable):
    """An infinite limit is refused in one line, not a traceback (``int(inf)`` raises OverflowError)."""
    done = subprocess.run([str(Path(sys.executable).with_name("advisor")), "ladder", "validate",
                           str(REPO / "ladders" / "demo.yaml")], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", variable: "inf"})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and variable in done.stderr, done.stderr
