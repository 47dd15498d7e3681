"""streams.worker.offsets: each partition is applied gaplessly from the committed offset of its assignment.

The pure tracker first, then the worker's reader on Faust's real consumer classes (no broker: only the
coordinator round trips and the seek are replaced): a delivery that skips offsets after an assignment is not
applied, counted, re-read, and Faust never commits past an offset the worker did not apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streams.worker.offsets import Jump, OffsetTracker, Step


def fake_coordinator(consumer: Any, committed: Mapping[Any, int]) -> list[tuple[Any, int]]:
    """Replace the consumer's coordinator round trips and its seek: commits from ``committed``, earliest 0.

    Returns the list every seek is appended to, so a test can see where the worker re-reads.
    """
    seeks: list[tuple[Any, int]] = []

    async def committed_offsets(tps: Iterable[Any]) -> dict[Any, int | None]:
        return {t: committed.get(t) for t in tps}

    async def earliest_offsets(*tps: Any) -> Mapping[Any, int]:
        return dict.fromkeys(tps, 0)

    async def _seek(partition: Any, offset: int) -> None:
        seeks.append((partition, offset))

    consumer.committed_offsets = committed_offsets
    consumer.earliest_offsets = earliest_offsets
    consumer._seek = _seek
    return seeks


def started(first: int, generation: int = 1, partition: int = 0) -> OffsetTracker:
    tracker = OffsetTracker()
    tracker.start(partition, generation, first)
    return tracker


def test_records_from_the_committed_offset_on_apply() -> None:
    tracker = started(5)
    assert [tracker.observe(0, o) for o in (5, 6, 7)] == [Step.APPLY] * 3


def test_the_first_record_after_an_assignment_must_be_the_committed_offset() -> None:
    tracker = started(515)
    assert tracker.observe(0, 598) == Jump(0, 515, 597)  # what Faust's inactive-partition drop delivered
    assert tracker.observe(0, 599) is Step.WAITING  # the seek back has not landed yet
    assert [tracker.observe(0, o) for o in (515, 516)] == [Step.APPLY] * 2


def test_redelivered_records_are_behind_and_a_later_jump_is_reported_again() -> None:
    tracker = started(0)
    for offset in range(10):
        assert tracker.observe(0, offset) is Step.APPLY
    assert tracker.observe(0, 3) is Step.BEHIND
    assert tracker.observe(0, 12) == Jump(0, 10, 11)


def test_a_new_generation_needs_a_new_start_and_never_accepts_any_offset() -> None:
    tracker = started(10, generation=3)
    assert tracker.knows(0, 3) and not tracker.knows(0, 4) and not tracker.knows(1, 3)
    tracker.start(0, 4, 40)
    assert tracker.observe(0, 500) == Jump(0, 40, 499)


def test_retention_moves_the_re_read() -> None:
    tracker = started(10)
    assert tracker.observe(0, 30) == Jump(0, 10, 29)
    tracker.reread_from(0, 20)
    assert tracker.observe(0, 30) is Step.WAITING
    assert tracker.observe(0, 20) is Step.APPLY


@given(st.integers(0, 1000), st.lists(st.integers(0, 1200), max_size=60))
def test_applied_offsets_are_always_contiguous_from_the_start(first: int, offsets: list[int]) -> None:
    tracker = started(first)
    applied = [o for o in offsets if tracker.observe(0, o) is Step.APPLY]
    assert applied == list(range(first, first + len(applied)))


@given(
    st.integers(0, 50),
    st.booleans(),
    st.lists(st.lists(st.integers(0, 80), max_size=8), max_size=6),
    st.lists(st.booleans(), min_size=6, max_size=6),
)
def test_take_run_is_observe_on_a_dense_run_and_nothing_otherwise(
    first: int, rereading: bool, chunks: list[list[int]], dense: list[bool]
) -> None:
    """A run taken at once leaves the tracker as observing it record by record would, all APPLY."""
    fast, slow = started(first), started(first)
    if rereading:  # mid re-read after a jump
        fast.observe(0, first + 100)
        slow.observe(0, first + 100)
    for offsets, make_dense in zip(chunks, dense, strict=False):
        if make_dense:  # most runs in production: the next offsets exactly
            offsets = list(range(slow._parts[0].next, slow._parts[0].next + len(offsets)))
        before = (fast._parts[0].next, fast._parts[0].rereading)
        if fast.take_run(0, offsets):
            assert [slow.observe(0, o) for o in offsets] == [Step.APPLY] * len(offsets)
        else:
            assert (fast._parts[0].next, fast._parts[0].rereading) == before
            for o in offsets:
                assert fast.observe(0, o) == slow.observe(0, o)
        assert (fast._parts[0].next, fast._parts[0].rereading) == (slow._parts[0].next, slow._parts[0].rereading)


# --- the worker's reader on Faust's real consumer ---------------------------------------------------------


class _Stream:
    def __init__(self, events: Iterable[Any]) -> None:
        self._events = list(events)

    async def events(self) -> AsyncIterator[Any]:
        for event in self._events:
            yield event


def test_the_worker_re_reads_a_skipped_delivery_counts_it_and_never_commits_past_it(tmp_path: Path) -> None:
    import faust
    from faust.transport.consumer import ConsumerMessage
    from faust.types import TP

    from streams.config_file import LoadedConfig
    from streams.kafka.compat import CompatConsumer
    from streams.worker.app import LoopwatchWorker, _ReaderStopped
    from streams.worker.metrics import WorkerMetrics
    from streams.worker.settings import WorkerSettings

    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    metrics = WorkerMetrics(process=False)
    worker = LoopwatchWorker(settings, LoadedConfig.default(), metrics)
    consumer = worker.app.consumer
    assert isinstance(consumer, CompatConsumer)
    tp = TP("ev", 0)
    committed = {tp: 5}
    seeks = fake_coordinator(consumer, committed)
    consumer.assignment = lambda: {tp}  # type: ignore[method-assign]
    consumer.app.topics._acking_topics.add("ev")
    consumer._committed_offset[tp] = 5

    def event(offset: int, generation: int) -> Any:
        message = ConsumerMessage("ev", 0, offset, 0.0, 0, None, b"k", b"v", None, tp=tp, generation_id=generation)
        consumer.track_message(message)
        return faust.Event(worker.app, b"k", b"v", None, message)

    # generation 7 starts at 5; 7 and 8 were dropped inside the consumer; 11 arrives before the seek lands
    deliveries = [(o, 7) for o in (5, 6, 9, 10, 11, 7, 8, 9, 10)]
    # generation 8 (a rebalance): the group committed 9 meanwhile; 8 is behind, 10 without 9 is a jump
    deliveries += [(o, 8) for o in (8, 10, 9, 10)]
    events = [event(o, g) for o, g in deliveries]

    async def read() -> list[Any]:
        queue: asyncio.Queue[Any] = asyncio.Queue()
        reader = asyncio.ensure_future(worker._read(_Stream(events[:9]), queue))
        await reader
        committed[tp] = 9
        await worker._read(_Stream(events[9:]), queue)
        items = [queue.get_nowait() for _ in range(queue.qsize())]
        return [item for item in items if not isinstance(item, _ReaderStopped)]

    queued = asyncio.run(read())
    assert [(e.message.offset, e.message.generation_id) for e in queued] == [
        (5, 7), (6, 7), (7, 7), (8, 7), (9, 7), (10, 7), (9, 8), (10, 8),
    ]  # fmt: skip
    assert seeks == [(tp, 7), (tp, 9)]
    assert metrics.skipped_offsets._value.get() == 2 + 1
    skipped = {id(e.message) for e in events} - {id(e.message) for e in queued}
    assert not skipped & {id(m) for m in consumer._unacked_messages}  # dropped: not waited for, not acked

    # Faust's commit: the worker acknowledges what it applied, in order; the first delivery of 9..11 was never
    # acknowledged, so while 7 is unapplied nothing beyond it is committable.
    consumer._committed_offset[tp] = 5
    for e in queued[:2]:
        consumer.ack(e.message)
    assert consumer._filter_committable_offsets([tp]) == {tp: 7}
    consumer._committed_offset[tp] = 7  # committed
    for e in queued[2:6]:
        consumer.ack(e.message)
    assert consumer._filter_committable_offsets([tp]) == {tp: 11}


def test_a_stream_re_read_outlasted_by_a_rebalance_does_not_seek(tmp_path: Path) -> None:
    """The earliest-offset answer can take seconds (retried while the broker is away); a rebalance meanwhile has
    sought the partition to its commit. Seeking to the old skip then would pass records applied but not
    committed, and the new generation's offset check would report them as skipped (a false alert)."""
    from faust.types import TP

    from streams.config_file import LoadedConfig
    from streams.kafka.compat import CompatConsumer
    from streams.worker.app import LoopwatchWorker
    from streams.worker.metrics import WorkerMetrics
    from streams.worker.offsets import Jump
    from streams.worker.settings import WorkerSettings

    settings = WorkerSettings(
        bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev", delivery="stream"
    )
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    consumer = worker.app.consumer
    assert isinstance(consumer, CompatConsumer) and not worker.bulk
    tp = TP("ev", 0)
    seeks = fake_coordinator(consumer, {tp: 5})

    async def earliest_after_a_rebalance(*tps: Any) -> Mapping[Any, int]:
        consumer._bulk_epoch += 1  # what every assignment does, in both delivery modes
        return dict.fromkeys(tps, 0)

    consumer.earliest_offsets = earliest_after_a_rebalance  # type: ignore[method-assign]
    tracker = started(5)
    jump = tracker.observe(0, 9)
    assert isinstance(jump, Jump)
    asyncio.run(worker._reread(consumer, tp, 9, jump, tracker))
    assert seeks == [] and worker.metrics.skipped_offsets._value.get() == 0


