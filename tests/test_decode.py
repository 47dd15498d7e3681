"""Decoding raw records: every rejection reason, and the core's view of a valid event."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from schemas import CompactionRetryEvent, ToolCallEvent, ToolResultEvent
from streams.decode import (
    DEFAULT_MAX_BYTES,
    INVALID_REASONS,
    InvalidEvent,
    decode_event,
    decode_line,
    scope_key_of,
    to_tool_event,
)
from streams.detection.types import MISSING, Outcome
from streams.limits import DEFAULT_LIMITS, DecodeLimits

H = "0f" * 32
SECRET = "hunter2-do-not-log"


def rec(**fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "tool_call",
        "event_id": "e1",
        "gateway_id": "gw",
        "session_id": "sess",
        "ts": "2026-01-01T00:00:00Z",
        "tool": "read",
        "args": {"path": "/x"},
    }
    out.update(fields)
    return {k: v for k, v in out.items() if v is not ...}


def raw(**fields: Any) -> bytes:
    return orjson.dumps(rec(**fields))


def reason_of(data: bytes, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(InvalidEvent) as info:
        decode_event(data, **kwargs)
    assert info.value.reason in INVALID_REASONS
    return info.value.reason, info.value.detail


def test_valid_records_of_each_type() -> None:
    assert isinstance(decode_event(raw()), ToolCallEvent)
    assert isinstance(decode_event(raw(type="tool_result", error="boom")), ToolResultEvent)
    assert isinstance(decode_event(raw(type="compaction_retry", tool=..., args=...)), CompactionRetryEvent)
    assert isinstance(decode_event(bytearray(raw())), ToolCallEvent)
    assert decode_event(raw(unknown_field=[1, 2], version=1)).event_id == "e1"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\xff\xfe{}", "not_utf8"),
        (b'{"type": "tool_call", "tool": "caf\xc3"}', "not_utf8"),
        (b'{"a": "\xed\xa0\x80"}', "not_utf8"),  # UTF-8-encoded lone surrogate
        (b"", "not_json"),
        (b"{", "not_json"),
        (b"{'type': 'tool_call'}", "not_json"),
        (b'{"a": NaN}', "not_json"),
        (b'{"a": "\\ud800"}', "not_json"),  # escaped lone surrogate
        (b"[]", "not_object"),
        (b'"tool_call"', "not_object"),
        (b"null", "not_object"),
        (b"{}", "unknown_type"),
        (b'{"type": "tool_denied"}', "unknown_type"),
        (b'{"type": 3}', "unknown_type"),
        (b'{"type": "tool_call", "version": 2}', "future_version"),
        (b'{"type": "whatever_v9", "version": 9}', "future_version"),
        (b'{"type": "tool_call"}', "schema_invalid"),
        (b'{"type": "tool_call", "args": ' + b"[" * 200 + b"]" * 200 + b"}", "limits_exceeded"),
        (b'{"a": ' + b"[" * 1100 + b"]" * 1100 + b"}", "not_json"),  # beyond orjson's own depth limit
        (b'{"a": 1e999}', "not_json"),  # beyond a double: JSON.parse would say Infinity
    ],
)
def test_each_reason(data: bytes, reason: str) -> None:
    assert reason_of(data)[0] == reason


def test_reasons_are_a_closed_set() -> None:
    assert INVALID_REASONS == (
        "oversized",
        "not_utf8",
        "not_json",
        "not_object",
        "limits_exceeded",
        "unknown_type",
        "future_version",
        "schema_invalid",
    )
    assert DEFAULT_MAX_BYTES == DEFAULT_LIMITS.max_bytes == 1_048_576


def test_limits_exceeded_details_name_the_limit_not_the_content() -> None:
    deep = rec(args={"x": [[[[[[[[[[SECRET]]]]]]]]]]})
    wide = rec(args=[SECRET] * 40)
    long_id = rec(run_id=SECRET * 50)
    for data, limits, detail in [
        (orjson.dumps(deep), DecodeLimits(max_depth=8), "max_depth: nesting deeper than 8 levels"),
        (orjson.dumps(wide), DecodeLimits(max_values=30), "max_values: more than 30 JSON values (at least 48)"),
        (
            orjson.dumps(long_id),
            DecodeLimits(max_id_length=100),
            "max_id_length: run_id is 900 characters > limit 100",
        ),
    ]:
        for decode in (decode_event, lambda d, **kw: decode_line(d.decode(), **kw)):
            with pytest.raises(InvalidEvent) as info:
                decode(data, limits=limits)
            assert (info.value.reason, info.value.detail) == ("limits_exceeded", detail)
        assert decode_event(data).event_id == "e1"  # the defaults admit all three


def test_limits_apply_to_every_input_type() -> None:
    data = orjson.dumps(rec(args=[[[[[[[[1]]]]]]]]))
    limits = DecodeLimits(max_depth=5)
    for value in (data, bytearray(data), memoryview(data)):
        with pytest.raises(InvalidEvent) as info:
            decode_event(value, limits=limits)
        assert info.value.reason == "limits_exceeded"
    assert decode_event(memoryview(data)).event_id == "e1"


def test_oversized_is_checked_before_parsing() -> None:
    assert reason_of(b"\xff" * 11, max_bytes=10)[0] == "oversized"
    data = raw()
    assert decode_event(data, max_bytes=len(data)).event_id == "e1"
    assert reason_of(data, max_bytes=len(data) - 1) == (
        "oversized",
        f"{len(data)} bytes > limit {len(data) - 1}",
    )


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"session_id": ...}, "session_id"),
        ({"event_id": ""}, "event_id"),
        ({"args_hash": H}, "(record)"),
        ({"args": ..., "args_hash": SECRET}, "args_hash"),
        ({"ts": SECRET}, "ts"),
        ({"tool": 5}, "tool"),
        ({"version": 0}, "version"),
        ({"version": "2"}, "version"),
        ({"type": "tool_result", "result": None}, "(record)"),
        ({"result_hash": SECRET}, "result_hash"),
        ({"call_id": {"secret": SECRET}}, "call_id"),
    ],
)
def test_schema_invalid_detail_names_field_without_values(fields: dict[str, Any], where: str) -> None:
    reason, detail = reason_of(raw(**fields))
    assert reason == "schema_invalid"
    assert detail.startswith(f"{where}: "), detail
    assert SECRET not in detail and "/x" not in detail


def test_unknown_type_detail_is_short() -> None:
    reason, detail = reason_of(orjson.dumps({"type": "x" * 500}))
    assert reason == "unknown_type" and len(detail) < 120


def test_decode_line() -> None:
    assert decode_line(raw().decode()).event_id == "e1"
    with pytest.raises(InvalidEvent) as info:
        decode_line('{"type": "tool_call", "tool": "\ud800"}')
    assert info.value.reason == "not_utf8"
    with pytest.raises(InvalidEvent) as info:
        decode_line("é" * 6, max_bytes=11)  # 6 characters, 12 bytes
    assert info.value.reason == "oversized"
    with pytest.raises(InvalidEvent) as info:
        decode_line("not json")
    assert info.value.reason == "not_json"
    with pytest.raises(InvalidEvent) as info:
        decode_line('{"type": "compaction_retry", "version": 3}')
    assert info.value.reason == "future_version"


# --- scope key and the core's ToolEvent ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("run_id", "scope"),
    [
        (None, "sess"),
        ("", "sess"),
        ("run-1", "run-1"),
        ("  run-1\t\n", "run-1"),
        ("\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff\v\f\r", "sess"),
        ("\ufeffrun\u3000", "run"),
        ("\x85run", "\x85run"),  # NEL is not JavaScript whitespace
        ("\x1crun\x1f", "\x1crun\x1f"),
        ("\u200brun", "\u200brun"),  # zero-width space is not whitespace either
        (" a b ", "a b"),
    ],
)
def test_scope_key_uses_javascript_trim(run_id: str | None, scope: str) -> None:
    assert scope_key_of(run_id, "sess") == scope
    assert to_tool_event(decode_event(raw(run_id=run_id))).scope == scope


def test_session_id_is_used_bare() -> None:
    assert to_tool_event(decode_event(raw(session_id=" s "))).scope == " s "


def test_tool_call_to_tool_event() -> None:
    ev = to_tool_event(decode_event(raw(call_id="c1", agent_id="ops")))
    assert (ev.kind, ev.tool, ev.call_id, ev.args, ev.args_hash) == (
        "tool_call",
        "read",
        "c1",
        {"path": "/x"},
        None,
    )
    assert ev.outcome is None
    assert ev.dedup_key == "gw\x00e1"


def test_args_null_and_hashed_args() -> None:
    assert to_tool_event(decode_event(raw(args=None))).args is None
    hashed = to_tool_event(decode_event(raw(args=..., args_hash=H)))
    assert hashed.args is MISSING and hashed.args_hash == H


def test_poll_action_reaches_the_core_and_only_poll_or_log_is_valid() -> None:
    for kind in ("tool_call", "tool_result"):
        fields = {"type": kind, "tool": "process", "args": ..., "args_hash": H, "poll_action": "log"}
        if kind == "tool_result":
            fields["result_hash"] = H
        assert to_tool_event(decode_event(raw(**fields))).poll_action == "log"
    assert to_tool_event(decode_event(raw())).poll_action is None
    reason, detail = reason_of(raw(tool="process", args=..., args_hash=H, poll_action="list"))
    assert reason == "schema_invalid" and detail.startswith("poll_action:")


@pytest.mark.parametrize(
    ("fields", "outcome"),
    [
        ({"error": "boom", "result": {"x": 1}, "result_hash": H}, Outcome(error="boom")),
        ({"error": None, "result": {"x": 1}, "result_hash": H}, Outcome(result={"x": 1})),
        (
            {"result": None, "result_hash": H, "unknown_tool_name": "foo"},
            Outcome(result_hash=H, unknown_tool_name="foo"),
        ),
        ({"result": 0}, Outcome(result=0)),
        ({"result": ""}, Outcome(result="")),
        ({"error": ""}, Outcome(error="")),
        ({"result": None, "error": None, "result_hash": None}, None),
    ],
)
def test_outcome_precedence(fields: dict[str, Any], outcome: Outcome | None) -> None:
    assert to_tool_event(decode_event(raw(**fields))).outcome == outcome


def test_tool_result_and_compaction() -> None:
    ev = to_tool_event(decode_event(raw(type="tool_result", call_id="c9", args=..., args_hash=H, result_hash=H)))
    assert (ev.kind, ev.call_id, ev.args, ev.outcome) == (
        "tool_result",
        "c9",
        MISSING,
        Outcome(result_hash=H),
    )
    ev = to_tool_event(decode_event(raw(type="compaction_retry", tool=..., args=..., run_id=" r ")))
    assert (ev.kind, ev.scope, ev.tool, ev.outcome, ev.dedup_key) == (
        "compaction_retry",
        "r",
        "",
        None,
        "gw\x00e1",
    )
