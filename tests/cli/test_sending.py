"""What ``publish`` and ``simulate --bootstrap`` count as sent (``streams/cli/_sending.py``), with a producer that
delivers only when it stops, as aiokafka's stop delivers every batch it holds.

The real-broker tests (tests/cli/test_sigterm.py) cannot place a signal: here the cancellation lands while the
sending waits for a block of sends, where a wait that cancelled them (``asyncio.gather``) lost them from the count.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from streams.cli._sending import BLOCK, Progress, create_if_missing, plural, send_counted


class HeldProducer:
    """Holds every send after the first ``prompt`` until ``stop``, which delivers them all (``deliver=False``: a
    sender that died)."""

    def __init__(self, *, prompt: int = 0, deliver: bool = True, fail: frozenset[int] = frozenset()) -> None:
        self.futures: list[asyncio.Future[None]] = []
        self.prompt = prompt
        self.deliver = deliver
        self.fail = fail  # the sends (by index) that fail at once

    async def send(self, topic: str, value: bytes, key: bytes | None) -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if len(self.futures) in self.fail:
            future.set_exception(RuntimeError(f"send {len(self.futures)} failed"))
        elif len(self.futures) < self.prompt:
            future.set_result(None)
        self.futures.append(future)
        return future

    async def stop(self) -> None:
        for future in self.futures:
            if self.deliver and not future.done():
                future.set_result(None)


def records(count: int) -> Iterator[tuple[bytes | None, bytes]]:
    return ((b"run", b"{}") for _ in range(count))


def interrupted(producer: HeldProducer, total: int, sent_before: int) -> int:
    """Cancel the sending once ``sent_before`` sends are made and nothing more moves, then stop the producer (as
    the command's ``started`` block does); what the progress then counts."""

    async def scenario() -> int:
        progress = Progress()
        task = asyncio.create_task(send_counted(producer, "t", records(total), progress))
        for _ in range(100_000):  # bounded: until the sending waits
            if len(producer.futures) >= sent_before:
                break
            await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        assert len(producer.futures) == sent_before  # waiting, not sending
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await producer.stop()
        return progress.delivered()

    return asyncio.run(scenario())


def test_a_cancelled_wait_for_a_block_counts_what_the_stop_delivered() -> None:
    assert interrupted(HeldProducer(), 2 * BLOCK + 5, BLOCK) == BLOCK


def test_a_cancelled_wait_for_the_last_sends_counts_them_too() -> None:
    assert interrupted(HeldProducer(prompt=BLOCK), BLOCK + 7, BLOCK + 7) == BLOCK + 7


def test_sends_that_were_never_delivered_are_not_counted() -> None:
    assert interrupted(HeldProducer(deliver=False), 50, 50) == 0


def test_an_uninterrupted_run_counts_every_record_and_keeps_no_future() -> None:
    progress = Progress()
    count = asyncio.run(send_counted(HeldProducer(prompt=3 * BLOCK), "t", records(2 * BLOCK + 3), progress))
    assert (count, progress.confirmed, progress.delivered(), progress.held, progress.finished) == (
        2 * BLOCK + 3,
        2 * BLOCK + 3,
        2 * BLOCK + 3,
        [],
        True,
    )


def test_a_failed_block_raises_its_first_failure_and_reads_every_other(caplog: pytest.LogCaptureFixture) -> None:
    """The first failure in send order is the one reported; the others are read too, or asyncio prints "Future
    exception was never retrieved" for each after the command's one line (a broker gone fails every send)."""

    def run() -> tuple[str, bool, int]:
        progress = Progress()
        try:
            asyncio.run(send_counted(HeldProducer(prompt=10, fail=frozenset({1, 2, 3})), "t", records(5), progress))
        except RuntimeError as exc:
            return str(exc), progress.finished, progress.confirmed  # as a failed command: nothing else reads them
        raise AssertionError("no failure raised")

    assert run() == ("send 1 failed", False, 0)
    gc.collect()  # the failed futures are gone: each unread exception would be logged now
    assert "never retrieved" not in caplog.text


def test_the_count_is_plural_only_when_it_should_be() -> None:
    assert [plural(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]


def test_a_topic_made_by_another_between_the_check_and_the_creation_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker starting at the same moment can create the topic with its own count after the check found none:
    the command sends into it (as into any existing topic), where it failed with "topic has N partitions"."""
    from streams.kafka import admin, client
    from streams.kafka.security import PLAINTEXT

    async def nothing(*_: object, **__: object) -> dict[str, int]:
        return {}

    async def one(*_: object, **__: object) -> int:
        return 1

    async def made_meanwhile(*_: object, **__: object) -> dict[str, bool]:
        raise admin.TopicMismatchError("topic has 12 partitions, 2 required (t)")

    monkeypatch.setattr(client, "partition_counts", nothing)
    monkeypatch.setattr(client, "broker_count", one)
    monkeypatch.setattr(admin, "ensure_topics", made_meanwhile)
    asyncio.run(create_if_missing("b:1", "t", 2, PLAINTEXT))
