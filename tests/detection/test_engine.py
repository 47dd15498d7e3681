"""``apply``: the event pipeline, publication de-dup, blocks, outcomes, the guard, purity and bounds."""

from __future__ import annotations

import copy

import pytest

from streams.detection import (
    MISSING,
    Decision,
    LoopConfig,
    Outcome,
    RunState,
    ToolEvent,
    apply,
    args_hash,
    hash_outcome,
)
from streams.detection.records import CallRecord
from streams.detection.state import DEDUP_CAPACITY, MAX_WARNING_KEYS
from tests.detection.support import call, compaction, text_result, tool_result

ON = LoopConfig(enabled=True)


def feed(
    events: list[ToolEvent], config: LoopConfig = ON, state: RunState | None = None
) -> tuple[RunState, list[tuple[int, Decision]]]:
    out: list[tuple[int, Decision]] = []
    for index, event in enumerate(events):
        state, decisions = apply(state, event, config)
        out.extend((index, d) for d in decisions)
    assert state is not None
    return state, out


def repeat(n: int, tool: str = "read", args: object = None, result: object = "same", start: int = 0) -> list[ToolEvent]:
    args = {"path": "/same"} if args is None else args
    return [call(tool, args, result=result, call_id=f"c{start + i}") for i in range(n)]


# --- purity ----------------------------------------------------------------------------------------


def test_apply_never_mutates_its_input_state() -> None:
    config = LoopConfig(enabled=True, warning_threshold=2, critical_threshold=3)
    state, _ = feed([compaction(), *repeat(2)], config)
    snapshot = copy.deepcopy(state.to_primitive())
    buckets = dict(state.buckets)
    for event in [*repeat(3, start=10), tool_result("read", {"path": "/same"}, result="x", call_id="c10")]:
        new, _ = apply(state, event, config)
        assert new is not state
        assert state.to_primitive() == snapshot
        assert state.buckets == buckets


def test_none_state_is_an_empty_state() -> None:
    state, decisions = apply(None, call("read", {}, result="x"), ON)
    assert decisions == [] and len(state.history) == 1


def test_unknown_event_kind_is_rejected() -> None:
    with pytest.raises(ValueError):
        apply(None, ToolEvent(kind="bogus", scope="s"), ON)  # type: ignore[arg-type]


# --- de-duplication of events ----------------------------------------------------------------------


def test_duplicate_events_are_ignored() -> None:
    first, _ = apply(None, call("read", {"p": 1}, result="x", dedup="gw\x00e1"), ON)
    again, decisions = apply(first, call("read", {"p": 1}, result="x", dedup="gw\x00e1"), ON)
    assert again is first and decisions == []
    other, _ = apply(first, call("read", {"p": 1}, result="x", dedup="gw\x00e2"), ON)
    assert len(other.history) == 2
    # duplicates of results and compaction events too
    same, _ = apply(other, compaction(dedup="gw\x00e2"), ON)
    assert same is other and same.guard is None


def test_dedup_ring_remembers_the_last_256_keys() -> None:
    state = None
    for i in range(DEDUP_CAPACITY + 1):
        state, _ = apply(state, compaction(dedup=f"gw\x00{i}"), ON)
    assert state is not None and len(state.seen) == DEDUP_CAPACITY * 8
    forgotten, _ = apply(state, compaction(dedup="gw\x000"), ON)
    assert forgotten is not state  # key 0 was evicted: processed again
    kept, _ = apply(state, compaction(dedup="gw\x001"), ON)
    assert kept is state


# --- detection off / on ----------------------------------------------------------------------------


def test_disabled_detection_records_outcomes_only() -> None:
    off = LoopConfig(enabled=False)
    state, decisions = feed(repeat(40), off)
    assert decisions == []
    assert len(state.history) == 30 and all(r.result is not None and r.call_id is None for r in state.history)
    state, _ = apply(state, call("read", {"path": "/x"}, call_id="p"), off)
    assert len(state.history) == 30 and state.history[-1].sig != args_hash("read", {"path": "/x"})


def test_generic_warning_then_sticky_block() -> None:
    state, got = feed(repeat(23))
    kinds = [(i, d.decision, d.detector, d.count, d.published, d.threshold) for i, d in got]
    assert kinds[0] == (10, "warning", "generic_repeat", 10, True, 10)
    assert kinds[9] == (19, "warning", "generic_repeat", 19, False, 10)
    assert kinds[10:] == [(i, "block", "generic_repeat", 20, True, 20) for i in (20, 21, 22)]
    assert len(state.history) == 20  # blocked calls leave no record
    d = got[10][1]
    sig = args_hash("read", {"path": "/same"})
    assert d.warning_key == f"generic:read:{sig}:{state.history[-1].result}"
    assert got[0][1].warning_key == f"generic:read:{sig}"
    assert d.call_id == "c20" and d.tool == "read"
    assert d.message.startswith("CRITICAL:") and "read" in d.message and "20" in d.message


