"""Reading topic ranges: the ``--from``/``--to`` bounds and a :class:`RecordSource` the audits read through.

:class:`KafkaSource` is the real one (a broker and its connection security); a test passes any object with the
same two methods instead, so nothing is monkeypatched. Time bounds (RFC 3339) are resolved with
``offsets_for_times``, which uses record timestamps. Producers normally set CreateTime; the embedded broker
(Tansu) answers with the broker's write time, so there a time bound means "written to the broker at or after"
(and it reports "no such offset" as offset 0 with timestamp -1, which is handled). ``--from`` is inclusive,
``--to`` exclusive, for offsets and times.
"""

from __future__ import annotations

import asyncio
import difflib
import heapq
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from streams.errors import EXIT_UNAVAILABLE, EXIT_USAGE, CommandError
from streams.integers import parse_integer, shown
from streams.kafka.security import KafkaSecurity
from streams.topics import DEAD_LETTER_TOPIC, EVENTS_TOPIC, FLEET_ALERTS_TOPIC, VERDICTS_TOPIC, changelog_topic


class RangeError(ValueError):
    """A ``--from``/``--to`` value that is neither offsets nor an RFC 3339 time."""


class NoSuchTopic(RuntimeError):
    """A topic the cluster does not have; ``existing`` holds the cluster's topic names (None: not known)."""

    def __init__(self, topic: str, existing: Collection[str] | None = None) -> None:
        super().__init__("no such topic")
        self.topic = topic
        self.existing = existing


_LOOPWATCH_TOPICS: Final = (EVENTS_TOPIC, VERDICTS_TOPIC, DEAD_LETTER_TOPIC, FLEET_ALERTS_TOPIC)
_CHANGELOG_SUFFIX: Final = changelog_topic("")


def _closest(topic: str, names: Sequence[str]) -> list[str]:
    """The names most like ``topic`` (difflib's ratio at least 0.6, and within 0.1 of the best), best first."""
    scored = sorted(((difflib.SequenceMatcher(None, topic, n).ratio(), n) for n in names), reverse=True)
    scored = [(ratio, n) for ratio, n in scored if ratio >= 0.6]
    return [n for ratio, n in scored[:3] if ratio >= scored[0][0] - 0.1]


def no_such_topic_hint(topic: str, existing: Collection[str] | None, flag: str) -> str:
    """The what-to-do part of every "no such topic" error: the closest existing topic names, else the flag that
    names the topic. For ``--group`` (GROUP-runs-changelog) the cluster's changelogs are the candidates."""
    names = sorted(set(existing or ()) - {topic})
    if flag == "--group":
        changelogs = [n for n in names if n.endswith(_CHANGELOG_SUFFIX)]
        listed = difflib.get_close_matches(topic, changelogs, n=5, cutoff=0.0)
        found = (
            f"; existing: {', '.join(listed)}" if listed else "; the cluster has none" if existing is not None else ""
        )
        return f"the stored state's topic is named after --group (GROUP{_CHANGELOG_SUFFIX}){found}"
    # loopwatch's own topics are of other kinds than each other: one missing is no typo of another
    own = topic in _LOOPWATCH_TOPICS
    close = _closest(topic, [n for n in names if n not in _LOOPWATCH_TOPICS] if own else names)
    running = "the worker creates the loopwatch topics when it starts: is one running?"
    if close:
        either = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
        guess = f"did you mean {either}? (check {flag})"
        # a default name missing is most often a worker not started yet: say that first
        return f"{running} Or {guess}" if own else guess
    hint = f"give an existing topic with {flag}"
    if own:
        return f"{running} Or {hint}"
    return f"{hint}; {running}" if topic.endswith(_CHANGELOG_SUFFIX) else hint


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


_OFFSET_MAX: Final = 2**63 - 1
_PARTITION_MAX: Final = 2**31 - 1
_DIGITS = re.compile(r"[0-9]+")
_PARTS = re.compile(r"^\s*([0-9]+)\s*:\s*([0-9]+)\s*$")


