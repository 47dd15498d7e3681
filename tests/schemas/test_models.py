"""The wire models: what a valid event is, what is rejected, and the verdict id contract."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from schemas import (
    EVENT_ADAPTER,
    CompactionRetryEvent,
    LoopDetectionConfig,
    SourceRef,
    ToolCallEvent,
    ToolResultEvent,
    Verdict,
    schema_errors,
    ts_to_epoch_ms,
    verdict_id,
)

H = "ab" * 32


def base(**extra: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"event_id": "e1", "gateway_id": "gw", "session_id": "s1", "ts": 1_700_000_000_000}
    rec.update(extra)
    return rec


def call(**extra: Any) -> dict[str, Any]:
    return base(**{"type": "tool_call", "tool": "read", **extra})


def test_tool_call_defaults_and_extra_fields_ignored() -> None:
    ev = ToolCallEvent.model_validate(call(args={"p": 1}, future_field={"x": 1}))
    assert (ev.agent_id, ev.run_id, ev.version, ev.call_id) == ("main", None, 1, None)
    assert ev.has_args and ev.args == {"p": 1} and not ev.has_outcome
    assert not hasattr(ev, "future_field")
    assert ev.dedup_key == "gw\x00e1"


def test_args_null_is_present_and_absent_is_not() -> None:
    present = ToolCallEvent.model_validate(call(args=None))
    assert present.has_args and present.args is None
    hashed = ToolCallEvent.model_validate(call(args_hash=H))
    assert not hashed.has_args
    with pytest.raises(ValidationError, match="exactly one of args and args_hash"):
        ToolCallEvent.model_validate(call())


@pytest.mark.parametrize(
    "fields",
    [
        {"args": 1, "args_hash": H},  # both
        {"args_hash": None},  # null hash is absent
        {"args_hash": H.upper()},
        {"args_hash": "ab"},
    ],
)
def test_args_xor_and_hash_format(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ToolCallEvent.model_validate(call(**fields))


def test_args_with_null_hash_is_fine() -> None:
    assert ToolCallEvent.model_validate(call(args=[1], args_hash=None)).has_args


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        ({"result_hash": H}, True),
        ({"result_hash": "error:" + H}, True),
        ({"result_hash": "error:" + H[:-1]}, False),
        ({"result_hash": "warn:" + H}, False),
        ({"error": 5}, False),
        ({"result": None, "error": None, "result_hash": None}, True),
    ],
)
def test_tool_call_outcome_fields(fields: dict[str, Any], ok: bool) -> None:
    rec = call(args={}, **fields)
    if ok:
        ToolCallEvent.model_validate(rec)
    else:
        with pytest.raises(ValidationError):
            ToolCallEvent.model_validate(rec)


def test_tool_result_needs_a_non_null_outcome() -> None:
    rec = base(type="tool_result", tool="read", call_id="c1", args={})
    with pytest.raises(ValidationError, match="one of result, error or result_hash"):
        ToolResultEvent.model_validate(rec)
    with pytest.raises(ValidationError):
        ToolResultEvent.model_validate({**rec, "result": None, "error": None})
    assert ToolResultEvent.model_validate({**rec, "error": ""}).error == ""
    assert ToolResultEvent.model_validate({**rec, "result": 0}).result == 0
    with pytest.raises(ValidationError):  # args or args_hash still required
        ToolResultEvent.model_validate(base(type="tool_result", tool="read", result=1))


@pytest.mark.parametrize(
    "fields",
    [
        {"event_id": ""},
        {"session_id": ""},
        {"gateway_id": None},
        {"session_id": None},
        {"agent_id": None},
        {"run_id": 5},
        {"version": 0},
        {"version": True},
        {"version": "1"},
        {"ts": True},
        {"ts": "yesterday"},
        {"ts": "2024-01-01T00:00:00"},  # no offset
        {"ts": "2024-02-30T00:00:00Z"},
        {"tool": ""},
        {"call_id": 7},
    ],
)
def test_common_field_rules(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ToolCallEvent.model_validate(call(args={}, **fields))


def test_missing_required_fields() -> None:
    for key in ("event_id", "gateway_id", "session_id", "ts"):
        rec = call(args={})
        del rec[key]
        with pytest.raises(ValidationError):
            ToolCallEvent.model_validate(rec)


def test_ts_kept_as_given_and_converted() -> None:
    ev = CompactionRetryEvent.model_validate(base(type="compaction_retry", ts="2024-01-01T00:00:01.5+01:00"))
    assert ev.ts == "2024-01-01T00:00:01.5+01:00"
    assert ev.ts_ms() == 1_704_063_601_500.0
    assert ts_to_epoch_ms("1970-01-01t00:00:00.123456789z") == pytest.approx(123.456)
    assert ts_to_epoch_ms(1_700_000_000_000) == 1_700_000_000_000.0
    assert ts_to_epoch_ms(1.5) == 1.5


def _ts_answer(ts: object) -> object:
    try:
        return CompactionRetryEvent.model_validate(base(type="compaction_retry", ts=ts)).ts
    except ValidationError:
        return "rejected"
    except OverflowError:  # an int beyond any double (orjson never parses one) escapes the validator
        return "overflow"


def _ts_reference(ts: object) -> object:
    """The rule without the validator's fast path for numbers: a str or non-bool number that converts."""
    if isinstance(ts, bool) or not isinstance(ts, str | int | float):
        return "rejected"
    try:
        ts_to_epoch_ms(ts)
    except ValueError:
        return "rejected"
    except OverflowError:
        return "overflow"
    return ts


