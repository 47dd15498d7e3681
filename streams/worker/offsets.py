"""The worker's delivery invariant for the events topic: each partition applied gaplessly from its commit.

The events topic is neither compacted nor transactional, so its offsets are dense: per assigned partition the
first record applied after an assignment must be the group's committed offset (the partition's earliest offset
when nothing is committed, or when retention deleted the committed one), and every next one the previous + 1.
A consumer that delivers past a gap has lost records (how Faust's pause-as-a-filter lost them:
``streams.kafka.compat`` remedy 4), and a later commit would make the loss permanent. So the worker does not
apply a record that jumps: it counts the skipped offsets (``loopwatch_skipped_offsets_total``), logs them,
seeks the partition back and re-reads; records beyond the gap that arrive before the seek lands are dropped
too. Dropped records are never acknowledged, so no commit passes them. Records below the expected offset were
applied already (or committed by the previous owner): dropped as well.

An assignment is recognised by the record's consumer generation, not by rebalance callbacks, so no callback
ordering can make the worker accept an arbitrary first offset. Pure bookkeeping: the worker fetches the
committed and earliest offsets and performs the seek.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Step(Enum):
    """What to do with a delivered record that is not a :class:`Jump`."""

    APPLY = "apply"  # the next record: apply it
    BEHIND = "behind"  # below the next expected offset: applied already, drop it
    WAITING = "waiting"  # beyond it while the partition is being re-read: drop it


@dataclass(frozen=True, slots=True)
class Jump:
    """Offsets ``first..last`` of ``partition`` were skipped: re-read from ``first`` (the record is not applied)."""

    partition: int
    first: int
    last: int

    @property
    def count(self) -> int:
        return self.last - self.first + 1


@dataclass(slots=True)
class _Partition:
    generation: int | None
    next: int
    rereading: bool = False


class OffsetTracker:
    """The next offset each partition must deliver, per consumer generation (see the module docstring)."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: dict[int, _Partition] = {}

    def knows(self, partition: int, generation: int | None) -> bool:
        """Whether ``partition`` has a starting point in this ``generation`` (else call :meth:`start`)."""
        part = self._parts.get(partition)
        return part is not None and part.generation == generation

    def start(self, partition: int, generation: int | None, first: int) -> None:
        """A new assignment: ``first`` is the committed offset, or the earliest when nothing is committed."""
        self._parts[partition] = _Partition(generation, first)

    def observe(self, partition: int, offset: int) -> Step | Jump:
        """Judge a delivered record of a partition that :meth:`knows` its generation."""
        part = self._parts[partition]
        if offset == part.next:
            part.next += 1
            part.rereading = False
            return Step.APPLY
        if offset < part.next:
            return Step.BEHIND
        if part.rereading:
            return Step.WAITING
        part.rereading = True
        return Jump(partition, part.next, offset - 1)

    def take_run(self, partition: int, offsets: list[int]) -> bool:
        """Apply a fetched run at once when it is exactly the next offsets (what :meth:`observe` answers
        ``APPLY`` to, one by one, and leaves the same way); otherwise change nothing and return False, and the
        caller observes record by record. The usual chunk takes one list comparison instead of a call each."""
        part = self._parts[partition]
        first = part.next
        if not offsets or offsets != list(range(first, first + len(offsets))):
            return False
        part.next = first + len(offsets)
        part.rereading = False
        return True

    def forget(self) -> None:
        """A revocation: every partition needs a new starting point (the committed offset) before it applies."""
        self._parts.clear()

    def reread_from(self, partition: int, offset: int) -> None:
        """After a :class:`Jump` whose start retention deleted meanwhile: re-read from ``offset`` instead."""
        part = self._parts.get(partition)
        if part is None:
            return  # forgotten by a revocation meanwhile: it starts again from the commit
        part.next = offset
        part.rereading = True
