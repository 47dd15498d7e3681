"""The worker's waits (streams.worker.app): how long a store step gathers processed batches before it stores,
how long the bulk processor lets a batch fill before it starts it, and how much it takes into one.

The acker and the processor run for real on a worker built for an unreachable broker; only their clock, their
sleeps and the work on either side are replaced, so the boundaries are exact and independent of the machine.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from faust.types import TP
from hypothesis import assume, given
from hypothesis import strategies as st

from streams.config_file import LoadedConfig
from streams.kafka.lease import OwnershipLost
from streams.worker import app as worker_app
from streams.worker.app import (
    _MIN_BATCH,
    _STEP_IDLE,
    _STEP_WINDOW,
    _STORE_CHUNK,
    LoopwatchWorker,
    _batch_limit,
    _gathering,
    _InFlight,
    _linger_left,
    _smoothed,
)
from streams.worker.event_context import source_partition
from streams.worker.metrics import WorkerMetrics
from streams.worker.settings import LINGER_ENOUGH, WorkerSettings
from tests.support.faults import core_raises
from tests.worker.support import event, records


@given(
    first=st.floats(0, 1e6),
    since_first=st.floats(0, 2 * _STEP_WINDOW),
    since_last=st.floats(0, 2 * _STEP_WINDOW),
)
def test_a_step_waits_within_its_window_only_while_batches_keep_coming(
    first: float, since_first: float, since_last: float
) -> None:
    since_last = min(since_last, since_first)  # the newest batch came at or after the first
    # away from the boundaries by more than the rounding of ``first + since_first``
    assume(abs(since_first - _STEP_WINDOW) > 1e-6 and abs(since_last - _STEP_IDLE) > 1e-6)
    now = first + since_first
    waits = _gathering(now, first, now - since_last)
    assert waits == (since_first < _STEP_WINDOW and since_last < _STEP_IDLE)


@given(
    linger=st.floats(0, 1),
    waited=st.floats(0, 2),
    waiting=st.integers(0, 600),
    last_size=st.integers(0, 600),
)
def test_a_batch_lingers_under_load_only_until_its_oldest_records_waited_the_linger(
    linger: float, waited: float, waiting: int, last_size: int
) -> None:
    left = _linger_left(linger, waited, waiting, LINGER_ENOUGH, last_size)
    under_load = waiting < LINGER_ENOUGH and (waiting > 1 or last_size > 1)
    assert 0 <= left <= linger
    if not under_load:
        assert left == 0  # enough records, or a lone record after a lone one, start at once
    else:
        assert left == max(0.0, linger - waited)  # records that waited while the last batch ran count it


@given(
    waiting=st.integers(0, 1_000),
    budget=st.floats(0, 1),
    per_event=st.floats(0, 0.01),
)
def test_a_batch_holds_what_the_budget_buys_while_the_processor_keeps_up(
    waiting: int, budget: float, per_event: float
) -> None:
    limit = _batch_limit(500, waiting, budget, per_event)
    assert min(_MIN_BATCH, 500) <= limit <= 500
    if waiting >= 500 or budget == 0 or per_event * 500 <= budget:
        assert limit == 500  # behind by a full batch, no budget, or a whole batch within it (or no cost yet)
    else:
        assert limit == max(_MIN_BATCH, int(budget / per_event))
        # a costlier record never buys a larger batch
        assert _batch_limit(500, waiting, budget, per_event * 2) <= limit


@given(mean=st.floats(0, 1), sample=st.floats(1e-9, 1))
def test_the_cost_per_record_follows_recent_batches(mean: float, sample: float) -> None:
    smoothed = _smoothed(mean, sample)
    if mean == 0:
        assert smoothed == sample  # the first measurement is taken as it is
    else:
        assert min(mean, sample) <= smoothed <= max(mean, sample)


class _Clock:
    """Monotonic time that moves only when the acker sleeps; ``arrivals`` are put in the queue as it passes them."""

    def __init__(self, pending: asyncio.Queue[_InFlight], arrivals: list[float]) -> None:
        self.now = 0.0
        self.pending = pending
        self.arrivals = arrivals
        self.real_sleep = asyncio.sleep

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        self.advance(self.now + delay)
        await self.real_sleep(0)

    def advance(self, to: float) -> None:
        self.now = to
        while self.arrivals and self.arrivals[0] <= self.now:
            self.arrivals.pop(0)
            self.pending.put_nowait(_flight())


class _Patched:
    """A module as the worker's module sees it, with some attributes replaced (the real module is untouched)."""

    def __init__(self, module: Any, **replaced: Any) -> None:
        self._module = module
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)


