"""Remedy 3 of :mod:`streams.kafka.compat`: stream partitions stay paused until positioned and flowing.

The consumer is Faust's real one (no broker needed to build it); only the broker round trip of the seek is
replaced. The sequence is the one Faust's recovery runs when it completes: resume the stream partitions,
seek them to their committed offsets, resume the flow control (clears stream queues), resume the flow.
``tests/integration/test_worker_crash.py`` shows the race this prevents with real processes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import faust
import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from streams.kafka.compat import (
    REREAD_AGAIN,
    REREAD_GAP,
    CompatConsumer,
    _ChangelogRecord,
    apply_kafka_compat,
    changelog_configs,
    faust_settings_for,
    partition_ranges,
)

EVENTS = [TP("ev", 0), TP("ev", 1)]
CHANGELOG = [TP("t-hold-runs-changelog", 0), TP("t-hold-runs-changelog", 1)]


def consumer_of(*, hold: bool = True, datadir: Path | None = None) -> tuple[CompatConsumer, list[str]]:
    """Faust's real consumer; its tables in memory, or in RocksDB under ``datadir``."""
    store = {"store": "memory://"} if datadir is None else {"store": "rocksdb://", "datadir": str(datadir)}
    app = faust.App("t-hold", **faust_settings_for("127.0.0.1:1", embedded=True), **store)
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


# --- remedy 4: gapless delivery ------------------------------------------------------------------------------


def record(tp: TP, offset: int) -> Any:
    from aiokafka.structs import ConsumerRecord

    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, b"k", b"v", None, 1, 1, [])


def fetching(consumer: CompatConsumer, batches: list[list[int]]) -> list[tuple[TP, int]]:
    """Replace the broker side: each fetch returns the next batch of offsets of ``EVENTS[0]``; returns the seeks."""
    seeks: list[tuple[TP, int]] = []
    pending = list(batches)

    async def _fetch(active: Any, timeout: float) -> Any:
        return {EVENTS[0]: [record(EVENTS[0], o) for o in pending.pop(0)]} if pending else {}

    async def _seek(tp: TP, offset: int) -> None:
        seeks.append((tp, offset))

    async def earliest_offsets(*tps: TP) -> Mapping[TP, int]:
        return dict.fromkeys(tps, 0)

    consumer._thread.getmany = _fetch  # type: ignore[method-assign]
    consumer._seek = _seek  # type: ignore[method-assign]
    consumer.earliest_offsets = earliest_offsets  # type: ignore[method-assign]
    consumer.assignment = lambda: set(EVENTS + CHANGELOG)  # type: ignore[method-assign]
    consumer.highwater = lambda tp: 1000  # type: ignore[method-assign]
    return seeks


def delivered(consumer: CompatConsumer, fetches: int) -> list[int]:
    async def drain() -> list[int]:
        out = []
        for _ in range(fetches):
            out += [message.offset async for _, message in consumer.getmany(timeout=0.01)]
        return out

    return cast(list[int], run(drain()))


def positioned(consumer: CompatConsumer) -> None:
    consumer.resume_partitions(EVENTS + CHANGELOG)
    run(consumer.perform_seek())  # committed offset 5
    consumer.resume_flow()


def test_records_fetched_but_not_delivered_are_re_read_not_skipped() -> None:
    consumer, _ = consumer_of()
    seeks = fetching(consumer, [[5, 6], [9, 10], [7, 8, 9, 10]])
    positioned(consumer)
    # 7 and 8 were fetched and dropped (the "inactive partition" case): 9 must not be delivered after 6
    assert delivered(consumer, 3) == [5, 6, 7, 8, 9, 10]
    assert seeks == [(EVENTS[0], 7)]
    assert consumer._read_offset[EVENTS[0]] == 7
    assert consumer.rereads == {REREAD_GAP: 1, REREAD_AGAIN: 0}  # the worker exports it


def test_a_re_read_that_does_not_start_at_its_offset_is_sought_again_not_left_stalled() -> None:
    """A hand-over begun after the re-read's seek landed holds records from the sought offset (aiokafka drops
    what it fetched for the old position). Once, one did not, and the partition waited for offset 4,996 while
    aiokafka read on to the end of the log: every later record was dropped as "fetched before the seek"."""
    consumer, _ = consumer_of()
    seeks = fetching(consumer, [[5, 6], [9, 10], [11, 12], [13], [7, 8]])
    positioned(consumer)
    assert delivered(consumer, 5) == [5, 6, 7, 8]
    assert seeks == [(EVENTS[0], 7)] * 3
    assert consumer.rereads == {REREAD_GAP: 1, REREAD_AGAIN: 2}


def test_records_of_a_hand_over_begun_before_the_re_read_landed_wait_quietly() -> None:
    """A re-read from the worker's own offset check runs beside Faust's fetch loop: a hand-over begun while its
    seek is under way may still hold records from the old position, and they are no reason to seek again."""
    consumer, _ = consumer_of()
    seeks = fetching(consumer, [[5, 6], [11], [12], [7, 8]])
    positioned(consumer)
    landed = asyncio.Event()
    record_seek = consumer._seek

    async def slow_seek(tp: TP, offset: int) -> None:
        await landed.wait()
        await record_seek(tp, offset)

    consumer._seek = slow_seek  # type: ignore[method-assign]

    async def scenario() -> list[int]:
        out = [m.offset async for _, m in consumer.getmany(timeout=0.01)]
        rewind = asyncio.ensure_future(consumer.rewind(EVENTS[0], 7))
        await asyncio.sleep(0)
        out += [m.offset async for _, m in consumer.getmany(timeout=0.01)]  # 11: fetched before the seek
        landed.set()
        await rewind
        consumer._seek = record_seek  # type: ignore[method-assign]
        for _ in range(2):  # 12 comes after the seek landed: the re-read is issued again; then 7 and 8
            out += [m.offset async for _, m in consumer.getmany(timeout=0.01)]
        return out

    assert run(scenario()) == [5, 6, 7, 8]
    assert seeks == [(EVENTS[0], 7)] * 2


