"""How the commands that publish records (``publish``, ``simulate --bootstrap``) send them and say what they sent.

Both end with one line on stdout, ``sent N events to TOPIC``, also when they are interrupted (then with
``, then interrupted``): N counts what the broker confirmed, so a user knows what is in Kafka before sending again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterable
from typing import Any

from streams.errors import EXIT_USAGE, StdoutError

#: Sends awaited at a time, so that a long run does not keep every future.
BLOCK = 10_000


@dataclasses.dataclass
class Progress:
    """What :func:`send_counted` has had confirmed, and the sends it still held when it stopped."""

    confirmed: int = 0
    held: list[asyncio.Future[Any]] = dataclasses.field(default_factory=list)

    def delivered(self) -> int:
        """The records in Kafka once the producer has stopped (its stop delivers what it holds): an interrupted
        run's count. A second Ctrl-C during that stop cuts it short: what it still delivered then is in Kafka but
        not in the count."""
        return self.confirmed + sum(1 for f in self.held if f.done() and not f.cancelled() and f.exception() is None)


async def send_counted(
    producer: Any, topic: str, records: Iterable[tuple[bytes | None, bytes]], progress: Progress, *, rate: float = 0.0
) -> int:
    """Send every record with the started ``producer`` (``rate`` a second when above 0) and wait for each
    confirmation; how many were sent. ``progress`` keeps the count, also when this is cancelled."""
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
    return count


async def _confirmed(pending: list[asyncio.Future[Any]]) -> int:
    """Wait for every send of ``pending`` (raising the first failure) and empty it; how many there were.
    ``asyncio.wait``, not ``gather``: a cancelled wait leaves the sends to the producer's stop, which delivers
    them, where a cancelled gather would cancel each and the count would lose them."""
    if pending:
        await asyncio.wait(pending)
    for future in pending:
        future.result()
    done = len(pending)
    pending.clear()
    return done


def plural(count: int, noun: str) -> str:
    """``1 event``, ``2 events``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def say_sent(summary: str, *, code: int = EXIT_USAGE) -> None:
    """The line a command that published records ends with, on stdout. A full disk there still ends with a line
    that says what was sent (the records are in Kafka all the same, and a retry would send them twice), with
    status ``code``."""
    try:
        print(summary, flush=True)
    except BrokenPipeError:
        raise  # the reader went away (... | head): 141, as for every command
    except OSError as exc:
        what = f"{summary}, but cannot write that to the output"
        raise StdoutError(what, exc.strerror or str(exc), code=code) from None
