"""Hostile records named in issue 6, one by one: what the decoder answers and what the core makes of it.

Each accepted record also goes through the core (:func:`tests.fuzz.hostile.check_record`), and every record's
CPU time is bounded: 50 ms for ordinary ones, :data:`WORST_CPU_BOUND_S` for the dearest shapes the limits
still admit (measured at most ~65 ms on a shared 2-core machine: 20,000 doubles near 1.8e308, or 1 MiB of
``"tool tool ..."`` error text for the unknown-tool patterns).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, Final

import orjson
import pytest

from schemas import ToolCallEvent
from streams.decode import INVALID_REASONS, InvalidEvent, decode_event, decode_line, to_tool_event
from streams.detection.canonical import canonical
from streams.limits import DEFAULT_LIMITS, ID_FIELDS, ORJSON_MAX_DEPTH, DecodeLimits
from tests.fuzz.hostile import (
    DEFAULT_CONFIG,
    EAGER_CONFIG,
    SECRET,
    Arr,
    Node,
    Obj,
    Raw,
    Str,
    check_record,
    nested,
    no_gc,
    plain,
    record,
    strict_step,
    to_bytes,
)

#: Safety bound for the dearest records the limits still admit (or reject only after parsing 1 MiB).
WORST_CPU_BOUND_S: Final = 0.2
MAX_DEPTH: Final = DEFAULT_LIMITS.max_depth
MAX_VALUES: Final = DEFAULT_LIMITS.max_values
MAX_BYTES: Final = DEFAULT_LIMITS.max_bytes


def reason(data: bytes, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(InvalidEvent) as info:
        decode_event(data, **kwargs)
    assert info.value.reason in INVALID_REASONS
    return info.value.reason, info.value.detail


def count_values(value: Any) -> int:
    """Independent count of JSON values (every container and scalar; object keys not counted)."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        total += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return total


def depth_of(value: Any) -> int:
    best, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            best = max(best, depth)
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return best


def cpu(fn: Callable[[], object]) -> float:
    with no_gc():
        started = time.thread_time()
        fn()
        return time.thread_time() - started


# --- nesting ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["list", "dict"])
@pytest.mark.parametrize("where", ["args", "result", "send_result", "extra"])
def test_depth_at_the_limit_passes_and_one_more_is_rejected(kind: str, where: str) -> None:
    def build(depth: int) -> bytes:  # ``depth`` of the whole record
        if where == "args":
            return to_bytes(record(args=nested(depth - 1, kind)))
        if where == "extra":  # an ignored field still costs the parse: the whole record counts
            return to_bytes(record(extra=nested(depth - 1, kind)))
        details = Obj((("x", nested(depth - 3, kind)),))  # record > result > details > x...
        tool = Str("sessions_send" if where == "send_result" else "read")
        return to_bytes(record(tool=tool, result=Obj((("details", details),))))

    ok = build(MAX_DEPTH)
    assert depth_of(orjson.loads(ok)) == MAX_DEPTH
    assert check_record(ok) is not None
    assert reason(build(MAX_DEPTH + 1)) == ("limits_exceeded", f"max_depth: nesting deeper than {MAX_DEPTH} levels")
    assert reason(build(ORJSON_MAX_DEPTH))[0] == "limits_exceeded"
    assert reason(build(ORJSON_MAX_DEPTH + 1))[0] == "not_json"  # orjson's own limit
    assert reason(build(100_000))[0] == "not_json"


