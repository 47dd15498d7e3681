"""JavaScript-exact canonical JSON (OpenClaw's ``stableStringify``) and the SHA-256 digests built on it.

Gateways hash in JavaScript and loopwatch must produce the very same text, so a gateway-computed
``args_hash``/``result_hash`` equals ours: numbers print as ``Number.prototype.toString``
does, object keys sort by UTF-16 code units, lone surrogates are escaped, non-finite numbers become quoted
strings and an absent value prints the bare word ``undefined``. Trimming follows JavaScript too (point 4).
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from collections.abc import Mapping
from json.encoder import encode_basestring
from typing import Any, Final

from streams.detection.types import MISSING

# ECMAScript WhiteSpace + LineTerminator: what String.prototype.trim removes and what `\s` matches.
JS_WHITESPACE: Final = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)

_MAX_SAFE: Final = 2**53
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")


def js_trim(text: str) -> str:
    """``String.prototype.trim``: strips only JavaScript whitespace (not e.g. U+0085 or U+001C)."""
    return text.strip(JS_WHITESPACE)


def _escape_lone_surrogates(quoted: str) -> str:
    # A high+low pair held as two code points is one character in JavaScript: UTF-16 round-tripping joins
    # such pairs. Every unpaired half is then written as JSON.stringify writes it (since ES2019): \udxxx.
    joined = quoted.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", joined)


def _quote(text: str) -> str:
    """``JSON.stringify`` of a string: only ``"``, ``\\``, C0 controls and lone surrogates are escaped."""
    quoted = encode_basestring(text)
    if not text.isascii() and _SURROGATE.search(text) is not None:
        return _escape_lone_surrogates(quoted)
    return quoted


def _utf16_units(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def js_number(value: float) -> str:
    """``Number.prototype.toString`` for a finite double (shortest round-trip digits, JS exponent rules)."""
    if value == 0:
        return "0"  # also -0
    if value.is_integer() and -_MAX_SAFE < value < _MAX_SAFE:
        return str(int(value))
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = int_part + frac_part
    point = len(int_part) + (int(exponent) if exponent else 0)  # value = 0.<digits> * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * -point + digits
    else:
        exp = point - 1
        exp_text = ("e+" if exp >= 0 else "e-") + str(abs(exp))
        body = (digits if k == 1 else digits[0] + "." + digits[1:]) + exp_text
    return sign + body


def _float(value: float) -> str:
    if math.isfinite(value):
        return js_number(value)
    if value != value:
        return '"NaN"'
    return '"Infinity"' if value > 0 else '"-Infinity"'


def _big_int(value: int) -> str:
    # JSON numbers are doubles in JavaScript: integers beyond 2**53 round, huge ones overflow to Infinity.
    try:
        return _float(float(value))
    except OverflowError:
        return '"Infinity"' if value > 0 else '"-Infinity"'


#: Per key sequence (insertion order) of an object: its keys in canonical order with their quoted prefixes.
#: Tool arguments and results repeat a few shapes, so sorting and quoting are paid once per shape. Bounded:
#: only objects of up to ``_LAYOUT_KEYS`` keys are kept, and the memo is cleared when full.
_LAYOUTS: dict[tuple[str, ...], list[tuple[str, str]]] = {}
_LAYOUTS_MAX: Final = 4096
_LAYOUT_KEYS: Final = 32


def _layout(keys: tuple[str, ...]) -> list[tuple[str, str]]:
    ordered = sorted(keys)
    joined = "".join(ordered)
    if not joined.isascii() and _ASTRAL.search(joined) is not None:
        ordered.sort(key=_utf16_units)  # code point order differs from UTF-16 order only for astral chars
    return [(k, _quote(k) + ":") for k in ordered]


def _object(obj: Mapping[Any, Any]) -> str:
    if not obj:
        return "{}"
    keys = tuple(obj)
    layout = _LAYOUTS.get(keys)
    if layout is None:
        layout = _layout(keys)
        if len(keys) <= _LAYOUT_KEYS:
            if len(_LAYOUTS) >= _LAYOUTS_MAX:
                _LAYOUTS.clear()
            _LAYOUTS[keys] = layout
    enc = _encode
    return "{" + ",".join([prefix + enc(obj[k]) for k, prefix in layout]) + "}"


def _encode(value: Any) -> str:
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is dict:
        return _object(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    if kind is int:
        return str(value) if -_MAX_SAFE <= value <= _MAX_SAFE else _big_int(value)
    if kind is list:
        return "[" + ",".join([_encode(item) for item in value]) + "]"
    if kind is float:
        return _float(value)
    if value is MISSING:
        return "undefined"
    return _encode_other(value)


def _encode_other(value: Any) -> str:
    """Subclasses and the few non-JSON types the JavaScript original also knows how to print."""
    if isinstance(value, str):
        return _quote(str(value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _encode(int(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("canonical JSON object keys must be strings")
        return _object(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join([_encode(item) for item in value]) + "]"
    if isinstance(value, bytes | bytearray | memoryview):
        data = base64.b64encode(bytes(value)).decode("ascii")
        return '{"data":' + _quote(data) + ',"type":"Uint8Array"}'
    raise TypeError(f"cannot canonicalise a value of type {type(value).__name__}")


def canonical(value: Any) -> str:
    """The canonical JSON text of a JSON value (``MISSING`` is JavaScript ``undefined``)."""
    return _encode(value)


def sha256_hex(text: str) -> str:
    """Lowercase hex SHA-256 of already canonical text (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest(value: Any) -> str:
    """Lowercase hex SHA-256 of the UTF-8 canonical text: OpenClaw's hash of params and outcomes."""
    return hashlib.sha256(_encode(value).encode("utf-8")).hexdigest()
