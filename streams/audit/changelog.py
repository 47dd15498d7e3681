"""The worker's run-table changelog as replay evidence: which stored version a run starts from, and where the
worker restarted it after an expiry (pure; :mod:`streams.audit.with_state` reads the records and replays).

The rules (origins stored/expired/first/compacted/empty, restarts inside the range) are written in
docs/auditing.md; here they are applied to one run's changelog records at a time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from streams.detection import RunState
from streams.kafka import reader
from streams.loop_cost import RunUsage
from streams.worker import envelope
from streams.worker.envelope import StoredRun

Origin = Literal["stored", "first", "expired", "compacted", "empty"]
ORIGINS: Final[tuple[Origin, ...]] = ("stored", "first", "expired", "compacted", "empty")


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    """One changelog record of a run, in changelog order. ``value`` None (or empty): a tombstone."""

    offset: int
    value: StoredRun | None


@dataclass(frozen=True, slots=True)
class Restart:
    """An expiry inside the range: the worker deleted the run's state covering offsets <= ``after`` (tombstone at
    ``changelog_offset``) and applied the run's next event, at ``offset``, to an empty state."""

    offset: int
    changelog_offset: int
    after: int

    def describe(self) -> str:
        at = f"changelog offset {self.changelog_offset}"
        return f"state expired by the worker (tombstone at {at}): restarting from empty"

    def to_json(self) -> dict[str, int]:
        return {"offset": self.offset, "changelog_offset": self.changelog_offset, "covered_offset": self.after}


@dataclass(frozen=True, slots=True)
class Expiries:
    """A run's tombstones after its base (:func:`select_expiries`); the last three hold changelog offsets."""

    restarts: tuple[Restart, ...] = ()
    idle: tuple[int, ...] = ()  # no later event of the run in the range: nothing to replay
    unknown: tuple[int, ...] = ()  # not directly after a version of the run: the restart point is unknown
    unknown_start: int | None = None  # the base is such a tombstone: the run starts empty at the range

    def unknowable(self) -> tuple[int, ...]:
        """Every tombstone whose restart point is unknown (the base's first)."""
        return (*(() if self.unknown_start is None else (self.unknown_start,)), *self.unknown)


@dataclass(frozen=True, slots=True)
class Base:
    """Where a run's replay starts: ``state`` (None: empty) covering its events at offsets <= ``after``.

    Events of the run after ``after`` and before the range are applied silently first (warm-up); events in the
    range at or below ``after`` are skipped (only when ``origin`` is ``compacted``). ``expiries``: the worker's
    restarts of the run inside the range.
    """

    state: RunState | None
    after: int
    origin: Origin
    changelog_offset: int | None = None
    expiries: Expiries = Expiries()
    usage: RunUsage | None = None  # the run's model usage stored with ``state`` (streams.loop_cost)


def _covering(records: Sequence[ChangelogRecord], first: int) -> int | None:
    """Index of the run's first version covering offset ``first`` (``last_offset >= first``)."""
    return next((i for i, r in enumerate(records) if r.value is not None and r.value.last_offset >= first), None)


def _deleted(records: Sequence[ChangelogRecord], i: int) -> StoredRun | None:
    """The version the tombstone ``records[i]`` deleted: the record right before it, when that is a version
    (else it is gone, e.g. compacted away, or the record before is another tombstone: unknown)."""
    return records[i - 1].value if i > 0 else None


def select_base(records: Sequence[ChangelogRecord], first: int) -> Base:
    """The base of a run whose first event in the range is at ``first`` (see the module docstring).

    ``records`` are the run's changelog records of its source partition in changelog order; states of another
    source partition (a repartitioned topic) must already be left out.
    """
    covering = _covering(records, first)
    if covering == 0:
        newer = records[0].value
        assert newer is not None
        return Base(newer.state, newer.last_offset, "compacted", records[0].offset, usage=newer.usage)
    end = len(records) if covering is None else covering
    if not end:
        return Base(None, first - 1, "empty")
    prev = records[end - 1]
    if prev.value is not None:
        return Base(prev.value.state, prev.value.last_offset, "stored", prev.offset, usage=prev.value.usage)
    deleted = _deleted(records, end - 1)
    # After a tombstone the worker started the run afresh with its first event past the state it deleted; with
    # that state gone (compacted away) the point is unknown: start at the range (select_expiries notes it).
    after = deleted.last_offset if deleted is not None and deleted.last_offset < first else first - 1
    return Base(None, after, "expired", prev.offset)


