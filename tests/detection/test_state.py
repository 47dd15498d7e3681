"""``RunState`` primitive form: exact round trips, rejection of foreign input, compactness and bounds."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from streams.detection import LoopConfig, RunState, apply, digest
from streams.detection.guard import GuardState
from streams.detection.records import CallRecord
from streams.detection.state import DEDUP_CAPACITY, MAX_BLOCKED_IDS
from tests.detection.support import call, compaction, text_result

ON = LoopConfig(enabled=True)
H1, H2 = digest(1), digest(2)


def roundtrip(state: RunState) -> RunState:
    packed = msgpack.packb(state.to_primitive())
    back = RunState.from_primitive(msgpack.unpackb(packed))
    assert back == state
    assert back.to_primitive() == state.to_primitive()
    assert list(back.buckets) == list(state.buckets)  # insertion order survives
    return back


def test_empty_state_roundtrip() -> None:
    roundtrip(RunState())
    assert RunState().to_primitive() == [1, [], b"", [], b"", None, b""]


@pytest.mark.parametrize(
    "history",
    [
        (CallRecord("read", "read:" + H1, H2),),
        (CallRecord("read", "read:" + H1, None, "call-1"),),  # pending, call id kept
        (CallRecord("exec", "exec:" + H1, "error:" + H2, None, "exec"),),
        (
            CallRecord("read", "read:" + H1, H2),
            CallRecord("r", "r:" + H1, None),
            CallRecord("r", "r:" + H2, H1),
        ),
        (CallRecord("t", "t:NOT-HEX", H1),),  # malformed gateway args hash
        (CallRecord("t", "t:" + H1.upper(), H1.upper()),),  # upper case is not canonical: kept as text
        (CallRecord("t", "t:" + H1[:-1] + " ", "x"),),
        (CallRecord("t", "t:" + H1, "error:zz"), CallRecord("t", "t:" + H1, "")),
        (CallRecord("t:x", "t:x:" + H1, H1), CallRecord("", ":" + H2, H2)),  # odd tool names
        (CallRecord("😀", "😀:" + H1, None, "c-é", "naïve"),),
        tuple(CallRecord(f"tool{i}", f"tool{i}:" + digest(i), digest(-i)) for i in range(300)),  # > 256 tools
    ],
)
def test_history_roundtrip(history: tuple[CallRecord, ...]) -> None:
    roundtrip(RunState(history=history))


def test_full_state_roundtrip() -> None:
    guard = GuardState(True, 3, 1, ("exec", "exec:" + H2, "error:" + H1), True)
    state = RunState(
        history=(CallRecord("read", "read:" + H1, H2), CallRecord("exec", "exec:" + H2, None, "c-9")),
        buckets={b"k" * 8: 2, b"a" * 8: 1},
        blocked=b"b" * 16,
        guard=guard,
        seen=b"s" * 24,
    )
    roundtrip(state)
    roundtrip(RunState(guard=GuardState(False, 5, 5)))
    roundtrip(RunState(guard=GuardState(True, 5, 2, ("t", "t:x", "r"), False)))


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        [2, [], b"", [], b"", None, b""],
        [1, [], b"", [1], b"", None, b""],  # keys and values differ in length
        [1, [], b"x" * 8, ["1"], b"", None, b""],
        [1, [], b"", [], b"short", None, b""],
        [1, [], b"", [], b"", [True, 3], b""],
        [1, [], b"", [], b"", None, "text"],
        [1, [["read"], b"\x05", b"\x00" * 32, None, [None], []], b"", [], b"", None, b""],  # bad tool index
        [1, [["read"], b"\x00", b"\x00" * 31, None, [None], []], b"", [], b"", None, b""],  # short digest
        [1, [["read"], b"\x00", b"\x00" * 32, b"\x01", b"", []], b"", [], b"", None, b""],  # missing result
        [1, [["read"], b"\x00", b"\x00" * 32, None, [None], [5, "c", None]], b"", [], b"", None, b""],
        [1, [["read"], b"\x00", [1], None, [None], []], b"", [], b"", None, b""],
    ],
)
def test_from_primitive_rejects_foreign_input(bad: Any) -> None:
    with pytest.raises(ValueError):
        RunState.from_primitive(bad)


def test_full_window_is_compact() -> None:
    """30 complete records with typical tool names and a full de-duplication ring stay under 4 KiB."""
    state = None
    tools = ["read", "exec", "web_fetch", "write", "process", "grep", "edit"]
    for i in range(400):
        event = call(
            tools[i % len(tools)],
            {"path": f"/repo/file_{i}.py"},
            result=text_result(f"content {i}", ok=True),
            call_id=f"call_{i:024d}",
            dedup=f"gateway-1\x00event-{i}",
        )
        state, _ = apply(state, event, ON)
    assert state is not None
    assert len(state.history) == 30 and len(state.seen) == DEDUP_CAPACITY * 8
    size = len(msgpack.packb(state.to_primitive()))
    assert size < 4096, size


def test_blocked_ids_are_bounded() -> None:
    config = LoopConfig(enabled=True, warning_threshold=1, critical_threshold=2, global_circuit_breaker_threshold=3)
    state = None
    for i in range(3):
        state, _ = apply(state, call("read", {"p": 1}, result="same", call_id=f"ok-{i}"), config)
    for i in range(MAX_BLOCKED_IDS + 50):
        state, decisions = apply(state, call("read", {"p": 1}, result="same", call_id=f"b-{i}"), config)
        assert decisions[0].decision == "block"
    assert state is not None
    assert len(state.blocked) == MAX_BLOCKED_IDS * 8
    roundtrip(state)


def test_guard_observations_roundtrip_through_apply() -> None:
    state, _ = apply(None, compaction(), LoopConfig(guard_window_size=4))
    state, _ = apply(state, call("read", {"p": 1}, result="x", call_id="c1"), LoopConfig())
    assert state.guard is not None and state.guard.first is not None and state.guard.remaining == 3
    roundtrip(state)
