"""The one parser of integers an operator types (streams/integers.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.integers import TooLarge, parse_integer, shown


@given(st.integers(min_value=-(2**63), max_value=2**63))
def test_every_integer_a_setting_can_hold_reads_back(value: int) -> None:
    assert parse_integer(f" {value} ") == value


@pytest.mark.parametrize("text", ["", "x", "1.5", "1e3", "1_000", "²", "٣", "--1", "0x10", "1 2"])
def test_what_int_would_take_or_choke_on_is_not_an_integer(text: str) -> None:
    """``int`` takes ``1_000`` and Arabic-Indic digits; ``str.isdigit`` passes ``²``, which ``int`` refuses."""
    with pytest.raises(ValueError, match=r"^not an integer$") as raised:
        parse_integer(text)
    assert not isinstance(raised.value, TooLarge)


def test_a_number_too_long_to_convert_is_too_large_in_words() -> None:
    """Python refuses to convert 4,300 digits or more; that was a traceback in four commands."""
    with pytest.raises(TooLarge, match=r"^too large$"):
        parse_integer("9" * 5000)
    with pytest.raises(TooLarge, match=r"^too large; at most 10$"):
        parse_integer("11", most=10)
    with pytest.raises(TooLarge, match=r"^too large; at most 10$"):
        parse_integer("-" + "9" * 5000, most=10)
    assert parse_integer("0" * 5000 + "7", most=10) == 7  # leading zeros are no size


def test_a_refused_value_is_quoted_short() -> None:
    assert shown("abc") == "'abc'"
    assert shown("9" * 5000) == "'" + "9" * 40 + "...'"