def _flight() -> _InFlight:
    sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    sent.set_result([])
    return _InFlight(size=1, sent=sent, writes=[])


def _steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrivals: list[float]) -> list[tuple[int, float]]:
    """(batches, clock time) of each store step the acker takes, for one batch at 0 and the others at
    ``arrivals``, until every batch is stored."""
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    total = 1 + len(arrivals)
    steps: list[tuple[int, float]] = []

    async def run() -> None:
        pending: asyncio.Queue[_InFlight] = asyncio.Queue()
        clock = _Clock(pending, sorted(arrivals))
        monkeypatch.setattr(worker_app, "time", _Patched(worker_app.time, monotonic=clock.monotonic))
        monkeypatch.setattr(worker_app, "asyncio", _Patched(asyncio, sleep=clock.sleep))

        async def store(flights: list[_InFlight]) -> tuple[Any, list[int]]:
            steps.append((len(flights), clock.now))
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result([])
            return done, []

        async def acknowledge(_flight: _InFlight) -> None:
            return None

        monkeypatch.setattr(worker, "_store", store)
        pending.put_nowait(_flight())
        acker = asyncio.ensure_future(worker._ack(pending, acknowledge, lambda _first: True))
        still = 0
        for _ in range(10_000):  # bounded: the clock moves at least every few turns
            if sum(n for n, _ in steps) == total or acker.done():
                break
            before = clock.now
            await clock.real_sleep(0)
            still = still + 1 if clock.now == before else 0
            if still > 3 and clock.arrivals:  # the acker waits for a batch: time passes until the next one
                clock.advance(clock.arrivals[0])
        acker.cancel()
        await asyncio.gather(acker, return_exceptions=True)

    asyncio.run(run())
    assert sum(n for n, _ in steps) == total
    return steps


def test_a_step_after_a_burst_stores_once_the_batches_stop_not_a_window_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = _steps(tmp_path, monkeypatch, arrivals=[0.01, 0.02])
    assert [n for n, _ in steps] == [3]
    assert steps[0][1] < 0.02 + _STEP_IDLE + 0.03  # the pause ended it: one poll after the idle time
    assert steps[0][1] < _STEP_WINDOW


def test_a_step_under_steady_traffic_gathers_for_its_whole_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    every = _STEP_IDLE / 2
    arrivals = [every * i for i in range(1, 40)]  # a batch every half idle time, for several windows
    steps = _steps(tmp_path, monkeypatch, arrivals)
    first_count, first_at = steps[0]
    assert first_at >= _STEP_WINDOW  # only the window ended the first step
    assert first_count >= int(_STEP_WINDOW / every)  # ... and it held every batch that came within it
    assert len(steps) > 1


class _Record(NamedTuple):
    offset: int
    timestamp: int