def test_a_re_read_outlasted_by_a_whole_rebalance_leaves_the_partition_where_the_new_assignment_sought_it() -> None:
    """The re-read asks the broker for the earliest offset before it seeks; a rebalance that assigns the partition
    again meanwhile seeks it to the committed offset (5). The old re-read's seek to 7 would then skip 5 and 6, and
    the worker's own offset check would report them as skipped offsets (a false LoopwatchSkippedOffsets)."""
    consumer, _ = consumer_of()
    seeks = fetching(consumer, [[5, 6], [9, 10], [5, 6, 7, 8]])
    positioned(consumer)
    answered = consumer.earliest_offsets

    async def earliest_after_a_rebalance(*tps: TP) -> Mapping[TP, int]:
        consumer._on_partitions_assigned = _no_op  # type: ignore[assignment]
        await consumer.on_partitions_assigned(set(EVENTS))
        consumer.pause_partitions(EVENTS + CHANGELOG)  # as Faust does on assignment, then positioned() again
        consumer.resume_partitions(EVENTS + CHANGELOG)
        await consumer.perform_seek()  # the committed offset, 5
        consumer.resume_flow()
        return await answered(*tps)

    consumer.earliest_offsets = earliest_after_a_rebalance  # type: ignore[method-assign]
    assert delivered(consumer, 3) == [5, 6, 5, 6, 7, 8]  # 9 after 6 is a gap; the new assignment reads from 5
    assert seeks == []


def test_a_delivery_after_the_seek_must_start_at_the_committed_offset() -> None:
    consumer, _ = consumer_of()
    seeks = fetching(consumer, [[8, 9], [5, 6]])
    positioned(consumer)
    assert delivered(consumer, 2) == [5, 6]
    assert seeks == [(EVENTS[0], 5)]


def test_faust_never_counts_a_gap_of_a_stream_partition_as_processed() -> None:
    from faust.transport.consumer import ConsumerMessage

    consumer, _ = consumer_of()
    consumer.assignment = lambda: set(EVENTS)  # type: ignore[method-assign]
    consumer.app.topics._acking_topics.add("ev")
    run(consumer.perform_seek())
    tp = EVENTS[0]
    run(consumer._add_gap(tp, 6, 8))  # what Faust's drain does when 9 follows 5
    for offset in (5, 9):
        consumer.ack(ConsumerMessage("ev", 0, offset, 0.0, 0, None, b"k", b"v", None, tp=tp))
    assert consumer._filter_committable_offsets([tp]) == {tp: 6}  # not past 6, the first offset never applied


def test_a_partition_revoked_before_its_re_read_is_left_to_its_next_owner() -> None:
    from aiokafka.errors import IllegalStateError

    consumer, _ = consumer_of()

    async def _seek(tp: TP, offset: int) -> None:
        raise IllegalStateError(f"{tp} is not assigned")

    consumer._seek = _seek  # type: ignore[method-assign]
    run(consumer.rewind(EVENTS[0], 7))  # no error: nothing to re-read here


def test_a_re_read_whose_seek_failed_leaves_later_hand_overs_checked() -> None:
    consumer, _ = consumer_of()

    async def _seek(tp: TP, offset: int) -> None:
        raise RuntimeError("the consumer thread stopped")

    consumer._seek = _seek  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        run(consumer.rewind(EVENTS[0], 7))
    consumer._handovers += 1  # the next hand-over
    assert not consumer._fetched_before_seek(EVENTS[0])  # a record beyond 7 is a gap again, not waited on


def test_a_recovery_seek_below_zero_reads_from_the_beginning() -> None:
    consumer, _ = consumer_of()
    sought: list[Mapping[TP, int]] = []

    async def seek_wait(partitions: Mapping[TP, int]) -> None:
        sought.append(dict(partitions))

    consumer._thread.seek_wait = seek_wait  # type: ignore[method-assign]
    run(consumer.seek_wait({CHANGELOG[0]: -2, CHANGELOG[1]: 7}))
    assert sought == [{CHANGELOG[0]: 0, CHANGELOG[1]: 7}]


# --- bulk delivery ---------------------------------------------------------------------------------------------


class Sink:
    """Records what the consumer hands over in bulk, and when a revocation asked it to settle."""

    def __init__(self) -> None:
        self.runs: list[tuple[int, list[int], int]] = []  # (partition, offsets, epoch)
        self.revocations: list[set[TP]] = []
        self.full = False
        self.callbacks: list[Any] = []

    def put(self, tp: Any, records: Any, generation: int | None, epoch: int) -> bool:
        self.runs.append((tp.partition, [r.offset for r in records], epoch))
        return not self.full

    def when_room(self, callback: Any) -> None:
        self.callbacks.append(callback)

    async def revoked(self, revoked: set[Any]) -> None:
        self.revocations.append(set(revoked))


def bulk_consumer(batches: list[list[int]]) -> tuple[CompatConsumer, Sink, list[tuple[TP, int]]]:
    consumer, _ = consumer_of()
    sink = Sink()
    consumer.deliver_in_bulk("ev", sink)
    seeks = fetching(consumer, batches)
    positioned(consumer)
    return consumer, sink, seeks


def test_bulk_records_reach_the_sink_in_gapless_runs_not_faust() -> None:
    consumer, sink, seeks = bulk_consumer([[5, 6, 7], [8, 11, 12], [9, 10, 11]])
    assert delivered(consumer, 3) == []  # nothing of the bulk topic goes through Faust's messages
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6, 7], [8], [9, 10, 11]]
    assert seeks == [(EVENTS[0], 9)]  # 9 and 10 missing: re-read from 9


def test_a_bulk_re_read_that_does_not_start_at_its_offset_is_sought_again() -> None:
    consumer, sink, seeks = bulk_consumer([[5, 6, 7], [8, 11, 12], [13, 14], [9, 10]])
    delivered(consumer, 4)
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6, 7], [8], [9, 10]]
    assert seeks == [(EVENTS[0], 9)] * 2


def test_bulk_run_starts_at_the_sought_position() -> None:
    consumer, sink, seeks = bulk_consumer([[3, 4, 5, 6], [8]])
    delivered(consumer, 2)
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6]]  # 3 and 4 are below the committed 5
    assert seeks == [(EVENTS[0], 7)]


