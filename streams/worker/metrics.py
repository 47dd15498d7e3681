"""Prometheus metrics of the worker (listed with their meaning in docs/metrics.md).

Label values come from closed sets only (event types, decisions, detectors, invalid-record reasons): run,
session and call ids would make the series count unbounded, so they go in verdict records instead. Every
known label combination is created up front so dashboards and alerts see zeros rather than missing series.

Each :class:`WorkerMetrics` has its own registry, which keeps tests and several apps in one process apart.
The hot path uses pre-resolved children (a dict look-up instead of ``labels()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Final, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import start_http_server
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

from schemas import EVENT_TYPES, DecisionName, DetectorId
from schemas.fleet_alert import StormKind
from streams.kafka.compat import REREAD_AGAIN, REREAD_GAP
from streams.loop_cost import LoopCost
from streams.worker.deadletter import DEAD_LETTER_REASONS

LATENCY_BUCKETS: Final = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip
#: Finer where a live worker's waits are (5-300 ms), so a p99 read from the buckets is not off by a whole bucket.
WAIT_BUCKETS: Final = (
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
)  # fmt: skip

#: The loop is idle or busy for a millisecond at a time; its long blocks (a batch, a store step, a full GC pass)
#: take 5-50 ms.
LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
LAG_INTERVAL: Final = 0.1  # seconds between the loop-lag samples: 10 wake-ups a second, nothing for a worker


class WorkerMetrics:
    """All worker series in one registry."""

    def __init__(self, registry: CollectorRegistry | None = None, *, process: bool = True) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        if process:
            ProcessCollector(registry=self.registry)
        r = self.registry
        self.events = Counter("loopwatch_events", "Valid events applied, by type", ["type"], registry=r)
        self.verdicts = Counter(
            "loopwatch_verdicts",
            "Verdicts published (first publication)",
            ["decision", "detector"],
            registry=r,
        )
        self.invalid = Counter(
            "loopwatch_invalid_events", "Records sent to the dead-letter topic", ["reason"], registry=r
        )
        self.duplicates = Counter(
            "loopwatch_duplicate_events",
            "Events ignored as duplicates (same gateway_id and event_id)",
            registry=r,
        )
        self.redelivered = Counter(
            "loopwatch_redelivered_events",
            "Records seen again after a restart or rebalance and not applied twice",
            registry=r,
        )
        self.skipped_offsets = Counter(
            "loopwatch_skipped_offsets",
            "Offsets of loopwatch.events the consumer skipped, re-read instead of applied (see streams.worker.offsets)",
            registry=r,
        )
        self.expired = Counter("loopwatch_expired_runs", "Runs removed after the idle TTL", registry=r)
        self.expiry_index_mismatches = Counter(
            "loopwatch_expiry_index_mismatches",
            "Runs the in-memory expiry index had wrong when checked against a full read of the store (should stay 0)",
            registry=r,
        )
        self.latency = Histogram(
            "loopwatch_event_to_verdict_seconds",
            "Event timestamp to confirmed verdict publication",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_wait = Histogram(
            "loopwatch_batch_wait_seconds",
            "Age of a batch's oldest record (its Kafka timestamp) when the worker starts applying the batch",
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.loop_lag = Histogram(
            "loopwatch_event_loop_lag_seconds",
            "How late the worker's event loop woke a timer: how long other work (batches, store steps, fetches, "
            "garbage collection) held it",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.active_runs = Gauge("loopwatch_active_runs", "Runs held in this worker's active partitions", registry=r)
        self.state_bytes = Gauge(
            "loopwatch_state_bytes",
            "Bytes of stored run state in this worker's active partitions",
            registry=r,
        )
        self.consumer_lag = Gauge(
            "loopwatch_consumer_lag",
            "Records of loopwatch.events not yet processed, per owned partition",
            ["partition"],
            registry=r,
        )
        self.batch_events = Histogram(
            "loopwatch_batch_events",
            "Records per processed batch",
            buckets=(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
            registry=r,
        )
        self.fleet_alerts = Counter(
            "loopwatch_fleet_alerts",
            "Fleet-level loop storms published to loopwatch.fleet-alerts (one per storm key and window)",
            ["kind", "detector"],
            registry=r,
        )
        self.rebalances = Counter(
            "loopwatch_rebalances",
            "Rebalances of the consumer group this worker completed (each one pauses the whole group)",
            registry=r,
        )
        self.storm_skipped = Counter(
            "loopwatch_storm_skipped_records",
            "Records on the storm-signal topic the storm counter could not read",
            registry=r,
        )
        self._state_decodes = _StateDecodes()
        r.register(self._state_decodes)
        self._rereads = _Rereads()
        r.register(self._rereads)
        self._init_loop_cost(r)
        for kind in get_args(StormKind):
            for detector in get_args(DetectorId):
                self.fleet_alerts.labels(kind=kind, detector=detector)
        self.events_by_type = {name: self.events.labels(type=name) for name in EVENT_TYPES}
        self.invalid_by_reason: dict[str, Counter] = {
            name: self.invalid.labels(reason=name) for name in DEAD_LETTER_REASONS
        }
        self.verdicts_by_kind = {
            (decision, detector): self.verdicts.labels(decision=decision, detector=detector)
            for decision in get_args(DecisionName)
            for detector in get_args(DetectorId)
        }

    def count_event(self, event_type: str) -> None:
        child = self.events_by_type.get(event_type)
        (child or self.events.labels(type=event_type)).inc()

    def observe_batch_wait(self, stamps: Iterable[float | None], unit: float, now: float) -> None:
        """A batch about to be applied waited ``now`` less the oldest of its records' Kafka ``stamps`` (``unit``
        seconds each). Records without one (None, or -1 from old message formats) are left out."""
        oldest = min((stamp for stamp in stamps if stamp is not None and stamp > 0), default=None)
        if oldest is not None:
            self.batch_wait.observe(max(0.0, now - oldest * unit))

    def count_invalid(self, reason: str) -> None:
        child = self.invalid_by_reason.get(reason)
        (child or self.invalid.labels(reason=reason)).inc()

    def count_verdict(self, decision: str, detector: str) -> None:
        child = self.verdicts_by_kind.get((decision, detector))
        (child or self.verdicts.labels(decision=decision, detector=detector)).inc()

    def _init_loop_cost(self, r: CollectorRegistry) -> None:
        """What loops cost, by detector and decision (streams.loop_cost; no run labels), all children at 0."""
        labels = ["decision", "detector"]
        self.loop_tokens = Counter("loopwatch_loop_tokens", "Model tokens runs spent in loops", labels, registry=r)
        self.loop_cost = Counter(
            "loopwatch_loop_cost_usd", "US dollars runs spent in loops (priced model calls)", labels, registry=r
        )
        self.saved_tokens = Counter(
            "loopwatch_saved_tokens_estimate", "Estimated model tokens blocks and aborts saved", labels, registry=r
        )
        self.saved_cost = Counter(
            "loopwatch_saved_cost_usd_estimate", "Estimated US dollars blocks and aborts saved", labels, registry=r
        )
        self.loop_cost_children = {
            (decision, detector): tuple(
                c.labels(decision=decision, detector=detector)
                for c in (self.loop_tokens, self.loop_cost, self.saved_tokens, self.saved_cost)
            )
            for decision in get_args(DecisionName)
            for detector in get_args(DetectorId)
        }

    def count_loop_cost(self, decision: str, detector: str, cost: LoopCost | None) -> None:
        """Add one published verdict's loop cost (nothing when the run's usage is unknown)."""
        if cost is None or cost.tokens_in_loop is None:
            return
        children = self.loop_cost_children.get((decision, detector))
        if children is None:
            return
        tokens, dollars, saved_tokens, saved_dollars = children
        tokens.inc(cost.tokens_since_reported)
        dollars.inc(cost.cost_usd_since_reported)
        saved_tokens.inc(cost.saved_tokens or 0)
        saved_dollars.inc(cost.saved_cost_usd or 0.0)

    def read_state_decodes(self, read: Callable[[], int]) -> None:
        """Where ``loopwatch_state_decodes_total`` comes from (the worker's :class:`RunProcessor` count)."""
        self._state_decodes.read = read

    def read_consumer_rereads(self, read: Callable[[], Mapping[str, int]]) -> None:
        """Where ``loopwatch_consumer_rereads_total`` comes from (the consumer's count by cause)."""
        self._rereads.read = read

    def serve(self, port: int, host: str = "127.0.0.1") -> None:
        """Expose ``/metrics`` on ``host:port`` from a daemon thread."""
        start_http_server(port, addr=host, registry=self.registry)


class _StateDecodes(Collector):
    """``loopwatch_state_decodes_total``, read from the worker's plain count at each scrape (a cache miss costs
    the hot path an integer add, not a Prometheus call)."""

    def __init__(self) -> None:
        self.read: Callable[[], int] = lambda: 0  # until a worker's processor is attached

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(
            "loopwatch_state_decodes",
            "Stored run states decoded because the decoded-state cache (--state-cache-runs) did not hold them",
        )
        family.add_metric([], self.read())
        yield family


class _Rereads(Collector):
    """``loopwatch_consumer_rereads_total{cause}``, read from the consumer's plain count at each scrape. Every
    cause shows from the start, at 0 (also before a consumer is attached), so increase() has a series."""

    def __init__(self) -> None:
        self.read: Callable[[], Mapping[str, int]] = lambda: dict.fromkeys((REREAD_GAP, REREAD_AGAIN), 0)

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(
            "loopwatch_consumer_rereads",
            "Re-reads of an input partition (events or storm signals) the consumer began, by cause: gap (records "
            "fetched and not delivered, as around a rebalance), seek_again (a re-read that did not take: report it)",
            labels=["cause"],
        )
        for cause, count in sorted(dict(self.read()).items()):
            family.add_metric([cause], count)
        yield family


async def sample_loop_lag(observe: Callable[[float], None], interval: float = LAG_INTERVAL) -> None:
    """Until cancelled, observe every ``interval`` how much later than asked the running loop woke this task.

    Every record, fetch and send of the worker waits its turn on this one loop, so its lag is what each of them
    waits for at least: near zero while the worker keeps up easily, the length of its blocks when it is busy.
    """
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval
        await asyncio.sleep(interval)
        observe(max(0.0, loop.time() - due))


__all__ = [
    "WorkerMetrics",
    "sample_loop_lag",
]