def test_the_core_keeps_recursion_headroom_at_the_depth_limit() -> None:
    """At ``max_depth`` the core needs far fewer frames than the interpreter allows: a deep caller is fine."""
    details = Obj((("x", nested(MAX_DEPTH - 3, "dict")),))
    data = to_bytes(
        record(tool=Str("sessions_send"), args=nested(MAX_DEPTH - 1, "dict"), result=Obj((("details", details),)))
    )
    event = decode_event(data)

    def at_depth(frames: int) -> None:
        if frames:
            at_depth(frames - 1)
        else:
            strict_step(None, event, EAGER_CONFIG)

    headroom = sys.getrecursionlimit() // 2  # a caller already using half of the stack budget
    at_depth(headroom)


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = "[" * 5_000 + "{" * 5_000
    event = check_record(to_bytes(record(args=plain({"code": text}))))
    assert isinstance(event, ToolCallEvent) and event.args == {"code": text}
    line_event = decode_line(to_bytes(record(args=plain({"code": text}))).decode())
    assert isinstance(line_event, ToolCallEvent) and line_event.args == {"code": text}


# --- numbers ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "canonical_text"),
    [
        ("9007199254740993", "9007199254740992"),  # 2**53 + 1 is a JavaScript double
        ("18446744073709551615", "18446744073709552000"),  # 2**64 - 1: orjson keeps an int, JS a double
        ("18446744073709551616", "18446744073709552000"),  # 2**64: orjson makes it a double too
        ("-9223372036854775809", "-9223372036854776000"),
        ("1" + "0" * 300, "1e+300"),
        ("1.7976931348623157e308", "1.7976931348623157e+308"),
        ("5e-324", "5e-324"),
        ("1e-400", "0"),  # underflows to 0 as in JavaScript
        ("-0", "0"),
        ("-0.0", "0"),
        ("1E+2", "100"),
    ],
)
def test_extreme_numbers_hash_as_javascript_doubles(number: str, canonical_text: str) -> None:
    data = to_bytes(record(args=Arr((Raw(number),)), ts=Raw(number if number[0] != "-" else "0")))
    event = check_record(data)
    assert isinstance(event, ToolCallEvent)
    assert canonical(event.args) == "[" + canonical_text + "]"
    event.ts_ms()  # usable for latency whatever the number


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1.8e308", "1" + "0" * 400, "NaN", "Infinity", "-Infinity"])
def test_numbers_beyond_doubles_are_not_json(number: str) -> None:
    """``JSON.parse`` would make these ``Infinity``; no gateway's ``JSON.stringify`` can write them."""
    assert reason(to_bytes(record(args=Arr((Raw(number),)))))[0] == "not_json"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("18446744073709551615", "future_version"), ("1e300", "schema_invalid"), ("-1", "schema_invalid")],
)
def test_extreme_versions(version: str, expected: str) -> None:
    assert reason(to_bytes(record(version=Raw(version))))[0] == expected


# --- strings, surrogates, sizes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("\\ud800", "not_json"),  # escaped lone high surrogate
        ("\\udc00", "not_json"),  # escaped lone low surrogate
        ("\\udc00\\ud800", "not_json"),  # a pair in the wrong order
        ("\\ud800x", "not_json"),
        ("\ud800", "not_utf8"),  # a raw surrogate (CESU-8 / WTF-8 bytes)
        ("\\ud83d\\ude00", None),  # a proper escaped pair
    ],
)
def test_surrogates(body: str, expected: str | None) -> None:
    for field in ("args", "tool", "run_id", "extra"):
        value: Node = Obj((("text", Str(body)),)) if field == "args" else Str(body)
        data = to_bytes(record(**{field: value}))
        if expected is None:
            assert check_record(data) is not None
            assert "😀" in str(orjson.loads(data))
        else:
            assert reason(data)[0] == expected, field
            with pytest.raises(InvalidEvent) as info:
                decode_line(data.decode("utf-8", "surrogatepass"))
            assert info.value.reason == ("not_utf8" if expected == "not_utf8" else "not_json")


