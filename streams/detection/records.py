"""The per-scope call history: records, pending-call bookkeeping and the sliding window."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol, TypeVar


class CallRecord(NamedTuple):
    """One call of the window. ``sig`` is ``tool:argsHash``; ``result`` is None while pending.

    ``call_id`` is kept only while the record is pending (it is only used to attach an outcome);
    ``unknown`` is the missing-tool name parsed from an error outcome.
    """

    tool: str
    sig: str
    result: str | None = None
    call_id: str | None = None
    unknown: str | None = None


History = tuple[CallRecord, ...]


class RecordView(Protocol):
    """What the detectors shared by every semantics profile read from a record (of any profile)."""

    @property
    def tool(self) -> str: ...
    @property
    def sig(self) -> str: ...
    @property
    def result(self) -> str | None: ...
    @property
    def unknown(self) -> str | None: ...


Records = Sequence[RecordView]
_R = TypeVar("_R")


def trim(history: tuple[_R, ...], size: int) -> tuple[_R, ...]:
    """Keep the newest ``size`` records."""
    return history[len(history) - size :] if len(history) > size else history


def record_outcome(
    history: History,
    tool: str,
    sig: str,
    call_id: str | None,
    result: str,
    unknown: str | None,
    size: int,
) -> History:
    """Attach an outcome to the newest matching pending record, else append a complete record; then trim.

    A pending record matches when it has the same signature and, if ``call_id`` is given, the same call id.
    """
    done = CallRecord(tool, sig, result, None, unknown)
    for at in range(len(history) - 1, -1, -1):
        rec = history[at]
        if rec.result is None and rec.sig == sig and (call_id is None or rec.call_id == call_id):
            return trim((*history[:at], done, *history[at + 1 :]), size)
    return trim((*history, done), size)
