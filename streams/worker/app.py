"""The Faust worker: topics, the run table, the batching agent, the TTL sweep and the metrics.

Three tasks per worker (see :mod:`streams.worker.processing` for what is decided):

1. *intake*: with ``--delivery bulk`` (the default) the consumer's fetch loop hands whole gapless runs of
   records to :mod:`streams.worker.bulk`, skipping Faust's per-record message, event and stream work; with
   ``--delivery stream`` a *reader* iterates the agent's stream with acknowledgements off
   (``stream.noack()``) and queues events;
2. *processor*: takes whatever has queued up (at least one event, at most ``max_batch``; under load, while
   fewer than ``LINGER_ENOUGH`` wait, it lets the queue fill for up to ``batch_linger`` first), so batches
   grow with load and cost no waiting at low load. While it keeps up, a bulk batch holds only about
   ``batch_budget`` seconds of work (:func:`_batch_limit`): a batch's verdicts wait for all of it.
   Per run it reads the state once and computes the new one (kept, decoded, in a pending overlay until
   stored), then it *sends* the batch's verdicts, their storm signals (:mod:`streams.worker.storms`) and
   its dead letters and moves on to the next batch;
3. *acker*, batch after batch in order: once the broker confirmed all of a batch's verdicts, signals and
   dead letters, it writes the batch's states to the table and sends their changelog records (each "as" the run's
   own source event, so the RocksDB partition database and the changelog partition are the source partition's:
   co-partitioning); its *confirmer*, in the same order, waits until those are confirmed too, then
   acknowledges the batch's events (bulk: reports each partition's position to the consumer, which Faust's
   commit loop commits). The two stages overlap one batch's changelog round trip with the next one's verdicts.
   A store step gathers the batches processed within a short window (bulk delivery; stream delivery only
   while the processor is behind) and writes each run once, encoded once, with its newest state, as one
   larger batch would: a run touched by several batches costs one state write per step, not one per batch.

Why this order is correct on any Kafka, without transactions: Faust commits only acknowledged offsets, so an
event is never committed before its state, verdicts and dead letter are durable. A stored state is written
only after its verdicts were confirmed, so a redelivered event that the stored state already covers needs
nothing re-published; an event whose state was not stored is applied again, from the same earlier state, and
produces the same verdicts (same ``verdict_id``, same bytes). Any error before acknowledgement ends the
process (no acknowledgement, no commit): the next owner gets the events again. A revocation first waits for
every batch in flight (stream: Faust waits for unacknowledged events; bulk: :class:`BulkIntake` waits for
begun batches), and a state is written only while the worker surely still owns its partition (a frozen worker
whose session expired may not know it has lost it: :mod:`streams.kafka.lease`), so no state of a partition is
written after its next owner may have started. Nothing here
depends on the embedded broker, apart from the remedies of :mod:`streams.kafka.compat` and
:mod:`streams.kafka.embedded`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, cast

import faust
from aiokafka.errors import KafkaError
from faust.exceptions import ConsistencyError
from faust.types import TP

from streams.config_file import LoadedConfig
from streams.errors import EXIT_FATAL, EXIT_UNAVAILABLE
from streams.kafka.compat import (
    CompatConsumer,
    apply_kafka_compat,
    changelog_configs,
    faust_settings_for,
    required_topics,
)
from streams.kafka.embedded import shorten_fetch_wait
from streams.kafka.lease import OwnershipLost
from streams.limits import MAX_RECORD_REQUEST
from streams.topics import RUN_TABLE, topic_configs
from streams.worker import expiry
from streams.worker.bulk import BulkIntake, Chunk, Taken
from streams.worker.deadletter import DeadLetterPolicy
from streams.worker.envelope import StoredRun
from streams.worker.event_context import as_current_event, source_partition
from streams.worker.metrics import WorkerMetrics, sample_loop_lag
from streams.worker.offsets import Jump, OffsetTracker, Step
from streams.worker.processing import (
    DeadLetter,
    InputRecord,
    Publication,
    RunProcessor,
    StateWrite,
    newest_states,
    plan_batch,
)
from streams.worker.settings import DEFAULT_WEB_PORT, LINGER_ENOUGH, WorkerSettings
from streams.worker.storms import StormWatch
from streams.worker.topics import raw_topic

log = logging.getLogger(__name__)

_TOPICS_LOST = "the cluster lost the worker's topics"
_TOPICS_LOST_HINT = (
    "the broker was restarted with empty storage or the topics were deleted; start the worker again: it creates "
    "them and rebuilds its state from what the cluster holds"
)


def _topics_lost_line(which: str) -> str:
    """The worker's one line when the cluster lost its topics (found by the topic check or by Faust's recovery)."""
    return f"loopwatch worker: {_TOPICS_LOST} ({which}): {_TOPICS_LOST_HINT}"


_SWEEP_CHUNK = 200  # keys per lock hold: the sweep must not stall event processing for long
_STORE_CHUNK = 32  # runs a store step encodes and writes per lock hold, about 2 ms (see _store)
_CHECK_EVERY = 30  # sweeps between full reads of the store that check the expiry index (5 min by default)
_MAX_FETCH_BYTES = 4 * 1024 * 1024  # above the 1 MiB event limit, so oversized records still arrive
_MAX_IN_FLIGHT = 8
# Records the bulk intake holds before the events partitions stop being fetched: at least 4 batches, and enough
# work (about half a second) to cover the fetch that follows the resume, which re-reads what aiokafka dropped
# when they were paused (about 0.25 s on the embedded broker while the worker is busy).
_INTAKE_MIN = 8000
_STEP_BATCHES = 4  # a store step holds up to this many full batches' events, each run stored once (see _ack)
_STEP_WINDOW = 0.2  # seconds a store step gathers processed batches for (only the state writes and commit wait)
_STEP_IDLE = 0.05  # ...but it stops once no batch came for this long: the traffic paused (see _gathering)
_STEP_POLL = 0.02  # seconds between looks at the processed batches and the intake, while a step waits
_MIN_BATCH = 20  # records a budgeted batch holds at least, so its per-batch work stays a small share
_COST_WEIGHT = 0.2  # weight of the newest batch in the processor's smoothed cost per record
_GC_YOUNG = 200_000  # net allocations between young-generation collections (Python's default: 700; _run_agent)


class _ReaderStopped:
    """Queued by the reader task when the stream iteration ends or fails."""

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


@dataclass(slots=True)
class _InFlight:
    """A processed batch on its way to being stored and acknowledged."""

    size: int  # events in the batch
    sent: Any  # future: confirmation of the verdicts and dead letters
    writes: list[StateWrite]
    publications: list[Publication] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    applied_types: list[str] = field(default_factory=list)
    redelivered: int = 0
    duplicates: int = 0
    next_offsets: dict[int, int] = field(default_factory=dict)
    events: Sequence[Any] = ()  # stream delivery: the Faust events to acknowledge
    positions: dict[Any, int] = field(default_factory=dict)  # bulk delivery: partition -> next offset
    epoch: int = 0  # bulk delivery: the consumer's delivery epoch the batch was taken in
    now_ms: int = 0  # processing time of the batch: its states' last_seen_ms
    confirmed_at: float = 0.0  # wall time its verdicts were confirmed (the latency metric ends there)
    busy: float = 0.0  # seconds the processor spent applying it and sending its records (not waiting for the lock)


class LoopwatchWorker:
    """One worker process: builds the Faust app and runs it."""

    def __init__(
        self,
        settings: WorkerSettings,
        config: LoadedConfig,
        metrics: WorkerMetrics,
        *,
        fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        policy = DeadLetterPolicy(settings.dead_letter_original, settings.dead_letter_max_original)
        self.processor = RunProcessor(config, cache_size=settings.state_cache_runs, dead_letter_policy=policy)
        metrics.read_state_decodes(lambda: self.processor.decodes)
        self._fatal_handler = fatal or _exit_now
        self._lost_handler = _exit_topics_lost
        self._lock = asyncio.Lock()
        self._agent_starts = 0
        self._pending_states: dict[bytes, StoredRun] = {}  # computed, not yet stored (not even encoded)
        self._next_offsets: dict[int, int] = {}
        self._lag_partitions: set[int] = set()
        self._offsets = OffsetTracker()
        self._sources: dict[int, Any] = {}  # partition -> stand-in current event (bulk delivery)
        self._intake = BulkIntake(max(settings.max_batch * 4, _INTAKE_MIN), on_revoked=self._offsets.forget)
        self._expiry = expiry.ExpiryIndex()
        self._expiry_partitions: set[int] = set()
        self._sweeps = 0
        client_id = f"loopwatch-{settings.worker_id}" if settings.worker_id else "loopwatch"
        app = faust.App(
            settings.group,
            **faust_settings_for(
                settings.bootstrap,
                embedded=bool(settings.embedded),
                security=settings.security,
                group_instance_id=settings.group_instance_id,
            ),
            store="rocksdb://" if settings.store == "rocksdb" else "memory://",
            datadir=settings.data_dir,
            topic_partitions=settings.partitions,
            table_standby_replicas=settings.standby_replicas,
            broker_client_id=client_id,
            consumer_max_fetch_size=_MAX_FETCH_BYTES,
            producer_max_request_size=MAX_RECORD_REQUEST,  # what MAX_STATE_BYTES leaves room in (streams.limits)
            web_bind=settings.web_host,
            web_host=settings.web_host,
            web_port=settings.web_port or DEFAULT_WEB_PORT,  # 0: no web server (Faust requires a valid port)
            web_enabled=settings.web_port != 0,
            autodiscover=False,
        )
        apply_kafka_compat(app)
        self.bulk = settings.delivery == "bulk"
        if settings.embedded:
            shorten_fetch_wait(app)
        self.app = app
        self.events_topic = raw_topic(app, settings.events_topic, settings.partitions)
        self.table = app.Table(
            RUN_TABLE,
            key_type=bytes,
            value_type=bytes,
            partitions=settings.partitions,
            options=settings.table_options(),
            help="Per-run loop-detection state (stored-run envelopes keyed by scope key)",
        )
        self.changelog_topic = settings.changelog_topic
        app.agent(self.events_topic, name="loopwatch.detect", concurrency=1)(self._make_agent())
        app.timer(settings.effective_sweep_interval, name="loopwatch.sweep")(self._make_sweep())
        app.task(self._sample_loop_lag, traced=False)
        app.task(self._watch_topics, traced=False)
        # Faust writes recovered states into the store past the worker: the index is rebuilt after each change.
        app.on_partitions_revoked.connect(self._store_changed_behind)
        app.on_partitions_assigned.connect(self._store_changed_behind)
        self.storms = StormWatch(app, settings, metrics, owning=self._owning)
        consumer = cast(CompatConsumer, app.consumer)
        self._lease = consumer.lease
        metrics.read_consumer_rereads(lambda: consumer.rereads)
        if self.bulk:  # the agent keeps the topic subscribed; its stream stays empty
            consumer.deliver_in_bulk(settings.events_topic, self._intake)
            self.storms.count_in_bulk(consumer, self._take_admitted, self._fatal)
            consumer.apply_standbys_in_bulk()  # a peer's changelog, one store write per fetch

    # --- topics ------------------------------------------------------------------------------------------

    def required_topics(self) -> dict[str, int]:
        """Every topic with its partition count: events, verdicts, dead letters, changelog, leader topic."""
        n = self.settings.partitions
        topics = required_topics(
            self.app,
            {
                self.settings.events_topic: n,
                self.settings.verdicts_topic: n,
                self.settings.dead_letter_topic: n,
                **self.storms.topics,
            },
        )
        if topics.get(self.changelog_topic) != n:
            raise RuntimeError(f"changelog topic {self.changelog_topic} must have {n} partitions")
        return topics

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """The configs the worker creates its topics with: Faust's for the changelogs, then what loopwatch adds
        (:func:`streams.topics.topic_configs`). The deploy scripts create the same (tests/deploy/topics.py)."""
        configs = changelog_configs(self.app)
        added = topic_configs(run_changelog=self.changelog_topic, dead_letter=self.settings.dead_letter_topic)
        for name, config in added.items():
            configs[name] = {**configs.get(name, {}), **config}
        return configs

    def local_tables(self) -> tuple[Path, dict[str, str]]:
        """Where the tables' RocksDB databases live, and each table's changelog topic by table name."""
        changelogs = {name: table.changelog_topic.get_topic_name() for name, table in self.app.tables.items()}
        return Path(self.app.conf.tabledir), changelogs

    # --- the agent ---------------------------------------------------------------------------------------

    def _make_agent(self) -> Callable[[Any], Any]:
        async def detect(stream: Any) -> None:
            await self._run_agent(stream)

        return detect

    async def _run_agent(self, stream: Any) -> None:
        self._agent_starts += 1
        if self._agent_starts > 1:
            if self.app.should_stop:
                return
            # A restarted actor would resume after events the previous one held unacknowledged, applying
            # later events before earlier ones. Only a new process (redelivery from the commit) is safe.
            self._fatal(RuntimeError("the detection agent was restarted in-process"))
            return
        # Everything alive now (modules, Faust's and aiokafka's services) lives as long as the process: keep
        # it out of the cyclic garbage collector's full passes, which otherwise pause the loop for ~70 ms.
        gc.collect()
        gc.freeze()
        # A batch allocates tens of container objects per event: at the default 700 the young generation was
        # collected hundreds of times a second, and a full pass (7-37 ms) came every half second at 10,000
        # events/s. A young pass walks every container still alive since the last one (the batches in
        # flight), 6-18 ms per pass, and found no garbage here. Cycles are rare, so they wait for growth
        # beyond what batches in flight hold (docs/performance.md, "The young collections").
        gc.set_threshold(_GC_YOUNG, *gc.get_threshold()[1:])
        if self.bulk:
            await self._run_bulk()
            return
        manual = stream.noack()
        events: asyncio.Queue[Any] = asyncio.Queue(maxsize=self.settings.max_batch * 4)
        pending: asyncio.Queue[_InFlight] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)
        reader = asyncio.ensure_future(self._read(manual, events))

        async def acknowledge(flight: _InFlight) -> None:
            for event in flight.events:
                await manual.ack(event)

        # Revocations wait for unacknowledged events here: a step gathers only while the processor is behind.
        acker = asyncio.ensure_future(self._ack(pending, acknowledge, lambda _: not events.empty()))
        max_batch = self.settings.max_batch
        linger = self.settings.batch_linger
        last_size = 0
        try:
            while True:
                item = await events.get()
                if isinstance(item, _ReaderStopped):
                    if item.error is not None:
                        self._fatal(item.error)
                    return
                # The bulk path's rule; the queue does not say how long its events have waited, so the whole linger.
                left = _linger_left(linger, 0.0, events.qsize() + 1, min(max_batch, LINGER_ENOUGH), last_size)
                if left > 0:
                    await asyncio.sleep(left)
                batch = [item]
                while len(batch) < max_batch and not events.empty():
                    nxt = events.get_nowait()
                    if isinstance(nxt, _ReaderStopped):
                        events.put_nowait(nxt)  # handle it after this batch
                        break
                    batch.append(nxt)
                last_size = len(batch)
                self.metrics.observe_batch_wait((event.message.timestamp for event in batch), 1.0, time.time())
                try:
                    records = [
                        InputRecord(m.topic, m.partition, m.offset, m.key, m.value) for m in (e.message for e in batch)
                    ]
                    flight = await self._process(records, batch.__getitem__)
                    if flight is not None:
                        flight.events = batch
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._fatal(exc)
                    return
                if flight is None:
                    return  # shutting down: leave the batch unacknowledged
                await pending.put(flight)
        finally:
            reader.cancel()
            acker.cancel()

    async def _read(self, stream: Any, queue: asyncio.Queue[Any]) -> None:
        """Queue the events of the stream that :mod:`streams.worker.offsets` lets apply; re-read after a jump."""
        error: BaseException | None = None
        tracker = self._offsets
        consumer = cast(CompatConsumer, self.app.consumer)
        try:
            async for event in stream.events():
                message = event.message
                if not tracker.knows(message.partition, message.generation_id):
                    tracker.start(message.partition, message.generation_id, await _committed(consumer, message.tp))
                step = tracker.observe(message.partition, message.offset)
                if step is Step.APPLY:
                    await queue.put(event)
                    continue
                consumer.discard(message)
                if isinstance(step, Jump):
                    await self._reread(consumer, message.tp, message.offset, step, tracker)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = exc
        await queue.put(_ReaderStopped(error))

    async def _reread(
        self,
        consumer: CompatConsumer,
        tp: Any,
        offset: int,
        jump: Jump,
        tracker: OffsetTracker,
        epoch: int | None = None,
    ) -> None:
        """Re-read ``tp`` from the first skipped offset; not if a rebalance came meanwhile (``epoch``: the bulk
        epoch the records were taken in, else now). Its seek to the committed offset re-reads what was not
        applied; the old seek would land past records applied but not committed, and set the offset check off
        again."""
        if epoch is None:
            epoch = consumer.bulk_epoch
        target = max(jump.first, await _earliest(consumer, tp))
        if consumer.bulk_epoch != epoch:
            return  # the tracker forgot the partition: it starts again from the commit
        self.metrics.skipped_offsets.inc(jump.count)
        if target > jump.first:
            log.warning(
                "%s[%d]: offsets %d..%d were deleted by retention before they were applied",
                tp.topic, tp.partition, jump.first, target - 1,
            )  # fmt: skip
            tracker.reread_from(tp.partition, target)
        log.warning(
            "%s[%d]: offsets %d..%d were never delivered before offset %d: not applied, re-reading from %d",
            tp.topic, tp.partition, jump.first, jump.last, offset, target,
        )  # fmt: skip
        await consumer.rewind(tp, target)

    async def _ack(
        self,
        pending: asyncio.Queue[_InFlight],
        acknowledge: Callable[[_InFlight], Awaitable[None]],
        gather: Callable[[_InFlight], bool],
    ) -> None:
        """Per store step, in order: verdicts confirmed -> states stored, changelog sent. The confirmer then, in
        order: changelog confirmed -> each batch acknowledged. Two stages, so one step's changelog round trip
        overlaps the next step's verdict round trip instead of adding to it.

        A step takes the batches already waiting behind the first, up to ``_STEP_BATCHES`` full batches' events
        (a drain's 4 batches; more of live traffic's smaller ones), and stores each run once, with its newest
        state, as one larger batch would have. While ``gather(first)`` holds, it also waits up to
        ``_STEP_WINDOW`` after the first batch for the batches still to come, as long as they keep coming
        (:func:`_gathering`): the verdicts are sent already, only the states and the commit wait, and a run
        that several of the step's batches touched is encoded and written once. Live traffic touches most
        active runs in every batch, so this is what keeps its state writes per event near a drain's. A batch is
        still acknowledged only after every state it computed is stored (its own, or a newer one of the same
        run), in batch order. A revocation stops the waiting within
        ``_STEP_POLL`` (``gather`` no longer holds), and so does a shutdown: the embedded broker's group that
        never forms again (docs/embedded-broker.md) is sensitive to when a stopping worker leaves.
        """
        stored: asyncio.Queue[tuple[list[_InFlight], Any, list[int]]] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)
        step_events = _STEP_BATCHES * self.settings.max_batch
        confirmer = asyncio.ensure_future(self._confirm(stored, acknowledge))
        try:
            while True:
                flights = [await pending.get()]
                events = flights[0].size
                first = last = time.monotonic()
                while events < step_events:
                    if not pending.empty():
                        flights.append(pending.get_nowait())
                        events += flights[-1].size
                        last = time.monotonic()
                    elif gather(flights[0]) and not self.app.should_stop and _gathering(time.monotonic(), first, last):
                        await asyncio.sleep(_STEP_POLL)  # a stopping worker stores at once: it leaves sooner
                    else:
                        break
                try:
                    for flight in flights:
                        await flight.sent
                    step = await self._store(flights)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._fatal(exc)
                    return
                if step is None:
                    self._intake.stop()
                    return  # shutting down: leave the rest unacknowledged, it is redelivered
                await stored.put((flights, *step))
        finally:
            confirmer.cancel()

    async def _confirm(
        self,
        stored: asyncio.Queue[tuple[list[_InFlight], Any, list[int]]],
        acknowledge: Callable[[_InFlight], Awaitable[None]],
    ) -> None:
        """Acknowledge the batches of each store step once its changelog records are confirmed, in batch order."""
        while True:
            flights, changelog, partitions = await stored.get()
            try:
                metas = await changelog
                if not self.table.should_stop:  # a closed RocksDB store would be reopened
                    self._note_persisted(partitions, metas)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a confirmer that died quietly would leave every later batch unsettled
                self._fatal(exc)
                return
            for flight in flights:
                await acknowledge(flight)  # durable in the changelog: acknowledged even while stopping
                self._count(flight)

    # --- bulk delivery -----------------------------------------------------------------------------------

    async def _run_bulk(self) -> None:
        """The processor for records the consumer hands over in bulk (:mod:`streams.worker.bulk`)."""
        consumer = cast(CompatConsumer, self.app.consumer)
        intake = self._intake
        pending: asyncio.Queue[_InFlight] = asyncio.Queue(maxsize=_MAX_IN_FLIGHT)

        async def acknowledge(flight: _InFlight) -> None:
            for tp, offset in flight.positions.items():
                consumer.advance(tp, offset, flight.epoch)
            intake.settle()

        # A step gathers until a revocation (a new delivery epoch) or its window ends.
        acker = asyncio.ensure_future(self._ack(pending, acknowledge, lambda first: consumer.bulk_epoch == first.epoch))
        max_batch = self.settings.max_batch
        linger = self.settings.batch_linger
        budget = self.settings.batch_budget
        last_size = 0
        per_event = 0.0  # seconds of processing per record, smoothed over recent batches (0: not measured yet)
        try:
            while True:
                await intake.wait()
                limit = _batch_limit(max_batch, intake.waiting(), budget, per_event)
                enough = min(limit, LINGER_ENOUGH)
                left = _linger_left(linger, intake.waited(), intake.waiting(), enough, last_size)
                if left > 0:
                    await intake.fill(enough, left)  # let a growing batch fill
                    limit = _batch_limit(max_batch, intake.waiting(), budget, per_event)
                try:
                    taken = await self._take_admitted(consumer, intake, limit, self._offsets)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._fatal(exc)
                    return
                if taken is None:
                    continue
                epoch, records, positions = taken.epoch, taken.records, taken.positions
                last_size = len(records)
                intake.begin()  # no await between the epoch check and here: a revocation now waits for it
                self.metrics.observe_batch_wait(
                    (chunk.records[0].timestamp for chunk in taken.chunks), 0.001, time.time()
                )
                try:
                    flight = await self._process(records, partial(self._source_of, records))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    self._fatal(exc)
                    return
                if flight is None:
                    intake.settle()
                    intake.stop()
                    return  # shutting down: nothing acknowledged
                flight.positions = positions
                flight.epoch = epoch
                per_event = _smoothed(per_event, flight.busy / len(records))
                await pending.put(flight)
                # Nothing above waits while records are queued, so without this the processor would run batch
                # after batch until ``pending`` is full: the fetch loop (the storm-count agent's topic), the
                # producer's sender and the acker get the loop between batches instead.
                await asyncio.sleep(0)
        finally:
            acker.cancel()

    async def _take_admitted(
        self, consumer: CompatConsumer, intake: BulkIntake, limit: int, tracker: OffsetTracker
    ) -> Taken | None:
        """Take up to ``limit`` queued records and admit them (:meth:`_admit`): the events topic's, and the storm
        signals' (:meth:`StormWatch.count_in_bulk`). None when nothing may be applied: none admitted, or a
        revocation came meanwhile (its next owner, maybe this worker again, re-reads the records). Returns with
        no await after its epoch check, so a caller that begins the batch at once is seen by a revocation."""
        epoch = consumer.bulk_epoch
        chunks = intake.take(limit)
        records, positions = await self._admit(consumer, chunks, epoch, tracker)
        if not records or consumer.bulk_epoch != epoch:
            return None
        return Taken(epoch, chunks, records, positions)

    async def _admit(
        self, consumer: CompatConsumer, chunks: list[Chunk], epoch: int, tracker: OffsetTracker
    ) -> tuple[list[InputRecord], dict[Any, int]]:
        """The records ``tracker`` (:mod:`streams.worker.offsets`) lets apply, and each partition's next offset
        after them."""
        records: list[InputRecord] = []
        positions: dict[Any, int] = {}
        for chunk in chunks:
            if consumer.bulk_epoch != epoch:
                return [], {}  # a revocation: nothing of this take may be applied
            if chunk.epoch != epoch:
                continue  # taken before the last revocation (the tracker forgot its partitions since)
            tp = chunk.tp
            partition = tp.partition
            if not tracker.knows(partition, chunk.generation):
                committed = await _committed(consumer, tp)
                if consumer.bulk_epoch != epoch:
                    return [], {}
                tracker.start(partition, chunk.generation, committed)
            if tracker.take_run(partition, [rec.offset for rec in chunk.records]):
                records += [InputRecord(rec.topic, partition, rec.offset, rec.key, rec.value) for rec in chunk.records]
                positions[tp] = chunk.records[-1].offset + 1
                continue
            observe = tracker.observe
            for rec in chunk.records:
                step = observe(partition, rec.offset)
                if step is Step.APPLY:
                    records.append(InputRecord(rec.topic, partition, rec.offset, rec.key, rec.value))
                    positions[tp] = rec.offset + 1
                elif isinstance(step, Jump):
                    await self._reread(consumer, tp, rec.offset, step, tracker, epoch)
                    break  # the rest waits for the re-read
        return records, positions

    def _source_of(self, records: Sequence[InputRecord], index: int) -> Any:
        return self._source(records[index])  # asked per run, not per record

    def _source(self, record: InputRecord) -> Any:
        """The stand-in current event of a bulk record's partition (see :mod:`streams.worker.event_context`)."""
        source = self._sources.get(record.partition)
        if source is None:
            source = self._sources[record.partition] = source_partition(record.topic, record.partition)
        return source

    async def _store(self, flights: Sequence[_InFlight]) -> tuple[Any, list[int]] | None:
        """Write confirmed batches' newest state of each run to the table and send its changelog record; returns
        the future of the changelog confirmations and their partitions, or None once the table is shutting
        down.

        A step stores a few hundred runs live, about 10 ms of encoding and writing: it holds the lock for
        ``_STORE_CHUNK`` runs at a time, so a batch whose events are waiting goes between two chunks instead
        of after the whole step (only these states and the commit wait for the step). Each run's write and
        its overlay entry change together under the lock, so a batch reads either this state or a newer one.
        """
        newest = list(newest_states((flight.now_ms, flight.writes) for flight in flights).values())
        futures: list[Any] = []
        partitions: list[int] = []
        pending = self._pending_states
        wrote = self._expiry.wrote
        encode = self.processor.encode
        send = self.app.producer.send
        changelog = self.changelog_topic
        for start in range(0, len(newest), _STORE_CHUNK):
            if start:
                await asyncio.sleep(0)  # a batch waiting for the lock takes it now
            if not await self._owning():
                return None  # stopping, ownership unconfirmed: nothing more is stored, the rest is redelivered
            async with self._lock:
                if self.table.should_stop:
                    return None
                data = self.table.data
                for (key, run, partition, event), now_ms in newest[start : start + _STORE_CHUNK]:
                    value = encode(key, run)
                    with as_current_event(event):
                        data[key] = value
                    wrote(key, now_ms, len(key) + len(value))
                    if pending.get(key) is run:  # no later batch has a newer state for this run
                        del pending[key]
                    futures.append(await send(changelog, key, value, partition, None, None))
                    partitions.append(partition)
        return asyncio.gather(*futures), partitions

    async def _process(self, records: list[InputRecord], source: Callable[[int], Any]) -> _InFlight | None:
        """Apply one batch and send its verdicts and dead letters; the acker does the rest.

        ``source(i)`` is the event the table treats as current for record ``i`` (its partition). Returns None,
        touching nothing, once the table is shutting down: the events stay unacknowledged and are redelivered.
        A run's state is read from the pending overlay first (a batch still in flight may have a newer state
        than the table).
        """
        if self.table.should_stop:
            return None
        started = time.monotonic()
        now_ms = int(time.time() * 1000)
        next_offsets = {rec.partition: rec.offset + 1 for rec in records}
        plan = plan_batch(records, now_ms, self.processor.dead_letter_policy)
        data = self.table.data
        pending = self._pending_states
        apply = self.processor.apply
        writes: list[StateWrite] = []
        publications: list[Publication] = []
        applied_types: list[str] = []
        redelivered = duplicates = 0
        locking = time.monotonic()
        async with self._lock:
            started += time.monotonic() - locking  # waiting for the acker or the sweep is not processing
            for group in plan.groups.values():
                key = group.key
                stored: StoredRun | bytes | None = pending.get(key)
                if stored is None:
                    with as_current_event(source(group.indexes[0])):
                        stored = data.get(key)
                result = apply(group, records, stored, now_ms)
                if result.run is not None:
                    pending[key] = result.run
                    writes.append((key, result.run, result.partition, source(group.indexes[-1])))
                publications.extend(result.publications)
                if result.dead_letters:
                    plan.dead_letters.extend(result.dead_letters)
                applied_types.extend(result.applied_types)
                redelivered += result.redelivered
                duplicates += result.duplicates
            send = self.app.producer.send
            verdicts = self.settings.verdicts_topic
            dead_topic = self.settings.dead_letter_topic
            futures = [await send(verdicts, p.key, p.value, None, None, None) for p in publications]
            futures += [await send(dead_topic, d.key, d.value, None, None, None) for d in plan.dead_letters]
            if publications and self.storms.config.enabled:  # confirmed with the verdicts, before any commit
                signals_topic = self.settings.storm_signals_topic
                signals_of = self.storms.signals_of
                written = now_ms / 1000
                for p in publications:
                    if p.verdict is not None:
                        for key, value in signals_of(p.verdict, written):
                            futures.append(await send(signals_topic, key, value, None, None, None))
        flight = _InFlight(
            size=len(records),
            sent=asyncio.gather(*futures),
            writes=writes,
            publications=publications,
            dead_letters=plan.dead_letters,
            applied_types=applied_types,
            redelivered=redelivered,
            duplicates=duplicates,
            next_offsets=next_offsets,
            now_ms=now_ms,
            busy=time.monotonic() - started,
        )
        flight.sent.add_done_callback(partial(_note_confirmed, flight))
        return flight

    def _count(self, flight: _InFlight) -> None:
        """Metrics of a confirmed batch."""
        confirmed = flight.confirmed_at or time.time()
        metrics = self.metrics
        for event_type in flight.applied_types:
            metrics.count_event(event_type)
        for dead in flight.dead_letters:
            metrics.count_invalid(dead.reason)
        if flight.redelivered:
            metrics.redelivered.inc(flight.redelivered)
        if flight.duplicates:
            metrics.duplicates.inc(flight.duplicates)
        for pub in flight.publications:
            metrics.count_verdict(pub.decision, pub.detector)
            metrics.count_loop_cost(pub.decision, pub.detector, pub.cost)
            if pub.event_ts_ms is not None:
                metrics.latency.observe(max(0.0, confirmed - pub.event_ts_ms / 1000.0))
        metrics.batch_events.observe(flight.size)
        self._next_offsets.update(flight.next_offsets)

    def _note_persisted(self, partitions: Sequence[int], metas: Sequence[Any]) -> None:
        """Tell a RocksDB store how far its changelog partitions are confirmed (recovery resumes there)."""
        newest: dict[int, int] = {}
        for partition, meta in zip(partitions, metas, strict=True):
            offset = getattr(meta, "offset", None)
            if isinstance(offset, int) and offset > newest.get(partition, -1):
                newest[partition] = offset
        store: Any = self.table.data
        for partition, offset in newest.items():
            store.set_persisted_offset(TP(self.changelog_topic, partition), offset)

    # --- TTL sweep, state gauges and lag -----------------------------------------------------------------

    async def _sample_loop_lag(self) -> None:
        await sample_loop_lag(self.metrics.loop_lag.observe)

    async def _watch_topics(self) -> None:
        """Every ``_TOPIC_CHECK_EVERY`` seconds, whether the cluster still has the topics the worker made at start.

        A restarted embedded broker (or topics deleted under a running worker) left it consuming a new events
        topic and publishing nowhere: verdicts lost while it looked healthy, a stop that hung on sends to topics
        that no longer exist, and Faust's topics recreated with the broker's default partition count. Once any
        is gone or has another partition count, the worker ends with one line and exit status 3; started again,
        it creates them and rebuilds its state (:mod:`streams.worker.local_state`). A cluster that does not
        answer is not judged: that is Kafka away, which the worker waits out.
        """
        from streams.kafka.client import partition_counts
        from streams.worker.startup import lost_topics

        mine = self.required_topics()
        expected: dict[str, int] | None = None  # as the cluster first lists them: an output topic may differ
        while not self.app.should_stop:
            try:
                present = await partition_counts(
                    self.settings.bootstrap, timeout=_TOPIC_CHECK_EVERY, security=self.settings.security
                )
            except Exception:  # unreachable or slow: not a verdict on the topics
                present = None
            if present is not None and expected is None:
                expected = {name: present[name] for name in mine if name in present}
            elif present is not None and expected is not None:
                lost = lost_topics(expected, present)
                if lost:
                    self._lost_handler(lost)
                    return
            await asyncio.sleep(_TOPIC_CHECK_EVERY)

    def _make_sweep(self) -> Callable[[], Any]:
        async def sweep() -> None:
            try:
                await self.sweep()
            except asyncio.CancelledError:
                raise
            except OwnershipLost as exc:  # deletes no more than states: another member may own them now
                self._fatal(exc)
            except Exception:
                log.exception("state sweep failed; retrying at the next interval")

        return sweep

    def _active_partitions(self) -> set[int]:
        topic = self.settings.events_topic
        return {tp.partition for tp in self.app.assignor.assigned_actives() if tp.topic == topic}

    def _store_changed_behind(self, *_: Any, **__: Any) -> None:
        self._expiry.invalidate()

    async def sweep(self) -> None:
        """Expire idle runs of owned partitions (delete + changelog tombstone) and refresh the gauges.

        The expiry index names the runs past the TTL; a full read of the store rebuilds it after a rebalance and
        checks it every ``_CHECK_EVERY`` sweeps (a disagreement is logged, counted and repaired).
        """
        app = self.app
        if app.rebalancing or app.in_recovery or app.should_stop:
            return
        active = self._active_partitions()
        index = self._expiry
        if active != self._expiry_partitions:
            index.invalidate()
            self._expiry_partitions = active
        self._sweeps += 1
        ttl_ms = int(self.settings.state_ttl * 1000)
        if index.valid and self._sweeps % _CHECK_EVERY:
            expired = await self._expire(index.due(now_ms=int(time.time() * 1000), ttl_ms=ttl_ms), ttl_ms)
        else:
            expired = await self._sweep_store(active, ttl_ms)
        if expired is None:
            return  # a rebalance or a shutdown began
        if expired:
            self.metrics.expired.inc(expired)
            log.info("expired %d idle runs (TTL %.0fs)", expired, self.settings.state_ttl)
        if index.valid:
            self.metrics.active_runs.set(index.runs)
            self.metrics.state_bytes.set(index.stored_bytes)
        self._update_lag(active)

    async def _expire(self, due: Sequence[bytes], ttl_ms: int) -> int | None:
        """Delete the runs of ``due`` still idle in the store; the number deleted, None if interrupted."""
        expired = 0
        for start in range(0, len(due), _SWEEP_CHUNK):
            sends = await self._expire_chunk(due[start : start + _SWEEP_CHUNK], ttl_ms)
            if sends is None:
                return None
            # The tombstones are queued in order behind every earlier changelog record of their partitions,
            # and a resumed run's next state is queued behind its tombstone: waiting for the broker's
            # confirmation outside the lock keeps batches from waiting for it.
            if sends:
                await asyncio.gather(*sends)
            expired += len(sends)
            await asyncio.sleep(0)
        return expired

    async def _expire_chunk(self, keys: Sequence[bytes], ttl_ms: int) -> list[Any] | None:
        app = self.app
        data = self.table.data
        index = self._expiry
        sends = []
        if not await self._owning():
            return None
        async with self._lock:
            if app.rebalancing or app.in_recovery or app.should_stop:
                return None
            now_ms = int(time.time() * 1000)
            for key in keys:
                if key in self._pending_states:
                    continue  # a batch in flight has a new state for it
                raw = data.get(key)
                if raw is None:
                    index.removed(key)
                    continue
                partition = expiry.expired_partition(raw, now_ms=now_ms, ttl_ms=ttl_ms)
                if partition is None:
                    continue
                if partition not in self._expiry_partitions:  # a standby copy: its owner expires it
                    index.removed(key)
                    continue
                del data[key]
                index.removed(key)
                self.processor.forget(key)
                sends.append(await app.producer.send(self.changelog_topic, key, None, partition, None, None))
        return sends

    async def _sweep_store(self, active: set[int], ttl_ms: int) -> int | None:
        """Read every stored run: expire the idle ones, rebuild the index (or check it); None if interrupted."""
        app = self.app
        data = self.table.data
        index = self._expiry
        checking = index.valid
        token = index.begin_rebuild()
        keys = list(data.keys())
        scanned: list[tuple[bytes, int, int]] = []
        due: list[bytes] = []
        for start in range(0, len(keys), _SWEEP_CHUNK):
            async with self._lock:
                if app.rebalancing or app.in_recovery or app.should_stop:
                    return None
                items = [(k, v) for k in keys[start : start + _SWEEP_CHUNK] if (v := data.get(k)) is not None]
                chunk = expiry.sweep(items, now_ms=int(time.time() * 1000), ttl_ms=ttl_ms, active_partitions=active)
            scanned += chunk.seen
            due += chunk.expired
            await asyncio.sleep(0)
        expired = await self._expire(due, ttl_ms)
        mismatches = None if expired is None else index.finish_rebuild(token, scanned)
        if mismatches is None:
            return None
        if checking and mismatches:
            self.metrics.expiry_index_mismatches.inc(mismatches)
            log.error("the expiry index disagreed with the store on %d runs; rebuilt from the store", mismatches)
        return expired

    def _update_lag(self, active: set[int]) -> None:
        gauge = self.metrics.consumer_lag
        consumer = self.app.consumer
        for partition in self._lag_partitions - active:
            gauge.remove(str(partition))
            self._next_offsets.pop(partition, None)
        self._lag_partitions = set(active)
        for partition in active:
            try:
                highwater = consumer.highwater(TP(self.settings.events_topic, partition))
            except Exception:  # not fetched yet
                highwater = None
            if highwater is None:
                continue
            position = self._next_offsets.get(partition, highwater)
            gauge.labels(partition=str(partition)).set(max(0, highwater - position))

    # --- running -----------------------------------------------------------------------------------------

    async def _owning(self) -> bool:
        """True once this worker surely still owns its partitions, before it writes their states; False if it
        is stopping meanwhile (it writes nothing more); raise :class:`~streams.kafka.lease.OwnershipLost` once it
        may not own them (a late writer would roll runs back)."""
        return await self._lease.wait_owned(self._stopping)

    def _stopping(self) -> bool:
        return bool(self.app.should_stop or self.table.should_stop)

    def _fatal(self, exc: BaseException) -> None:
        log.critical("stopping the worker without acknowledging the current batch: %r", exc, exc_info=exc)
        self._fatal_handler(exc)

    def run(self, on_ready: Callable[[], Awaitable[None]] | None = None) -> int:
        """Run the Faust worker until SIGTERM/SIGINT; returns the exit status.

        ``on_ready`` is awaited once Faust has finished starting (partitions assigned, tables recovered, agents
        and timers running): the moment Faust itself logs "Ready". A worker stopped before that never calls it,
        although Faust calls its start-up hook then too (:meth:`_Worker.came_up`).
        """
        worker = _Worker(
            self.app,
            loglevel=_PYTHON_LEVELS[self.settings.log_level],
            quiet=True,
            redirect_stdouts=False,
        )
        if on_ready is not None:
            started = worker.on_startup_finished  # faust.Worker hands this to the app when it starts

            async def startup_finished() -> None:
                await started()
                if worker.came_up():
                    await on_ready()

            worker.on_startup_finished = startup_finished  # type: ignore[method-assign]
        # Faust's terminal spinner lowers the root logger to DEBUG (so it spins on every record), which makes
        # every debug call in aiokafka build a log record: about a tenth of the worker's CPU under load.
        worker.spinner = None
        try:
            worker.execute_from_commandline()
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
        else:  # pragma: no cover - execute_from_commandline always raises SystemExit
            status = 0
        if worker.lost is not None:
            print(_topics_lost_line(worker.lost), file=sys.stderr, flush=True)
            return EXIT_UNAVAILABLE
        return status


