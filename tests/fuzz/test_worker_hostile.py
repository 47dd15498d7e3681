"""Hostile batches through the worker's batch logic (no Kafka): every record is applied or dead-lettered.

A bad record must land in the dead-letter topic with its reason (and fit in a Kafka record), never stop the
batch; every valid one must be applied and its run's envelope written.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.decode import INVALID_REASONS, KEY_MISMATCH, InvalidEvent, decode_event, scope_key
from tests.fuzz.hostile import EAGER_CONFIG, FUZZ, records

processing = pytest.importorskip("streams.worker.processing")
deadletter = pytest.importorskip("streams.worker.deadletter")


def _key(data: bytes) -> bytes:
    try:
        return scope_key(decode_event(data)).encode("utf-8")
    except InvalidEvent:
        return b"k"


@settings(FUZZ, max_examples=40)
@given(st.lists(records(), min_size=1, max_size=6))
def test_hostile_batches_are_applied_or_dead_lettered(batch: list[bytes]) -> None:
    inputs = [
        processing.InputRecord("loopwatch.events", 0, offset, _key(data), data) for offset, data in enumerate(batch)
    ]
    plan = processing.plan_batch(inputs, 1767225600000.0)
    grouped = sum(len(group.indexes) for group in plan.groups.values())
    assert grouped + len(plan.dead_letters) == len(inputs)
    for dead in plan.dead_letters:
        assert dead.reason in (*INVALID_REASONS, KEY_MISMATCH)
        assert len(dead.value) <= deadletter.MAX_RECORD_BYTES
        assert orjson.loads(dead.value)["reason"] == dead.reason
    runner = processing.RunProcessor(EAGER_CONFIG)
    for group in plan.groups.values():
        result = runner.process(group, inputs, None, 1767225600000)
        assert not result.dead_letters, [orjson.loads(d.value)["detail"] for d in result.dead_letters]
        assert result.value is not None and len(result.applied_types) == len(group.indexes)


_BIG = 2**53  # the schema's largest token count
_TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")


def _usage_event(tokens: int, cost: float | None) -> dict[str, object]:
    return {
        "type": "model_usage",
        "model": "m",
        "cost_usd": cost,
        **{f"{kind}_tokens": tokens for kind in _TOKEN_KINDS},
    }


_usage = st.builds(
    _usage_event,
    st.sampled_from([0, 1, _BIG]),
    st.sampled_from([None, 0.0, 5e-324, 1.0, 1e308, 1.7976931348623157e308]),
)
_call = st.fixed_dictionaries(
    {
        "type": st.just("tool_call"),
        "tool": st.sampled_from(["exec", "read", "process"]),
        "args": st.sampled_from([{"command": "ls"}, {"path": "/x"}, {"action": "poll", "sessionId": "s"}]),
        "result": st.sampled_from([{"content": [{"type": "text", "text": "same"}]}, {"details": {"status": 1}}]),
    }
)
_compaction = st.just({"type": "compaction_retry"})


@settings(FUZZ, max_examples=25)
@given(st.lists(st.tuples(st.one_of(_usage, _call, _compaction), st.sampled_from([1, 3, 600])), max_size=8))
def test_long_runs_of_valid_events_at_the_schemas_extremes_are_applied_and_stored(
    pattern: list[tuple[dict[str, object], int]],
) -> None:
    """Valid events are never a reason to stop: a run of hundreds of them at the schema's extremes (the largest
    token counts and costs, loops that warn, block and abort) is applied, priced and stored, its state encodes and
    its verdicts are JSON. Huge token sums once made a run's envelope unencodable (streams.loop_cost)."""
    events: list[dict[str, object]] = []
    for shape, repeats in pattern:
        for _ in range(repeats):
            at = len(events)
            event = {**shape, "event_id": f"e{at}", "gateway_id": "gw", "session_id": "s", "run_id": "r"}
            event["ts"] = 1767225600000 + at
            if shape["type"] == "tool_call":
                event["call_id"] = f"c{at}"
            events.append(event)
    inputs = [processing.InputRecord("loopwatch.events", 0, at, b"r", orjson.dumps(e)) for at, e in enumerate(events)]
    runner = processing.RunProcessor(EAGER_CONFIG)
    stored: bytes | None = None
    for start in range(0, len(inputs), 500):
        batch = inputs[start : start + 500]
        plan = processing.plan_batch(batch, 1767225600000.0)
        assert not plan.dead_letters, [orjson.loads(d.value)["detail"] for d in plan.dead_letters]
        for group in plan.groups.values():
            result = runner.process(group, batch, stored, 1767225600000)
            assert not result.dead_letters, [orjson.loads(d.value)["detail"] for d in result.dead_letters]
            assert result.value is not None
            stored = result.value
            for publication in result.publications:
                assert orjson.loads(publication.value)["run_id"] == "r"
