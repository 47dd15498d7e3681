"""Where audited events come from, accepted exactly as the worker accepts them: topic ranges and JSON Lines.

A topic record goes through :func:`streams.decode.accept` (decode and key check), so a record the worker
dead-letters is set aside and reported here too, never replayed or analysed. Only :func:`read_partitions` (and
:func:`read_topic` on top of it) does I/O.

Time bounds (``--from``/``--to`` as RFC 3339) are resolved with ``offsets_for_times``, which uses record
timestamps. Producers normally set CreateTime; the embedded broker (Tansu) answers with the broker's write time,
so there a time bound means "written to the broker at or after" (and it reports "no such offset" as offset 0
with timestamp -1, which is handled). ``--from`` is inclusive, ``--to`` exclusive, for offsets and times.
"""

from __future__ import annotations

import asyncio
import heapq
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

from schemas import Event, SourceRef
from streams.decode import InvalidEvent, Rejection, accept, decode_event
from streams.kafka.security import KafkaSecurity
from streams.whatif import IndexedEvent


class RangeError(ValueError):
    """A ``--from``/``--to`` value that is neither offsets nor an RFC 3339 time."""


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Offsets per partition; ``default`` applies to partitions not listed (None: the natural start/end)."""

    per_partition: Mapping[int, int] = field(default_factory=dict)
    default: int | None = None


@dataclass(frozen=True, slots=True)
class TimeBound:
    """A point in time, epoch milliseconds (resolved with ``offsets_for_times``)."""

    ms: int


Bound = OffsetBound | TimeBound


_PARTS = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_bound(text: str) -> Bound:
    """``123`` (every partition), ``0:100,1:250`` (per partition) or an RFC 3339 time with a UTC offset."""
    value = text.strip()
    if not value:
        raise RangeError("empty range bound")
    if value.isdigit():
        return OffsetBound(default=int(value))
    if "," in value or _PARTS.match(value):
        per: dict[int, int] = {}
        for part in value.split(","):
            m = _PARTS.match(part)
            if m is None:
                raise RangeError(f"bad partition offset {part.strip()!r} (want PARTITION:OFFSET)")
            partition, offset = int(m.group(1)), int(m.group(2))
            if partition in per:
                raise RangeError(f"partition {partition} given twice")
            per[partition] = offset
        return OffsetBound(per_partition=per)
    try:
        when = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise RangeError(f"{text!r} is neither offsets (N or P:N,...) nor an RFC 3339 time") from None
    if when.tzinfo is None:
        raise RangeError(f"time {text!r} has no UTC offset (RFC 3339 needs Z or +HH:MM)")
    return TimeBound(int(when.timestamp() * 1000))


def resolve_offsets(bound: OffsetBound | None, natural: Mapping[int, int], ends: Mapping[int, int]) -> dict[int, int]:
    """Offsets per partition: ``bound``'s where given, else ``natural``; always clamped into ``[0, end]``."""
    out: dict[int, int] = {}
    for partition, default in natural.items():
        value = default
        if bound is not None:
            if partition in bound.per_partition:
                value = bound.per_partition[partition]
            elif bound.default is not None:
                value = bound.default
        out[partition] = max(0, min(value, ends[partition]))
    return out


def unknown_partitions(bound: Bound | None, partitions: Iterable[int]) -> list[int]:
    if not isinstance(bound, OffsetBound):
        return []
    known = set(partitions)
    return sorted(p for p in bound.per_partition if p not in known)


@dataclass(frozen=True, slots=True)
class TopicRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A topic record :func:`streams.decode.accept` refused (the worker dead-lettered it)."""

    partition: int
    offset: int
    rejection: Rejection

    @property
    def reason(self) -> str:
        return self.rejection.reason

    def describe(self, topic: str) -> str:
        return self.rejection.describe(f"{topic}[{self.partition}]@{self.offset}")


@dataclass(frozen=True, slots=True)
class PositionedEvent:
    """A decoded event with where it came from: ``index`` (line or offset) and, for topics, the partition."""

    index: int
    event: Event
    partition: int | None = None

    @property
    def label(self) -> str:
        return f"{self.partition}@{self.index}" if self.partition is not None else f"#{self.index}"

    def source(self, topic: str) -> SourceRef | None:
        """The verdict ``source`` of a topic event (None for a file line)."""
        if self.partition is None:
            return None
        return SourceRef(topic=topic, partition=self.partition, offset=self.index)


def decode_records(
    records_by_partition: Mapping[int, Sequence[TopicRecord]],
) -> tuple[dict[int, list[PositionedEvent]], list[BadRecord]]:
    """Decode each partition's records (in offset order); bad and key-mismatched records are set aside."""
    events: dict[int, list[PositionedEvent]] = {}
    bad: list[BadRecord] = []
    for partition in sorted(records_by_partition):
        out = events[partition] = []
        for rec in sorted(records_by_partition[partition], key=lambda r: r.offset):
            event = accept(rec.key, rec.value)
            if type(event) is Rejection:
                bad.append(BadRecord(partition, rec.offset, event))
                continue
            out.append(PositionedEvent(rec.offset, event, partition))
    return events, bad


@dataclass(frozen=True, slots=True)
class TopicRead:
    records: dict[int, list[TopicRecord]]
    ranges: dict[int, tuple[int, int]]  # partition -> [start, end)


