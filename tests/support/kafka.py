"""Blocking Kafka helpers for integration tests: produce record batches, read topics, true end offsets.

Tests are synchronous; each helper runs its own short event loop (``TopicReader`` keeps one for its life).
End offsets always come from :func:`streams.kafka.compat.end_offsets` (Tansu's ListOffsets is wrong).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams.kafka.compat import end_offsets

__all__ = ["Record", "TopicReader", "list_offsets", "produce_batches", "true_end_offsets"]

Pair = tuple[bytes | None, bytes | None]
T = TypeVar("T")


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def produce_batches(
    bootstrap: str,
    topic: str,
    partition: int,
    records: Sequence[Pair],
    *,
    batch_size: int = 50,
    timeout: float = 30.0,
) -> list[int]:
    """Append ``records`` to one partition as explicit multi-record batches; returns each batch's base offset."""

    async def run() -> list[int]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
        await producer.start()
        bases: list[int] = []
        try:
            for start in range(0, len(records), batch_size):
                batch = producer.create_batch()
                for key, value in records[start : start + batch_size]:
                    if batch.append(key=key, value=value, timestamp=None) is None:
                        raise RuntimeError("record batch full: lower batch_size")
                future = await producer.send_batch(batch, topic, partition=partition)
                metadata = await future
                bases.append(metadata.offset)
        finally:
            await producer.stop()
        return bases

    return asyncio.run(asyncio.wait_for(run(), timeout))


def true_end_offsets(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """End offsets per partition (checked against Fetch high watermarks)."""
    result = asyncio.run(end_offsets(bootstrap, [(topic, p) for p in partitions], timeout=15.0))
    return {tp.partition: offset for tp, offset in result.items()}


def list_offsets(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    """The broker's raw ListOffsets(LATEST) answers (wrong on Tansu after multi-record batches)."""

    async def run() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            answer = await consumer.end_offsets([TopicPartition(topic, p) for p in partitions])
        finally:
            await consumer.stop()
        return {tp.partition: offset for tp, offset in answer.items()}

    return asyncio.run(asyncio.wait_for(run(), 15.0))


class TopicReader:
    """Reads every partition of a topic from offset 0, incrementally; ``with TopicReader(...) as r: r.poll()``.

    The consumer lives on an event loop in a background thread, so its connections keep being serviced while
    the test thread waits for something else (a frozen loop makes aiokafka time out its own requests).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = [TopicPartition(topic, p) for p in range(partitions)]
        self.records: list[Record] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"reader-{topic}", daemon=True)
        self._consumer: AIOKafkaConsumer | None = None

    def _run(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self._loop).result(timeout + 5.0)

    def __enter__(self) -> Self:
        async def start() -> AIOKafkaConsumer:
            consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100
            )
            await consumer.start()
            consumer.assign(self.partitions)
            for tp in self.partitions:
                consumer.seek(tp, 0)
            return consumer

        self._thread.start()
        try:
            self._consumer = self._run(start(), 15.0)
        except BaseException:
            self._shutdown()
            raise
        return self

    def _shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10.0)
        if not self._thread.is_alive():
            self._loop.close()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._consumer is not None:
                self._run(self._consumer.stop(), 15.0)
        finally:
            self._shutdown()

    def poll(self, timeout: float = 0.2) -> list[Record]:
        """Records that arrived since the last poll (also appended to ``records``)."""
        assert self._consumer is not None, "use TopicReader as a context manager"
        consumer = self._consumer

        async def fetch() -> list[Record]:
            batches = await consumer.getmany(timeout_ms=int(timeout * 1000))
            return [Record(m.partition, m.offset, m.key, m.value) for msgs in batches.values() for m in msgs]

        new = self._run(fetch(), timeout + 15.0)
        self.records.extend(new)
        return new

    def poll_until(
        self, predicate: Callable[[list[Record]], object], timeout: float, message: str = "condition"
    ) -> list[Record]:
        """Poll until ``predicate(records)`` is truthy; ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate(self.records):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{message} not reached within {timeout:.1f}s ({len(self.records)} read)")
            self.poll()
        return self.records
