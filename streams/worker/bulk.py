"""Bulk intake: the events topic's records, as the consumer's fetch loop hands them over, until processed.

With ``--delivery bulk`` (the default) the consumer
(:meth:`streams.kafka.compat.CompatConsumer.deliver_in_bulk`) puts each fetched gapless run of one partition's
records here instead of passing every record through Faust's message, event and stream machinery; the
worker's processor takes up to a batch of records at a time. Batches grow with load, and memory does not:
once the queue holds its limit, :meth:`BulkIntake.put` says so and the consumer stops fetching the topic (pauses
its partitions in aiokafka) until :meth:`BulkIntake.when_room` calls back, so it holds at most its limit plus
one fetch. The fetch loop itself never waits here, so the other topics it serves (the storm-count agent's
signals, standby changelogs) keep flowing while the worker works through a backlog.

Revocation is the delicate part: a batch taken before the partitions move on must never be started after,
and one already started must be stored and its position reported before the next owner may begin. So
:meth:`BulkIntake.revoked` drops every queued chunk, lets the owner forget its offset bookkeeping, and
returns only once every batch begun (:meth:`begin`) is settled (:meth:`settle`), or the worker stopped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streams.worker.processing import InputRecord

log = logging.getLogger(__name__)

_REVOKE_LOG_EVERY = 10.0  # seconds between "still waiting" lines while a revocation waits for batches


@dataclass(slots=True)
class Chunk:
    """A gapless run of one partition's records, fetched in one consumer ``generation`` and delivery ``epoch``."""

    tp: Any
    records: Sequence[Any]
    generation: int | None
    epoch: int
    arrived: float  # time.monotonic() when the consumer handed it over


@dataclass(slots=True)
class Taken:
    """Records taken from the intake that their offset tracker lets apply, in the delivery ``epoch`` they were
    taken in: the ``chunks`` taken, the admitted ``records``, and each partition's next offset after them."""

    epoch: int
    chunks: list[Chunk]
    records: list[InputRecord]
    positions: dict[Any, int]


class BulkIntake:
    """The :class:`streams.kafka.compat.BulkSink` of the worker: a bounded queue of chunks plus the count of
    batches begun and not yet settled, which a revocation waits for."""

    def __init__(self, limit: int, on_revoked: Callable[[], None]) -> None:
        self._chunks: deque[Chunk] = deque()
        self._count = 0
        self._limit = limit
        self._on_room: list[Callable[[], None]] = []
        self._ready = asyncio.Event()
        self._settled = asyncio.Event()
        self._unsettled = 0
        self._stopped = False
        self._on_revoked = on_revoked

    # --- the consumer's side ------------------------------------------------------------------------------

    def put(self, tp: Any, records: Sequence[Any], generation: int | None, epoch: int) -> bool:
        """Queue the run, never refused nor waited for (the fetch loop serves other topics); False once full."""
        self._chunks.append(Chunk(tp, records, generation, epoch, time.monotonic()))
        self._count += len(records)
        self._ready.set()
        return self._count < self._limit

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, as soon as the queue is below its limit again (now, if it is)."""
        self._on_room.append(callback)
        self._room()

    def _room(self) -> None:
        if self._on_room and (self._count < self._limit or self._stopped):
            callbacks, self._on_room = self._on_room, []
            for callback in callbacks:
                callback()

    async def revoked(self, revoked: set[Any]) -> None:
        self._chunks.clear()
        self._count = 0
        self._room()
        self._on_revoked()
        while self._unsettled and not self._stopped:
            self._settled.clear()
            try:
                await asyncio.wait_for(self._settled.wait(), _REVOKE_LOG_EVERY)
            except TimeoutError:
                log.warning("revocation waits for %d batches in flight to be stored", self._unsettled)

    # --- the processor's side -----------------------------------------------------------------------------

    def waiting(self) -> int:
        """Records queued."""
        return self._count

    def waited(self) -> float:
        """Seconds the oldest queued records have waited (0 when none are queued)."""
        return time.monotonic() - self._chunks[0].arrived if self._chunks else 0.0

    async def wait(self) -> None:
        """Return once at least one chunk is queued."""
        while not self._chunks:
            self._ready.clear()
            await self._ready.wait()

    async def fill(self, count: int, timeout: float) -> None:
        """Return once ``count`` records are queued, or after ``timeout`` seconds (a linger that ends early)."""
        deadline = time.monotonic() + timeout
        while self._count < count and not self._stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self._ready.clear()
            try:
                async with asyncio.timeout(left):
                    await self._ready.wait()
            except TimeoutError:
                return

    def take(self, most: int) -> list[Chunk]:
        """Queued chunks holding at most ``most`` records in all (the last one split if needed), oldest first."""
        taken: list[Chunk] = []
        left = most
        chunks = self._chunks
        while chunks and left > 0:
            chunk = chunks[0]
            if len(chunk.records) <= left:
                chunks.popleft()
            else:
                chunks[0] = Chunk(chunk.tp, chunk.records[left:], chunk.generation, chunk.epoch, chunk.arrived)
                chunk = Chunk(chunk.tp, chunk.records[:left], chunk.generation, chunk.epoch, chunk.arrived)
            taken.append(chunk)
            left -= len(chunk.records)
        self._count -= most - left
        self._room()
        return taken

    def begin(self) -> None:
        """A batch is started: a revocation now waits for its :meth:`settle`."""
        self._unsettled += 1

    def settle(self) -> None:
        """A begun batch is stored and its positions reported, or it was abandoned without acknowledgement."""
        self._unsettled -= 1
        if not self._unsettled:
            self._settled.set()

    def stop(self) -> None:
        """The worker is shutting down (nothing more is acknowledged): release every waiter."""
        self._stopped = True
        self._room()
        self._settled.set()