def _batch_starts(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    arrivals: list[float],
    busy: float = 0.0,
    size: int = 2,
    per_record: float = 0.0,
    budget: float = 0.008,
) -> list[tuple[float, int]]:
    """(clock time, records) of each batch the real bulk processor starts, for fetched runs of ``size`` records
    handed over at ``arrivals`` (a fake clock), each batch taking ``busy`` seconds plus ``per_record`` per
    record to process (and reporting that time as its processing time)."""
    from streams.worker import bulk

    settings = WorkerSettings(
        bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev", batch_budget=budget
    )
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    intake = worker._intake
    now = [0.0]
    pending = sorted(arrivals)
    starts: list[tuple[float, int]] = []

    def advance(to: float) -> None:
        while pending and pending[0] <= to:
            now[0] = pending.pop(0)  # handed over at its own time, on the way
            intake.put(TP("ev", 0), [_Record(offset, 1) for offset in range(size)], 1, 0)
        now[0] = to

    async def sleep(delay: float) -> None:
        advance(now[0] + delay)
        await real_sleep(0)

    async def fill(count: int, timeout: float) -> None:  # BulkIntake.fill on the fake clock
        deadline = now[0] + timeout
        while intake.waiting() < count and pending and pending[0] <= deadline:
            advance(pending[0])
        if intake.waiting() < count:
            advance(deadline)
        await real_sleep(0)

    async def admit(_consumer: Any, chunks: list[Any], _epoch: int, _tracker: Any) -> tuple[list[Any], dict[Any, int]]:
        return [record for chunk in chunks for record in chunk.records], {}

    async def process(records: list[Any], _source: Any) -> _InFlight:
        starts.append((now[0], len(records)))
        took = busy + per_record * len(records)
        advance(now[0] + took)
        flight = _flight()
        flight.busy = took
        return flight

    async def ack(queue: asyncio.Queue[_InFlight], *_: Any) -> None:
        while True:
            await queue.get()
            intake.settle()

    real_sleep = asyncio.sleep
    clock = _Patched(worker_app.time, monotonic=lambda: now[0], time=lambda: now[0])
    monkeypatch.setattr(worker_app, "time", clock)
    monkeypatch.setattr(bulk, "time", clock)
    monkeypatch.setattr(worker_app, "asyncio", _Patched(asyncio, sleep=sleep))
    monkeypatch.setattr(intake, "fill", fill)
    monkeypatch.setattr(worker, "_admit", admit)
    monkeypatch.setattr(worker, "_process", process)
    monkeypatch.setattr(worker, "_ack", ack)

    async def run() -> None:
        processor = asyncio.ensure_future(worker._run_bulk())
        for _ in range(1_000):  # bounded: time moves whenever the processor waits for records
            await real_sleep(0)
            if not pending and not intake.waiting():
                break
            if not intake.waiting():
                advance(pending[0])
        processor.cancel()
        await asyncio.gather(processor, return_exceptions=True)

    advance(0.0)
    asyncio.run(run())
    return starts


@pytest.mark.parametrize(("second", "starts_at"), [(0.015, 0.03), (0.025, 0.035)])
def test_records_that_waited_through_a_batch_linger_only_for_the_rest_of_the_linger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: float, starts_at: float
) -> None:
    """A run handed over at 0 lingers 10 ms for more; its batch takes 20 ms. A run handed over during that
    batch starts once it has waited the linger (at once, if it already has), not a whole linger after it."""
    assert WorkerSettings(bootstrap="127.0.0.1:1").batch_linger == 0.01
    starts = _batch_starts(tmp_path, monkeypatch, arrivals=[0.0, second], busy=0.02)
    assert [n for _, n in starts] == [2, 2]
    assert [at for at, _ in starts] == pytest.approx([0.01, starts_at])


