"""Call records of the 2026.9 history: the 2026.7 record plus what 2026.9 remembers about each outcome."""

from __future__ import annotations

from typing import NamedTuple

from streams.detection.gen9_outcome import Hashed
from streams.detection.records import trim


class CallRecord9(NamedTuple):
    """A 2026.7 :class:`~streams.detection.records.CallRecord` (same first five fields) plus:

    ``veto`` - the detector's own veto of this call (no result hash, counts toward no-progress);
    ``failure`` - the failure identity of a terminal exec failure; ``no_progress`` - an error or an
    unchanged write, the outcomes argument churn counts.
    """

    tool: str
    sig: str
    result: str | None = None
    call_id: str | None = None
    unknown: str | None = None
    veto: bool = False
    failure: str | None = None
    no_progress: bool = False

    @property
    def pending(self) -> bool:
        return self.result is None and not self.veto


History9 = tuple[CallRecord9, ...]


def record_outcome(history: History9, tool: str, sig: str, call_id: str | None, hashed: Hashed, size: int) -> History9:
    """Attach ``hashed`` to the newest pending record of this call, else append a complete record; trim.

    With a call id, the pending record of that id and tool matches even when its arguments differ: 2026.9
    rebinds loop state to the arguments as executed after ``before_tool_call`` rewrites.
    """
    done = CallRecord9(tool, sig, hashed.result, None, hashed.unknown, hashed.veto, hashed.failure, hashed.no_progress)
    for at in range(len(history) - 1, -1, -1):
        rec = history[at]
        if not rec.pending or rec.tool != tool:
            continue
        if (rec.call_id == call_id) if call_id is not None else rec.sig == sig:
            return trim((*history[:at], done, *history[at + 1 :]), size)
    return trim((*history, done), size)
