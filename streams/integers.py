"""Whole numbers typed by an operator: ASCII digits only, and refused in words when too long to be a value.

Python's ``int()`` accepts what no flag should (``1_000``, other scripts' digits; ``str.isdigit`` even passes
``²``, which ``int()`` then refuses) and raises on 4,300 digits or more, which reached users as tracebacks. Every
integer a command reads (flags, variables, sweep values, offsets, partition counts) goes through
:func:`parse_integer`.
"""

from __future__ import annotations

import re
from typing import Final

_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
#: More digits than any value a setting takes (int64 has 19): such a number is "too large", not converted.
_MAX_DIGITS: Final = 20


class TooLarge(ValueError):
    """An integer past the size asked for (or past any setting's): its text says so in a few words."""


def parse_integer(text: str, *, most: int | None = None) -> int:
    """``text`` (surrounding whitespace allowed) as an integer; ``ValueError`` with the reason in a few words:
    "not an integer", or :class:`TooLarge` "too large" (with ``most``: "too large; at most MOST") past
    ``most`` in size."""
    digits = text.strip()
    if not _INTEGER.fullmatch(digits):
        raise ValueError("not an integer")
    limit = len(str(most)) if most is not None else _MAX_DIGITS
    too_large = "too large" if most is None else f"too large; at most {most}"
    sign, body = ("-" if digits[0] == "-" else ""), digits.lstrip("+-").lstrip("0")
    if len(body) > limit:
        raise TooLarge(too_large)
    value = int(sign + (body or "0"))  # without its leading zeros, which count against int()'s digit limit too
    if most is not None and abs(value) > most:
        raise TooLarge(too_large)
    return value


def shown(text: str) -> str:
    """A refused value as an error line quotes it: its first 40 characters (a 5,000-digit number is not echoed)."""
    return repr(text if len(text) <= 40 else text[:40] + "...")


__all__ = ["TooLarge", "parse_integer", "shown"]
