"""What ``simulate --bootstrap`` counts as sent when it is cancelled (Ctrl-C, SIGTERM), with a producer that
delivers only when it stops, as aiokafka's stop delivers every batch it holds.

The real-broker tests (tests/cli/test_sigterm.py) cannot place the signal: here the cancellation lands while
``publish`` waits for a block of sends, where a wait that cancelled them (``asyncio.gather``) lost them from the
count.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from streams.cli.simulate import Progress, publish

BLOCK = 10_000  # the sends publish waits for at a time


class HeldProducer:
    """Holds every send until ``stop``, which delivers them all."""

    made: ClassVar[list[HeldProducer]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.futures: list[asyncio.Future[None]] = []
        HeldProducer.made.append(self)

    async def start(self) -> None:
        return None

    async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.futures.append(future)
        return future

    async def stop(self) -> None:
        for future in self.futures:
            if not future.done():
                future.set_result(None)


def records(count: int) -> Iterator[tuple[bytes, bytes]]:
    return ((b"run", b"{}") for _ in range(count))


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[HeldProducer]:
    HeldProducer.made = []
    monkeypatch.setattr("aiokafka.AIOKafkaProducer", HeldProducer)
    return HeldProducer


def test_a_cancelled_wait_for_a_block_counts_what_the_stop_delivered(producer: type[HeldProducer]) -> None:
    async def scenario() -> int:
        progress = Progress()
        task = asyncio.create_task(publish(records(2 * BLOCK + 5), "127.0.0.1:1", "t", 1.0, False, progress=progress))
        for _ in range(100_000):  # bounded: until publish waits for its first block
            if producer.made and len(producer.made[0].futures) >= BLOCK:
                break
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        assert len(producer.made[0].futures) == BLOCK  # waiting, not sending
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return progress.confirmed

    assert asyncio.run(scenario()) == BLOCK


def test_sends_that_were_never_delivered_are_not_counted(producer: type[HeldProducer]) -> None:
    class LostProducer(HeldProducer):
        async def stop(self) -> None:  # the sender died: nothing is delivered
            return None

    async def scenario() -> int:
        progress = Progress()
        task = asyncio.create_task(publish(records(50), "127.0.0.1:1", "t", 1.0, False, progress=progress))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return progress.confirmed

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("aiokafka.AIOKafkaProducer", LostProducer)
        assert asyncio.run(scenario()) == 0


def test_an_uninterrupted_publish_counts_every_record(producer: type[HeldProducer]) -> None:
    class PromptProducer(HeldProducer):
        async def send(self, topic: str, value: bytes, key: bytes) -> asyncio.Future[None]:
            future = await super().send(topic, value, key)
            future.set_result(None)
            return future

    progress = Progress()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("aiokafka.AIOKafkaProducer", PromptProducer)
        count = asyncio.run(publish(records(BLOCK + 7), "127.0.0.1:1", "t", 1.0, False, progress=progress))
    assert (count, progress.confirmed) == (BLOCK + 7, BLOCK + 7)
