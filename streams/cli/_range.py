"""``--from`` / ``--to``: the range of a topic an audit reads (``replay --topic``, ``whatif --topic``), one rule.

A bound is ``N`` for every partition, ``P:N,P:N`` per partition, or an RFC 3339 time resolved with
``offsets_for_times`` (:func:`streams.kafka.reader.parse_bound`); a ``--from`` past its ``--to`` is refused before
anything is read, and a range past a partition's end or holding no record is a note, not an error.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from streams.errors import CommandError
from streams.kafka import reader

#: (option, attribute) of the two flags, for the commands' refusals of flags that need ``--topic``.
RANGE_FLAGS: tuple[tuple[str, str], ...] = (("--from", "start"), ("--to", "end"))


def add_range_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """``--from`` and ``--to`` (attributes ``start`` and ``end``)."""
    parser.add_argument(
        "--from",
        dest="start",
        metavar="SPEC",
        help="with --topic: first offsets (N for every partition, or P:N,...: partitions not listed are read from "
        "their first offset) or an RFC 3339 time",
    )
    parser.add_argument(
        "--to",
        dest="end",
        metavar="SPEC",
        help="with --topic: end offsets, exclusive (N, or P:N,...: partitions not listed are read to their end) or "
        "an RFC 3339 time",
    )


def topic_range(args: argparse.Namespace, command: str) -> tuple[reader.Bound | None, reader.Bound | None]:
    """The parsed ``--from`` and ``--to``; a bad spec or a reversed range is one error line (exit status 2)."""
    try:
        start = reader.parse_bound(args.start) if args.start is not None else None
        end = reader.parse_bound(args.end) if args.end is not None else None
        reader.check_order(start, end)
    except reader.RangeError as exc:
        raise CommandError(str(exc), "--from/--to", f"see 'loopwatch {command} --help'") from None
    return start, end


def note_range(
    command: str,
    args: argparse.Namespace,
    start: reader.Bound | None,
    end: reader.Bound | None,
    read: reader.TopicRead,
) -> None:
    """Notes on stderr: bounds past a partition's end, and a range that holds no record."""
    past = reader.past_end(start, end, read.ends)
    if past:
        print(f"loopwatch {command}: note: {past}", file=sys.stderr)
    if not any(read.records.values()) and (args.start is not None or args.end is not None):
        spans = ", ".join(f"{p}: {lo}..{hi}" for p, (lo, hi) in sorted(read.ranges.items()))
        print(
            f"loopwatch {command}: note: no record of {args.topic} in the range (partition: [from, to) {spans}); "
            "check --from/--to",
            file=sys.stderr,
        )


__all__ = ["RANGE_FLAGS", "add_range_arguments", "note_range", "topic_range"]
