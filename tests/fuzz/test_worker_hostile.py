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
