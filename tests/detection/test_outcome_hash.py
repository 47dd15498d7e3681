"""``Decision.outcome_hash``: the loop's repeated outcome, identical for the same loop in any run.

Fleet storms group verdicts of many runs by (tool, detector, outcome hash), so the value must depend only
on what the loop does, never on run, session or call ids.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.detection import Decision, LoopConfig, Outcome, RunState, ToolEvent, apply
from streams.detection.outcome import hash_outcome
from tests.detection.support import call, compaction, load_scenarios, resolve, scenario_event

SMALL = LoopConfig(
    enabled=True,
    warning_threshold=2,
    critical_threshold=4,
    global_circuit_breaker_threshold=6,
    unknown_tool_threshold=3,
)


def run(events: list[ToolEvent], config: LoopConfig = SMALL) -> list[Decision]:
    state: RunState | None = None
    out: list[Decision] = []
    for event in events:
        state, decisions = apply(state, event, config)
        out.extend(decisions)
    return out


def result_hash(tool: str, args: object, **outcome: object) -> str:
    value, _ = hash_outcome(tool, args, Outcome(**outcome))  # type: ignore[arg-type]
    assert value is not None
    return value


def test_generic_repeat_warning_and_block_carry_the_repeated_result_hash() -> None:
    args = {"path": "/same"}
    decisions = run([call("read", args, result="same", call_id=f"c{i}") for i in range(5)])
    assert {d.decision for d in decisions} == {"warning", "block"}
    assert {d.outcome_hash for d in decisions} == {result_hash("read", args, result="same")}


def test_unknown_tool_carries_the_error_hash() -> None:
    error = "Unknown tool: browser.open"
    decisions = run([call("browser", {"u": i}, error=error, call_id=f"c{i}") for i in range(4)])
    assert decisions and decisions[0].detector == "unknown_tool_repeat"
    assert decisions[0].outcome_hash == result_hash("browser", {"u": 3}, error=error)


def test_known_poll_carries_the_unchanged_poll_result() -> None:
    args = {"action": "poll", "sessionId": "s1"}
    decisions = run([call("process", args, result={"status": "running"}, call_id=f"c{i}") for i in range(4)])
    assert decisions and {d.detector for d in decisions} == {"known_poll_no_progress"}
    assert {d.outcome_hash for d in decisions} == {result_hash("process", args, result={"status": "running"})}


def test_compaction_abort_carries_the_guarded_result() -> None:
    args = {"command": "ls"}
    events = [compaction(), *[call("exec", args, result="x", call_id=f"c{i}") for i in range(3)]]
    aborts = [d for d in run(events) if d.decision == "abort"]
    assert aborts and aborts[0].outcome_hash == result_hash("exec", args, result="x")


def test_a_different_result_is_a_different_loop() -> None:
    first = run([call("read", {"p": 1}, result="a", call_id=f"c{i}") for i in range(3)])
    second = run([call("read", {"p": 1}, result="b", call_id=f"c{i}") for i in range(3)])
    assert first[0].outcome_hash != second[0].outcome_hash


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    scope=st.text(min_size=1, max_size=12),
    call_prefix=st.text(max_size=8),
    repeats=st.integers(min_value=2, max_value=8),
)
def test_the_same_loop_in_another_run_has_the_same_outcome_hash(scope: str, call_prefix: str, repeats: int) -> None:
    reference = run([call("read", {"p": 1}, result="r", call_id=f"c{i}") for i in range(repeats)])
    other = run(
        [
            ToolEvent(
                kind="tool_call",
                scope=scope,
                tool="read",
                call_id=f"{call_prefix}{i}",
                args={"p": 1},
                outcome=Outcome(result="r"),
            )
            for i in range(repeats)
        ]
    )
    assert [(d.detector, d.outcome_hash) for d in other] == [(d.detector, d.outcome_hash) for d in reference]


def test_scenario_verdicts_that_follow_completed_calls_name_their_outcome() -> None:
    """Across the shared scenarios, a block or abort always knows the outcome it saw repeat."""
    checked = 0
    for scenario in load_scenarios()["scenarios"]:
        cfg = scenario.get("config") or {}
        tools = cfg.get("tools") if isinstance(cfg, dict) else None
        block = tools.get("loopDetection") if isinstance(tools, dict) else None
        config = resolve(block)
        states: dict[str, RunState | None] = {}
        for index, raw in enumerate(scenario["events"]):
            event = scenario_event(index, raw)
            new, decisions = apply(states.get(event.scope), event, config)
            states[event.scope] = new
            for decision in decisions:
                if decision.decision != "warning" and decision.detector != "ping_pong":
                    assert decision.outcome_hash is not None, (scenario["name"], index, decision)
                    checked += 1
    assert checked > 0
