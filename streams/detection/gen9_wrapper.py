"""Outcome digests that ignore the random id of external-content wrappers (OpenClaw #130210).

Untrusted content reaches tools wrapped in ``<<<EXTERNAL_UNTRUSTED_CONTENT id="…">>>`` …
``<<<END_EXTERNAL_UNTRUSTED_CONTENT id="…">>>`` with a fresh 16-hex id per call, so a loop fetching the same
page would otherwise look like progress. Every string of an outcome (keys included) has the id of each
complete, consistently escaped wrapper pair replaced by zeros before hashing; argument hashes are unchanged.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Final

from streams.detection.canonical import _big_int, _float, _quote, _utf16_units
from streams.detection.types import MISSING

_MARK: Final = "<<<EXTERNAL_UNTRUSTED_CONTENT"
_ZERO_ID: Final = "0" * 16
# The wrapper may sit inside JSON text that was escaped any number of times: (\\*) captures that escaping.
_WRAPPER: Final = re.compile(
    r'(<<<EXTERNAL_UNTRUSTED_CONTENT id=(\\*)")([a-f0-9]{16})'
    r'(\2">>>(?:(?!<<<(?:END_)?EXTERNAL_UNTRUSTED_CONTENT)[\s\S])*<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\2")\3(\2">>>)'
)
_QUOTE_RUN: Final = re.compile(r'(?<!\\)\\*"')


def _replace(match: re.Match[str]) -> str:
    escapes = len(match.group(2))
    middle = match.group(4)
    # Only an escaping depth of 2**k - 1 backslashes is real JSON escaping, and every quote inside the
    # wrapper must be escaped to the same depth; anything else is left alone.
    if escapes & (escapes + 1) or any(len(q) % (escapes + 1) for q in _QUOTE_RUN.findall(middle)):
        return match.group(0)
    return match.group(1) + _ZERO_ID + middle + _ZERO_ID + match.group(5)


def canonical_wrapper_ids(text: str) -> str:
    """``text`` with every wrapper pair's id replaced by zeros."""
    if _MARK not in text:
        return text
    return _WRAPPER.sub(_replace, text)


def _object(obj: dict[str, Any]) -> str:
    # Keys sort by their normalised form, ties by the original key (both in UTF-16 code-unit order).
    entries = sorted(
        ((canonical_wrapper_ids(key), key) for key in obj),
        key=lambda pair: (_utf16_units(pair[0]), _utf16_units(pair[1])),
    )
    return "{" + ",".join(_quote(norm) + ":" + _encode(obj[key]) for norm, key in entries) + "}"


def _encode(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _quote(canonical_wrapper_ids(value))
    if kind is dict:
        return _object(value) if value else "{}"
    if kind is list:
        return "[" + ",".join([_encode(item) for item in value]) + "]"
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is int:
        return str(value) if -(2**53) <= value <= 2**53 else _big_int(value)
    if kind is float:
        return _float(value)
    if value is MISSING:
        return "undefined"
    raise TypeError(f"cannot canonicalise a value of type {kind.__name__}")


def outcome_digest(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value`` with wrapper ids canonicalised."""
    return hashlib.sha256(_encode(value).encode("utf-8")).hexdigest()