def test_bulk_records_fetched_across_a_whole_rebalance_are_delivered_from_the_new_position() -> None:
    """A fetch can wait through a revocation, an assignment and the seek; its records, gapless from the sought
    position, belong to the new epoch. Dropping them stalled the partition when no later record came."""
    consumer, sink, seeks = bulk_consumer([])
    before = consumer.bulk_epoch

    async def _fetch(active: Any, timeout: float) -> Any:
        consumer._bulk_epoch += 1  # what the assignment does while this fetch waits (same committed offset 5)
        return {EVENTS[0]: [record(EVENTS[0], o) for o in (5, 6, 7)]}

    consumer._thread.getmany = _fetch  # type: ignore[method-assign]
    delivered(consumer, 1)
    assert sink.runs == [(0, [5, 6, 7], before + 1)]
    assert seeks == []


def test_bulk_records_of_a_partition_gone_inactive_are_re_read() -> None:
    consumer, sink, seeks = bulk_consumer([[5, 6], [7, 8]])
    delivered(consumer, 1)
    consumer._get_active_partitions().discard(EVENTS[0])  # e.g. paused between the fetch and the hand-over
    delivered(consumer, 1)
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6]]
    assert seeks == [(EVENTS[0], 7)]  # 7 and 8 were fetched past: sought back, not left for a later record


def test_positions_are_committed_only_up_to_what_was_delivered_in_this_epoch() -> None:
    consumer, _sink, _ = bulk_consumer([[5, 6, 7]])
    delivered(consumer, 1)
    tp = EVENTS[0]
    epoch = consumer.bulk_epoch
    assert not consumer.advance(tp, 9, epoch)  # beyond the delivered 7: refused
    assert not consumer.advance(tp, 7, epoch - 1)  # an older epoch: refused
    assert consumer.advance(tp, 7, epoch)
    assert consumer._filter_committable_offsets(list(consumer._filter_tps_with_pending_acks())) == {tp: 7}
    assert consumer._filter_committable_offsets(list(consumer._filter_tps_with_pending_acks())) == {}


def test_a_revocation_waits_for_the_sink_and_stops_bulk_delivery_until_the_next_assignment() -> None:
    consumer, sink, _ = bulk_consumer([[5, 6], [7, 8], [9]])
    delivered(consumer, 1)
    before = consumer.bulk_epoch
    order: list[str] = []

    async def faust_revoked(revoked: set[Any]) -> None:
        order.append(f"faust after {len(sink.revocations)} sink revocation(s)")

    consumer._on_partitions_revoked = faust_revoked  # type: ignore[assignment]
    consumer.app.consumer_generation_id = 1
    run(consumer.on_partitions_revoked(set(EVENTS)))
    assert sink.revocations == [set(EVENTS)] and order == ["faust after 1 sink revocation(s)"]
    assert consumer.bulk_epoch == before + 1
    assert not consumer.advance(EVENTS[0], 7, before)  # revoked: its position is no longer committed here
    delivered(consumer, 1)  # fetched during the revocation: not handed over
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6]]


def test_rewound_uncommitted_partitions_are_sought_from_their_start_offset(caplog: pytest.LogCaptureFixture) -> None:
    """Faust (and remedy 4) learn where a rewound partition starts, so a record prefetched from an older position
    before the rewind landed does not pass as its first one (``test_a_delivery_after_the_seek...`` then holds).
    The rewind is routine on every fresh group, so it is logged below the operator's default level."""
    from aiokafka import TopicPartition

    caplog.set_level(logging.DEBUG, logger="streams.kafka.compat")

    consumer, _ = consumer_of()
    changelog = CHANGELOG[0]

    class Aio:
        async def seek_to_committed(self) -> dict[Any, int | None]:
            return {EVENTS[0]: None, EVENTS[1]: 0, changelog: None, TP("ev2", 0): 9}

        def seek(self, tp: Any, offset: int) -> None:
            pass

        async def seek_to_beginning(self, *tps: Any) -> None:
            pass

        async def beginning_offsets(self, tps: list[Any]) -> dict[Any, int]:
            assert set(tps) == {TopicPartition("ev", 0), TopicPartition("ev", 1)}  # not the changelog's
            return dict.fromkeys(tps, 3)

    thread = cast(Any, consumer._thread)
    thread._consumer = Aio()
    starts = run(thread._seek_to_committed_or_reset())
    assert starts == {EVENTS[0]: 3, EVENTS[1]: 3, changelog: None, TP("ev2", 0): 9}
    rewinds = [r for r in caplog.records if r.getMessage().startswith("rewound uncommitted partitions")]
    assert [r.levelno for r in rewinds] == [logging.DEBUG]


def test_the_producer_faust_builds_sends_produce_batches_of_produce_batch_bytes() -> None:
    """The setting reaches aiokafka (through Faust's producer defaults), on real Kafka and the embedded broker,
    and a batch of that size is a legal request."""
    from streams.kafka.compat import PRODUCE_BATCH_BYTES

    for embedded in (True, False):
        app = faust.App("t-batch", **faust_settings_for("127.0.0.1:1", embedded=embedded))
        settings = app.producer._settings_default()
        assert settings["max_batch_size"] == PRODUCE_BATCH_BYTES > 16 * 1024
        assert settings["max_request_size"] >= 2 * PRODUCE_BATCH_BYTES


def test_the_embedded_worker_consumer_waits_at_most_fetch_max_wait_ms_per_fetch() -> None:
    """``--embedded`` shortens Faust's 1.5 s fetch wait on the aiokafka consumer Faust creates (a private
    attribute: this fails if aiokafka renames it, instead of the worker silently waiting 1.5 s per fetch)."""
    from streams.kafka.embedded import FETCH_MAX_WAIT_MS, shorten_fetch_wait

    app = faust.App("t-wait", **faust_settings_for("127.0.0.1:1", embedded=True), store="memory://")
    apply_kafka_compat(app)
    shorten_fetch_wait(app)

    async def created() -> Any:
        thread = cast(Any, app.consumer)._new_consumer_thread()
        return thread._create_worker_consumer(app.transport)

    consumer = asyncio.run(created())
    assert consumer._fetch_max_wait_ms == FETCH_MAX_WAIT_MS < 1500


