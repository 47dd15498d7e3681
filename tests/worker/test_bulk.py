"""The bulk intake's queue and the settling a revocation waits for (streams.worker.bulk)."""

from __future__ import annotations

import asyncio

from faust.types import TP

from streams.worker.bulk import BulkIntake

TP0 = TP("ev", 0)


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_take_returns_at_most_the_batch_and_splits_the_last_chunk() -> None:
    async def scenario() -> list[list[int]]:
        intake = BulkIntake(100, on_revoked=lambda: None)
        await intake.put(TP0, [1, 2, 3], 7, 0)
        await intake.put(TP0, [4, 5, 6], 7, 0)
        first = intake.take(4)
        rest = intake.take(10)
        assert intake.waiting() == 0
        return [list(c.records) for c in first + rest]

    assert run(scenario()) == [[1, 2, 3], [4], [5, 6]]


def test_the_fetch_loop_waits_for_room() -> None:
    async def scenario() -> list[str]:
        intake = BulkIntake(2, on_revoked=lambda: None)
        log: list[str] = []
        await intake.put(TP0, [1, 2], 7, 0)

        async def put() -> None:
            await intake.put(TP0, [3], 7, 0)
            log.append("put")

        task = asyncio.ensure_future(put())
        await asyncio.sleep(0.01)
        log.append("full")
        intake.take(2)
        await asyncio.wait_for(task, 1)
        return log

    assert run(scenario()) == ["full", "put"]


def test_a_revocation_drops_the_queue_and_waits_for_begun_batches() -> None:
    async def scenario() -> list[str]:
        log: list[str] = []
        intake = BulkIntake(100, on_revoked=lambda: log.append("forgot offsets"))
        await intake.put(TP0, [1, 2], 7, 0)
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
