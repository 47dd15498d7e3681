"""``loopwatch tail``: follow loopwatch topics, one readable line per record (or the JSON record with --json).

Reads every partition without joining a consumer group (nothing is committed, any number of tails can run).
Starts at the current end unless ``--from-beginning``; end offsets come from
:func:`streams.kafka.compat.end_offsets` because the embedded broker's ListOffsets answer is wrong. Each
record's line is chosen by what it is (streams/record_lines.py), so verdicts, fleet alerts, dead letters and
events can be followed together. ``--max N`` stops after N shown records (exit status 1 if ``--timeout`` ends
the wait first).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import select
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import IO, Any

import orjson

from streams.cli import StdoutFailed, StdoutGone
from streams.cli._args import bootstrap, bootstrap_setting, non_negative_int, positive_float, positive_int, topic_name
from streams.errors import EXIT_FINDINGS, EXIT_OK, EXIT_UNAVAILABLE, CommandError, warn
from streams.kafka.reader import no_such_topic_hint
from streams.kafka.security import (
    PLAINTEXT,
    KafkaSecurity,
    KafkaSecurityError,
    add_security_arguments,
    security_from_args,
)
from streams.record_lines import fit, kind_of, record_line
from streams.topics import DEAD_LETTER_TOPIC, EVENTS_TOPIC, FLEET_ALERTS_TOPIC, VERDICTS_TOPIC
from streams.worker.settings import DEFAULT_BOOTSTRAP

_ESCALATIONS_REMEMBERED = 100_000  # runs whose shown decision levels are remembered (oldest forgotten first)
LOST_AFTER = 10.0  # seconds without any bootstrap server answering before tail gives up (exit status 3)
_CHECK_EVERY = 5.0  # while no record comes, how often tail asks whether a broker still answers
_CHECK_TIMEOUT = 2.0  # the bound of one such question


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "tail",
        help="follow verdicts, fleet alerts, dead letters or events, one line each",
        description="Follow loopwatch topics from their end (or from the beginning), one readable line per record: "
        "verdicts, fleet storm alerts, dead letters and events each have their own line. Nothing is committed, so "
        f"any number of tails can run. When no bootstrap server has answered for {LOST_AFTER:g} s (the broker went "
        "away), tail says so and ends with exit status 3.",
    )
    p.add_argument(
        "--bootstrap",
        type=bootstrap,
        default=None,
        help=f"Kafka bootstrap servers (env LOOPWATCH_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})",
    )
    p.add_argument(
        "--topic",
        action="append",
        type=topic_name,
        default=None,
        help=f"topic to follow, repeatable (default {VERDICTS_TOPIC}; also {FLEET_ALERTS_TOPIC}, "
        f"{DEAD_LETTER_TOPIC}, {EVENTS_TOPIC})",
    )
    p.add_argument("--json", action="store_true", help="print each record as it is, one JSON object per line")
    p.add_argument("--gateway", help="only records of this gateway id")
    p.add_argument("--agent", help="only records of this agent id")
    p.add_argument("--decision", choices=("warning", "block", "abort"), help="only verdicts with this decision")
    p.add_argument(
        "--escalations",
        action="store_true",
        help="only the first warning, block and abort of each run (a looping run repeats its verdicts)",
    )
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest retained record")
    p.add_argument("--max", type=positive_int, default=None, metavar="N", help="stop after N records")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="S", help="stop after S seconds")
    p.add_argument(
        "--width", type=non_negative_int, default=0, metavar="COLUMNS", help="cut lines to this width (0: never)"
    )
    add_security_arguments(p)
    p.set_defaults(func=run)


def matches(record: dict[str, Any], args: argparse.Namespace) -> bool:
    decision = getattr(args, "decision", None)
    return (
        (args.gateway is None or record.get("gateway_id") == args.gateway)
        and (args.agent is None or record.get("agent_id") == args.agent)
        and (decision is None or record.get("decision") == decision)
    )


def topics_of(args: argparse.Namespace) -> list[str]:
    """The followed topics: ``--topic`` may be repeated (a plain string is accepted too)."""
    topic = args.topic
    if not topic:
        return [VERDICTS_TOPIC]
    return [topic] if isinstance(topic, str) else list(dict.fromkeys(topic))


def _note_verdict_filters(record: dict[str, Any], topic: str, args: argparse.Namespace, noted: set[str]) -> None:
    """Say once per topic that ``--decision`` or ``--escalations`` met records that are not verdicts: on the
    events topic the first showed nothing and the second let everything through, both without a word."""
    kind = kind_of(record)
    if kind == "verdict" or topic in noted:
        return
    noun = kind.replace("_", "-")
    if getattr(args, "decision", None) is not None and "decision" not in record:
        warn("tail", f"--decision keeps only verdicts; {topic} has {noun} records, which it leaves out")
    elif getattr(args, "escalations", False):
        warn("tail", f"--escalations applies to verdicts only; {topic} has {noun} records, which it shows unfiltered")
    else:
        return
    noted.add(topic)


class Escalations:
    """Lets through the first verdict of each decision level of each run (bounded memory)."""

    def __init__(self, limit: int = _ESCALATIONS_REMEMBERED) -> None:
        self._seen: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        self._limit = limit

    def first(self, record: dict[str, Any]) -> bool:
        if kind_of(record) != "verdict":
            return True
        scope = record.get("run_id") or record.get("session_id")
        key = (record.get("gateway_id"), scope, record.get("decision"))
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self._limit:
            self._seen.popitem(last=False)
        return True


class Lifeline:
    """Notices that Kafka went away, which aiokafka only logs while it retries forever.

    While no record comes, every ``every`` seconds (every second once one failed) it asks the bootstrap servers
    the pre-flight question (:func:`streams.kafka.client.kafka_problem`, in a thread); when none has answered for
    ``grace`` seconds, :meth:`check` raises the one error line (exit status 3).
    """

    def __init__(
        self,
        bootstrap: str,
        security: KafkaSecurity,
        *,
        grace: float = LOST_AFTER,
        every: float = _CHECK_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap = bootstrap
        self.security = security
        self.grace = grace
        self.every = every
        self._clock = clock
        self._next = clock() + every
        self._failing_since: float | None = None

    def alive(self) -> None:
        """A record came: the connection works."""
        self._failing_since = None
        self._next = self._clock() + self.every

    async def check(self) -> None:
        if self._clock() < self._next:
            return
        from streams.kafka.client import kafka_problem

        problem = await asyncio.to_thread(kafka_problem, self.bootstrap, self.security, timeout=_CHECK_TIMEOUT)
        now = self._clock()
        if problem is None:
            self.alive()
            return
        if self._failing_since is None:
            self._failing_since = now
        elif now - self._failing_since >= self.grace:
            raise CommandError(
                "lost the connection to Kafka",
                self.bootstrap,
                f"no bootstrap server has answered for {self.grace:g} s (the last try: {problem.what}); run tail "
                "again once the broker is back",
                code=EXIT_UNAVAILABLE,
            )
        self._next = now + 1.0


def reader_gone(out: IO[str]) -> bool:
    """Whether ``out`` is a pipe whose reader has exited (``loopwatch tail | head -1`` once head has its line): poll
    reports an error on such a pipe. Noticed only at the next write, a quiet topic (or one whose records the
    filters all leave out) kept tail waiting for ever."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


