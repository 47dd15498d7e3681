"""``apply`` for the 2026.9 profile: one event in, the scope's new state and the decisions out.

Order for a ``tool_call`` (as in 2026.9.6): de-duplicate, detect against the history before the call; on a
critical, block and record the veto in the history (it counts toward no-progress, #127701) - the run's
first critical leaves one recovery reply, a second one also ends the run (an ``abort`` with the critical
detector's id, #118647); on a warning, publish once per bucket of 10 (the gateway appends it to the tool
result at each bucket boundary, #135103); record the pending call, then an inline outcome, and feed the
post-compaction guard (window 3, unchanged). De-duplication, buckets and the guard are the 2026.7 code.

The ``gen9_*`` modules hold only what the 2026.9 generation (as shipped in 2026.9.6) does differently; all
they share with 2026.7 is imported from the 2026.7 modules, so a fix there applies to both profiles.
"""

from __future__ import annotations

from streams.detection import guard as guard_mod
from streams.detection import messages
from streams.detection.digest_ring import ring_contains, ring_push, short_digest
from streams.detection.engine import _decision, _observe, _publish_warning
from streams.detection.gen9_detectors import HISTORY_SIZE, WARNING, detect
from streams.detection.gen9_outcome import hash_outcome
from streams.detection.gen9_records import CallRecord9, record_outcome
from streams.detection.gen9_state import RunState9
from streams.detection.outcome import args_hash, is_known_poll
from streams.detection.records import trim
from streams.detection.state import DEDUP_CAPACITY, MAX_BLOCKED_IDS, RunState
from streams.detection.types import Decision, LoopConfig, ToolEvent

EMPTY9 = RunState9()


def apply(state: RunState | None, event: ToolEvent, config: LoopConfig) -> tuple[RunState9, list[Decision]]:
    """Apply ``event`` under the 2026.9 rules (``config.enabled`` and the guard flag are all it reads)."""
    if isinstance(state, RunState9):
        st = state
    elif state is None:
        st = EMPTY9
    else:  # a scope judged by the 2026.7 rules until now: its records carry over, unmarked
        st = RunState9.of(state, tuple(CallRecord9(*rec) for rec in state.history), False)
    seen = st.seen
    if event.dedup_key is not None:
        key = short_digest(event.dedup_key)
        if ring_contains(seen, key):
            return st, []
        seen = ring_push(seen, key, DEDUP_CAPACITY)
    if event.kind == "tool_call":
        return _tool_call(st, event, config, seen)
    if event.kind == "tool_result":
        return _tool_result(st, event, seen)
    if event.kind == "compaction_retry":
        return RunState9.of(st, st.records(), st.recovered, seen=seen, guard=guard_mod.arm(config)), []
    raise ValueError(f"unknown event kind {event.kind!r}")


def _tool_call(st: RunState9, event: ToolEvent, config: LoopConfig, seen: bytes) -> tuple[RunState9, list[Decision]]:
    tool = event.tool
    sig = args_hash(tool, event.args, event.args_hash)
    history = st.records()
    buckets = st.buckets
    decisions: list[Decision] = []
    if config.enabled:
        finding = detect(history, tool, sig, is_known_poll(tool, event.args, event.poll_action))
        if finding is not None:
            if finding.critical:
                blocked = st.blocked
                if event.call_id is not None:
                    blocked = ring_push(blocked, short_digest(event.call_id), MAX_BLOCKED_IDS)
                decisions.append(_decision("block", finding, event, True))
                if st.recovered:
                    decisions.append(
                        Decision(
                            decision="abort",
                            detector=finding.detector,
                            count=finding.count,
                            threshold=finding.threshold,
                            message=messages.recovery_exhausted(tool, finding.detector),
                            tool=tool,
                            call_id=event.call_id,
                            warning_key="recovery:" + finding.key,
                            published=True,
                            paired_tool=finding.paired_tool,
                            outcome_hash=finding.outcome,
                        )
                    )
                vetoed = trim((*history, CallRecord9(tool, sig, veto=True)), HISTORY_SIZE)
                return RunState9.of(st, vetoed, True, blocked=blocked, seen=seen), decisions
            published, buckets = _publish_warning(buckets, finding, WARNING)
            decisions.append(_decision("warning", finding, event, published))
        history = trim((*history, CallRecord9(tool, sig, None, event.call_id)), HISTORY_SIZE)
    guard = st.guard
    if event.outcome is not None:
        hashed = hash_outcome(tool, event.args, event.outcome, event.poll_action)
        if hashed.result is not None or hashed.veto:
            history = record_outcome(history, tool, sig, event.call_id, hashed, HISTORY_SIZE)
        if hashed.result is not None:
            guard = _observe(guard, event, sig, hashed.result, decisions)
    return RunState9.of(st, history, st.recovered, buckets=buckets, guard=guard, seen=seen), decisions


def _tool_result(st: RunState9, event: ToolEvent, seen: bytes) -> tuple[RunState9, list[Decision]]:
    call_id = event.call_id
    if call_id is not None and st.blocked and ring_contains(st.blocked, short_digest(call_id)):
        return RunState9.of(st, st.records(), st.recovered, seen=seen), []  # its veto is recorded already
    tool = event.tool
    hashed = hash_outcome(tool, event.args, event.outcome, event.poll_action)
    if hashed.result is None and not hashed.veto:
        return RunState9.of(st, st.records(), st.recovered, seen=seen), []
    sig = args_hash(tool, event.args, event.args_hash)
    history = record_outcome(st.records(), tool, sig, call_id, hashed, HISTORY_SIZE)
    decisions: list[Decision] = []
    guard = st.guard
    if hashed.result is not None:
        guard = _observe(guard, event, sig, hashed.result, decisions)
    return RunState9.of(st, history, st.recovered, guard=guard, seen=seen), decisions