class Aiokafka:
    """The consumer thread's aiokafka consumer, as far as pausing goes; its loop runs calls at once."""

    def __init__(self, assigned: set[Any]) -> None:
        self.assigned = assigned
        self.paused: set[Any] = set()
        self.thread_loop = self

    def assignment(self) -> set[Any]:
        return self.assigned

    def pause(self, tp: Any) -> None:
        self.paused.add(tp)

    def resume(self, tp: Any) -> None:
        self.paused.discard(tp)

    def call_soon_threadsafe(self, callback: Any) -> None:
        callback()


def throttling_consumer(batches: list[list[int]]) -> tuple[CompatConsumer, Sink, Aiokafka]:
    from aiokafka import TopicPartition

    consumer, sink, _ = bulk_consumer(batches)
    aio = Aiokafka({TopicPartition(tp.topic, tp.partition) for tp in EVENTS + CHANGELOG})
    thread = cast(Any, consumer._thread)
    thread._consumer = aio
    thread.thread_loop = aio
    return consumer, sink, aio


def test_a_full_sink_pauses_its_topic_in_aiokafka_without_holding_up_the_fetch_loop() -> None:
    """The fetch loop returns at once (the storm agents' topics and standby changelogs keep flowing); the bulk
    topic is not fetched until the sink calls back, and then only where Faust has not paused it meanwhile."""
    from aiokafka import TopicPartition

    consumer, sink, aio = throttling_consumer([[5, 6], [7, 8]])
    sink.full = True
    delivered(consumer, 1)
    ev0, ev1 = (TopicPartition("ev", p) for p in (0, 1))
    assert aio.paused == {ev0, ev1} and len(sink.callbacks) == 1
    delivered(consumer, 1)  # a fetch already under way: taken, and no second callback
    assert [offsets for _, offsets, _ in sink.runs] == [[5, 6], [7, 8]] and len(sink.callbacks) == 1
    consumer.resume_partitions([EVENTS[0]])  # Faust resuming a partition does not lift the throttle
    assert aio.paused == {ev0, ev1}
    consumer.pause_partitions([EVENTS[1]])  # Faust pauses one meanwhile (a rebalance begins)
    sink.callbacks.pop()()
    assert aio.paused == {ev1}  # only Faust's pause is left


def test_a_new_assignment_forgets_the_throttle() -> None:
    consumer, sink, aio = throttling_consumer([[5, 6]])
    sink.full = True
    delivered(consumer, 1)
    assert aio.paused
    consumer._on_partitions_assigned = _no_op  # type: ignore[assignment]
    run(consumer.on_partitions_assigned(set(EVENTS)))
    consumer.resume_partitions(CHANGELOG)
    consumer.resume_flow()
    aio.paused.clear()  # aiokafka's new assignment starts unpaused
    consumer.pause_partitions(EVENTS)
    consumer.resume_partitions(EVENTS)
    run(consumer.perform_seek())
    consumer.resume_flow()
    assert aio.paused == set()  # Faust's resume after the seek is not held back by the old throttle


async def _no_op(*args: Any) -> None:
    return None


def paused_changelogs(*, remedy: bool) -> list[set[int]]:
    """The changelog partitions paused in aiokafka after each step of Faust's recovery, as Faust runs it."""
    from aiokafka import TopicPartition

    consumer, _ = consumer_of()
    if not remedy:
        apply_kafka_compat(consumer.app, pause_changelogs=False)
    aio = Aiokafka({TopicPartition(tp.topic, tp.partition) for tp in EVENTS + CHANGELOG})
    thread = cast(Any, consumer._thread)
    thread._consumer = aio
    thread.thread_loop = aio
    steps = [
        lambda: consumer.pause_partitions(EVENTS + CHANGELOG),  # assigned
        lambda: consumer.resume_partitions(CHANGELOG),  # the tables are recovered from their changelog
        lambda: consumer.pause_partitions(CHANGELOG),  # recovery done: the worker only writes them now
        lambda: consumer.resume_partitions(CHANGELOG[1:]),  # partition 1 is another worker's: a standby copy
    ]
    seen = []
    for step in steps:
        step()
        seen.append({tp.partition for tp in aio.paused if tp.topic == CHANGELOG[0].topic})
    return seen


def test_changelog_partitions_faust_pauses_are_not_fetched_by_aiokafka() -> None:
    """Remedy 5: a recovered table's changelog records, which Faust never drains, are not fetched. aiokafka
    fetches nothing from a broker while such records are younger than its prefetch backoff, so they held up
    the events topic's next fetch by up to 0.1 s after every store step. Standby partitions keep flowing."""
    assert paused_changelogs(remedy=True) == [{0, 1}, set(), {0, 1}, {0}]
    assert paused_changelogs(remedy=False) == [set(), set(), set(), set()]  # what Faust 0.15.3 does alone


def test_aiokafka_drops_what_it_fetched_for_a_paused_partition_without_moving_past_it() -> None:
    """What the throttle rests on (aiokafka's ``FetchResult.check_assignment``): records fetched before a pause
    are neither returned nor consumed, so the first fetch after the resume starts at the next record to deliver.
    Were aiokafka to move past them, the gapless check above would see the jump and re-read."""
    from aiokafka import TopicPartition
    from aiokafka.consumer.fetcher import FetchResult
    from aiokafka.consumer.subscription_state import SubscriptionState

    async def scenario() -> None:  # aiokafka builds its futures on the running loop
        tp = TopicPartition("ev", 0)
        subscription = SubscriptionState()
        subscription.assign_from_user({tp})
        assignment = subscription.subscription.assignment
        state = assignment.state_value(tp)
        state.seek(5)

        class Fetched:
            next_fetch_offset = 5

            def __iter__(self) -> Any:
                return iter([record(EVENTS[0], o) for o in (5, 6, 7)])

        result = FetchResult(tp, assignment=assignment, partition_records=Fetched(), backoff=0.1)
        state.pause()
        assert result.getall() == [] and not result.has_more()
        assert state.position == 5
        state.resume()
        again = FetchResult(tp, assignment=assignment, partition_records=Fetched(), backoff=0.1)
        assert [r.offset for r in again.getall()] == [5, 6, 7]

    run(scenario())