def parse_bound(text: str) -> Bound:
    """``123`` (every partition), ``0:100,1:250`` (per partition) or an RFC 3339 time with a UTC offset."""
    value = text.strip()
    if not value:
        raise RangeError("empty range bound")
    if _DIGITS.fullmatch(value):
        return OffsetBound(default=_whole(value, "offset", _OFFSET_MAX))
    if "," in value or _PARTS.match(value):
        per: dict[int, int] = {}
        for part in value.split(","):
            m = _PARTS.match(part)
            if m is None:
                raise RangeError(f"bad partition offset {part.strip()!r} (want PARTITION:OFFSET)")
            partition, offset = (
                _whole(m.group(1), "partition", _PARTITION_MAX),
                _whole(m.group(2), "offset", _OFFSET_MAX),
            )
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


def _whole(digits: str, what: str, most: int) -> int:
    """A partition or an offset that Kafka can hold (its fields are int32 and int64)."""
    try:
        return parse_integer(digits, most=most)
    except ValueError as exc:
        raise RangeError(f"{what} {shown(digits)} is {exc}") from None


def check_order(start: Bound | None, end: Bound | None) -> None:
    """Refuse a ``--from`` that lies after its ``--to``: the range would be empty, and read as nothing found."""
    if isinstance(start, TimeBound) and isinstance(end, TimeBound):
        if start.ms > end.ms:
            raise RangeError("the --from time is after the --to time")
        return
    if not (isinstance(start, OffsetBound) and isinstance(end, OffsetBound)):
        return  # a time against offsets: only the broker knows which comes first
    pairs = [("", start.default, end.default)]  # the partitions neither lists, then each one listed
    for partition in sorted({*start.per_partition, *end.per_partition}):
        first = start.per_partition.get(partition, start.default)
        pairs.append((f" in partition {partition}", first, end.per_partition.get(partition, end.default)))
    for where, first, last in pairs:
        if first is not None and last is not None and first > last:
            raise RangeError(f"--from {first} is past --to {last}{where}, where the range ends")


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
class TopicRead:
    records: dict[int, list[TopicRecord]]
    ranges: dict[int, tuple[int, int]]  # partition -> [start, end)
    ends: dict[int, int] = field(default_factory=dict)  # partition -> its end offset when read (empty: unknown)