class _Worker(faust.Worker):
    """Faust's worker, which tells a changelog that ends before the local store (Faust's ``ConsistencyError``
    when a partition is assigned again: the broker restarted with empty storage under a RocksDB worker) as the
    cluster having lost the worker's topics, instead of re-raising it as a crash with a traceback (the log
    record of the crash is held back too: :class:`streams.worker.startup.ToldByTheWorker`)."""

    lost: str | None = None  # the changelog partition whose end lies before the store's offset

    def came_up(self) -> bool:
        """Whether the app really finished starting: the group assigned its partitions, the tables are
        recovered, and no stop has begun.

        Faust calls the app's start-up hook (``on_startup_finished``) also when SIGINT or SIGTERM cut its start
        short: mode's ``Service._actually_start`` leaves its loop over the children once a stop begins and
        still awaits ``on_started``, and Faust's ``App.on_started`` waits for table recovery only once recovery
        has started. Faust's own hook then skips its "Ready" (``_shutdown_immediately``); so must the worker's.
        """
        if self._shutdown_immediately or self.should_stop or self.app.should_stop:
            return False
        recovery = cast(Any, self.app.tables).recovery  # TableManagerT does not declare it
        return bool(recovery.completed.is_set())

    def _shutdown_loop(self) -> None:
        if isinstance(self.crash_reason, ConsistencyError):  # else mode logs "We experienced a crash!" and re-raises
            self.lost = changelog_behind(self.crash_reason)
            self.crash_reason = None
        super()._shutdown_loop()


