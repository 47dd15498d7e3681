"""Unit tests of the openclaw-2026.9 profile's parts that the scenarios exercise only indirectly."""

from __future__ import annotations

from streams.detection import LoopConfig, Outcome, RunState, args_hash
from streams.detection.gen9_config import resolve_loop_config
from streams.detection.gen9_outcome import hash_outcome, hash_result
from streams.detection.gen9_state import RunState9
from streams.detection.gen9_wrapper import canonical_wrapper_ids, outcome_digest
from streams.detection.outcome import hash_result as hash_result_2026_7
from streams.detection.profiles import apply, parse_version, profile_for_version
from streams.detection.types import PROFILE_2026_7, PROFILE_2026_9, ToolEvent
from tests.detection.support import call, compaction, text_result, tool_result

ID_A, ID_B = "0123456789abcdef", "fedcba9876543210"
V9 = LoopConfig(enabled=True, profile=PROFILE_2026_9)


def wrap(i: str, body: str, j: str | None = None) -> str:
    return f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{i}">>>{body}<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{j or i}">>>'


def test_version_table() -> None:
    assert parse_version("2026.9.6") == (2026, 9, 6)
    assert parse_version("v2026.7.35-beta.1") == (2026, 7, 35)
    assert parse_version("latest") is None
    assert profile_for_version("2026.7.35") == PROFILE_2026_7
    assert profile_for_version("2026.6.11") == PROFILE_2026_7
    assert profile_for_version("2026.8.0") == PROFILE_2026_9
    assert profile_for_version("2026.9.6") == PROFILE_2026_9
    assert profile_for_version("2027.1.0") == PROFILE_2026_9
    assert profile_for_version(None) is None
    assert profile_for_version("garbage") is None


def test_wrapper_ids_are_canonical_only_for_matching_pairs() -> None:
    assert canonical_wrapper_ids(wrap(ID_A, "x")) == canonical_wrapper_ids(wrap(ID_B, "x"))
    assert "0" * 16 in canonical_wrapper_ids(wrap(ID_A, "x"))
    assert canonical_wrapper_ids(wrap(ID_A, "x", ID_B)) == wrap(ID_A, "x", ID_B)
    assert canonical_wrapper_ids(wrap(ID_A, "x")) != canonical_wrapper_ids(wrap(ID_A, "y"))
    # keys are normalised too, and the argument-free 2026.7 hash still sees the ids
    assert outcome_digest({wrap(ID_A, "k"): 1}) == outcome_digest({wrap(ID_B, "k"): 1})
    r1, r2 = text_result(wrap(ID_A, "page")), text_result(wrap(ID_B, "page"))
    assert hash_result("web_fetch", {}, r1) == hash_result("web_fetch", {}, r2)
    assert hash_result_2026_7("web_fetch", {}, r1) != hash_result_2026_7("web_fetch", {}, r2)


def test_exec_failure_identity_masks_volatile_parts_only() -> None:
    def failed(out: str) -> object:
        return {"content": [], "details": {"status": "failed", "exitCode": 2, "aggregated": out}}

    a = hash_result("exec", {}, failed("2026-11-30T10:00:01Z boom after 12ms (attempt 3) pid 77 at 10:00:01"))
    b = hash_result("exec", {}, failed("2026-12-01 11:22:33 boom after 9.5 seconds (attempt 4) pid=78 at 11:22:33"))
    c = hash_result("exec", {}, failed("2026-11-30T10:00:01Z bang after 12ms (attempt 3) pid 77 at 10:00:01"))
    assert a.result != b.result and a.failure == b.failure and a.failure is not None
    assert c.failure != a.failure
    assert hash_result("exec", {}, failed("(Command exited with code 2)")).failure is None
    ok = {"content": [], "details": {"status": "completed", "exitCode": 0, "aggregated": "x"}}
    assert hash_result("exec", {}, ok).failure is None


def test_progress_kinds() -> None:
    assert hash_outcome("read", {}, Outcome(error="boom")).no_progress
    unchanged = hash_result("write", {}, text_result("a", changed=False))
    assert unchanged.no_progress and unchanged == hash_result("write", {}, text_result("b", changed=False))
    assert not hash_result("write", {}, text_result("a", changed=True)).no_progress
    veto = hash_result("read", {}, {"details": {"status": "blocked", "deniedReason": "tool-loop"}})
    assert veto.veto and veto.result is None