# --- taking fetched records ahead ------------------------------------------------------------------------------


def drain_only(offsets: dict[int, list[int]]) -> Any:
    """aiokafka's real fetcher drain (``fetched_records``) over fetched ``offsets`` per partition of ``ev``, with
    its real subscription state; every partition positioned at its first fetched offset. No broker, no fetch task.
    """
    from aiokafka import TopicPartition
    from aiokafka.consumer.fetcher import Fetcher, FetchResult
    from aiokafka.consumer.subscription_state import SubscriptionState

    class DrainOnly(Fetcher):  # type: ignore[misc]
        def __init__(self) -> None:  # only what the drain reads; the broker side never starts
            self._subscriptions = SubscriptionState()
            self._records: dict[Any, Any] = {}
            self._wait_consume_future = None
            self._closed = False

        def fetched(self, partition: int, offsets: list[int]) -> None:
            tp = TopicPartition("ev", partition)
            assignment = self._subscriptions.subscription.assignment

            class Fetched:  # aiokafka's PartitionRecords as the drain sees it
                next_fetch_offset = offsets[0]

                def __iter__(self) -> Any:
                    for offset in offsets:
                        self.next_fetch_offset = offset + 1
                        yield record(TP("ev", partition), offset)

            self._records[tp] = FetchResult(tp, assignment=assignment, partition_records=Fetched(), backoff=0.1)

    fetcher = DrainOnly()
    fetcher._subscriptions.assign_from_user({TopicPartition("ev", p) for p in (0, 1)} | {TopicPartition("cl", 0)})
    assignment = fetcher._subscriptions.subscription.assignment
    for partition, fetched in offsets.items():
        assignment.state_value(TopicPartition("ev", partition)).seek(fetched[0])
        fetcher.fetched(partition, fetched)
    return fetcher


def offsets_of(records: Mapping[Any, list[Any]]) -> dict[int, list[int]]:
    return {tp.partition: [r.offset for r in recs] for tp, recs in records.items()}


async def taken_ahead(offsets: dict[int, list[int]]) -> tuple[Any, dict[Any, Any], Any]:
    """A fetcher over ``offsets`` (:func:`drain_only`) whose records were all taken ahead; partition 0's state."""
    from aiokafka import TopicPartition

    from streams.kafka.compat import take_ahead

    fetcher = drain_only(offsets)
    ahead: dict[Any, Any] = {}
    await take_ahead(fetcher, {"ev"}, ahead)
    return fetcher, ahead, fetcher._subscriptions.subscription.assignment.state_value(TopicPartition("ev", 0))


def test_records_are_taken_ahead_on_arrival_and_handed_to_faust_unchanged() -> None:
    """Taken: aiokafka's queue for the partition is empty (its next fetch goes out) and its position moved on."""
    from aiokafka import TopicPartition

    from streams.kafka.compat import release_ahead, take_ahead

    async def scenario() -> None:
        fetcher = drain_only({0: [5, 6, 7], 1: [3]})
        ahead: dict[Any, Any] = {}
        assert await take_ahead(fetcher, {"ev"}, ahead) == 2
        assert fetcher._records == {}
        assignment = fetcher._subscriptions.subscription.assignment
        assert assignment.state_value(TopicPartition("ev", 0)).position == 8
        released, discarded = release_ahead(ahead, None)
        assert offsets_of(released) == {0: [5, 6, 7], 1: [3]} and discarded == 0 and ahead == {}

    run(scenario())


def test_nothing_is_taken_ahead_while_faust_drains_or_from_other_topics() -> None:
    from streams.kafka.compat import take_ahead

    async def scenario() -> None:
        fetcher = drain_only({0: [5]})
        ahead: dict[Any, Any] = {}
        with fetcher._subscriptions.fetch_context():  # Faust is waiting in its own drain: it takes them at once
            assert await take_ahead(fetcher, {"ev"}, ahead) == 0
        assert await take_ahead(fetcher, {"other"}, ahead) == 0
        assert len(fetcher._records) == 1 and ahead == {}

    run(scenario())


def test_records_taken_ahead_are_discarded_after_a_seek_or_a_new_assignment() -> None:
    """aiokafka's own validity rule: a seek since the drain (a re-read, a rebalance) means they are read again
    from where the partition was sought; records of a new assignment never mix with an old one's."""
    from aiokafka import TopicPartition

    from streams.kafka.compat import release_ahead, take_ahead

    async def scenario() -> None:
        fetcher = drain_only({0: [5, 6], 1: [3, 4]})
        ahead: dict[Any, Any] = {}
        await take_ahead(fetcher, {"ev"}, ahead)
        assignment = fetcher._subscriptions.subscription.assignment
        assignment.state_value(TopicPartition("ev", 0)).seek(5)
        released, discarded = release_ahead(ahead, None)
        assert offsets_of(released) == {1: [3, 4]} and discarded == 1
        fetcher.fetched(0, [5, 6])
        await take_ahead(fetcher, {"ev"}, ahead)
        fetcher._subscriptions.assign_from_user({TopicPartition("ev", 0)})  # the old assignment ends
        assert release_ahead(ahead, None) == ({}, 1) and ahead == {}

    run(scenario())


def test_records_taken_ahead_wait_while_their_partition_is_paused_or_not_asked_for() -> None:
    from streams.kafka.compat import release_ahead

    async def scenario() -> None:
        _, ahead, state = await taken_ahead({0: [5, 6], 1: [3]})
        state.pause()
        assert offsets_of(release_ahead(ahead, {TP("ev", 0)})[0]) == {}
        assert offsets_of(release_ahead(ahead, {TP("ev", 1)})[0]) == {1: [3]}
        state.resume()
        assert offsets_of(release_ahead(ahead, None)[0]) == {0: [5, 6]}

    run(scenario())