def test_blocked_call_ignores_its_inline_outcome_and_later_result() -> None:
    config = LoopConfig(enabled=True, warning_threshold=1, critical_threshold=2, global_circuit_breaker_threshold=3)
    state, got = feed(repeat(3), config)
    assert [d.decision for _, d in got] == ["warning", "block"]
    before = state.to_primitive()
    # the blocked call's late tool_result is ignored: no record, no guard observation
    armed, _ = apply(state, compaction(), config)
    after, decisions = apply(armed, tool_result("read", {"path": "/same"}, result="same", call_id="c2"), config)
    assert decisions == [] and after.history == state.history and after.guard == armed.guard
    # a result for an unknown call id is recorded as a fresh complete record
    other, _ = apply(state, tool_result("read", {"path": "/same"}, result="new", call_id="zz"), config)
    assert len(other.history) == len(state.history) + 1
    assert state.to_primitive() == before


def test_tool_result_attaches_to_the_matching_pending_record() -> None:
    args = {"path": "/a"}
    state, _ = feed([call("read", args, call_id="c1"), call("read", args, call_id="c2")])
    assert [r.call_id for r in state.history] == ["c1", "c2"]
    state, _ = apply(state, tool_result("read", args, result="r1", call_id="c1"), ON)
    assert [(r.call_id, r.result is not None) for r in state.history] == [(None, True), ("c2", False)]
    # without a call id the newest pending record with the same signature matches
    state, _ = apply(state, tool_result("read", args, result="r2"), ON)
    assert all(r.result is not None for r in state.history) and len(state.history) == 2
    # nothing pending any more: a fresh record is appended
    state, _ = apply(state, tool_result("read", args, result="r3"), ON)
    assert len(state.history) == 3
    # a result without a hashable outcome changes nothing
    same, decisions = apply(state, tool_result("read", args, call_id="c9"), ON)
    assert same.history == state.history and decisions == []


def test_prehashed_tool_result_matches_by_args_hash() -> None:
    digest_part = args_hash("read", {"p": 1})[len("read:") :]
    state, _ = apply(None, call("read", args_hash=digest_part, call_id="c1"), ON)
    result = ToolEvent(kind="tool_result", scope="run-1", tool="read", call_id="c1", args_hash=digest_part)
    state, _ = apply(state, result, ON)
    assert len(state.history) == 1 and state.history[0].result is None  # no outcome: nothing attached
    state, _ = apply(state, tool_result("read", {"p": 1}, result="x", call_id="c1"), ON)
    assert len(state.history) == 1 and state.history[0].result is not None


# --- warning publication ---------------------------------------------------------------------------


def test_warnings_are_published_once_per_threshold_bucket() -> None:
    config = LoopConfig(enabled=True, warning_threshold=3, critical_threshold=50, global_circuit_breaker_threshold=60)
    _, got = feed([call("read", {"p": 1}, result=str(i), call_id=f"c{i}") for i in range(13)], config)
    published = [(d.count, d.published) for _, d in got]
    assert published == [(c, c % 3 == 0) for c in range(3, 13)]


def test_warning_keys_are_bounded_and_oldest_is_evicted() -> None:
    config = LoopConfig(
        enabled=True,
        history_size=2000,
        warning_threshold=2,
        critical_threshold=100,
        global_circuit_breaker_threshold=200,
        ping_pong=False,
    )
    state: RunState | None = None
    for k in range(MAX_WARNING_KEYS + 1):
        for j in range(3):
            state, decisions = apply(state, call("read", {"k": k}, result=f"{j}"), config)
        assert decisions and decisions[0].published
    assert state is not None and len(state.buckets) == MAX_WARNING_KEYS
    _, evicted = apply(state, call("read", {"k": 0}, result="x"), config)
    _, kept = apply(state, call("read", {"k": MAX_WARNING_KEYS}, result="x"), config)
    assert evicted[0].count == 3 and evicted[0].published  # key 0 forgotten: bucket 1 published again
    assert kept[0].count == 3 and not kept[0].published


def test_scopes_have_independent_buckets() -> None:
    config = LoopConfig(enabled=True, warning_threshold=2)
    _, got_a = feed([call("read", {}, result=str(i), scope="a") for i in range(3)], config)
    _, got_b = feed([call("read", {}, result=str(i), scope="b") for i in range(3)], config)
    assert got_a[0][1].published and got_b[0][1].published


