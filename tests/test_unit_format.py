"""Issue #8.9: unit formatting helpers for console output."""
from __future__ import annotations

import math

import pytest

from archsim.units import fmt_bandwidth, fmt_count, fmt_energy, fmt_si, fmt_time


@pytest.mark.parametrize("seconds, digits, text", [
    (0.01776, 4, "17.76 ms"),
    (0.01776, 3, "17.8 ms"),
    (3.2e-6, 3, "3.2 µs"),
    (1.5, 3, "1.50 s"),
    (125.0, 3, "125.00 s"),
    (2e-9, 3, "2 ns"),
    (0.0, 3, "0 s"),
    (999.96e-6, 3, "1 ms"),          # rounding carries into the next prefix
    (-4.5e-3, 3, "-4.5 ms"),
])
def test_fmt_time(seconds, digits, text):
    assert fmt_time(seconds, digits) == text


def test_fmt_time_defaults():
    assert (fmt_time(0.01776), fmt_time(3.2e-6), fmt_time(1.5)) == ("17.76 ms", "3.2 µs", "1.50 s")


def test_fmt_bandwidth_energy():
    assert fmt_bandwidth(31.3e9) == "31.3 GB/s"
    assert fmt_bandwidth(25.6e9) == "25.6 GB/s"
    assert fmt_bandwidth(1.2e12) == "1.2 TB/s"
    assert fmt_energy(1.23e-3) == "1.23 mJ"
    assert fmt_energy(4.56e-12) == "4.56 pJ"
    assert fmt_energy(2.0) == "2 J"


def test_fmt_si_edge_cases():
    assert fmt_si(float("nan"), "J") == "nan"
    assert fmt_si(math.inf, "B/s") == "inf B/s"
    assert fmt_si(None, "s") == "n/a"
    assert fmt_si(1.5, "s", keep_zeros=True) == "1.50 s"
    assert fmt_si(1e20, "B") == "100000 PB"     # beyond the largest prefix: stays in P


def test_fmt_count():
    assert fmt_count(1234567) == "1,234,567"
    assert fmt_count(12.0) == "12"
    assert fmt_count(0.125) == "0.125"
    assert fmt_count(12345.67) == "12,345.7"
