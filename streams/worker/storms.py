"""Fleet-level loop storms, the Faust part: storm signals and a tumbling windowed table.

1. *signals*: the worker re-keys each verdict it publishes as storm signals (:meth:`StormWatch.signals_of`),
   sent with the batch's verdicts to ``<group>-storm-signals`` keyed by storm key, so all runs of one key meet
   in one partition. They are confirmed before the batch's states are stored and its offsets committed, as the
   verdicts are, so a signal is published at least once;
2. *count* reads the signals and counts them into the ``storms`` table, tumbling windows of the configured
   length with expiry; the first signal that brings a key to its threshold of distinct runs in a window
   publishes a record on ``loopwatch.fleet-alerts`` and counts ``loopwatch_fleet_alerts_total{kind,detector}``.

The count is at least once too. With bulk delivery (the worker's default) the signals reach the count as the
events reach the worker, in batches without one Faust event each (:meth:`StormWatch.count_in_bulk`): a batch's
alerts are confirmed by the broker before its tallies are written, and the tallies before its offsets advance.
With stream delivery each signal's alert is confirmed before its tally is written, and the offset commits after
both. A tally records that its key alerted, so one written before its alert was confirmed would, after a crash,
have kept the re-counted signal from alerting again: the alert would have been lost. A re-counted signal does
not count its run twice (the tally keeps runs, not verdicts) and a re-published alert keeps its ``alert_id``.
Windows follow the verdict's event time (see :func:`streams.worker.storm_rules.event_seconds`). What is counted
and when it fires is :mod:`streams.worker.storm_rules`. Tallies are written only while the worker owns their
partitions (:mod:`streams.kafka.lease`).

Why the worker makes the signals itself instead of an agent reading ``loopwatch.verdicts`` back: that agent
took every verdict (16 % of a realistic fleet's events) through Faust's per-message path and a second JSON
validation, and it fell behind with the events whenever the worker did. Why the count takes them in bulk: one
Faust event and one table write per signal cost the worker more than the signals' share of its work, and at
half its maximum rate that was the difference between an event -> verdict p99 under 50 ms and over it
(docs/performance.md, "The storm count in bulk").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import faust

from schemas import Verdict
from schemas.fleet_alert import FleetAlert
from streams.kafka.compat import CompatConsumer
from streams.kafka.lease import OwnershipLost
from streams.topics import STORM_TABLE
from streams.worker.bulk import BulkIntake, Taken
from streams.worker.event_context import as_current_event, source_partition
from streams.worker.metrics import WorkerMetrics
from streams.worker.offsets import OffsetTracker
from streams.worker.processing import InputRecord
from streams.worker.settings import WorkerSettings
from streams.worker.storm_rules import Signal, StormConfig, alert_of, observe, signals_of, window_start
from streams.worker.topics import raw_topic

log = logging.getLogger(__name__)

#: The worker's ``_take_admitted``: a batch taken from an intake that its offset tracker lets apply, or None.
Take = Callable[[CompatConsumer, BulkIntake, int, OffsetTracker], Awaitable[Taken | None]]

_BATCH = 1000  # signals a bulk count takes at once (a few ms of work; more wait for the next batch)
_INTAKE = 8000  # signals queued before the consumer stops fetching the topic


@dataclass(frozen=True, slots=True)
class _Tally:
    """One key's window as a batch left it, to be written once its alerts are confirmed."""

    key: str
    ts: float  # a signal's event time in its window: the window clock when it is written
    value: dict[str, Any]
    source: Any  # the source partition its changelog record follows (``as_current_event``)


@dataclass(slots=True)
class _Bulk:
    consumer: CompatConsumer
    intake: BulkIntake
    tracker: OffsetTracker
    take: Take
    fatal: Callable[[BaseException], None]


async def _owned() -> bool:
    """Ownership not checked (a count outside a worker)."""
    return True