# --- detector specifics ----------------------------------------------------------------------------


def test_poll_detector_fields() -> None:
    poll = {"action": "poll", "sessionId": "s"}
    events = [call("process", poll, result=text_result("(no new output)", status="running", pid=i)) for i in range(21)]
    _, got = feed(events)
    first, last = got[0][1], got[-1][1]
    assert (first.decision, first.detector, first.count, first.threshold) == (
        "warning",
        "known_poll_no_progress",
        10,
        10,
    )
    assert first.warning_key.startswith("poll:process:process:")
    assert "polling loop" in first.message and first.message.startswith("WARNING:")
    assert (last.decision, last.count, last.threshold) == ("block", 20, 20)
    assert "polling loop" in last.message


def _hashed_poll(i: int, args: dict[str, object], result: object, poll_action: str | None) -> ToolEvent:
    """A ``process`` call as a hashing gateway sends it: args and outcome digests plus the action hint."""
    sig = args_hash("process", args)
    result_hash, _ = hash_outcome("process", args, Outcome(result=result))
    return ToolEvent(
        kind="tool_call",
        scope="r",
        tool="process",
        call_id=f"c{i}",
        args_hash=sig[len("process:") :],
        outcome=Outcome(result_hash=result_hash),
        poll_action=poll_action,
    )


@pytest.mark.parametrize("action", ["poll", "log"])
def test_hashed_process_polls_are_known_polls_through_poll_action(action: str) -> None:
    args = {"action": action, "sessionId": "bg-1"}
    quiet = text_result("(no new output)", status="running")
    hashed = [_hashed_poll(i, args, quiet, action) for i in range(21)]
    raw = [call("process", args, result=quiet, call_id=f"c{i}", scope="r") for i in range(21)]
    want = [(10, "warning", "known_poll_no_progress", 10), (20, "block", "known_poll_no_progress", 20)]
    for events in (hashed, raw):
        _, got = feed(events)
        assert [(i, d.decision, d.detector, d.count) for i, d in got if d.published] == want


def test_a_progressing_hashed_poll_gets_no_generic_warning() -> None:
    args = {"action": "poll", "sessionId": "bg-1"}
    events = [_hashed_poll(i, args, text_result(f"line {i}", status="running"), "poll") for i in range(25)]
    _, got = feed(events)
    assert got == []  # OpenClaw: poll tools never get generic warnings (edge case 7)
    _, without_hint = feed([_hashed_poll(i, args, text_result(f"line {i}"), None) for i in range(25)])
    assert {d.detector for _, d in without_hint} == {"generic_repeat"}  # what a hint-less gateway gets


def test_poll_action_is_ignored_with_raw_args_and_on_other_tools() -> None:
    same = text_result("x", status="running")
    raw_list = [
        ToolEvent(
            kind="tool_call",
            scope="r",
            tool="process",
            call_id=f"c{i}",
            args={"action": "list"},
            outcome=Outcome(result=same),
            poll_action="poll",
        )
        for i in range(11)
    ]
    _, got = feed(raw_list)
    assert [d.detector for _, d in got] == ["generic_repeat"]  # raw args say "list": not a poll
    other = [_hashed_poll(i, {"action": "poll"}, same, "poll") for i in range(11)]
    other = [ToolEvent(**{**_fields(e), "tool": "read"}) for e in other]
    _, got = feed(other)
    assert [d.detector for _, d in got] == ["generic_repeat"]


def _fields(event: ToolEvent) -> dict[str, object]:
    return {name: getattr(event, name) for name in ToolEvent._fields}


def test_hashed_args_with_a_raw_poll_result_hash_like_raw_args() -> None:
    args = {"action": "poll", "sessionId": "bg-1"}
    result = text_result("(no new output)", status="running", pid=7)
    raw, _ = hash_outcome("process", args, Outcome(result=result))
    assert hash_outcome("process", MISSING, Outcome(result=result), "poll") == (raw, None)
    assert hash_outcome("process", MISSING, Outcome(result=result)) != (raw, None)


def test_ping_pong_fields_and_symmetric_key() -> None:
    a, b = ("read", {"p": "a"}), ("list", {"d": "/"})
    events = [call(*(a if i % 2 == 0 else b), result="same") for i in range(20)]
    _, got = feed(events)
    first = got[0][1]
    assert (got[0][0], first.decision, first.detector, first.count) == (9, "warning", "ping_pong", 10)
    assert first.paired_tool == "read" and first.tool == "list"
    sig_a, sig_b = args_hash(*a), args_hash(*b)
    assert first.warning_key == "pingpong:" + "|".join(sorted([sig_a, sig_b]))
    assert {d.warning_key for _, d in got} == {first.warning_key}
    block = got[-1][1]
    assert (block.decision, block.count, block.threshold) == ("block", 20, 20)
    assert "ping-pong loop" in block.message and "ping-pong loop" in first.message