def test_records_held_ahead_come_before_those_a_waiting_drain_brought_after_a_resume() -> None:
    """A drain that waits began with partition 0's taken-ahead records held back (paused by a full intake); it
    was resumed meanwhile and aiokafka fetched on from 7. Handed over alone, 7 and 8 were a gap: most drains of a
    300,000-event backlog re-read hundreds to thousands of records, and under a re-read a partition once stalled."""
    from aiokafka import TopicPartition

    from streams.kafka.compat import join_ahead, release_ahead

    async def scenario() -> None:
        fetcher, ahead, state = await taken_ahead({0: [5, 6], 1: [3]})
        state.pause()
        assert offsets_of(release_ahead(ahead, None)[0]) == {1: [3]}  # the drain begins: 0 is held back
        state.resume()  # while it waits
        fetcher.fetched(0, [7, 8])
        drained = await fetcher.fetched_records({TopicPartition("ev", 0)}, timeout=0)
        assert join_ahead(ahead, drained) == 0 and ahead == {}
        assert offsets_of(drained) == {0: [5, 6, 7, 8]}

    run(scenario())


def test_records_held_ahead_are_discarded_when_a_drain_brings_a_partition_sought_since() -> None:
    from aiokafka import TopicPartition

    from streams.kafka.compat import join_ahead

    async def scenario() -> None:
        fetcher, ahead, state = await taken_ahead({0: [5, 6]})
        state.seek(4)  # a re-read
        fetcher.fetched(0, [4, 5])
        drained = await fetcher.fetched_records({TopicPartition("ev", 0)}, timeout=0)
        assert join_ahead(ahead, drained) == 1 and ahead == {}
        assert offsets_of(drained) == {0: [4, 5]}

    run(scenario())


def test_faust_receives_records_taken_ahead_before_those_it_drains_within_its_record_limit() -> None:
    """The consumer thread's drain: taken-ahead records first, then aiokafka's, contiguous per partition; a
    drain whose limit the taken-ahead records fill does not drain aiokafka at all."""
    from streams.kafka.compat import take_ahead

    consumer, _ = consumer_of()
    consumer.resume_flow()
    thread = cast(Any, consumer._thread)
    thread._ahead = {}

    async def scenario() -> tuple[dict[int, list[int]], dict[int, list[int]], dict[int, list[int]]]:
        fetcher = drain_only({0: [5, 6]})
        aio = type("Aio", (), {"_fetcher": fetcher, "_closed": False})()
        await take_ahead(fetcher, {"ev"}, thread._ahead)
        fetcher.fetched(0, [7, 8])  # the fetch that went out at once
        first = offsets_of(await thread._fetch_records(aio, None, timeout=1.0))
        fetcher.fetched(0, [9, 10])
        await take_ahead(fetcher, {"ev"}, thread._ahead)
        fetcher.fetched(0, [11])
        limited = offsets_of(await thread._fetch_records(aio, None, timeout=1.0, max_records=2))
        rest = offsets_of(await thread._fetch_records(aio, None, timeout=0))
        return first, limited, rest

    first, limited, rest = run(scenario())
    assert first == {0: [5, 6, 7, 8]}
    assert limited == {0: [9, 10]}
    assert rest == {0: [11]}


# --- standby changelogs in bulk --------------------------------------------------------------------------------

STANDBY = CHANGELOG[1]


def changelog_record(tp: TP, offset: int, key: bytes, value: bytes | None) -> Any:
    from aiokafka.structs import ConsumerRecord

    return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, key, value, None, 1, 1, [])


def standby_consumer(
    fetches: list[dict[TP, list[tuple[int, bytes, bytes | None]]]], *, seen: int, datadir: Path | None
) -> tuple[CompatConsumer, Any, Any]:
    """Faust's real recovery bookkeeping with ``STANDBY`` as the standby partition, applied up to ``seen``."""
    consumer, _ = consumer_of(datadir=datadir)
    assert consumer.apply_standbys_in_bulk()
    recovery: Any = cast(Any, consumer.app.tables).recovery
    table = consumer.app.tables["runs"]
    recovery.add_active(table, CHANGELOG[0])
    recovery.add_standby(table, STANDBY)
    recovery.standby_offsets[STANDBY] = seen
    pending = list(fetches)

    async def _fetch(active: Any, timeout: float) -> Any:
        if not pending:
            return {}
        return {tp: [changelog_record(tp, *rec) for rec in recs] for tp, recs in pending.pop(0).items()}

    consumer._thread.getmany = _fetch  # type: ignore[method-assign]
    consumer.assignment = lambda: set(EVENTS + CHANGELOG)  # type: ignore[method-assign]
    consumer.highwater = lambda tp: 1000  # type: ignore[method-assign]
    consumer._seek = _no_op  # type: ignore[method-assign]
    positioned(consumer)
    return consumer, recovery, table


def standby_copy(table: Any) -> dict[bytes, bytes]:
    """The RocksDB copy of the standby partition (the store's own iteration covers active partitions only)."""
    db = table.data._db_for_partition(STANDBY.partition)
    return {bytes(k): bytes(v) for k, v in db.items() if k != table.data.offset_key}


def test_standby_records_continuing_the_applied_offset_are_written_in_one_step_not_through_faust(
    tmp_path: Path,
) -> None:
    fetch = {STANDBY: [(3, b"a", b"old"), (5, b"a", b"a5"), (6, b"b", b"b6"), (7, b"b", None)]}
    consumer, recovery, table = standby_consumer([fetch], seen=4, datadir=tmp_path)
    assert delivered(consumer, 1) == []  # none became a Faust message
    assert standby_copy(table) == {b"a": b"a5"}  # 3 was applied before; b written, then deleted
    assert recovery.standby_offsets[STANDBY] == 7
    assert table.data.persisted_offset(STANDBY) == 7  # where a takeover's recovery starts


def resting_standby(tmp_path: Path, *, highwater: int) -> tuple[CompatConsumer, Aiokafka, Any]:
    """A standby consumer whose one fetch ends at offset 7, with aiokafka's pauses recorded and 50 ms rests."""
    from aiokafka import TopicPartition

    fetch = {STANDBY: [(5, b"a", b"a5"), (6, b"b", b"b6"), (7, b"b", b"b7")]}
    consumer, _, table = standby_consumer([fetch, {}], seen=4, datadir=tmp_path)
    apply_kafka_compat(consumer.app, standby_pace=0.05)
    consumer.highwater = lambda tp: highwater  # type: ignore[method-assign]
    aio = Aiokafka({TopicPartition(tp.topic, tp.partition) for tp in EVENTS + CHANGELOG})
    thread = cast(Any, consumer._thread)
    thread._consumer = aio
    thread.thread_loop = aio
    return consumer, aio, table


