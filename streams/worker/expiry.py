"""Idle-run expiry (processing-time TTL) and the state-size figures, as a pure selection over stored values.

Runs end without telling anyone, so without a TTL the table grows forever. Processing time (when the worker
last wrote the run) is used rather than event time so that a gateway with a wrong clock, or a replay of old
events, can neither keep state alive forever nor expire it at once.

Only runs of partitions this worker actively owns are considered: a memory store also holds standby copies
of other workers' partitions, and expiring those would race their owners' writes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from streams.worker import envelope


@dataclass(slots=True)
class SweepResult:
    expired: list[tuple[bytes, int]] = field(default_factory=list)  # (key, partition)
    live_runs: int = 0
    live_bytes: int = 0
    unreadable: int = 0


def sweep(
    items: Iterable[tuple[bytes, bytes]],
    *,
    now_ms: int,
    ttl_ms: int,
    active_partitions: Collection[int],
    result: SweepResult | None = None,
) -> SweepResult:
    """Pick the runs idle for more than ``ttl_ms``; count the others (``ttl_ms <= 0`` disables expiry)."""
    out = result if result is not None else SweepResult()
    for key, raw in items:
        try:
            header = envelope.peek(raw)
        except envelope.EnvelopeError:
            out.unreadable += 1
            continue
        if header.partition not in active_partitions:
            continue
        if ttl_ms > 0 and now_ms - header.last_seen_ms > ttl_ms:
            out.expired.append((key, header.partition))
        else:
            out.live_runs += 1
            out.live_bytes += len(key) + len(raw)
    return out


def is_expired(raw: bytes, *, now_ms: int, ttl_ms: int) -> bool:
    """Re-check one value right before deleting it (it may have been written since the sweep read it)."""
    try:
        header = envelope.peek(raw)
    except envelope.EnvelopeError:
        return False
    return ttl_ms > 0 and now_ms - header.last_seen_ms > ttl_ms