@given(
    st.one_of(
        st.integers(),
        st.integers(min_value=2**999, max_value=2**1100),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
    )
)
def test_numeric_ts_fast_path_answers_as_the_full_check(ts: object) -> None:
    assert _ts_answer(ts) == _ts_reference(ts)


def test_discriminated_union() -> None:
    ev = EVENT_ADAPTER.validate_python(base(type="compaction_retry", run_id="r"))
    assert isinstance(ev, CompactionRetryEvent)
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python(base(type="tool_denied"))


def test_models_are_immutable() -> None:
    ev = ToolCallEvent.model_validate(call(args={}))
    with pytest.raises(ValidationError):
        ev.tool = "x"


def test_verdict_id_is_deterministic_and_distinguishes_parts() -> None:
    a = verdict_id("gw", "e1", "block", "generic_repeat")
    assert a == verdict_id("gw", "e1", "block", "generic_repeat")
    assert len(a) == 32 and int(a, 16) >= 0
    others = {
        verdict_id("gw", "e1", "warning", "generic_repeat"),
        verdict_id("gw", "e1", "block", "ping_pong"),
        verdict_id("gw", "e2", "block", "generic_repeat"),
        verdict_id("gw2", "e1", "block", "generic_repeat"),
        verdict_id("g", "we1", "block", "generic_repeat"),  # no ambiguity from concatenation
    }
    assert a not in others and len(others) == 5
    # Pinned: sha256 of the JSON array; changing it would break de-duplication across versions.
    assert a == "c2ab31967446632ddcc0c604c9cd1315"


def make_verdict(**extra: Any) -> Verdict:
    fields: dict[str, Any] = {
        "verdict_id": verdict_id("gw", "e1", "block", "generic_repeat"),
        "decision": "block",
        "detector": "generic_repeat",
        "count": 20,
        "threshold": 20,
        "gateway_id": "gw",
        "agent_id": "main",
        "session_id": "s1",
        "tool": "read",
        "event_id": "e1",
        "message": "CRITICAL: ...",
        "event_ts": 1_700_000_000_000,
        "config_hash": "0" * 64,
    }
    fields.update(extra)
    return Verdict.model_validate(fields)


def test_verdict_model() -> None:
    v = make_verdict()
    assert v.source == SourceRef(topic=None, partition=None, offset=None)
    assert v.version == 1
    dumped = v.model_dump(mode="json")
    assert dumped["source"] == {"topic": None, "partition": None, "offset": None}
    assert make_verdict(source=None).source == SourceRef()
    src = make_verdict(source={"topic": "loopwatch.events", "partition": 2, "offset": 17}).source
    assert (src.topic, src.partition, src.offset) == ("loopwatch.events", 2, 17)
    with pytest.raises(ValidationError):
        make_verdict(decision="stop")
    with pytest.raises(ValidationError):
        make_verdict(detector="genericRepeat")
    with pytest.raises(ValidationError):
        make_verdict(verdict_id="xyz")


def test_config_model_is_strict() -> None:
    assert LoopDetectionConfig.model_validate({"warningThreshold": 5.0}).warningThreshold == 5
    assert schema_errors({"enabled": True, "detectors": {"pingPong": False}}) == []
    paths = [p for p, _ in schema_errors({"foo": 1, "warningThreshold": True, "detectors": {"x": 1}})]
    assert sorted(paths) == ["detectors.x", "foo", "warningThreshold"]
    assert schema_errors({"warningThreshold": 5, "criticalThreshold": 5}) == [
        ("criticalThreshold", "tools.loopDetection.warningThreshold must be lower than criticalThreshold.")
    ]
    assert schema_errors("x") == [("", "expected an object")]
