"""Random event streams for engine property tests: bursts of calls, ping-pongs, late results, compactions and
re-deliveries over a small vocabulary of tools, arguments and outcomes, in raw or gateway-hashed form.

A script is a list of steps ``(kind, a, b, c, n)`` whose numbers index a :class:`Vocabulary`; the same script
over the same vocabulary always builds the same events, which is what the frozen corpus digest relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from streams.detection import LoopConfig, Outcome, ToolEvent, args_hash, hash_outcome
from streams.detection.outcome import process_action

Step = tuple[str, int, int, int, int]

OUTCOMES: tuple[Outcome | None, ...] = (
    None,
    Outcome(result={"content": [{"type": "text", "text": "same"}], "details": {"ok": True}}),
    Outcome(result={"content": [{"type": "text", "text": "other"}], "details": {"status": "running", "pid": 3}}),
    Outcome(result={"details": {"status": "completed", "exitCode": 0, "aggregated": "x", "durationMs": 4}}),
    Outcome(result={"details": {"status": "blocked", "deniedReason": "tool-loop"}}),
    Outcome(result="plain"),
    Outcome(error="Tool write not found"),
    Outcome(error="Unknown tool: grep"),
)
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


@dataclass(frozen=True)
class Vocabulary:
    """The tools and arguments a script's numbers pick from (the outcomes are shared)."""

    tools: tuple[str, ...]
    args: tuple[Any, ...]
    outcomes: tuple[Outcome | None, ...] = OUTCOMES

    def scripts(self) -> st.SearchStrategy[list[Step]]:
        tool, arg, outcome = (st.integers(0, len(x) - 1) for x in (self.tools, self.args, self.outcomes))
        step = st.one_of(
            st.tuples(st.just("call"), tool, arg, outcome, st.integers(1, 8)),
            st.tuples(st.just("alternate"), tool, arg, outcome, st.integers(2, 12)),
            st.tuples(st.just("result"), st.integers(0, 30), outcome, st.just(0), st.just(1)),
            st.tuples(st.just("compaction"), st.just(0), st.just(0), st.just(0), st.just(1)),
            st.tuples(st.just("repeat"), st.integers(1, 6), st.just(0), st.just(0), st.just(1)),
        )
        return st.lists(step, min_size=1, max_size=25)

    def build(self, script: list[Step], scope: str, prehashed: bool) -> list[ToolEvent]:
        """Events of a script. ``call`` is a burst of identical calls, ``alternate`` a ping-pong with a second
        call, ``result`` a late outcome of an earlier call, ``repeat`` re-sends an earlier event (same key).
        Pre-hashed events carry what a gateway sends instead of the arguments: their hash and the poll hint.
        """
        tools, arguments, outcomes = self.tools, self.args, self.outcomes
        events: list[ToolEvent] = []
        calls: list[tuple[str, Any, str]] = []

        def emit(kind: Any, tool: str, args: Any, outcome: Outcome | None, call_id: str) -> None:
            common: dict[str, Any] = {"kind": kind, "scope": scope, "tool": tool, "call_id": call_id}
            common["dedup_key"] = f"gw\x00{len(events)}"
            if not prehashed:
                events.append(ToolEvent(**common, args=args, outcome=outcome))
                return
            hashed: Outcome | None = None
            if outcome is not None:
                result_hash, unknown = hash_outcome(tool, args, outcome)
                hashed = Outcome(result_hash=result_hash, unknown_tool_name=unknown)
            digest_part = args_hash(tool, args)[len(tool) + 1 :]
            events.append(
                ToolEvent(**common, args_hash=digest_part, outcome=hashed, poll_action=process_action(tool, args))
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
                    emit("tool_result", tool, args, outcomes[b] or outcomes[1], call_id)
            else:
                pair = [(tools[a], arguments[b], outcomes[c])]
                if kind == "alternate":
                    following = (a + 1) % len(tools), (b + 2) % len(arguments), (c + 1) % len(outcomes)
                    pair.append((tools[following[0]], arguments[following[1]], outcomes[following[2]]))
                for i in range(n):
                    tool, args, outcome = pair[i % len(pair)]
                    call_id = f"c{len(events)}"
                    calls.append((tool, args, call_id))
                    emit("tool_call", tool, args, outcome, call_id)
        return events


# Ordinary tools only (no process poll/log, no message sends): the vocabulary of the frozen 2026.7 corpus.
BASIC = Vocabulary(
    tools=("read", "write", "exec", "command_status", "grep", "sessions_send"),
    args=({"path": "/a"}, {"path": "/b"}, {"cmd": "ls", "n": 1.0}, None, [1, 2]),
)
# Also process polls and logs, which travel pre-hashed with their poll_action hint.
WITH_POLLS = Vocabulary(
    tools=(*BASIC.tools, "process"),
    args=(*BASIC.args, {"action": "poll", "sessionId": "s1"}, {"action": "log", "sessionId": "s1"}),
)