def test_global_breaker_and_unknown_tool_messages() -> None:
    config = LoopConfig(enabled=True, generic_repeat=False)
    _, got = feed(repeat(31), config)
    assert [(i, d.detector, d.count, d.threshold) for i, d in got] == [(30, "global_circuit_breaker", 30, 30)]
    assert "global circuit breaker" in got[0][1].message
    assert got[0][1].warning_key.startswith("global:read:read:")
    _, got = feed([call("exec", {"i": i}, error="Tool exec not found") for i in range(11)])
    d = got[0][1]
    assert (d.decision, d.detector, d.count, d.threshold) == ("block", "unknown_tool_repeat", 10, 10)
    assert d.warning_key == "unknown-tool:exec:exec" and d.message.startswith("CRITICAL:")


def test_unknown_tool_uses_pre_hashed_names() -> None:
    outcome = Outcome(result_hash="error:" + "a" * 64, unknown_tool_name="exec")
    events = [ToolEvent(kind="tool_call", scope="r", tool="exec", args={"i": i}, outcome=outcome) for i in range(4)]
    _, got = feed(events, LoopConfig(enabled=True, unknown_tool_threshold=3))
    assert [(i, d.detector, d.count) for i, d in got] == [(3, "unknown_tool_repeat", 3)]


def test_history_is_trimmed_per_scope() -> None:
    config = LoopConfig(enabled=True, history_size=5)
    state, _ = feed([call("read", {"i": i}, result="x") for i in range(9)], config)
    assert [r.sig for r in state.history] == [args_hash("read", {"i": i}) for i in range(4, 9)]
    state, _ = apply(state, call("read", {"i": 99}, call_id="p"), config)
    assert len(state.history) == 5 and state.history[-1] == CallRecord("read", args_hash("read", {"i": 99}), None, "p")


# --- post-compaction guard -------------------------------------------------------------------------


def test_guard_aborts_when_the_whole_window_repeats() -> None:
    state, got = feed([compaction(), *repeat(3)], LoopConfig())
    assert [(i, d.decision, d.detector, d.count, d.threshold) for i, d in got] == [
        (3, "abort", "compaction_loop_persisted", 3, 3)
    ]
    d = got[0][1]
    assert d.published and d.message.startswith("CRITICAL:") and "window 3" in d.message and "read" in d.message
    assert state.guard is not None and state.guard.remaining == 0 and state.guard.first is None
    _, later = feed(repeat(5), LoopConfig(), state)  # disarmed: later events are processed normally
    assert later == []


def test_guard_window_and_rearm() -> None:
    _, got = feed([compaction(), *repeat(2), compaction(), *repeat(2)], LoopConfig())
    assert got == []  # re-arming discarded the first two observations
    _, got = feed([compaction(), *repeat(2), call("ls", {}, result="x"), *repeat(3)], LoopConfig())
    assert got == []  # the window closed after three observations, one of them different


def test_guard_takes_its_config_from_the_arming_event() -> None:
    armed, _ = apply(None, compaction(), LoopConfig(guard_window_size=2))
    _, got = feed(repeat(2), LoopConfig(guard_window_size=5), armed)
    assert [(d.count, d.threshold) for _, d in got] == [(2, 2)]
    disabled, _ = apply(None, compaction(), LoopConfig(guard_enabled=False))
    _, got = feed(repeat(5), LoopConfig(), disabled)
    assert got == []


def test_guard_skips_unhashed_and_vetoed_outcomes_and_sees_tool_results() -> None:
    veto = text_result("blocked", status="blocked", deniedReason="tool-loop")
    events = [
        compaction(),
        call("read", {"p": 1}, result=veto),
        call("read", {"p": 1}, call_id="x1"),
        tool_result("read", {"p": 1}, result="r", call_id="x1"),
        call("read", {"p": 1}, result="r"),
        call("read", {"p": 1}, result="r"),
    ]
    _, got = feed(events, LoopConfig())
    assert [(i, d.decision, d.count) for i, d in got] == [(5, "abort", 3)]
    assert got[0][1].call_id is None


def test_warning_is_listed_before_abort() -> None:
    config = LoopConfig(enabled=True, warning_threshold=2, critical_threshold=10, global_circuit_breaker_threshold=11)
    _, got = feed([compaction(), *repeat(3)], config)
    assert [(i, d.decision) for i, d in got] == [(3, "warning"), (3, "abort")]
