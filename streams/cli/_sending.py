"""How the commands that publish records (``publish``, ``simulate --bootstrap``) send them and say what they sent.

Both create a missing topic as the worker would (``--partitions``, else ``LOOPWATCH_PARTITIONS``, else the
worker's default), so that a worker started afterwards with its defaults finds the partition count it requires.
Both end with one line on stdout, ``sent N events to TOPIC`` (each command adds its own details), also when they
are interrupted while sending (then with ``, then interrupted``): N counts what the broker confirmed, so a user
knows what is in Kafka before sending again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any

from streams.cli._args import partition_count
from streams.cli._signals import settle
from streams.errors import EXIT_INTERRUPTED, EXIT_USAGE, CommandError, StdoutError, stdout_reason
from streams.kafka.security import KafkaSecurity
from streams.topics import partition_count_problem
from streams.worker.settings import DEFAULT_PARTITIONS, SettingsError, env_int, environ

#: Sends awaited at a time, so that a long run does not keep every future.
BLOCK = 10_000


@dataclasses.dataclass
class Progress:
    """What :func:`send_counted` has had confirmed, and the sends it still held when it stopped."""

    confirmed: int = 0
    held: list[asyncio.Future[Any]] = dataclasses.field(default_factory=list)
    finished: bool = False  # every record was sent and confirmed: a signal after that interrupts nothing

    def delivered(self) -> int:
        """The records in Kafka once the producer has stopped (its stop delivers what it holds): an interrupted
        run's count. A second Ctrl-C during that stop cuts it short: what it still delivered then is in Kafka but
        not in the count."""
        return self.confirmed + sum(1 for f in self.held if f.done() and not f.cancelled() and f.exception() is None)


def add_partitions_argument(parser: argparse.ArgumentParser) -> None:
    """``--partitions``: the partition count of a topic the command has to create."""
    parser.add_argument(
        "--partitions",
        type=partition_count,
        default=None,
        help="partitions of the topic if it has to be created, as the worker creates it "
        f"(env LOOPWATCH_PARTITIONS; default {DEFAULT_PARTITIONS})",
    )


def partitions_setting(args: argparse.Namespace, command: str) -> int:
    """``--partitions``, else ``LOOPWATCH_PARTITIONS``, else the worker's default; read only when sending."""
    if args.partitions is not None:
        return int(args.partitions)
    hint = f"see 'loopwatch {command} --help'"
    try:
        partitions = env_int(environ(), "LOOPWATCH_PARTITIONS", DEFAULT_PARTITIONS)
    except SettingsError as exc:
        raise CommandError(str(exc), hint=hint) from None
    problem = partition_count_problem(partitions)
    if problem is not None:
        raise CommandError(f"LOOPWATCH_PARTITIONS={partitions} {problem}", hint=hint)
    return partitions


async def create_if_missing(bootstrap: str, topic: str, partitions: int, security: KafkaSecurity) -> None:
    """Create ``topic`` with ``partitions`` and the worker's replication when the cluster lacks it (a broker that
    creates topics on first use would give it its own default count, which the worker then refuses)."""
    from streams.kafka.admin import TopicMismatchError, ensure_topics
    from streams.kafka.client import broker_count, partition_counts
    from streams.worker.settings import replication_for

    if topic not in await partition_counts(bootstrap, security=security):
        replication = replication_for(await broker_count(bootstrap, security=security), None)  # as the worker's
        with contextlib.suppress(TopicMismatchError):  # made meanwhile by another (a worker starting): it is used
            await ensure_topics(bootstrap, {topic: partitions}, replication=replication, security=security)


async def send_to_topic(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    *,
    partitions: int,
    security: KafkaSecurity,
    progress: Progress | None,
    producer: Mapping[str, Any],
    start_timeout: float,
    rate: float = 0.0,
) -> int:
    """Create ``topic`` if missing (:func:`create_if_missing`), then send every record with a producer of the
    command's ``producer`` settings (``acks=all``) and wait for each confirmation (:func:`send_counted`)."""
    from aiokafka import AIOKafkaProducer  # only the sending path needs Kafka

    from streams.kafka.client import started

    await create_if_missing(bootstrap, topic, partitions, security)
    client = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", **producer, **security.aiokafka_kwargs())
    async with started(client, start_timeout):
        return await send_counted(client, topic, records, progress, rate=rate)


async def send_counted(
    producer: Any,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes]],
    progress: Progress | None = None,
    *,
    rate: float = 0.0,
) -> int:
    """Send every record with the started ``producer`` (``rate`` a second when above 0) and wait for each
    confirmation; how many were sent. ``progress`` keeps the count, also when this is cancelled. A failed send
    ends the sending at the end of its block of :data:`BLOCK`."""
    progress = progress if progress is not None else Progress()
    count = 0
    started = time.monotonic()
    for key, value in records:
        if rate > 0:
            delay = started + count / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        progress.held.append(await producer.send(topic, value=value, key=key))
        count += 1
        if len(progress.held) >= BLOCK:
            progress.confirmed += await _confirmed(progress.held)
    progress.confirmed += await _confirmed(progress.held)
    progress.finished = True
    return count


async def _confirmed(pending: list[asyncio.Future[Any]]) -> int:
    """Wait for every send of ``pending`` (raising the first failure) and empty it; how many there were.
    ``asyncio.wait``, not ``gather``: a cancelled wait leaves the sends to the producer's stop, which delivers
    them, where a cancelled gather would cancel each and the count would lose them."""
    if pending:
        await asyncio.wait(pending)
    failures = [f.exception() for f in pending]  # each read, so that asyncio reports none as never retrieved
    failure = next((exc for exc in failures if exc is not None), None)
    if failure is not None:
        raise failure
    done = len(pending)
    pending.clear()
    return done


def run_counted(
    sending: Coroutine[Any, Any, int],
    progress: Progress,
    summary: Callable[[int], str],
    *,
    topic: str,
    bootstrap: str,
    security: KafkaSecurity,
) -> None:
    """Run a command's ``sending`` to ``topic`` (which keeps ``progress``) and end with its ``summary`` line. Ctrl-C
    or SIGTERM while it sends: the line says what is in Kafka and ``, then interrupted``, and the interrupt goes on
    (130). A failure is one line (:func:`streams.kafka.client.kafka_failure`)."""
    try:
        count = asyncio.run(sending)
    except KeyboardInterrupt:
        if not progress.finished:
            _say_sent(f"{summary(progress.delivered())}, then interrupted", code=EXIT_INTERRUPTED)
            raise
        count = progress.confirmed  # every record was confirmed before the signal: nothing was interrupted
    except Exception as exc:  # Kafka errors, timeouts, topic mismatches, TLS failures
        from streams.kafka.client import kafka_failure

        raise kafka_failure(exc, f"cannot publish to {topic}", bootstrap, security) from None
    settle()  # every record is confirmed: a Ctrl-C now would only make the summary a lie
    _say_sent(summary(count))


def plural(count: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _say_sent(summary: str, *, code: int = EXIT_USAGE) -> None:
    """The line a command that published records ends with, on stdout. A full disk there still ends with a line
    that says what was sent (the records are in Kafka all the same, and a retry would send them twice), with
    status ``code``."""
    try:
        print(summary, flush=True)
    except BrokenPipeError:
        raise  # the reader went away (... | head): 141, as for every command
    except OSError as exc:
        what = f"{summary}, but cannot write that to the output"
        raise StdoutError(what, stdout_reason(exc), code=code) from None