def _paused_while_and_after_the_rest(consumer: CompatConsumer, aio: Aiokafka, during: Any = None) -> list[set[Any]]:
    async def scenario() -> list[set[Any]]:
        async for _ in consumer.getmany(timeout=0.01):
            pass
        seen = [set(aio.paused)]
        if during is not None:
            during()
        await asyncio.sleep(0.15)
        return [*seen, set(aio.paused)]

    return cast(list[set[Any]], run(scenario()))


def test_a_standby_partition_that_caught_up_rests_then_is_fetched_again(tmp_path: Path) -> None:
    """Each fetch names every partition it reads, and the broker's work grows with them: a standby copy that
    has applied its changelog's end is left out of fetches for a while, then read again."""
    consumer, aio, table = resting_standby(tmp_path, highwater=8)
    during, after = _paused_while_and_after_the_rest(consumer, aio)
    assert during == {STANDBY} and after == set()
    assert standby_copy(table) == {b"a": b"a5", b"b": b"b7"}


def test_a_standby_partition_behind_its_changelog_end_does_not_rest(tmp_path: Path) -> None:
    consumer, aio, _ = resting_standby(tmp_path, highwater=20)
    assert _paused_while_and_after_the_rest(consumer, aio) == [set(), set()]


def test_a_pause_by_faust_during_a_rest_outlasts_it(tmp_path: Path) -> None:
    """A rebalance pauses the partition while it rests: the rest's end must not resume what Faust paused."""
    consumer, aio, _ = resting_standby(tmp_path, highwater=8)
    during, after = _paused_while_and_after_the_rest(consumer, aio, lambda: consumer.pause_partitions([STANDBY]))
    assert during == {STANDBY} and after == {STANDBY}


def test_a_new_assignment_during_a_rest_leaves_the_partition_to_it(tmp_path: Path) -> None:
    consumer, aio, _ = resting_standby(tmp_path, highwater=8)

    def reassigned() -> None:
        aio.paused.clear()  # aiokafka's new assignment starts unpaused; Faust then pauses what it recovers
        consumer._bulk_epoch += 1  # what on_partitions_assigned moves on
        aio.paused.add(STANDBY)  # stands for Faust's recovery pausing it in aiokafka under the new assignment

    during, after = _paused_while_and_after_the_rest(consumer, aio, reassigned)
    assert during == {STANDBY} and after == {STANDBY}


def test_standby_records_of_tables_in_memory_stay_on_faust_path() -> None:
    """Faust's memory store keeps keys as the table's serializer decodes them: only its own path does that."""
    consumer, recovery, _ = standby_consumer([{STANDBY: [(5, b"a", b"a5")]}], seen=4, datadir=None)
    assert delivered(consumer, 1) == [5]
    assert recovery.standby_offsets[STANDBY] == 4


def test_a_standby_fetch_that_does_not_continue_the_applied_offset_stays_on_faust_path(tmp_path: Path) -> None:
    """A gap after the applied offset may be records the client dropped: Faust's own path decides."""
    consumer, recovery, table = standby_consumer([{STANDBY: [(6, b"a", b"a6")]}], seen=4, datadir=tmp_path)
    assert delivered(consumer, 1) == [6]
    assert standby_copy(table) == {}
    assert recovery.standby_offsets[STANDBY] == 4


def test_active_and_paused_changelog_partitions_stay_on_faust_path(tmp_path: Path) -> None:
    consumer, recovery, table = standby_consumer(
        [{CHANGELOG[0]: [(0, b"a", b"a0")]}, {STANDBY: [(5, b"b", b"b5")]}], seen=4, datadir=tmp_path
    )
    consumer.pause_partitions([STANDBY])
    assert delivered(consumer, 2) == [0]  # the active one is Faust's recovery's; the paused one Faust drops
    assert standby_copy(table) == {}
    assert recovery.standby_offsets[STANDBY] == 4


def test_records_faust_buffered_for_the_table_are_applied_before_newer_ones(tmp_path: Path) -> None:
    consumer, recovery, table = standby_consumer([{STANDBY: [(5, b"a", b"new")]}], seen=4, datadir=tmp_path)

    buffered = _ChangelogRecord(STANDBY, changelog_record(STANDBY, 4, b"a", b"older"))  # in Faust's buffer
    recovery.buffers[table].append(buffered)
    delivered(consumer, 1)
    assert standby_copy(table) == {b"a": b"new"}
    assert recovery.buffers[table] == []


def test_standbys_stay_on_faust_path_if_its_recovery_bookkeeping_changes() -> None:
    consumer, _ = consumer_of()
    recovery: Any = cast(Any, consumer.app.tables).recovery
    del recovery.standby_offsets
    assert not consumer.apply_standbys_in_bulk()


def test_the_consumer_thread_runs_on_a_coalescing_loop_that_mode_closes_when_the_thread_stops() -> None:
    """Plain and ``--embedded`` consumers alike. mode closes a thread's loop only if it made the loop itself: this
    pins the private flag that makes it close ours too (it fails if mode renames it, instead of a worker leaking
    an epoll descriptor per consumer thread)."""
    from mode.threads import ServiceThread

    from streams.kafka.embedded import shorten_fetch_wait
    from streams.kafka.thread_loop import CoalescingSelector

    for embedded in (False, True):
        app = faust.App("t-loop", **faust_settings_for("127.0.0.1:1", embedded=embedded), store="memory://")
        apply_kafka_compat(app)
        if embedded:
            shorten_fetch_wait(app)

        async def created(app: Any) -> Any:
            return app.consumer._thread

        thread = asyncio.run(created(app))
        try:
            assert isinstance(thread.thread_loop._selector, CoalescingSelector)
            assert thread._close_thread_loop_on_stop is True
        finally:
            thread.thread_loop.close()

    async def plain(loop: asyncio.AbstractEventLoop) -> bool:
        return bool(ServiceThread(thread_loop=loop)._close_thread_loop_on_stop)

    given = asyncio.new_event_loop()
    try:  # mode itself keeps a loop it was given open by this flag (an AttributeError if it is renamed)
        assert asyncio.run(plain(given)) is False
    finally:
        given.close()


