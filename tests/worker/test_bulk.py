"""The bulk intake's queue and the settling a revocation waits for (streams.worker.bulk)."""

from __future__ import annotations

import asyncio

import pytest
from faust.types import TP

from streams.worker.bulk import BulkIntake

TP0 = TP("ev", 0)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_take_returns_at_most_the_batch_and_splits_the_last_chunk() -> None:
    intake = BulkIntake(100, on_revoked=lambda: None)
    intake.put(TP0, [1, 2, 3], 7, 0)
    intake.put(TP0, [4, 5, 6], 7, 0)
    first = intake.take(4)
    rest = intake.take(10)
    assert intake.waiting() == 0
    assert [list(c.records) for c in first + rest] == [[1, 2, 3], [4], [5, 6]]


def test_waited_is_the_age_of_the_oldest_queued_records_also_after_a_split(monkeypatch: pytest.MonkeyPatch) -> None:
    import streams.worker.bulk as bulk

    now = [10.0]
    monkeypatch.setattr(bulk.time, "monotonic", lambda: now[0])
    intake = BulkIntake(100, on_revoked=lambda: None)
    assert intake.waited() == 0.0
    intake.put(TP0, [1, 2, 3], 7, 0)
    now[0] = 10.5
    intake.put(TP0, [4, 5], 7, 0)
    now[0] = 10.75
    assert intake.waited() == 0.75
    intake.take(2)  # the first run split: its rest has waited as long
    assert intake.waited() == 0.75
    intake.take(1)
    assert intake.waited() == 0.25
    intake.take(5)
    assert intake.waited() == 0.0


def test_a_full_intake_takes_the_run_says_full_and_calls_back_once_below_its_limit() -> None:
    """The fetch loop never waits here (it also serves the storm topics): it learns the intake is full and is
    called back when there is room."""
    log: list[str] = []
    intake = BulkIntake(4, on_revoked=lambda: None)
    assert intake.put(TP0, [1, 2], 7, 0)
    assert not intake.put(TP0, [3, 4, 5], 7, 0)  # taken anyway: 5 records queued
    assert intake.waiting() == 5
    intake.when_room(lambda: log.append("room"))
    intake.take(1)
    assert log == []  # 4 queued: still at the limit
    intake.take(1)
    assert log == ["room"]
    intake.take(3)
    assert log == ["room"]  # once per registration
    intake.when_room(lambda: log.append("room at once"))
    assert log == ["room", "room at once"]


def test_a_revocation_or_a_stop_releases_the_callbacks() -> None:
    async def scenario() -> list[str]:
        log: list[str] = []
        intake = BulkIntake(2, on_revoked=lambda: None)
        intake.put(TP0, [1, 2, 3], 7, 0)
        intake.when_room(lambda: log.append("after revocation"))
        await intake.revoked({TP0})
        intake.put(TP0, [4, 5], 7, 1)
        intake.when_room(lambda: log.append("after stop"))
        intake.stop()
        return log

    assert run(scenario()) == ["after revocation", "after stop"]


def test_a_revocation_drops_the_queue_and_waits_for_begun_batches() -> None:
    async def scenario() -> list[str]:
        log: list[str] = []
        intake = BulkIntake(100, on_revoked=lambda: log.append("forgot offsets"))
        intake.put(TP0, [1, 2], 7, 0)
        intake.take(1)
        intake.begin()  # a batch in flight
        revoking = asyncio.ensure_future(intake.revoked({TP0}))
        await asyncio.sleep(0.01)
        log.append(f"queued {intake.waiting()}, revocation done {revoking.done()}")
        intake.settle()
        await asyncio.wait_for(revoking, 1)
        log.append("revocation done")
        return log

    assert run(scenario()) == ["forgot offsets", "queued 0, revocation done False", "revocation done"]


def test_stopping_releases_a_waiting_revocation() -> None:
    async def scenario() -> bool:
        intake = BulkIntake(100, on_revoked=lambda: None)
        intake.begin()
        revoking = asyncio.ensure_future(intake.revoked({TP0}))
        await asyncio.sleep(0.01)
        intake.stop()  # shutting down: nothing more is acknowledged, so nothing to wait for
        await asyncio.wait_for(revoking, 1)
        return True

    assert run(scenario())


def test_fill_returns_once_enough_records_are_queued_or_when_its_time_is_up() -> None:
    """A linger that ends early: the processor stops waiting as soon as the records it waits for are there."""
    loop_time: list[float] = []

    async def scenario() -> None:
        intake = BulkIntake(100, on_revoked=lambda: None)
        intake.put(TP0, [1], 7, 0)
        loop = asyncio.get_running_loop()
        loop.call_later(0.02, intake.put, TP0, [2, 3], 7, 0)  # a run that fills the batch
        begun = loop.time()
        await asyncio.wait_for(intake.fill(3, timeout=30.0), 10)
        loop_time.append(loop.time() - begun)
        begun = loop.time()
        await asyncio.wait_for(intake.fill(4, timeout=0.05), 10)  # never filled: the linger's end
        loop_time.append(loop.time() - begun)
        assert intake.waiting() == 3

    run(scenario())
    filled, timed_out = loop_time
    assert 0.015 <= filled < 5  # woken by the put, not by the 30 s timeout
    assert 0.045 <= timed_out < 5