async def _time_offsets(consumer: Any, tps: Sequence[Any], ms: int, ends: Mapping[Any, int]) -> dict[int, int]:
    """First offset with timestamp >= ``ms`` per partition (its end offset when there is none).

    Kafka answers "none" as offset -1 (aiokafka: None); the embedded broker answers offset 0 with timestamp -1
    instead, so an answer without a timestamp counts as none as well.
    """
    answer = await consumer.offsets_for_times({tp: ms for tp in tps})
    out: dict[int, int] = {}
    for tp in tps:
        found = answer.get(tp)
        if found is None or found.offset < 0 or found.timestamp < 0:
            out[tp.partition] = ends.get(tp, 0)
        else:
            out[tp.partition] = min(found.offset, ends.get(tp, 0))
    return out


async def read_partitions(
    bootstrap: str,
    topic: str,
    start: Bound | None = None,
    end: Bound | None = None,
    *,
    timeout: float = 30.0,
    security: Any = None,
) -> TopicRead:
    """Records of ``topic`` in ``[start, end)`` per partition; end offsets come from kafka_compat (taken now).

    ``security`` is a :class:`streams.kafka.security.KafkaSecurity` (TLS/SASL); None means PLAINTEXT.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streams.kafka.client import started
    from streams.kafka.compat import end_offsets

    auth: dict[str, Any] = security.aiokafka_kwargs() if security is not None else {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **auth
    )
    async with started(consumer, timeout):
        await asyncio.wait_for(consumer.topics(), timeout)
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise RuntimeError("no such topic")
        for bound in (start, end):
            missing = unknown_partitions(bound, partitions)
            if missing:
                raise RuntimeError(f"topic has no partition {missing[0]} (it has {len(partitions)})")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends_tp = await end_offsets(bootstrap, [(topic, tp.partition) for tp in tps], timeout=timeout, **auth)
        ends = {tp.partition: ends_tp.get(tp, 0) for tp in tps}
        begins_tp = await asyncio.wait_for(consumer.beginning_offsets(tps), timeout)
        begins = {tp.partition: int(begins_tp.get(tp, 0)) for tp in tps}
        if isinstance(start, TimeBound):
            starts = await _time_offsets(consumer, tps, start.ms, ends_tp)
        else:
            starts = resolve_offsets(start, begins, ends)
        if isinstance(end, TimeBound):
            stops = await _time_offsets(consumer, tps, end.ms, ends_tp)
        else:
            stops = resolve_offsets(end, ends, ends)
        ranges = {p: (max(starts[p], begins[p]), max(stops[p], starts[p], begins[p])) for p in ends}
        records: dict[int, list[TopicRecord]] = {p: [] for p in ends}
        wanted = [tp for tp in tps if ranges[tp.partition][0] < ranges[tp.partition][1]]
        consumer.assign(tps)
        for tp in wanted:
            consumer.seek(tp, ranges[tp.partition][0])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = [tp for tp in wanted if await consumer.position(tp) < ranges[tp.partition][1]]
            if not remaining:
                break
            if loop.time() > deadline:
                raise TimeoutError(f"no progress reading {len(remaining)} partition(s) of {topic}")
            batches = await consumer.getmany(*remaining, timeout_ms=500)
            for tp, messages in batches.items():
                if messages:
                    deadline = loop.time() + timeout
                lo, hi = ranges[tp.partition]
                for m in messages:
                    if lo <= m.offset < hi:
                        records[tp.partition].append(
                            TopicRecord(tp.partition, m.offset, m.timestamp, m.key, m.value or b"")
                        )
    return TopicRead(records, ranges)


def lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Each line of a JSON Lines stream without its line end (blank lines included, so numbers stay right)."""
    for raw in stream:
        yield raw.rstrip(b"\r\n")


def decode_lines(lines: Iterable[bytes], name: str) -> Iterator[tuple[int, Event | None]]:
    """Each non-blank line's 0-based index and its event. A bad line is reported on stderr
    (``NAME:LINE: invalid event (reason): detail``) and yields None, so callers decide whether to go on."""
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            yield index, decode_event(raw)
        except InvalidEvent as exc:
            print(f"{name}:{index + 1}: invalid event ({exc.reason}): {exc.detail}", file=sys.stderr)
            yield index, None


def read_events(lines: Iterable[bytes], name: str) -> tuple[list[IndexedEvent], int]:
    """Decode every non-blank line; bad ones are reported on stderr as replay does and counted."""
    events: list[IndexedEvent] = []
    bad = 0
    for index, event in decode_lines(lines, name):
        if event is None:
            bad += 1
        else:
            events.append(IndexedEvent(index, event))
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
    read = await read_partitions(bootstrap, topic, timeout=timeout, security=security)
    return list(heapq.merge(*read.records.values(), key=lambda r: (r.timestamp, r.partition)))


__all__ = [
    "BadRecord",
    "Bound",
    "OffsetBound",
    "PositionedEvent",
    "RangeError",
    "TimeBound",
    "TopicRead",
    "TopicRecord",
    "decode_lines",
    "decode_records",
    "lines",
    "parse_bound",
    "read_events",
    "read_partitions",
    "read_records",
    "read_topic",
    "resolve_offsets",
    "unknown_partitions",
]
