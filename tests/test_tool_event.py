"""``to_tool_event`` builds its named tuples positionally (cheaper): pin it to the field-by-name meaning."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from schemas.events import CompactionRetryEvent, Event, ModelUsageEvent
from streams.decode import InvalidEvent, decode_event, scope_key, to_tool_event
from streams.detection.types import MISSING, Outcome, ToolEvent
from tests.fuzz.hostile import FUZZ, records


def by_name(event: Event) -> ToolEvent:
    """The core's view of an event, every field named (what the positional construction must equal)."""
    dedup_key = event.gateway_id + "\x00" + event.event_id
    if isinstance(event, CompactionRetryEvent):
        return ToolEvent(kind="compaction_retry", scope=scope_key(event), dedup_key=dedup_key)
    if event.error is not None:
        outcome: Outcome | None = Outcome(error=event.error)
    elif event.result is not None:
        outcome = Outcome(result=event.result)
    elif event.result_hash is not None:
        outcome = Outcome(result_hash=event.result_hash, unknown_tool_name=event.unknown_tool_name)
    else:
        outcome = None
    return ToolEvent(
        kind=event.type,
        scope=scope_key(event),
        tool=event.tool,
        call_id=event.call_id,
        args=event.args if event.has_args else MISSING,
        args_hash=event.args_hash,
        outcome=outcome,
        dedup_key=dedup_key,
    )


@settings(FUZZ, max_examples=200)
@given(records())
def test_positional_construction_means_the_named_fields(data: bytes) -> None:
    try:
        event = decode_event(data)
    except InvalidEvent:
        return
    if isinstance(event, ModelUsageEvent):  # priced by streams.loop_cost, never shown to the core
        with pytest.raises(TypeError):
            to_tool_event(event)
        return
    assert to_tool_event(event) == by_name(event)