def past_end(start: Bound | None, end: Bound | None, ends: Mapping[int, int]) -> str | None:
    """What to note about ``--from``/``--to`` offsets past their partition's end offset (``ends``): each is
    named with its partition and that end (None: there is none). A ``--from`` there reads nothing from it."""
    found = []
    for flag, bound, effect in (("--from", start, "nothing read from it"), ("--to", end, "read to its end")):
        if not isinstance(bound, OffsetBound):
            continue
        for partition, stop in sorted(ends.items()):
            listed = partition in bound.per_partition
            given = bound.per_partition[partition] if listed else bound.default
            if given is not None and given > stop:
                spec = f"{partition}:{given}" if listed else str(given)
                found.append(f"{flag} {spec} is past partition {partition}'s end offset {stop} ({effect})")
    return "; ".join(found) + "; check --from/--to" if found else None


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
    security: KafkaSecurity | None = None,
) -> TopicRead:
    """Records of ``topic`` in ``[start, end)`` per partition; end offsets come from the compat remedy (taken
    now, right on the embedded broker too). ``security`` None means PLAINTEXT."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streams.kafka.client import started
    from streams.kafka.compat import end_offsets

    auth: dict[str, Any] = security.aiokafka_kwargs() if security is not None else {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **auth
    )
    async with started(consumer, timeout):
        existing = await asyncio.wait_for(consumer.topics(), timeout)
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise NoSuchTopic(topic, existing)
        for bound in (start, end):
            missing = unknown_partitions(bound, partitions)
            if missing:
                count = len(partitions)
                raise RuntimeError(
                    f"topic has no partition {missing[0]} (it has {count}, 0..{count - 1}); "
                    "name partitions of the topic in --from/--to"
                )
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
    return TopicRead(records, ranges, ends)


class RecordSource(Protocol):
    """Where audits read topic records: a broker (:class:`KafkaSource`) or, in tests, lists."""

    def check(self) -> None:
        """Fail with one clear error (a ``CommandError``) before reading when the source is unusable."""

    async def read(self, topic: str, start: Bound | None = None, end: Bound | None = None) -> TopicRead:
        """Records of ``topic`` in ``[start, end)`` per partition, with the ranges read.

        Raises :class:`NoSuchTopic` or ``RuntimeError("topic has no partition N ...")`` for a wrong name or
        partition."""
        ...


@dataclass(frozen=True, slots=True)
class KafkaSource:
    """A broker: :func:`streams.kafka.client.preflight` as the check, :func:`read_partitions` as the read."""

    bootstrap: str
    security: KafkaSecurity | None = None
    timeout: float = 30.0

    def check(self) -> None:
        from streams.kafka.client import preflight

        preflight(self.bootstrap, self.security if self.security is not None else KafkaSecurity())

    async def read(self, topic: str, start: Bound | None = None, end: Bound | None = None) -> TopicRead:
        return await read_partitions(self.bootstrap, topic, start, end, timeout=self.timeout, security=self.security)


#: Where the records of each kind an audit reads are, for the line that says another topic was named.
_WHERE_KIND: Final = {
    "events": "events are in the worker's --events-topic (default loopwatch.events)",
    "verdicts": "verdicts are in the worker's --verdicts-topic (default loopwatch.verdicts)",
    "stored runs": "stored runs are in the worker's <group>-runs-changelog (--group, or --state-topic)",
}


class WrongTopic(CommandError):
    """Not one record of a topic read is of the kind expected (``kind``: a key of :data:`_WHERE_KIND`): another
    topic was named. One line then says so (exit status 2), where a note per record would bury it."""

    def __init__(self, topic: str, kind: str, records: int, first: str) -> None:
        super().__init__(
            f"topic {topic} holds no {kind}: none of the {records} records read is one (the first: {first})",
            hint=_WHERE_KIND[kind],
        )
        self.topic = topic
        self.kind = kind


def check_kind(topic: str, kind: str, good: int, bad: Sequence[str]) -> None:
    """Raise :class:`WrongTopic` when records were read and none of them was good; ``bad`` describes the others."""
    if bad and not good:
        raise WrongTopic(topic, kind, len(bad), bad[0])


def read_failure(
    exc: BaseException, action: str, bootstrap: str, security: KafkaSecurity | None, flag: str = "--topic"
) -> CommandError:
    """A failed topic read as the audits' one error line (a ``CommandError``): a topic or partition that does not
    exist (:meth:`RecordSource.read`'s ``RuntimeError``) is a usage error, exit status 2, a missing topic with
    :func:`no_such_topic_hint` (``flag``: the flag naming it); any other reader problem and every Kafka client
    error (aiokafka's are ``RuntimeError`` too) make Kafka unavailable, exit status 3."""
    from streams.kafka.client import kafka_failure

    security = security if security is not None else KafkaSecurity()
    if isinstance(exc, WrongTopic):  # raised while reading: a usage error, told as it is
        return exc
    if isinstance(exc, NoSuchTopic):
        return CommandError(action, bootstrap, f"no such topic; {no_such_topic_hint(exc.topic, exc.existing, flag)}")
    if isinstance(exc, RuntimeError) and not type(exc).__module__.startswith("aiokafka"):
        text = security.redact(str(exc))
        wrong_name = "no such topic" in text or "has no partition" in text
        return CommandError(action, bootstrap, text, code=EXIT_USAGE if wrong_name else EXIT_UNAVAILABLE)
    return kafka_failure(exc, action, bootstrap, security)


def merged(read: TopicRead) -> list[TopicRecord]:
    """Every record read, partitions merged by record timestamp.

    The merge keeps each partition in offset order (all events of a run share a partition), so decisions do
    not depend on how partitions interleave.
    """
    return list(heapq.merge(*read.records.values(), key=lambda r: (r.timestamp, r.partition)))


__all__ = [
    "Bound",
    "KafkaSource",
    "NoSuchTopic",
    "OffsetBound",
    "RangeError",
    "RecordSource",
    "TimeBound",
    "TopicRead",
    "TopicRecord",
    "WrongTopic",
    "check_kind",
    "check_order",
    "merged",
    "no_such_topic_hint",
    "parse_bound",
    "past_end",
    "read_failure",
    "read_partitions",
    "resolve_offsets",
    "unknown_partitions",
]
