"""``apply``: one event in, the scope's new state and the decisions out. Pure and deterministic.

Order for a ``tool_call``: de-duplicate, detect against the history before the call, block (nothing
recorded, call id remembered) or warn (published once per bucket of ``warningThreshold``), record the pending
call when detection is on, then record an inline outcome and feed the post-compaction guard.
"""

from __future__ import annotations

from streams.detection import guard as guard_mod
from streams.detection import messages
from streams.detection.detectors import Finding, detect
from streams.detection.digest_ring import ring_contains, ring_push, short_digest
from streams.detection.outcome import args_hash, hash_outcome, is_known_poll
from streams.detection.records import CallRecord, record_outcome, trim
from streams.detection.state import DEDUP_CAPACITY, EMPTY, MAX_BLOCKED_IDS, MAX_WARNING_KEYS, RunState
from streams.detection.types import Decision, LoopConfig, ToolEvent

COMPACTION = "compaction_loop_persisted"


def apply(state: RunState | None, event: ToolEvent, config: LoopConfig) -> tuple[RunState, list[Decision]]:
    """Apply ``event`` (with its agent's resolved ``config``) to ``state``; never mutates ``state``."""
    st = EMPTY if state is None else state
    seen = st.seen
    if event.dedup_key is not None:
        key = short_digest(event.dedup_key)
        if ring_contains(seen, key):
            return st, []
        seen = ring_push(seen, key, DEDUP_CAPACITY)
    kind = event.kind
    if kind == "tool_call":
        return _tool_call(st, event, config, seen)
    if kind == "tool_result":
        return _tool_result(st, event, config, seen)
    if kind == "compaction_retry":
        return RunState(st.history, st.buckets, st.blocked, guard_mod.arm(config), seen), []
    raise ValueError(f"unknown event kind {kind!r}")


def _tool_call(st: RunState, event: ToolEvent, config: LoopConfig, seen: bytes) -> tuple[RunState, list[Decision]]:
    tool = event.tool
    sig = args_hash(tool, event.args, event.args_hash)
    history = st.history
    buckets = st.buckets
    decisions: list[Decision] = []
    if config.enabled:
        finding = detect(history, tool, sig, is_known_poll(tool, event.args, event.poll_action), config)
        if finding is not None:
            if finding.critical:
                blocked = st.blocked
                if event.call_id is not None:
                    blocked = ring_push(blocked, short_digest(event.call_id), MAX_BLOCKED_IDS)
                decisions.append(_decision("block", finding, event, True))
                return RunState(history, buckets, blocked, st.guard, seen), decisions
            published, buckets = _publish_warning(buckets, finding, config.warning_threshold)
            decisions.append(_decision("warning", finding, event, published))
        history = trim((*history, CallRecord(tool, sig, None, event.call_id)), config.history_size)
    guard = st.guard
    if event.outcome is not None:
        result, unknown = hash_outcome(tool, event.args, event.outcome, event.poll_action)
        if result is not None:
            history = record_outcome(history, tool, sig, event.call_id, result, unknown, config.history_size)
            guard = _observe(guard, event, sig, result, decisions)
    return RunState(history, buckets, st.blocked, guard, seen), decisions


def _tool_result(st: RunState, event: ToolEvent, config: LoopConfig, seen: bytes) -> tuple[RunState, list[Decision]]:
    call_id = event.call_id
    if call_id is not None and st.blocked and ring_contains(st.blocked, short_digest(call_id)):
        return RunState(st.history, st.buckets, st.blocked, st.guard, seen), []
    tool = event.tool
    result, unknown = hash_outcome(tool, event.args, event.outcome, event.poll_action)
    if result is None:
        return RunState(st.history, st.buckets, st.blocked, st.guard, seen), []
    sig = args_hash(tool, event.args, event.args_hash)
    history = record_outcome(st.history, tool, sig, call_id, result, unknown, config.history_size)
    decisions: list[Decision] = []
    guard = _observe(st.guard, event, sig, result, decisions)
    return RunState(history, st.buckets, st.blocked, guard, seen), decisions


def _observe(
    guard: guard_mod.GuardState | None, event: ToolEvent, sig: str, result: str, decisions: list[Decision]
) -> guard_mod.GuardState | None:
    guard, count = guard_mod.observe(guard, event.tool, sig, result)
    if count and guard is not None:
        size = guard.window_size
        decisions.append(
            Decision(
                decision="abort",
                detector=COMPACTION,
                count=count,
                threshold=size,
                message=messages.compaction_abort(event.tool, count, size),
                tool=event.tool,
                call_id=event.call_id,
                warning_key=f"compaction:{sig}:{result}",
                published=True,
                outcome_hash=result,
            )
        )
    return guard


def _publish_warning(buckets: dict[bytes, int], finding: Finding, threshold: int) -> tuple[bool, dict[bytes, int]]:
    """Deviation 2: publish when ``count // warningThreshold`` passes the key's last published bucket."""
    key = short_digest(finding.key)
    bucket = finding.count // threshold
    if bucket <= buckets.get(key, 0):
        return False, buckets
    updated = dict(buckets)
    updated[key] = bucket
    if len(updated) > MAX_WARNING_KEYS:
        del updated[next(iter(updated))]
    return True, updated


def _decision(kind: str, finding: Finding, event: ToolEvent, published: bool) -> Decision:
    return Decision(
        decision="block" if kind == "block" else "warning",
        detector=finding.detector,
        count=finding.count,
        threshold=finding.threshold,
        message=finding.message,
        tool=event.tool,
        call_id=event.call_id,
        warning_key=finding.key,
        published=published,
        paired_tool=finding.paired_tool,
        outcome_hash=finding.outcome,
    )