def test_config_resolution_and_warnings() -> None:
    cfg, warnings = resolve_loop_config({"enabled": True, "criticalThreshold": 5, "bogus": 1}, None)
    assert cfg.enabled and cfg.profile == PROFILE_2026_9 and cfg.critical_threshold == 20
    assert [w.path for w in warnings] == ["tools.loopDetection.criticalThreshold", "tools.loopDetection.bogus"]
    assert "retired" in warnings[0].message
    off, _ = resolve_loop_config({"enabled": True}, {"enabled": False})
    assert not off.enabled and not off.guard_enabled
    inherit, _ = resolve_loop_config({"enabled": True}, {"enabled": None})
    assert inherit.enabled
    truthy, warnings = resolve_loop_config({"enabled": 1}, None)
    assert not truthy.enabled and truthy.guard_enabled and "not a boolean" in warnings[0].message


def test_state_round_trips_through_the_stored_form() -> None:
    state: RunState | None = None
    for i in range(24):
        state, _ = apply(state, call("read", {"p": i % 2}, result=text_result("same"), call_id=f"c{i}"), V9)
    state, _ = apply(state, compaction(), V9)
    state, _ = apply(state, tool_result("read", {"p": 0}, result=text_result("late"), call_id="c0"), V9)
    assert isinstance(state, RunState9) and state.recovered and any(m[0] for m in state.marks)
    assert RunState.from_primitive(state.to_primitive()) == state


def test_rewritten_arguments_rebind_the_pending_call() -> None:
    """2026.9 binds loop state to the arguments as executed (after before_tool_call rewrites)."""
    state, _ = apply(None, call("read", {"path": "/asked"}, call_id="c1"), V9)
    state, _ = apply(state, tool_result("read", {"path": "/executed"}, result=text_result("x"), call_id="c1"), V9)
    assert isinstance(state, RunState9)
    assert len(state.history) == 1 and state.history[0].result is not None
    assert state.history[0].sig == args_hash("read", {"path": "/executed"})


def test_a_scope_switching_to_2026_9_keeps_its_history() -> None:
    state: RunState | None = None
    for i in range(12):
        state, _ = apply(
            state, call("read", {"p": 1}, result=text_result("same"), call_id=f"c{i}"), LoopConfig(enabled=True)
        )
    assert type(state) is RunState
    state, decisions = apply(state, call("read", {"p": 1}, result=text_result("same"), call_id="c12"), V9)
    assert isinstance(state, RunState9) and len(state.history) == 13
    assert [(d.decision, d.count) for d in decisions] == [("warning", 12)]


def test_hashed_process_polls_are_known_polls_through_poll_action() -> None:
    """A hashing gateway sends only digests; its ``poll_action`` hint makes the call a known poll here too."""
    args = {"action": "poll", "sessionId": "bg-1"}
    quiet = text_result("(no new output)", status="running")
    sig = args_hash("process", args)[len("process:") :]

    def hashed(i: int, hint: str | None) -> ToolEvent:
        result = hash_outcome("process", args, Outcome(result=quiet)).result
        outcome = Outcome(result_hash=result)
        return ToolEvent("tool_call", "r", "process", f"c{i}", args_hash=sig, outcome=outcome, poll_action=hint)

    def published(events: list[ToolEvent]) -> list[tuple[int, str, str, int]]:
        state: RunState | None = None
        out = []
        for i, event in enumerate(events):
            state, decisions = apply(state, event, V9)
            out += [(i, d.decision, d.detector, d.count) for d in decisions if d.published]
        return out

    raw = [call("process", args, result=quiet, call_id=f"c{i}", scope="r") for i in range(21)]
    want = [(10, "warning", "known_poll_no_progress", 10), (20, "block", "known_poll_no_progress", 20)]
    assert published([hashed(i, "poll") for i in range(21)]) == published(raw) == want
    assert {d for _, _, d, _ in published([hashed(i, None) for i in range(21)])} == {"generic_repeat"}