def test_forget_makes_every_partition_start_again_from_its_commit() -> None:
    tracker = started(5)
    tracker.observe(0, 5)
    tracker.forget()  # a revocation
    assert not tracker.knows(0, 1)


def test_bulk_admission_applies_gaplessly_from_the_commit_and_restarts_after_a_revocation(tmp_path: Path) -> None:
    from aiokafka.structs import ConsumerRecord
    from faust.types import TP

    from streams.config_file import LoadedConfig
    from streams.kafka.compat import CompatConsumer
    from streams.worker.app import LoopwatchWorker
    from streams.worker.bulk import Chunk
    from streams.worker.metrics import WorkerMetrics
    from streams.worker.settings import WorkerSettings

    settings = WorkerSettings(
        bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev", delivery="bulk"
    )
    metrics = WorkerMetrics(process=False)
    worker = LoopwatchWorker(settings, LoadedConfig.default(), metrics)
    consumer = worker.app.consumer
    assert isinstance(consumer, CompatConsumer) and worker.bulk
    tp = TP("ev", 0)
    committed = {tp: 5}
    seeks = fake_coordinator(consumer, committed)

    def chunk(offsets: list[int], generation: int = 7) -> Chunk:
        records = [ConsumerRecord("ev", 0, o, 0, 0, b"k", b"v", None, 1, 1, []) for o in offsets]
        return Chunk(tp, records, generation, consumer.bulk_epoch, 0.0)

    async def admit(*chunks: Chunk) -> tuple[list[int], dict[Any, int]]:
        records, positions = await worker._admit(consumer, list(chunks), consumer.bulk_epoch, worker._offsets)
        return [r.offset for r in records], positions

    # 7 and 8 missing after 6: not applied, re-read from 7; 11 arrives before the seek lands
    assert asyncio.run(admit(chunk([5, 6, 9, 10]), chunk([11]))) == ([5, 6], {tp: 7})
    assert asyncio.run(admit(chunk([7, 8, 9]))) == ([7, 8, 9], {tp: 10})
    assert seeks == [(tp, 7)] and metrics.skipped_offsets._value.get() == 2
    # a revocation in the same generation (the tracker forgets): the next record must be the commit, 5 again
    asyncio.run(worker._intake.revoked({tp}))
    assert asyncio.run(admit(chunk([10, 11]))) == ([], {})
    assert seeks[-1] == (tp, 5)
    # a chunk taken before an epoch change is not admitted at all
    stale = chunk([5, 6])
    consumer._bulk_epoch += 1
    assert asyncio.run(admit(stale)) == ([], {})
