"""Random event streams for engine property tests: bursts of calls, ping-pongs, late results, compactions and
re-deliveries over a small vocabulary of tools, arguments and outcomes, in raw or gateway-hashed form."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from streams.detection import LoopConfig, Outcome, ToolEvent, args_hash, hash_outcome

TOOLS = [
    "read",
    "write",
    "exec",
    "command_status",
    "grep",
    "sessions_send",
]  # no process poll/log, no message sends
ARGS: list[Any] = [{"path": "/a"}, {"path": "/b"}, {"cmd": "ls", "n": 1.0}, None, [1, 2]]
OUTCOMES: list[Outcome | None] = [
    None,
    Outcome(result={"content": [{"type": "text", "text": "same"}], "details": {"ok": True}}),
    Outcome(result={"content": [{"type": "text", "text": "other"}], "details": {"status": "running", "pid": 3}}),
    Outcome(result={"details": {"status": "completed", "exitCode": 0, "aggregated": "x", "durationMs": 4}}),
    Outcome(result={"details": {"status": "blocked", "deniedReason": "tool-loop"}}),
    Outcome(result="plain"),
    Outcome(error="Tool write not found"),
    Outcome(error="Unknown tool: grep"),
]
CONFIGS = [
    LoopConfig(
        enabled=True,
        history_size=6,
        warning_threshold=2,
        critical_threshold=3,
        unknown_tool_threshold=2,
        global_circuit_breaker_threshold=4,
        guard_window_size=2,
    ),
    LoopConfig(enabled=True, history_size=8, warning_threshold=2, critical_threshold=4, generic_repeat=False),
    LoopConfig(enabled=False, guard_window_size=2),
    LoopConfig(enabled=True, warning_threshold=1, critical_threshold=2, ping_pong=False, guard_enabled=False),
]

step = st.one_of(
    st.tuples(
        st.just("call"),
        st.integers(0, len(TOOLS) - 1),
        st.integers(0, len(ARGS) - 1),
        st.integers(0, len(OUTCOMES) - 1),
        st.integers(1, 8),
    ),
    st.tuples(
        st.just("alternate"),
        st.integers(0, len(TOOLS) - 1),
        st.integers(0, len(ARGS) - 1),
        st.integers(0, len(OUTCOMES) - 1),
        st.integers(2, 12),
    ),
    st.tuples(st.just("result"), st.integers(0, 30), st.integers(0, len(OUTCOMES) - 1), st.just(0), st.just(1)),
    st.tuples(st.just("compaction"), st.just(0), st.just(0), st.just(0), st.just(1)),
    st.tuples(st.just("repeat"), st.integers(1, 6), st.just(0), st.just(0), st.just(1)),
)
scripts = st.lists(step, min_size=1, max_size=25)


def build(script: list[tuple[str, int, int, int, int]], scope: str, prehashed: bool) -> list[ToolEvent]:
    """Events of a script. ``call`` is a burst of identical calls, ``alternate`` a ping-pong with a second
    call, ``result`` a late outcome of an earlier call, ``repeat`` re-sends an earlier event (same key).
    """
    events: list[ToolEvent] = []
    calls: list[tuple[str, Any, str]] = []

    def emit(kind: Any, tool: str, args: Any, outcome: Outcome | None, call_id: str) -> None:
        dedup = f"gw\x00{len(events)}"
        if prehashed:
            hashed: Outcome | None = None
            if outcome is not None:
                result_hash, unknown = hash_outcome(tool, args, outcome)
                hashed = Outcome(result_hash=result_hash, unknown_tool_name=unknown)
            digest_part = args_hash(tool, args)[len(tool) + 1 :]
            events.append(
                ToolEvent(
                    kind=kind,
                    scope=scope,
                    tool=tool,
                    call_id=call_id,
                    args_hash=digest_part,
                    outcome=hashed,
                    dedup_key=dedup,
                )
            )
        else:
            events.append(
                ToolEvent(
                    kind=kind,
                    scope=scope,
                    tool=tool,
                    call_id=call_id,
                    args=args,
                    outcome=outcome,
                    dedup_key=dedup,
                )
            )

    for kind, a, b, c, n in script:
        if kind == "repeat":
            if events:
                events.append(events[-min(a, len(events))])
        elif kind == "compaction":
            events.append(ToolEvent(kind="compaction_retry", scope=scope, dedup_key=f"gw\x00{len(events)}"))
        elif kind == "result":
            if calls:
                tool, args, call_id = calls[a % len(calls)]
                emit("tool_result", tool, args, OUTCOMES[b] or OUTCOMES[1], call_id)
        else:
            pair = [(TOOLS[a], ARGS[b], OUTCOMES[c])]
            if kind == "alternate":
                pair.append(
                    (
                        TOOLS[(a + 1) % len(TOOLS)],
                        ARGS[(b + 2) % len(ARGS)],
                        OUTCOMES[(c + 1) % len(OUTCOMES)],
                    )
                )
            for i in range(n):
                tool, args, outcome = pair[i % len(pair)]
                call_id = f"c{len(events)}"
                calls.append((tool, args, call_id))
                emit("tool_call", tool, args, outcome, call_id)
    return events
