"""The storm count in bulk (streams.worker.storms): the same tallies and alerts as counting one signal at a
time, one table write per key and window in a batch, alerts confirmed before the tallies that record them, and
offsets that advance only once confirmed.

A real Faust table on the memory store, outside a running app: its changelog records are queued to a producer
that never sends them, so their futures stay pending until a test resolves them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faust
import pytest
from faust.types import TP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas.fleet_alert import FleetAlert
from streams.worker.bulk import BulkIntake, Taken
from streams.worker.metrics import WorkerMetrics
from streams.worker.offsets import OffsetTracker
from streams.worker.processing import InputRecord
from streams.worker.settings import WorkerSettings
from streams.worker.storm_rules import Signal, StormConfig, alert_of, observe, signals_of, window_start
from streams.worker.storms import StormWatch
from tests.worker.support import NOW, verdict

WINDOW = 60.0
CONFIG = StormConfig(window_seconds=WINDOW, signature_runs=3, agent_runs=4)
SIGNALS = "loopwatch-storm-signals"


@pytest.fixture(autouse=True)
def event_loop_set() -> Iterator[None]:
    """A table write makes its changelog record's future on the current event loop, as in the worker."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def watch(tmp_path: Path, config: StormConfig = CONFIG) -> StormWatch:
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), storms=config)
    app = faust.App("storms-test", broker="kafka://127.0.0.1:1", store="memory://", autodiscover=False)
    return StormWatch(app, settings, WorkerMetrics(process=False))


def records(signals: list[Signal], first_offset: int = 0) -> list[InputRecord]:
    return [InputRecord(SIGNALS, 0, first_offset + i, s.key.encode(), s.to_bytes()) for i, s in enumerate(signals)]


def one_at_a_time(signals: list[Signal]) -> tuple[dict[tuple[str, float], Any], list[FleetAlert]]:
    """The reference: every signal observed alone, in order (what the per-message agent does)."""
    tallies: dict[tuple[str, float], Any] = {}
    alerts: list[FleetAlert] = []
    for signal in signals:
        threshold = CONFIG.threshold(signal.kind)
        window = (signal.key, window_start(signal.ts, WINDOW))
        tallies[window], fired = observe(tallies.get(window), signal, threshold)
        if fired:
            alerts.append(alert_of(signal, tallies[window], threshold, WINDOW))
    return tallies, alerts


def tally_of(storms: StormWatch, key: str, start: float) -> Any:
    storms._ts = start
    return storms.table[key].value()


_verdicts = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2", "r3", "r4", "r5"]),
        st.sampled_from(["main", "ops"]),
        st.sampled_from(["a" * 64, "b" * 64]),
        st.sampled_from([0.0, 20.0, 70.0, 130.0]),  # seconds after a window start: three windows
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verdicts=_verdicts, cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=4))
def test_counting_in_batches_gives_the_tallies_and_alerts_of_counting_one_signal_at_a_time(
    tmp_path: Path, verdicts: list[tuple[str, str, str, float]], cuts: list[int]
) -> None:
    start = window_start(NOW, WINDOW)
    signals = [
        signal
        for run, agent, outcome, offset in verdicts
        for signal in signals_of(
            verdict(run, agent_id=agent, outcome_hash=outcome, event_ts=int((start + offset) * 1000)),
            start + offset,
            CONFIG,
        )
    ]
    expected_tallies, expected_alerts = one_at_a_time(signals)
    storms = watch(tmp_path)
    batch = records(signals)
    alerts: list[FleetAlert] = []
    for lo, hi in zip([0, *sorted(cuts)], [*sorted(cuts), len(batch)], strict=True):
        tallies, fired = storms._tally_batch(batch[lo:hi])
        sends = storms._write_tallies(tallies)
        windows = {(s.key, window_start(s.ts, WINDOW)) for s in signals[lo:hi]}
        assert len(sends) == len(windows)  # one tally write, and one changelog record, per key and window
        alerts += fired
    # Alerts of different keys are independent (and in different partitions, already unordered): same alerts.
    assert sorted(alerts, key=lambda a: a.alert_id) == sorted(expected_alerts, key=lambda a: a.alert_id)
    for (key, begin), tally in expected_tallies.items():
        assert tally_of(storms, key, begin) == tally


def test_unreadable_records_are_skipped_and_counted_and_the_rest_is_counted(tmp_path: Path) -> None:
    storms = watch(tmp_path)
    good = records([s for run in ("r1", "r2", "r3") for s in signals_of(verdict(run), NOW, CONFIG)])
    bad = InputRecord(SIGNALS, 0, 99, b"k", b"{not json")
    _, alerts = storms._tally_batch([good[0], bad, *good[1:]])
    assert [a.kind for a in alerts] == ["signature"]  # 3 runs: the signature storm fires, the agent one not yet
    assert storms.metrics.storm_skipped._value.get() == 1


