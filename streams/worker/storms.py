"""Fleet-level loop storms, the Faust part: storm signals and a tumbling windowed table.

1. *signals*: the worker re-keys each verdict it publishes as storm signals (:meth:`StormWatch.signals_of`),
   sent with the batch's verdicts to ``<group>-storm-signals`` keyed by storm key, so all runs of one key meet
   in one partition. They are confirmed before the batch's states are stored and its offsets committed, as the
   verdicts are, so a signal is published at least once;
2. *count* reads the signals and counts them into the ``storms`` table, tumbling windows of the configured
   length with expiry; the first signal that brings a key to its threshold of distinct runs in a window
   publishes a record on ``loopwatch.fleet-alerts`` and counts ``loopwatch_fleet_alerts_total{kind,detector}``.

The count is at least once too: a send inside the agent is attached to the source record and published before
its offset is committed. A re-counted signal does not count its run twice (the tally keeps runs, not verdicts)
and a re-published alert keeps its ``alert_id``. Windows follow the verdict's event time (see
:func:`streams.worker.storm_rules.event_seconds`). What is counted and when it fires is
:mod:`streams.worker.storm_rules`.

Why the worker makes the signals itself instead of an agent reading ``loopwatch.verdicts`` back: that agent
took every verdict (16 % of a realistic fleet's events) through Faust's per-message path and a second JSON
validation, and it fell behind with the events whenever the worker did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import faust

from schemas import Verdict
from streams.topics import STORM_TABLE
from streams.worker.metrics import WorkerMetrics
from streams.worker.settings import WorkerSettings
from streams.worker.storm_rules import Signal, StormConfig, alert_of, observe, signals_of
from streams.worker.topics import raw_topic

log = logging.getLogger(__name__)


class StormWatch:
    """Registers the storm-count agent and table on ``app`` and makes the signals; nothing runs when both
    thresholds are 0."""

    def __init__(self, app: faust.App, settings: WorkerSettings, metrics: WorkerMetrics) -> None:
        self.config: StormConfig = settings.storms
        self.metrics = metrics
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
        self.topics: dict[str, int] = {settings.storm_signals_topic: n, settings.fleet_alerts_topic: n}
        if self.config.enabled:
            app.agent(self.signals_topic, name="loopwatch.storm-count")(self._make_count())

    def _window_clock(self, event: Any = None) -> float:
        return self._ts

    # --- signals: verdicts -> storm keys -------------------------------------------------------------------

    def signals_of(self, verdict: Verdict, written_seconds: float) -> list[tuple[bytes, bytes]]:
        """The signal records (key, value) of a verdict the worker publishes at ``written_seconds``."""
        return [(s.key.encode(), s.to_bytes()) for s in signals_of(verdict, written_seconds, self.config)]

    # --- count: signals -> windows -> alerts -------------------------------------------------------------

    def _make_count(self) -> Callable[[Any], Any]:
        async def count(stream: Any) -> None:
            async for event in stream.events():
                message = event.message
                try:
                    signal = Signal.from_bytes(message.value)
                except (ValueError, TypeError, KeyError):
                    self._skip(message)
                    continue
                try:
                    await self._count(signal)
                except Exception:  # one bad record must not restart the agent over and over
                    log.exception("storm counter failed on %s[%s]@%s", message.topic, message.partition, message.offset)
                    self.metrics.storm_skipped.inc()

        return count

    async def _count(self, signal: Signal) -> None:
        threshold = self.config.threshold(signal.kind)
        if threshold <= 0:
            return
        self._ts = signal.ts
        windows = self.table[signal.key]
        tally, fired = observe(windows.value(), signal, threshold)
        if fired:
            alert = alert_of(signal, tally, threshold, self.config.window_seconds)
            await self.alerts_topic.send(key=signal.key.encode(), value=alert.model_dump_json().encode())
            self.metrics.fleet_alerts.labels(kind=alert.kind, detector=alert.detector).inc()
            log.warning(
                "fleet storm: %s %s in %d runs within %.0fs (alert %s)",
                alert.kind,
                alert.key,
                alert.distinct_runs,
                alert.window_seconds,
                alert.alert_id,
            )
        self.table[signal.key] = tally

    def _skip(self, message: Any) -> None:
        self.metrics.storm_skipped.inc()
        log.warning(
            "storm counter skipped an unreadable storm signal record at %s[%s]@%s",
            message.topic,
            message.partition,
            message.offset,
        )
