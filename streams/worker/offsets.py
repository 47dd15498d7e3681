"""Offsets of the events topic a worker never received: the signal for an event skipped without a trace.

A consumer delivers each partition's records in offset order; after a seek (restart, rebalance) it may go back
and deliver some again, but it never jumps forward over records that exist. A forward jump therefore means the
skipped offsets held no records (transaction markers, a compacted or truncated events topic) or the consumer
lost records (how Faust's resume-before-seek race showed: ``streams.kafka_compat`` remedy 3). The worker counts
the skipped offsets (``loopwatch_skipped_offsets_total``) and logs each jump, so neither goes unnoticed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Jump:
    """Offsets ``first..last`` of ``partition`` were never delivered between two records that were."""

    partition: int
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


class OffsetTracker:
    """The next offset expected per partition, since the partition was (re)assigned."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next: dict[int, int] = {}

    def observe(self, partition: int, offset: int) -> Jump | None:
        """Note a delivered record; a forward jump over offsets never delivered is returned."""
        expected = self._next.get(partition)
        self._next[partition] = offset + 1
        if expected is None or offset <= expected:
            return None  # first record since assignment, the next one, or a re-delivery after a seek
        return Jump(partition, expected, offset - 1)

    def forget(self, partitions: Iterable[int]) -> None:
        """Partitions revoked: whoever owns them next starts from the committed offset, not from ours."""
        for partition in partitions:
            self._next.pop(partition, None)