def test_a_batch_with_enough_records_lingers_no_more(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once ``LINGER_ENOUGH`` records wait, their per-batch work is a small share: waiting longer only delays them.
    Enough at once start at once; a batch that becomes enough during its linger starts then, not when the
    linger ends; fewer still wait the whole linger."""
    runs = LINGER_ENOUGH // 10
    at_once = _batch_starts(tmp_path, monkeypatch, arrivals=[0.0] * runs, size=10)
    assert at_once == [(0.0, runs * 10)]
    filled = _batch_starts(tmp_path, monkeypatch, arrivals=[0.0] * (runs - 1) + [0.004], size=10)
    assert filled == [(pytest.approx(0.004), runs * 10)]
    short = _batch_starts(tmp_path, monkeypatch, arrivals=[0.0] * (runs - 2) + [0.004], size=10)
    assert short == [(pytest.approx(0.01), (runs - 1) * 10)]


def test_batches_below_a_full_one_hold_what_the_processor_applies_within_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 0.1 ms a record, the 8 ms budget buys 80 records. The first batch (no cost measured yet) takes all
    100 that wait; 100 handed over after it go in batches of 80 and 20, so their verdicts wait for 80 records
    at most, not 100. Without the budget (``--batch-budget 0``) they go in one batch of 100."""
    assert WorkerSettings(bootstrap="127.0.0.1:1").batch_budget == 0.008
    arrivals = [0.0] * 10 + [0.012] * 10
    starts = _batch_starts(tmp_path, monkeypatch, arrivals, size=10, per_record=0.0001)
    assert [n for _, n in starts] == [100, 80, 20]
    # a budget's worth waiting lingers no more; the 20 left linger until they have waited 10 ms
    assert [at for at, _ in starts] == pytest.approx([0.0, 0.012, 0.022])
    unbudgeted = _batch_starts(tmp_path, monkeypatch, arrivals, size=10, per_record=0.0001, budget=0.0)
    assert [n for _, n in unbudgeted] == [100, 100]


def test_a_full_batch_waiting_is_taken_whole_whatever_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A processor behind by a full batch (here 600 records handed over during the first batch) catches up
    with the largest batches: 500, then the 100 left, which the budget (80 records) then splits no more than
    it must."""
    arrivals = [0.0] * 10 + [0.015] * 60
    starts = _batch_starts(tmp_path, monkeypatch, arrivals, size=10, per_record=0.0001)
    assert [n for _, n in starts] == [100, 500, 80, 20]


def test_a_store_step_lets_a_waiting_batch_take_the_lock_between_its_chunks(tmp_path: Path) -> None:
    """A live store step writes a few hundred runs; a batch waiting for the table lock goes after at most
    ``_STORE_CHUNK`` of them, not after the whole step, and sees every run either stored or still pending."""
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    runs = 2 * _STORE_CHUNK + 5
    keys = [b"run-%d" % i for i in range(runs)]
    states = {key: object() for key in keys}
    seen: list[int] = []
    data: dict[bytes, bytes] = {}

    class _Table:
        should_stop = False

    class _Producer:
        async def send(self, *_: Any) -> asyncio.Future[Any]:
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

    table = _Table()
    table.data = data  # type: ignore[attr-defined]
    worker.table = table  # type: ignore[assignment]
    worker.app.producer = _Producer()  # type: ignore[assignment]
    worker.processor.encode = lambda key, run: b"state"  # type: ignore[method-assign]
    worker.app.consumer.lease.assigned(time.monotonic())  # type: ignore[attr-defined]  # owned: it may write

    async def run() -> None:
        worker._pending_states.update(states)  # type: ignore[arg-type]
        flight = _flight()
        source = source_partition("ev", 0)
        flight.writes = [(key, states[key], 0, source) for key in keys]  # type: ignore[misc]

        async def batch() -> None:  # ready while the step writes its first chunk
            async with worker._lock:
                seen.append(len(data))
                assert all((key in data) != (key in worker._pending_states) for key in keys)

        waiting = asyncio.ensure_future(batch())
        step = await worker._store([flight])
        assert step is not None
        await waiting

    asyncio.run(run())
    assert seen == [_STORE_CHUNK]
    assert sorted(data) == sorted(keys) and not worker._pending_states


def test_a_changelog_behind_the_store_is_named_from_fausts_error() -> None:
    """Faust's ConsistencyError carries only text; the worker's one line names the partition from it."""
    from faust.exceptions import ConsistencyError
    from faust.tables.recovery import E_PERSISTED_OFFSET
    from faust.types import TP

    from streams.worker.app import changelog_behind

    exc = ConsistencyError(E_PERSISTED_OFFSET.format(TP("lw-runs-changelog", 3), 12, -1))
    assert changelog_behind(exc) == "lw-runs-changelog[3]"
    assert changelog_behind(ConsistencyError("other words")) == "a changelog"


def test_a_confirmer_that_cannot_note_a_store_stops_the_worker(tmp_path: Path) -> None:
    """Noting the confirmed changelog offsets runs under the confirmer's guard: had it raised outside it, the
    confirmer task would have ended quietly, every later batch left unsettled and every revocation waiting."""
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    fatal: list[BaseException] = []
    worker._fatal = fatal.append  # type: ignore[method-assign]
    acknowledged: list[_InFlight] = []

    def broken(_partitions: Any, _metas: Any) -> None:
        raise OSError("the store is gone")

    worker._note_persisted = broken  # type: ignore[method-assign]

    async def acknowledge(flight: _InFlight) -> None:
        acknowledged.append(flight)

    async def run() -> None:
        stored: asyncio.Queue[tuple[list[_InFlight], Any, list[int]]] = asyncio.Queue()
        done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        done.set_result([])
        stored.put_nowait(([_flight()], done, []))
        await asyncio.wait_for(worker._confirm(stored, acknowledge), timeout=5)

    asyncio.run(run())
    assert [str(exc) for exc in fatal] == ["the store is gone"] and acknowledged == []


class _Table:
    """The run table as a store step uses it: its data, and whether it is stopping."""

    def __init__(self) -> None:
        self.should_stop = False
        self.data: dict[bytes, bytes] = {}


def _worker_on_a_table(tmp_path: Path) -> tuple[LoopwatchWorker, _Table, dict[bytes, bytes]]:
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    table = _Table()
    worker.table = table  # type: ignore[assignment]
    return worker, table, table.data


def test_a_store_step_writes_nothing_once_ownership_is_lost(tmp_path: Path) -> None:
    """A worker that cannot vouch for owning its partitions (a revocation begun and no heartbeat answered:
    streams.kafka.lease) writes no state at all; the acker then stops the worker."""
    worker, _, data = _worker_on_a_table(tmp_path)
    lease = worker.app.consumer.lease  # type: ignore[attr-defined]
    lease.assigned(time.monotonic() - 2 * lease.session_timeout)  # frozen since, unknowingly evicted
    lease.revoking(time.monotonic())

    async def run() -> None:
        flight = _flight()
        flight.writes = [(b"run-1", object(), 0, source_partition("ev", 0))]  # type: ignore[list-item]
        with pytest.raises(OwnershipLost):
            await asyncio.wait_for(worker._store([flight]), 5)

    asyncio.run(run())
    assert data == {}


def test_a_stopping_worker_unsure_of_its_partitions_stores_nothing_and_does_not_wait(tmp_path: Path) -> None:
    """Its heartbeats have ended with the stop, so no answer will confirm the lease: the step stores nothing
    (redelivered to the next owner) instead of holding the stop up."""
    worker, table, data = _worker_on_a_table(tmp_path)
    lease = worker.app.consumer.lease  # type: ignore[attr-defined]
    lease.assigned(time.monotonic() - 2 * lease.session_timeout)  # no heartbeat answered since: unsure

    async def run() -> None:
        flight = _flight()
        flight.writes = [(b"run-1", object(), 0, source_partition("ev", 0))]  # type: ignore[list-item]
        stored = asyncio.ensure_future(worker._store([flight]))
        await asyncio.sleep(0.2)
        assert not stored.done()  # unsure while running: it waits for the next heartbeat's answer
        table.should_stop = True
        assert await asyncio.wait_for(stored, 5) is None

    asyncio.run(run())
    assert data == {}


def test_an_event_that_raises_goes_to_the_dead_letter_topic_and_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A defect of the core on one event must not stop the partition (on this worker, then on every other one
    that takes it): the batch goes on, the event is dead-lettered as ``apply_failed`` and counted."""
    worker, _, _ = _worker_on_a_table(tmp_path)
    sent: list[tuple[str, bytes]] = []

    class _Producer:
        async def send(self, topic: str, key: bytes, *_: Any) -> asyncio.Future[Any]:
            sent.append((topic, key))
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

    worker.app.producer = _Producer()  # type: ignore[assignment]

    core_raises(monkeypatch, lambda _ev: True, lambda _ev: RuntimeError("a defect"))
    recs = records([event(0, "a"), event(1, "b")])

    async def run() -> None:
        flight = await worker._process(recs, lambda _i: source_partition("ev", 0))
        assert flight is not None
        await flight.sent
        worker._count(flight)
        assert [write[0] for write in flight.writes] == [b"a", b"b"]  # each run stored, as replay keeps it

    asyncio.run(run())
    dead_topic = worker.settings.dead_letter_topic
    assert sorted(key for topic, key in sent if topic == dead_topic) == [b"a", b"b"]
    counted = worker.metrics.registry.get_sample_value("loopwatch_invalid_events_total", {"reason": "apply_failed"})
    assert counted == 2
