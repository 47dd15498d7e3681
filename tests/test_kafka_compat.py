"""Remedy 3 of :mod:`streams.kafka_compat`: stream partitions stay paused until positioned and flowing.

The consumer is Faust's real one (no broker needed to build it); only the broker round trip of the seek is
replaced. The sequence is the one Faust's recovery runs when it completes: resume the stream partitions,
seek them to their committed offsets, resume the flow control (clears stream queues), resume the flow.
``tests/integration/test_worker_crash.py`` shows the race this prevents with real processes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import faust
from faust.types import TP

from streams.kafka_compat import CompatConsumer, apply_kafka_compat, faust_settings_for

EVENTS = [TP("ev", 0), TP("ev", 1)]
CHANGELOG = [TP("t-hold-runs-changelog", 0), TP("t-hold-runs-changelog", 1)]


def consumer_of(*, hold: bool = True) -> tuple[CompatConsumer, list[str]]:
    app = faust.App("t-hold", **faust_settings_for("127.0.0.1:1", embedded=True), store="memory://")
    apply_kafka_compat(app, hold_until_seek=hold)
    app.Table("runs", partitions=2)
    consumer = app.consumer
    assert isinstance(consumer, CompatConsumer)
    calls: list[str] = []

    async def seek_to_committed() -> Mapping[Any, int]:
        calls.append(f"seek with active {sorted(tp.partition for tp in active(consumer) if tp.topic == 'ev')}")
        return dict.fromkeys(EVENTS, 5)

    consumer.seek_to_committed = seek_to_committed  # type: ignore[method-assign]
    consumer.pause_partitions(EVENTS + CHANGELOG)  # what Faust does on assignment
    return consumer, calls


def active(consumer: CompatConsumer) -> set[TP]:
    return set(consumer._get_active_partitions())


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_changelog_partitions_resume_at_once() -> None:
    consumer, _ = consumer_of()
    consumer.resume_partitions(CHANGELOG)
    assert active(consumer) == set(CHANGELOG)


def test_stream_partitions_wait_for_the_seek_and_the_flow() -> None:
    consumer, calls = consumer_of()
    consumer.resume_partitions(EVENTS + CHANGELOG)
    assert active(consumer) == set(CHANGELOG)  # held: nothing may be fetched from the old position
    run(consumer.perform_seek())
    assert calls == ["seek with active []"]
    assert active(consumer) == set(CHANGELOG)  # positioned, but the flow control may still clear queues
    consumer.resume_flow()
    assert active(consumer) == set(CHANGELOG) | set(EVENTS)
    assert consumer._read_offset[EVENTS[0]] == 5


def test_resuming_the_flow_without_a_seek_keeps_them_held() -> None:
    """During recovery Faust resumes the flow to read changelogs: stream partitions must not come along."""
    consumer, _ = consumer_of()
    consumer.resume_partitions(EVENTS)
    consumer.resume_flow()
    assert not active(consumer) & set(EVENTS)


def test_a_rebalance_between_seek_and_flow_needs_a_new_seek() -> None:
    consumer, _ = consumer_of()
    consumer.resume_partitions(EVENTS)
    run(consumer.perform_seek())
    consumer.pause_partitions(EVENTS)  # revoked before the flow resumed
    consumer.resume_partitions(EVENTS)
    consumer.resume_flow()
    assert not active(consumer) & set(EVENTS)
    run(consumer.perform_seek())
    consumer.resume_flow()
    assert active(consumer) >= set(EVENTS)


def test_paused_partitions_are_no_longer_held() -> None:
    consumer, _ = consumer_of()
    consumer.resume_partitions(EVENTS)
    consumer.pause_partitions(EVENTS[:1])
    run(consumer.perform_seek())
    consumer.resume_flow()
    assert active(consumer) == {EVENTS[1]}


def test_without_the_remedy_faust_resumes_before_the_seek() -> None:
    consumer, calls = consumer_of(hold=False)
    consumer.resume_partitions(EVENTS)
    run(consumer.perform_seek())
    assert calls == ["seek with active [0, 1]"]  # the race: fetchable while the seek is under way
