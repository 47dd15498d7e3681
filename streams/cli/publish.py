"""``loopwatch publish``: send events from a JSON Lines file to ``loopwatch.events``, keyed by scope key.

Each line is validated as an event (schemas/events.py) and sent as is (the original bytes), keyed by its scope key
so that every event of a run lands in one partition, in file order. Invalid lines are reported as replay reports
them (``FILE:LINE: invalid event …``) and not sent (exit status 2). ``--raw`` sends every non-blank line
unchecked, keyed by scope key when one can be derived: that is how tests feed the worker bad records to dead-letter.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from streams.audit.source import input_name, invalid_line, lines
from streams.cli._args import (
    bootstrap,
    bootstrap_setting,
    open_events,
    require_stdout,
    topic_name,
)
from streams.cli._sending import (
    Progress,
    add_partitions_argument,
    partitions_setting,
    plural,
    run_counted,
    send_to_topic,
)
from streams.decode import InvalidEvent, decode_event, scope_key
from streams.errors import EXIT_USAGE, CommandError
from streams.kafka.client import (
    preflight,
    scope_key_from_raw,
)
from streams.kafka.security import (
    KafkaSecurityError,
    add_security_arguments,
    security_from_args,
)
from streams.topics import EVENTS_TOPIC
from streams.worker.settings import (
    DEFAULT_BOOTSTRAP,
)

_HELP = "see 'loopwatch publish --help'"
_RAW_MAX_REQUEST = 16 * 1024 * 1024  # --raw may carry deliberately oversized records


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "publish",
        help="send events from a JSON Lines file to loopwatch.events",
        description="Check every line of a JSON Lines file as an event and send the valid ones, each keyed by its "
        "run, so that a run's events stay in order in one partition. Invalid lines are reported with their file "
        "and line number and not sent (exit status 2).",
    )
    p.add_argument("file", type=Path, help="JSON Lines file of events ('-' for stdin)")
    p.add_argument(
        "--bootstrap",
        type=bootstrap,
        default=None,
        help=f"Kafka bootstrap servers (env LOOPWATCH_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument("--topic", type=topic_name, default=EVENTS_TOPIC, help=f"destination topic (default {EVENTS_TOPIC})")
    p.add_argument("--raw", action="store_true", help="send lines unchecked (for testing dead-lettering)")
    add_partitions_argument(p)
    add_security_arguments(p)
    p.set_defaults(func=run)


def _numbered(stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines with their 1-based line numbers."""
    return ((number, line) for number, line in enumerate(lines(stream), 1) if line.strip())


def prepare(
    lines: Iterator[tuple[int, bytes]], *, raw: bool, name: str = "<events>"
) -> tuple[list[tuple[bytes | None, bytes]], int]:
    """``([(key, value)], refused)``; invalid lines are reported on stderr as replay reports them (``name`` is
    the file's) and refused unless ``raw``."""
    records: list[tuple[bytes | None, bytes]] = []
    refused = 0
    for number, line in lines:
        if raw:
            records.append((scope_key_from_raw(line), line))
            continue
        try:
            event = decode_event(line)
        except InvalidEvent as exc:
            refused += 1
            print(f"{invalid_line(name, number, exc)}; not sent", file=sys.stderr)
            continue
        records.append((scope_key(event).encode("utf-8"), line))
    return records, refused


def run(args: argparse.Namespace) -> int:
    args.bootstrap = bootstrap_setting(args, "publish")
    try:
        security = security_from_args(args)
    except KafkaSecurityError as exc:
        raise CommandError(str(exc), hint=_HELP) from None
    partitions = partitions_setting(args, "publish")
    require_stdout()
    with open_events(args.file) as source:
        records, refused = prepare(_numbered(source), raw=args.raw, name=input_name(args.file))
    preflight(args.bootstrap, security)
    progress = Progress()

    def summary(count: int) -> str:
        said = f"sent {plural(count, 'record' if args.raw else 'event')} to {args.topic}"
        return said + (f"; refused {plural(refused, 'invalid line')}" if refused else "")

    sending = send_to_topic(
        args.bootstrap,
        args.topic,
        records,
        partitions=partitions,
        security=security,
        progress=progress,
        producer={
            "linger_ms": 5,
            "max_request_size": _RAW_MAX_REQUEST if args.raw else 1_048_576,
            "client_id": "loopwatch-publish",
        },
        start_timeout=15.0,
    )
    run_counted(sending, progress, summary, topic=args.topic, bootstrap=args.bootstrap, security=security)
    return EXIT_USAGE if refused else 0