def test_one_mebibyte_of_arguments() -> None:
    """A record of exactly ``max_bytes`` with one huge argument string passes; one byte more is oversized."""
    empty = to_bytes(record(tool=Str("write"), args=Obj((("content", Str("")),))))
    for unit, width in (("a", 1), ("é", 2), ("😀", 4), ("\\u0000", 6)):
        count = (MAX_BYTES - len(empty)) // width
        pad = "a" * (MAX_BYTES - len(empty) - count * width)
        data = to_bytes(record(tool=Str("write"), args=Obj((("content", Str(unit * count + pad)),))))
        assert len(data) == MAX_BYTES
        event = check_record(data, repeats=2)
        assert isinstance(event, ToolCallEvent) and len(event.args["content"]) == count + len(pad)
        assert reason(data + b" ") == ("oversized", f"{MAX_BYTES + 1} bytes > limit {MAX_BYTES}")


@pytest.mark.parametrize("field", ID_FIELDS)
def test_identifier_lengths(field: str) -> None:
    limit = DEFAULT_LIMITS.max_id_length
    extra = {"type": Str("tool_result"), "error": Str("boom")} if field == "unknown_tool_name" else {}
    ok = to_bytes(record(**{**extra, field: Str("x" * limit)}))
    event = check_record(ok)
    assert event is not None
    too_long = to_bytes(record(**{**extra, field: Str("x" * (limit + 1))}))
    assert reason(too_long) == ("limits_exceeded", f"max_id_length: {field} is {limit + 1} characters > limit {limit}")
    with pytest.raises(InvalidEvent) as info:
        decode_line(too_long.decode())
    assert info.value.reason == "limits_exceeded"


