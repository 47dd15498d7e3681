"""Where audited events come from, accepted exactly as the worker accepts them: topic ranges and JSON Lines.

A topic record goes through :func:`streams.decode.accept` (decode and key check), so a record the worker
dead-letters is set aside and reported here too, never replayed or analysed. Reading the records is
:mod:`streams.kafka.reader`'s (a :class:`~streams.kafka.reader.RecordSource`); nothing here does I/O.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Final

from schemas import Event, SourceRef
from streams.decode import InvalidEvent, Rejection, accept, decode_event
from streams.errors import CommandError
from streams.kafka.reader import TopicRecord, check_kind
from streams.whatif import IndexedEvent


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


def input_name(path: object) -> str:
    """How a position names a JSON Lines input: its path, or ``<stdin>`` for ``-``."""
    return "<stdin>" if str(path) == "-" else str(path)


def invalid_line(name: str, number: int, exc: InvalidEvent) -> str:
    """``NAME:LINE: invalid event (reason): detail``, the one report of a bad line (``number`` 1-based)."""
    return f"{name}:{number}: invalid event ({exc.reason}): {exc.detail}"


def lines(stream: IO[bytes]) -> Iterator[bytes]:
    """Each line of a JSON Lines stream without its line end (blank lines included, so numbers stay right)."""
    for raw in stream:
        yield raw.rstrip(b"\r\n")


#: What to do about bad lines, said after them by replay and whatif.
BAD_LINES_HINT: Final = "fix the file, or pass --skip-invalid to report such lines and go on"
#: Bad lines held back before the first event (:func:`decode_lines`); more are counted, not kept.
_HELD: Final = 1_000


def decode_lines(lines: Iterable[bytes], name: str) -> Iterator[tuple[int, Event | None]]:
    """Each non-blank line's 0-based index and its event. A bad line is reported on stderr
    (``NAME:LINE: invalid event (reason): detail``) and yields None, so callers decide whether to go on.

    The bad lines before the first event are held back (the first :data:`_HELD`, the rest counted): when no line
    is an event, the input is not an events file (a verdicts dump, say), and that is one error line (exit status
    2), as for a topic of another kind, where a note per line would bury it."""
    held: list[str] = []
    more = 0
    seen = False
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            message = invalid_line(name, index + 1, exc)
            if seen:
                print(message, file=sys.stderr)
            elif len(held) < _HELD:
                held.append(message)
            else:
                more += 1
            yield index, None
            continue
        if not seen:
            seen = True
            for message in held:
                print(message, file=sys.stderr)
            if more:
                print(f"{name}: {more} more invalid lines before the first event", file=sys.stderr)
        yield index, event
    if held and not seen:
        count = len(held) + more
        what = f"none of its {count} lines is an event" if count > 1 else "its one line is not an event"
        raise CommandError(
            f"{name} holds no events: {what} ({held[0]})",
            hint="give --events a file of events, one JSON object per line ('loopwatch tail --topic "
            "loopwatch.events --from-beginning --json --timeout S' writes one)",
        )


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
    partition/offset. Refused records (the worker dead-letters them) are reported on stderr and counted; a topic
    of which no record is an event is another kind's topic: one error line (``reader.WrongTopic``), as replay."""
    events: list[IndexedEvent] = []
    refused: list[str] = []
    for index, rec in enumerate(records):
        event = accept(rec.key, rec.value)
        if type(event) is Rejection:
            refused.append(event.describe(f"{topic}[{rec.partition}]@{rec.offset}"))
            continue
        events.append(IndexedEvent(index, event, (rec.partition, rec.offset)))
    check_kind(topic, "events", len(events), refused)
    for line in refused:
        print(line, file=sys.stderr)
    return events, len(refused)


__all__ = [
    "BAD_LINES_HINT",
    "BadRecord",
    "PositionedEvent",
    "decode_lines",
    "decode_records",
    "input_name",
    "invalid_line",
    "lines",
    "read_events",
    "read_records",
]