def changelog_behind(exc: ConsistencyError) -> str:
    """``topic[partition]`` of the changelog partition Faust's ``ConsistencyError`` names (it carries only text)."""
    found = re.search(r"topic='([^']+)', partition=(\d+)", str(exc))
    return f"{found.group(1)}[{found.group(2)}]" if found else "a changelog"


async def _committed(consumer: CompatConsumer, tp: Any) -> int:
    """Where a partition's first record in a new assignment must be: the group's commit, else the earliest."""
    committed = (await consumer.committed_offsets([tp])).get(tp)  # aiokafka retries until it has them
    return committed if committed is not None else await _earliest(consumer, tp)


async def _earliest(consumer: CompatConsumer, tp: Any, attempts: int = 10) -> int:
    """The partition's earliest offset; ListOffsets fails while the broker is unreachable, so retry a while."""
    for attempt in range(attempts):
        try:
            return (await consumer.earliest_offsets(tp)).get(tp, 0)
        except KafkaError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")


def _linger_left(linger: float, waited: float, waiting: int, enough: int, last_size: int) -> float:
    """Seconds the processor lets a batch fill before it starts it (``waiting`` counts every record queued).

    Under load (more than one record waiting, or the last batch held more than one), the oldest waiting
    records may wait up to ``linger`` for more to come, so per-batch work is paid for more events. Time they
    already spent queued, while the previous batch was processed, counts: records that waited that long
    start at once, and batches still grow with the load. ``enough`` records (a full batch, or
    ``LINGER_ENOUGH``: per-batch work is then a small share) never wait, and the bulk processor stops waiting
    once they are queued (:meth:`BulkIntake.fill`); nor does a lone record after a lone one.
    """
    if linger <= 0 or waiting >= enough or (waiting <= 1 and last_size <= 1):
        return 0.0
    return max(0.0, linger - waited)


