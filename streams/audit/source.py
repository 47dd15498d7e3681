"""Where audited events come from: JSON Lines files and topic records, accepted exactly as the worker accepts them.

A topic record goes through :func:`streams.decode.accept` (decode and key check), so a record the worker
dead-letters is reported and counted here too, never analysed.
"""

from __future__ import annotations

import heapq
import sys
from collections.abc import Iterable, Iterator
from typing import IO

from streams.audit.replay import TopicRecord
from streams.decode import InvalidEvent, Rejection, accept, decode_event
from streams.kafka.security import KafkaSecurity
from streams.whatif import IndexedEvent

__all__ = ["lines", "read_events", "read_records", "read_topic"]


def lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Each line of a JSON Lines stream without its line end (blank lines included, so numbers stay right)."""
    for raw in stream:
        yield raw.rstrip(b"\r\n")


def read_events(lines: Iterable[bytes], name: str) -> tuple[list[IndexedEvent], int]:
    """Decode every non-blank line; bad ones are reported on stderr as replay does and counted."""
    events: list[IndexedEvent] = []
    bad = 0
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            events.append(IndexedEvent(index, decode_event(raw)))
        except InvalidEvent as exc:
            bad += 1
            print(f"{name}:{index + 1}: invalid event ({exc.reason}): {exc.detail}", file=sys.stderr)
    return events, bad


def read_records(records: Iterable[TopicRecord], topic: str) -> tuple[list[IndexedEvent], int]:
    """Accept topic records (already in processing order) as the worker does; index = position, source =
    partition/offset. Refused records (the worker dead-letters them) are reported on stderr and counted."""
    events: list[IndexedEvent] = []
    bad = 0
    for index, rec in enumerate(records):
        event = accept(rec.key, rec.value)
        if type(event) is Rejection:
            bad += 1
            print(event.describe(f"{topic}[{rec.partition}]@{rec.offset}"), file=sys.stderr)
            continue
        events.append(IndexedEvent(index, event, (rec.partition, rec.offset)))
    return events, bad


async def read_topic(
    bootstrap: str, topic: str, *, timeout: float = 30.0, security: KafkaSecurity | None = None
) -> list[TopicRecord]:
    """Every record of ``topic`` up to its end offsets when called, partitions merged by record timestamp.

    The merge keeps each partition in offset order (all events of a run share a partition), so decisions do
    not depend on how partitions interleave. Reading is :func:`streams.audit.replay.read_partitions`, whose end
    offsets are right on the embedded broker too.
    """
    from streams.audit.replay import read_partitions

    read = await read_partitions(bootstrap, topic, timeout=timeout, security=security)
    return list(heapq.merge(*read.records.values(), key=lambda r: (r.timestamp, r.partition)))