def test_a_tally_written_without_a_changelog_record_stops_the_count(tmp_path: Path) -> None:
    """If Faust no longer sent a table's changelog through ``send_changelog``, the batch's offsets could
    advance past tallies that are not durable: the count refuses instead."""
    storms = watch(tmp_path)
    table = storms._tallies
    table.send_changelog = type(table).send_changelog.__get__(table)  # Faust's own, not captured
    with pytest.raises(RuntimeError, match="no changelog record"):
        storms._write_tallies(storms._tally_batch(records(signals_of(verdict(), NOW, CONFIG)))[0])


def _take(tp: Any) -> Any:
    """The worker's ``_take_admitted`` as the bulk count sees it: the batch queued, up to the next offset."""

    async def take(c: Any, queued: BulkIntake, most: int, _t: Any) -> Taken | None:
        chunks = queued.take(most)
        recs = [rec for chunk in chunks for rec in chunk.records]
        return Taken(c.bulk_epoch, chunks, recs, {tp: recs[-1].offset + 1})

    return take


async def _count_one_batch(
    storms: StormWatch, consumer: Any, intake: BulkIntake, tracker: OffsetTracker, tp: Any, batch: list[InputRecord]
) -> asyncio.Future[None]:
    """Start the bulk count and hand it ``batch``; its task, after 50 turns of the loop (bounded: the batch is
    counted and waits for a confirmation)."""
    from streams.worker.storms import _Bulk

    bulk = _Bulk(consumer, intake, tracker, _take(tp), fatal=lambda exc: pytest.fail(str(exc)))
    counting = asyncio.ensure_future(storms._count_bulk(bulk))
    intake.put(tp, batch, 1, 1)
    for _ in range(50):
        await asyncio.sleep(0)
    return counting


def _keep_writes(storms: StormWatch) -> list[Any]:
    """The futures of every changelog record the count's tally writes send, as they are sent."""
    sent: list[Any] = []
    write_tallies = storms._write_tallies

    def keep(tallies: Any) -> list[Any]:
        sends = write_tallies(tallies)
        sent.extend(sends)
        return sends

    storms._write_tallies = keep  # type: ignore[method-assign]
    return sent


class _Consumer:
    """What the bulk count asks of the consumer: its delivery epoch, and the positions it may commit."""

    def __init__(self) -> None:
        self.bulk_epoch = 1
        self.advanced: list[tuple[Any, int, int]] = []

    def advance(self, tp: Any, offset: int, epoch: int) -> bool:
        self.advanced.append((tp, offset, epoch))
        return True


def test_a_batch_advances_its_offsets_only_once_its_tallies_are_confirmed(tmp_path: Path) -> None:
    storms = watch(tmp_path)
    consumer = _Consumer()
    tracker = OffsetTracker()
    intake = BulkIntake(100, on_revoked=tracker.forget)
    tp = TP(SIGNALS, 0)
    batch = records(signals_of(verdict(), NOW, CONFIG), first_offset=5)

    sent = _keep_writes(storms)

    async def scenario() -> None:
        counting = await _count_one_batch(storms, consumer, intake, tracker, tp, batch)  # waits for its changelog
        assert len(sent) == 2 and consumer.advanced == []  # sent, not confirmed: nothing may be committed
        revoked = asyncio.ensure_future(intake.revoked({tp}))
        await asyncio.sleep(0)
        assert not revoked.done()  # the revocation waits for the batch begun
        for future in sent:
            future.set_result(None)
        await asyncio.wait_for(revoked, 2.0)
        assert consumer.advanced == [(tp, 7, 1)]
        counting.cancel()
        await asyncio.gather(counting, return_exceptions=True)

    asyncio.get_event_loop().run_until_complete(scenario())


def test_a_tally_is_written_only_once_its_alert_is_confirmed(tmp_path: Path) -> None:
    """A tally records that its key alerted. Written before the alert was confirmed, a crash in between left a
    tally that kept the re-counted signals from alerting again: the alert was lost for good."""
    storms = watch(tmp_path)
    consumer = _Consumer()
    tracker = OffsetTracker()
    intake = BulkIntake(100, on_revoked=tracker.forget)
    tp = TP(SIGNALS, 0)
    signals = [s for run in ("r1", "r2", "r3") for s in signals_of(verdict(run), NOW, CONFIG)]
    batch = records(signals, first_offset=5)
    alerts_sent: list[tuple[FleetAlert, asyncio.Future[Any]]] = []

    async def send_alert(alert: FleetAlert) -> asyncio.Future[Any]:
        confirmed: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        alerts_sent.append((alert, confirmed))
        return confirmed

    storms._send_alert = send_alert  # type: ignore[method-assign]
    writes = _keep_writes(storms)

    async def scenario() -> None:
        counting = await _count_one_batch(storms, consumer, intake, tracker, tp, batch)  # waits for its alert
        assert [a.kind for a, _ in alerts_sent] == ["signature"]  # three runs: the signature storm fires
        assert writes == [] and consumer.advanced == []  # no tally says so before the broker has the alert
        counting.cancel()  # the worker dies here
        await asyncio.gather(counting, return_exceptions=True)

    asyncio.get_event_loop().run_until_complete(scenario())
    first = alerts_sent[0][0]
    _, again = storms._tally_batch(batch)  # redelivered to the next owner: it alerts again, with the same id
    assert [a.alert_id for a in again] == [first.alert_id]