def _batch_limit(max_batch: int, waiting: int, budget: float, per_event: float) -> int:
    """Most records the bulk processor takes into its next batch.

    A batch's verdicts are sent when the whole batch is applied, so every event waits for the ones after it in
    its batch. While the processor keeps up (fewer than ``max_batch`` records waiting), a batch holds about what
    it applies in ``budget`` seconds at the recent ``per_event`` cost, at least ``_MIN_BATCH``. Once a full batch
    waits it is behind, and the largest batch is the cheapest way to catch up.
    """
    if budget <= 0 or waiting >= max_batch or per_event * max_batch <= budget:
        return max_batch  # (also before any cost is measured, and without dividing by a vanishing cost)
    return max(_MIN_BATCH, int(budget / per_event))


def _smoothed(mean: float, sample: float) -> float:
    """An exponentially weighted mean of the recent batches' cost per record (the first sample as is)."""
    return sample if mean <= 0 else mean + _COST_WEIGHT * (sample - mean)


def _note_confirmed(flight: _InFlight, _: Any) -> None:
    flight.confirmed_at = time.time()


def _gathering(now: float, first: float, last: float) -> bool:
    """Whether a store step whose first batch came at ``first`` and newest at ``last`` still waits at ``now``.

    Within ``_STEP_WINDOW`` of its first batch, and only while batches keep coming: once none came for
    ``_STEP_IDLE`` the traffic paused, so the step stores at once. Waiting out the window then bought nothing
    and held the last states of every burst (and its commit) back by up to the whole window.
    """
    return now < first + _STEP_WINDOW and now - last < _STEP_IDLE


#: The worker's --log-level choices by Python's level names, which Faust's worker wants ("crit" is none).
_PYTHON_LEVELS: Final = {"debug": "DEBUG", "info": "INFO", "warn": "WARNING", "error": "ERROR", "crit": "CRITICAL"}


_TOPIC_CHECK_EVERY: Final = 10.0  # seconds between the checks that the cluster still has the worker's topics


def _exit_topics_lost(lost: Sequence[str]) -> None:
    """End the process with one line and exit status 3: the cluster lost the worker's topics (a restarted
    embedded broker, topics deleted), so nothing it does now reaches anyone; nothing is committed."""
    _flush_logs()
    with contextlib.suppress(Exception):
        print(_topics_lost_line(", ".join(lost)), file=sys.stderr, flush=True)
    os._exit(EXIT_UNAVAILABLE)


def _exit_now(exc: BaseException) -> None:
    """End the process at once: no acknowledgement, no commit; the group hands the partitions on."""
    _flush_logs()
    os._exit(EXIT_FATAL)


def _flush_logs() -> None:
    """Write out what the log handlers and stderr hold: ``os._exit`` skips every flush the interpreter would do."""
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