class PausedAiokafka:
    """aiokafka's consumer as far as its public ``paused()`` goes."""

    def __init__(self, paused: set[Any]) -> None:
        self._paused = paused

    def paused(self) -> set[Any]:
        return self._paused


def test_faust_s_livelock_check_skips_only_the_changelog_partitions_paused_on_purpose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After 5 minutes Faust's check logged a false ERROR every 7 s for each recovered table's changelog
    partition, which remedy 5 never lets aiokafka fetch again (the soak of 2026-12-06 found it)."""
    from aiokafka import TopicPartition

    checked: list[TP] = []
    monkeypatch.setattr(
        faust_aiokafka.AIOKafkaConsumerThread, "verify_event_path", lambda self, now, tp: checked.append(tp)
    )
    consumer, _ = consumer_of()
    thread = cast(Any, consumer._thread)
    paused = {TopicPartition(tp.topic, tp.partition) for tp in (CHANGELOG[0], EVENTS[0])}
    thread._consumer = PausedAiokafka(paused)
    for tp in (*CHANGELOG, *EVENTS):
        thread.verify_event_path(0.0, tp)
    # the active changelog partition is skipped; the standby one and the stream partitions, paused or not, are checked
    assert checked == [CHANGELOG[1], EVENTS[0], EVENTS[1]]


def test_the_livelock_check_skips_a_standby_paused_in_aiokafka_only_while_it_rests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A standby partition Faust reads (active in its filter) but aiokafka has paused is a stalled copy, unless
    it rests (``CompatConsumer._rest``): the check must still see the first."""
    from aiokafka import TopicPartition

    checked: list[TP] = []
    monkeypatch.setattr(
        faust_aiokafka.AIOKafkaConsumerThread, "verify_event_path", lambda self, now, tp: checked.append(tp)
    )
    consumer, _ = consumer_of()
    consumer.resume_partitions([STANDBY])  # Faust reads the standby copy
    thread = cast(Any, consumer._thread)
    thread._consumer = PausedAiokafka({TopicPartition(STANDBY.topic, STANDBY.partition)})
    thread.verify_event_path(0.0, STANDBY)
    consumer._resting.add(STANDBY)
    thread.verify_event_path(0.0, STANDBY)
    assert checked == [STANDBY]


@pytest.mark.parametrize("pause_changelogs", [True, False])
def test_faust_resuming_a_resting_partition_ends_its_rest_at_once(tmp_path: Path, pause_changelogs: bool) -> None:
    consumer, aio, _ = resting_standby(tmp_path, highwater=8)
    apply_kafka_compat(consumer.app, standby_pace=0.05, pause_changelogs=pause_changelogs)
    right_after: list[set[Any]] = []

    def resumed() -> None:
        consumer.resume_partitions([STANDBY])
        right_after.append(set(aio.paused))

    during, after = _paused_while_and_after_the_rest(consumer, aio, resumed)
    assert during == {STANDBY} and right_after == [set()] and after == set()


def test_partition_ranges_keep_a_worker_s_start_up_line_short() -> None:
    tps = [("loopwatch.events", p) for p in (3, 0, 1, 2, 5, 7, 8, 9)] + [("signals", 0), ("loopwatch.events", 1)]
    assert partition_ranges(tps) == "loopwatch.events[0-3,5,7-9], signals[0]"
    assert partition_ranges([]) == ""


def _leave_at_generation_zero(instance_id: str | None) -> list[int]:
    """The generations a coordinator in generation 0 presents to aiokafka's leave, with the remedy installed."""
    from streams.kafka.compat import _leave_group_even_for_generation_zero

    seen: list[int] = []

    class Coordinator:
        group_id, member_id, generation, _group_instance_id = "g", "m-1", 0, instance_id

        async def _maybe_leave_group(self) -> None:
            seen.append(self.generation)

    class Consumer:
        _coordinator = Coordinator()

    assert _leave_group_even_for_generation_zero(cast(Any, Consumer()))
    run(Consumer._coordinator._maybe_leave_group())
    return seen


def test_a_static_member_is_not_presented_as_leaving(caplog: pytest.LogCaptureFixture) -> None:
    """aiokafka never sends LeaveGroup for a static member (its session outlives a restart on purpose); the
    generation-0 remedy leaves it so and says nothing, where it used to log a leave that never happened. (At
    debug: the worker's stop says it is stopping; a leave on every stop is no news at the default level.)"""
    caplog.set_level(logging.DEBUG, logger="streams.kafka.compat")
    assert _leave_at_generation_zero(None) == [1]
    assert [r.getMessage() for r in caplog.records] == ["leaving group g (generation 0, member m-1)"]
    caplog.clear()
    assert _leave_at_generation_zero("pod-0") == [0]
    assert caplog.records == []


def test_changelog_configs_are_the_ones_faust_would_create_its_changelogs_with() -> None:
    """The worker creates Faust's changelogs itself (so that they exist with the right partition counts before
    Faust looks), and Faust then skips them: their configs must be Faust's own, by its own rule. A change of that
    rule in faust-streaming shows here."""
    app = faust.App("cfg-test", broker="kafka://127.0.0.1:1")
    app.Table("plain", partitions=2)
    app.Table("windowed", default=dict, partitions=2).tumbling(300, expires=600)
    app.Table("kept", partitions=2, extra_topic_configs={"min.insync.replicas": 2})
    transport = faust_aiokafka.Transport(url=["kafka://127.0.0.1:1"], app=app)
    configs = changelog_configs(app)
    for table in app.tables.values():
        topic = table.changelog_topic
        retention = int(topic.retention * 1000.0) if topic.retention else None
        faust_config = {**transport._topic_config(retention, topic.compacting, topic.deleting), **(topic.config or {})}
        assert configs[topic.get_topic_name()] == {key: str(value) for key, value in faust_config.items()}
    assert configs == {
        "cfg-test-plain-changelog": {"cleanup.policy": "compact"},
        "cfg-test-windowed-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "600000"},
        "cfg-test-kept-changelog": {"cleanup.policy": "compact", "min.insync.replicas": "2"},
    }