async def follow(args: argparse.Namespace, out: IO[str], security: KafkaSecurity = PLAINTEXT) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streams.kafka.client import partition_counts, started
    from streams.kafka.compat import end_offsets

    deadline = time.monotonic() + args.timeout if args.timeout is not None else None
    counts = await partition_counts(args.bootstrap, security=security)
    topics = topics_of(args)
    for topic in topics:
        if topic not in counts:
            raise CommandError("no such topic", topic, no_such_topic_hint(topic, counts, "--topic"))
    tps = [TopicPartition(topic, p) for topic in topics for p in range(counts[topic])]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        client_id="loopwatch-tail",
        **security.aiokafka_kwargs(),
    )
    escalations = Escalations() if getattr(args, "escalations", False) else None
    noted: set[str] = set()
    lifeline = Lifeline(args.bootstrap, security)
    width = getattr(args, "width", 0) or 0
    shown = 0
    async with started(consumer, 15.0):
        consumer.assign(tps)
        if args.from_beginning:
            for tp in tps:
                consumer.seek(tp, 0)
        else:
            ends = await end_offsets(
                args.bootstrap, [(tp.topic, tp.partition) for tp in tps], **security.aiokafka_kwargs()
            )
            for tp in tps:
                consumer.seek(tp, ends[tp])
        while args.max is None or shown < args.max:
            wait = 0.5
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            batches = await consumer.getmany(timeout_ms=max(1, int(wait * 1000)))
            records = sorted((m for msgs in batches.values() for m in msgs), key=lambda m: m.timestamp)
            if records:
                lifeline.alive()
            else:
                await lifeline.check()
            written = shown
            for message in records:
                try:
                    record = orjson.loads(message.value or b"")
                except orjson.JSONDecodeError:
                    record = None
                if not isinstance(record, dict):
                    where = f"{message.topic}[{message.partition}]@{message.offset}"
                    warn(
                        "tail",
                        f"skipping a record that is not a JSON object ({where}, {len(message.value or b'')} bytes)",
                    )
                    continue
                _note_verdict_filters(record, message.topic, args, noted)
                if not matches(record, args) or (escalations is not None and not escalations.first(record)):
                    continue
                out.write((orjson.dumps(record).decode() if args.json else fit(record_line(record), width)) + "\n")
                out.flush()
                shown += 1
                if args.max is not None and shown >= args.max:
                    break
            if shown == written and reader_gone(out):  # nothing written: no write would notice a closed pipe
                raise StdoutGone(errno.EPIPE, "the reader of standard output is gone")
    if args.max is not None and shown < args.max:
        warn("tail", f"{shown} of the {args.max} records asked for (--max) came within {args.timeout:g} s (--timeout)")
        return EXIT_FINDINGS
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    from streams.kafka.client import kafka_failure, preflight

    args.bootstrap = bootstrap_setting(args, "tail")
    try:
        security = security_from_args(args)
    except KafkaSecurityError as exc:
        raise CommandError(str(exc), hint="see 'loopwatch tail --help'") from None
    timeout = 5.0 if args.timeout is None else max(0.5, min(5.0, args.timeout))
    preflight(args.bootstrap, security, timeout=timeout)
    try:
        return asyncio.run(follow(args, sys.stdout, security))
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (streams.cli turns it into this): a follow command's end
        return EXIT_OK
    except (CommandError, StdoutFailed, StdoutGone):  # stdout's errors are streams.cli.main's to report
        raise
    except Exception as exc:
        raise kafka_failure(exc, "cannot follow the topics", args.bootstrap, security) from None