class StormWatch:
    """Registers the storm-count agent and table on ``app`` and makes the signals; nothing runs when both
    thresholds are 0."""

    def __init__(
        self,
        app: faust.App,
        settings: WorkerSettings,
        metrics: WorkerMetrics,
        owning: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        self.config: StormConfig = settings.storms
        self.metrics = metrics
        self._owning = owning or _owned
        self._ts = 0.0  # event time of the signal being counted (the window clock)
        n = settings.partitions
        window = self.config.window_seconds
        self.signals_topic = raw_topic(app, settings.storm_signals_topic, n)
        self.alerts_topic = raw_topic(app, settings.fleet_alerts_topic, n)
        table = app.Table(
            STORM_TABLE,
            default=dict,  # an empty tally
            partitions=n,
            options=settings.table_options(),
            help="Fleet storm tallies per storm key and tumbling window",
        )
        windowed: Any = table.tumbling(window, expires=2 * window)  # the wrapper's type stub lacks relative_to
        self.table = windowed.relative_to(self._window_clock)
        self._tallies: Any = table  # the table under its windowed view: its changelog sends (_capture_changelog)
        self._sends: list[Any] | None = None
        self._bulk: _Bulk | None = None
        self.topics: dict[str, int] = {settings.storm_signals_topic: n, settings.fleet_alerts_topic: n}
        if self.config.enabled:
            self._capture_changelog()
            app.agent(self.signals_topic, name="loopwatch.storm-count")(self._make_count())

    def count_in_bulk(self, consumer: CompatConsumer, take: Take, fatal: Callable[[BaseException], None]) -> None:
        """Take the signals topic in bulk, as the worker takes its events (``--delivery bulk``): the agent keeps
        the topic subscribed and its table co-partitioned, its stream stays empty."""
        if not self.config.enabled:
            return
        tracker = OffsetTracker()
        intake = BulkIntake(_INTAKE, on_revoked=tracker.forget)
        self._bulk = _Bulk(consumer, intake, tracker, take, fatal)
        consumer.deliver_in_bulk(self.signals_topic.get_topic_name(), intake)

    def _capture_changelog(self) -> None:
        """Keep the future of every changelog record the storm table sends while tallies are written.

        Faust sends a table's changelog record from its ``send_changelog`` (faust-streaming 0.15: ``on_key_set``
        calls it and drops the future). A batch's offsets may only advance once those records are confirmed, so
        the count checks that every tally it wrote produced one (:meth:`_write_tallies`): a Faust that sent them
        another way would stop the worker rather than commit unconfirmed tallies.
        """
        table = self._tallies
        send = table.send_changelog

        def send_changelog(*args: Any, **kwargs: Any) -> Any:
            future = send(*args, **kwargs)
            if self._sends is not None:
                self._sends.append(future)
            return future

        table.send_changelog = send_changelog

    def _window_clock(self, event: Any = None) -> float:
        return self._ts

    # --- signals: verdicts -> storm keys -------------------------------------------------------------------

    def signals_of(self, verdict: Verdict, written_seconds: float) -> list[tuple[bytes, bytes]]:
        """The signal records (key, value) of a verdict the worker publishes at ``written_seconds``."""
        return [(s.key.encode(), s.to_bytes()) for s in signals_of(verdict, written_seconds, self.config)]

    # --- count: signals -> windows -> alerts -------------------------------------------------------------

    def _make_count(self) -> Callable[[Any], Any]:
        async def count(stream: Any) -> None:
            if self._bulk is not None:
                await self._count_bulk(self._bulk)
                return
            async for event in stream.events():
                message = event.message
                try:
                    signal = Signal.from_bytes(message.value)
                except (ValueError, TypeError, KeyError):
                    self._skip(message)
                    continue
                try:
                    await self._count(signal, source_partition(message.topic, message.partition))
                except OwnershipLost:
                    raise  # the agent's end stops the worker: nothing more is written
                except Exception:  # one bad record must not restart the agent over and over
                    log.exception("storm counter failed on %s[%s]@%s", message.topic, message.partition, message.offset)
                    self.metrics.storm_skipped.inc()

        return count

    async def _count(self, signal: Signal, source: Any) -> None:
        tally, alerts = self._observe_window([signal])
        if tally is None:
            return
        for alert in alerts:
            await (await self._send_alert(alert))  # confirmed before the tally says the key alerted
        if not await self._owning():  # no tally written for partitions another member may own by now
            raise OwnershipLost("stopping with partition ownership unconfirmed: the signal is counted again")
        self._write_tallies([_Tally(signal.key, signal.ts, tally, source)])  # Faust commits as for any table write
        for alert in alerts:
            self._alerted(alert)

    def _observe_window(self, signals: Sequence[Signal]) -> tuple[dict[str, Any] | None, list[FleetAlert]]:
        """Observe one key's signals of one window, in order: the tally to write (None: the kind is off) and the
        alerts that fired."""
        first = signals[0]
        threshold = self.config.threshold(first.kind)
        if threshold <= 0:
            return None, []
        self._ts = first.ts  # the window clock: all of them are in its window
        tally: Any = self.table[first.key].value()
        alerts: list[FleetAlert] = []
        for signal in signals:
            tally, fired = observe(tally, signal, threshold)
            if fired:
                alerts.append(alert_of(signal, tally, threshold, self.config.window_seconds))
        return tally, alerts

    def _write_tallies(self, tallies: Sequence[_Tally]) -> list[Any]:
        """Write each tally once; the futures of their changelog records.

        Every tally written must have sent a changelog record (:meth:`_capture_changelog`): the offsets they
        cover advance only once those are confirmed."""
        sends: list[Any] = []
        self._sends = sends
        try:
            for tally in tallies:
                written = len(sends)
                with as_current_event(tally.source):
                    self._ts = tally.ts
                    self.table[tally.key] = tally.value
                if len(sends) == written:
                    raise RuntimeError("the storm table sent no changelog record for a tally it wrote")
        finally:
            self._sends = None
        return sends

    # --- count in bulk -------------------------------------------------------------------------------------

    async def _count_bulk(self, bulk: _Bulk) -> None:
        """Count batches of signals, one at a time: alerts confirmed, then tallies written and confirmed, then
        committed.

        The same rules as the worker's events (:meth:`LoopwatchWorker._run_bulk`): records a revocation came
        after are never started, a started batch holds the revocation until its offsets have advanced.
        """
        consumer, intake = bulk.consumer, bulk.intake
        while True:
            await intake.wait()
            try:
                taken = await bulk.take(consumer, intake, _BATCH, bulk.tracker)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                bulk.fatal(exc)
                return
            if taken is None:
                continue
            if self._tallies.should_stop:
                intake.stop()
                return  # shutting down: not counted, not committed; redelivered
            intake.begin()  # no await since the epoch check: a revocation now waits for the settle
            try:
                tallies, alerts = self._tally_batch(taken.records)
                await asyncio.gather(*[await self._send_alert(alert) for alert in alerts])
                if not await self._owning():
                    intake.settle()
                    intake.stop()
                    return  # stopping with ownership unconfirmed: not written, not committed; redelivered
                await asyncio.gather(*self._write_tallies(tallies))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                intake.settle()
                bulk.fatal(exc)  # unconfirmed tallies or alerts: the offsets must not advance
                return
            for tp, offset in taken.positions.items():
                consumer.advance(tp, offset, taken.epoch)
            intake.settle()
            for alert in alerts:
                self._alerted(alert)

    def _tally_batch(self, records: Sequence[InputRecord]) -> tuple[list[_Tally], list[FleetAlert]]:
        """Count a batch: each key's window as it leaves it (read once, its signals observed in offset order: a
        key's signals share one partition), and the alerts that fired. Nothing is written yet."""
        groups: dict[tuple[str, float], list[Signal]] = {}
        sources: dict[str, Any] = {}
        window = self.config.window_seconds
        for rec in records:
            try:
                signal = Signal.from_bytes(rec.value or b"")
            except (ValueError, TypeError, KeyError):
                self._skip(rec)
                continue
            groups.setdefault((signal.key, window_start(signal.ts, window)), []).append(signal)
            if signal.key not in sources:
                sources[signal.key] = source_partition(rec.topic, rec.partition)
        tallies: list[_Tally] = []
        alerts: list[FleetAlert] = []
        for signals in groups.values():
            first = signals[0]
            try:
                tally, fired = self._observe_window(signals)
            except Exception:  # one bad key must not stop the count, as with one bad record
                log.exception("storm counter failed on %d signals of %s", len(signals), first.key)
                self.metrics.storm_skipped.inc(len(signals))
                continue
            if tally is not None:
                tallies.append(_Tally(first.key, first.ts, tally, sources[first.key]))
                alerts += fired
        return tallies, alerts

    async def _send_alert(self, alert: FleetAlert) -> Any:
        """Send ``alert`` at once (not held for the source record's commit); the future of its confirmation."""
        value = alert.model_dump_json().encode()
        return await self.alerts_topic.send(key=alert.key.encode(), value=value, force=True)

    def _alerted(self, alert: FleetAlert) -> None:
        self.metrics.fleet_alerts.labels(kind=alert.kind, detector=alert.detector).inc()
        log.warning(
            "fleet storm: %s %s in %d runs within %.0fs (alert %s)",
            alert.kind,
            alert.key,
            alert.distinct_runs,
            alert.window_seconds,
            alert.alert_id,
        )

    def _skip(self, message: Any) -> None:
        self.metrics.storm_skipped.inc()
        log.warning(
            "storm counter skipped an unreadable storm signal record at %s[%s]@%s",
            message.topic,
            message.partition,
            message.offset,
        )