def select_expiries(records: Sequence[ChangelogRecord], offsets: Sequence[int]) -> Expiries:
    """The worker's expiries of a run inside the range, from its changelog ``records`` (as for
    :func:`select_base`) and the offsets of its events in the range (ascending, same partition).

    Every tombstone after the first version covering the run's first event in the range, directly after a
    version covering offsets ``<= L``, restarts the run from empty at its first event after ``L``.
    """
    if not offsets:
        return Expiries()
    first = offsets[0]
    covering = _covering(records, first)
    end = len(records) if covering is None else covering
    unknown_start = None
    if end and records[end - 1].value is None and _deleted(records, end - 1) is None:
        unknown_start = records[end - 1].offset
    restarts: list[Restart] = []
    idle: list[int] = []
    unknown: list[int] = []
    for i in range(end + 1, len(records)):
        tombstone = records[i]
        if tombstone.value is not None:
            continue
        deleted = _deleted(records, i)
        if deleted is None or deleted.last_offset < first:
            unknown.append(tombstone.offset)
            continue
        offset = next((o for o in offsets if o > deleted.last_offset), None)
        if offset is None:
            idle.append(tombstone.offset)
        elif restarts and offset <= restarts[-1].offset:  # the version it deleted went back: redelivered events
            unknown.append(tombstone.offset)
        else:
            restarts.append(Restart(offset, tombstone.offset, deleted.last_offset))
    return Expiries(tuple(restarts), tuple(idle), tuple(unknown), unknown_start)


def expiry_notes(run: tuple[int, str], base: Base, topic: str) -> list[str]:
    """What cannot be known about the run's expiries (see :class:`Expiries`), one line per tombstone."""
    partition, key = run
    gone = "does not directly follow a version of the run covering the range's events before it (compacted away?)"
    gone += ": where the worker restarted the run is unknown"
    notes = []
    if base.expiries.unknown_start is not None:
        notes.append(
            f"{topic}[{partition}]@{base.expiries.unknown_start}: tombstone of {key} {gone}; it starts empty "
            "at the range"
        )
    notes += [
        f"{topic}[{partition}]@{offset}: tombstone of {key} {gone}; replayed without that restart"
        for offset in base.expiries.unknown
    ]
    return notes


@dataclass(slots=True)
class ChangelogIndex:
    """Changelog records per (source partition, scope key), the records that were not stored runs, and the
    wanted partitions with missing offsets."""

    runs: dict[tuple[int, str], list[ChangelogRecord]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)


def index_changelog(
    records_by_partition: Mapping[int, Sequence[reader.TopicRecord]], topic: str, wanted: set[tuple[int, str]]
) -> ChangelogIndex:
    """Decode the changelog records of the wanted (partition, scope key) runs, in changelog order.

    Notes what makes expiries unknowable: a wanted run's tombstone in another partition (offsets of different
    partitions are not comparable) and missing offsets in a wanted partition (compacted or deleted records).
    """
    out = ChangelogIndex()
    keys = {key for _, key in wanted}
    decoded, undecodable = 0, []
    for partition in sorted(records_by_partition):
        records = sorted(records_by_partition[partition], key=lambda r: r.offset)
        if any(p == partition for p, _ in wanted):
            out.gaps += _missing_offsets(records, topic, partition)
        for rec in records:
            if rec.key is None:
                out.ignored.append(f"{topic}[{partition}]@{rec.offset}: record has no key, ignored")
                continue
            try:
                key = rec.key.decode("utf-8")
            except UnicodeDecodeError:
                out.ignored.append(f"{topic}[{partition}]@{rec.offset}: key is not UTF-8, ignored")
                continue
            if (partition, key) not in wanted:
                if key in keys and not rec.value:
                    out.ignored.append(
                        f"{topic}[{partition}]@{rec.offset}: tombstone of {key}, whose events in the range are in "
                        "another partition (offsets not comparable): whether the worker restarted it there is "
                        "unknown, ignored"
                    )
                continue
            stored: StoredRun | None = None
            if rec.value:
                try:
                    stored = envelope.decode(rec.value)
                except envelope.EnvelopeError as exc:
                    undecodable.append(f"{topic}[{partition}]@{rec.offset}: {exc}")
                    out.ignored.append(f"{undecodable[-1]}, ignored")
                    continue
            decoded += 1  # a stored run or a tombstone: what a changelog holds
            if stored is not None and stored.partition != partition:
                out.ignored.append(
                    f"{topic}[{partition}]@{rec.offset}: state of source partition {stored.partition}, ignored"
                )
                continue
            out.runs.setdefault((partition, key), []).append(ChangelogRecord(rec.offset, stored))
    reader.check_kind(topic, "stored runs", decoded, undecodable)
    return out


def _missing_offsets(records: Sequence[reader.TopicRecord], topic: str, partition: int) -> list[str]:
    """A note when offsets below the partition's last record are missing (compaction or deleted records)."""
    if not records:
        return []
    missing = records[-1].offset + 1 - len(records)
    if not missing:
        return []
    return [
        f"{topic}[{partition}]: {missing} of offsets 0..{records[-1].offset} are missing (compacted or deleted): "
        "an expiry whose tombstone is gone cannot be replayed (a run may be continued where the worker restarted it)"
    ]


__all__ = [
    "ORIGINS",
    "Base",
    "ChangelogIndex",
    "ChangelogRecord",
    "Expiries",
    "Origin",
    "Restart",
    "expiry_notes",
    "index_changelog",
    "select_base",
    "select_expiries",
]