def test_long_error_messages_cost_linear_time() -> None:
    """The unknown-tool patterns scan 1 MiB error messages in linear time (the worst about 50 ns a byte)."""
    room = MAX_BYTES - 400
    for body in (
        "tool " * (room // 5),
        "unknown tool: " + "a" * (room - 14),
        ("Tool " + "a" * 50 + " ") * (room // 56),
        "tool\\t" + " " * (room - 10) + "x",
        "tool " + "\\u00a0" * (room // 6 - 2),
    ):
        data = to_bytes(record(type=Str("tool_result"), error=Str(body)))
        assert check_record(data, repeats=1, cpu_bound_s=WORST_CPU_BOUND_S) is not None


# --- duplicate keys -----------------------------------------------------------------------------------------


def test_duplicate_keys_keep_the_last_value_like_json_parse() -> None:
    data = to_bytes(
        Obj(
            (
                *record().pairs,
                ("tool", Str("second")),
                ("args", Obj((("x", Raw("1")), ("y", Raw("2")), ("x", Raw("3"))))),
                ("type", Str("tool_result")),
                ("error", Str("boom")),
            )
        )
    )
    event = decode_event(data)
    assert (event.type, event.tool, event.args) == ("tool_result", "second", {"x": 3, "y": 2})  # type: ignore[union-attr]
    tool_event = to_tool_event(event)
    assert canonical(tool_event.args) == '{"x":3,"y":2}'  # what JSON.parse + stableStringify give
    check_record(data)


# --- many values --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", [Raw("0"), Str(""), Obj(()), Arr(()), Raw("null")])
def test_value_count_at_the_limit_passes_and_one_more_is_rejected(unit: Node) -> None:
    base = count_values(orjson.loads(to_bytes(record(args=Arr(())))))
    ok = to_bytes(record(args=Arr((unit,) * (MAX_VALUES - base))))
    assert count_values(orjson.loads(ok)) == MAX_VALUES
    assert check_record(ok, repeats=1) is not None
    rejected, detail = reason(to_bytes(record(args=Arr((unit,) * (MAX_VALUES - base + 1)))))
    assert rejected == "limits_exceeded" and detail.startswith(f"max_values: more than {MAX_VALUES} JSON values")


_WORST_UNITS: Final = (
    "0",
    "0.1",
    "3.141592653589793",
    "1.7976931348623157e308",  # the dearest for the core: Python's repr of a huge double
    "18446744073709551615",
    '""',
    "{}",
    "[]",
    "null",
    '{"a":1}',
    '"\\u00e9"',
)


@pytest.mark.parametrize("unit", _WORST_UNITS)
@pytest.mark.parametrize("where", ["args", "details"])
def test_worst_shapes_cost_bounded_cpu(unit: str, where: str) -> None:
    """1 MiB of the unit (rejected after the parse) and as many as the limit admits (through the core)."""

    def build(count: int) -> bytes:
        values = Raw("[" + ",".join([unit] * count) + "]")
        if where == "args":
            return to_bytes(record(args=values))
        return to_bytes(record(tool=Str("read"), result=Obj((("details", Obj((("x", values),))),))))

    base = count_values(orjson.loads(build(0)))
    per = count_values(orjson.loads(unit))
    admitted = build((MAX_VALUES - base) // per)
    flood = build((MAX_BYTES - len(build(0))) // (len(unit) + 1))
    assert len(flood) <= MAX_BYTES
    event = decode_event(admitted)
    spent = cpu(lambda: strict_step(None, decode_event(admitted), DEFAULT_CONFIG))
    assert spent < WORST_CPU_BOUND_S, f"{spent * 1e3:.1f} ms to decode and apply {len(admitted)} bytes"
    assert event is not None
    spent = cpu(lambda: reason(flood))
    assert reason(flood)[0] == "limits_exceeded"
    assert spent < WORST_CPU_BOUND_S, f"{spent * 1e3:.1f} ms to reject {len(flood)} bytes"


def test_rejection_details_never_quote_payload() -> None:
    secret = Str(SECRET * 3)
    cases = [
        record(args=Arr((secret,) * (MAX_VALUES + 1))),
        record(args=nested(MAX_DEPTH + 5, "dict", secret)),
        record(tool=Str(SECRET * 500)),
        record(args=Obj(((SECRET, Raw("1e999")),))),
    ]
    for node in cases:
        _, detail = reason(to_bytes(node))
        assert SECRET not in detail


# --- limits are configuration --------------------------------------------------------------------------------


def test_limits_are_configurable_and_validated() -> None:
    data = to_bytes(record(args=plain({"a": [[1, 2], {"b": [3]}]})))
    obj = orjson.loads(data)
    assert decode_event(data, limits=DecodeLimits(max_depth=depth_of(obj))).event_id == "e1"
    assert reason(data, limits=DecodeLimits(max_depth=depth_of(obj) - 1))[0] == "limits_exceeded"
    assert decode_event(data, limits=DecodeLimits(max_values=count_values(obj))).event_id == "e1"
    assert reason(data, limits=DecodeLimits(max_values=count_values(obj) - 1))[0] == "limits_exceeded"
    assert reason(data, limits=DecodeLimits(max_id_length=2))[1].startswith("max_id_length: session_id is 4")
    assert reason(data, limits=DecodeLimits(max_bytes=len(data) - 1))[0] == "oversized"
    assert reason(data, max_bytes=len(data) - 1, limits=DecodeLimits(max_bytes=10**9))[0] == "oversized"
    with pytest.raises(ValueError):
        DecodeLimits(max_depth=ORJSON_MAX_DEPTH + 1)
    with pytest.raises(ValueError):
        DecodeLimits(max_values=0)


def test_orjson_limits_this_suite_relies_on() -> None:
    """Guards an orjson upgrade: its depth limit, u64 integers, last-key-wins and surrogate handling."""
    assert orjson.loads(b"[" * ORJSON_MAX_DEPTH + b"]" * ORJSON_MAX_DEPTH)
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(b"[" * (ORJSON_MAX_DEPTH + 1) + b"]" * (ORJSON_MAX_DEPTH + 1))
    assert orjson.loads(b"18446744073709551615") == 2**64 - 1
    assert type(orjson.loads(b"18446744073709551616")) is float
    assert orjson.loads(b'{"a":1,"a":2}') == {"a": 2}
    for bad in (b"1e999", b'"\\ud800"', b'"\xed\xa0\x80"', b"NaN"):
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(bad)
