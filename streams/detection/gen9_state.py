"""``RunState9``: a scope's state under the 2026.9 profile, and its compact form (format 2).

It is a :class:`~streams.detection.state.RunState` (so every shell stores, expires and re-emits it alike)
whose history records are the 2026.7 ones, plus a parallel tuple of what 2026.9 adds per record
(:class:`Mark`) and the run's one-recovery flag. The 2026.7 format (1) is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from streams.detection.gen9_records import CallRecord9, History9
from streams.detection.guard import GuardState
from streams.detection.records import CallRecord
from streams.detection.state import RunState

FORMAT_VERSION_9: Final = 2


class _Keep:
    """Marks an argument of :meth:`RunState9.of` that keeps the base state's value."""


KEEP: Final = _Keep()
Mark = tuple[bool, str | None, bool]  # (veto, failure identity, no_progress)
PLAIN: Final[Mark] = (False, None, False)


@dataclass(frozen=True, slots=True)
class RunState9(RunState):
    """``marks[i]`` belongs to ``history[i]``; ``recovered``: this run already had its one recovery reply."""

    marks: tuple[Mark, ...] = ()
    recovered: bool = False

    def records(self) -> History9:
        marks = self.marks if len(self.marks) == len(self.history) else (PLAIN,) * len(self.history)
        return tuple(CallRecord9(*rec, *mark) for rec, mark in zip(self.history, marks, strict=True))

    @classmethod
    def of(
        cls,
        base: RunState,
        records: History9,
        recovered: bool,
        *,
        buckets: dict[bytes, int] | None = None,
        blocked: bytes | None = None,
        guard: GuardState | _Keep | None = KEEP,
        seen: bytes | None = None,
    ) -> RunState9:
        """A state with ``records`` as its history and ``base``'s other parts unless given."""
        return cls(
            tuple(CallRecord(*rec[:5]) for rec in records),
            base.buckets if buckets is None else buckets,
            base.blocked if blocked is None else blocked,
            base.guard if isinstance(guard, _Keep) else guard,
            base.seen if seen is None else seen,
            tuple((rec.veto, rec.failure, rec.no_progress) for rec in records),
            recovered,
        )

    def to_primitive(self) -> list[Any]:
        base = RunState.to_primitive(self)
        base[0] = FORMAT_VERSION_9
        sparse = [[at, *mark] for at, mark in enumerate(self.marks) if mark != PLAIN]
        return [*base, sparse, self.recovered]

    @classmethod
    def from_primitive(cls, obj: Any) -> RunState9:
        try:
            *base, sparse, recovered = obj
        except (TypeError, ValueError):
            raise ValueError("RunState9 primitive must be a list of 9 items") from None
        if not base or base[0] != FORMAT_VERSION_9 or type(recovered) is not bool or not isinstance(sparse, list):
            raise ValueError("malformed RunState9 primitive")
        plain = RunState.from_primitive([1, *base[1:]])
        marks = [PLAIN] * len(plain.history)
        for entry in sparse:
            if not (isinstance(entry, list) and len(entry) == 4):
                raise ValueError("malformed RunState9 marks")
            at, veto, failure, no_progress = entry
            valid = type(at) is int and 0 <= at < len(marks) and type(veto) is bool and type(no_progress) is bool
            if not valid or not (failure is None or type(failure) is str):
                raise ValueError("malformed RunState9 marks")
            marks[at] = (veto, failure, no_progress)
        return cls(plain.history, plain.buckets, plain.blocked, plain.guard, plain.seen, tuple(marks), recovered)
