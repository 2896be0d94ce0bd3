"""The one strict parser of numeric options (pybench.cli.argtypes.parse_decimal and the types on it)."""

from __future__ import annotations

import argparse

import pytest

from pybench.cli import argtypes

# Each was accepted by at least one numeric type before the one strict parser.
REFUSED = ["inf", "1e400", "10%%", "\u0661\u0660", "\uff11\uff10", "1_0"]


@pytest.mark.parametrize("text", REFUSED)
def test_every_numeric_type_refuses_what_no_option_means(text):
    for parse in (argtypes.positive_int, argtypes.nonneg_float, argtypes.positive_float, argtypes.fraction(),
                  argtypes.percent, argtypes.timeout_seconds if text != "inf" else argtypes.nonneg_float):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)


def test_a_timeout_that_underflows_to_zero_is_not_no_timeout():
    with pytest.raises(argparse.ArgumentTypeError, match="too small to be told from 0"):
        argtypes.timeout_seconds("1e-400")
    assert argtypes.timeout_seconds("0") == 0.0 and argtypes.timeout_seconds("0.0e-400") == 0.0
    assert argtypes.timeout_seconds("never") == 0.0  # documented words still mean no timeout


def test_percent_and_fraction_take_one_percent_sign():
    assert argtypes.percent("10%") == 10.0 and argtypes.fraction()("5%") == pytest.approx(0.05)
    for parse in (argtypes.percent, argtypes.fraction()):
        with pytest.raises(argparse.ArgumentTypeError):
            parse("10%%")


def test_plain_numbers_still_parse():
    assert argtypes.positive_int(" 12 ") == 12 and argtypes.positive_float("2.5e-3") == 0.0025
    assert argtypes.number(int, 1, strict=False, maximum=8)("8") == 8
