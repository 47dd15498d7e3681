"""Idle-run expiry (processing-time TTL): the selection over stored values, and the index that spares reading them.

Runs end without telling anyone, so without a TTL the table grows forever. Processing time (when the worker
last wrote the run) is used rather than event time so that a gateway with a wrong clock, or a replay of old
events, can neither keep state alive forever nor expire it at once.

Only runs of partitions this worker actively owns are considered: a memory store also holds standby copies
of other workers' partitions, and expiring those would race their owners' writes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from streams.worker import envelope


@dataclass(slots=True)
class SweepResult:
    expired: list[bytes] = field(default_factory=list)
    seen: list[tuple[bytes, int, int]] = field(default_factory=list)  # every run read: (key, last_seen_ms, bytes)
    unreadable: int = 0


def sweep(
    items: Iterable[tuple[bytes, bytes]], *, now_ms: int, ttl_ms: int, active_partitions: Collection[int]
) -> SweepResult:
    """Of stored ``(key, value)`` pairs, the runs of active partitions, and those idle for more than ``ttl_ms``
    (``ttl_ms <= 0`` disables expiry)."""
    out = SweepResult()
    for key, raw in items:
        try:
            header = envelope.peek(raw)
        except envelope.EnvelopeError:
            out.unreadable += 1
            continue
        if header.partition not in active_partitions:
            continue
        out.seen.append((key, header.last_seen_ms, len(key) + len(raw)))
        if ttl_ms > 0 and now_ms - header.last_seen_ms > ttl_ms:
            out.expired.append(key)
    return out


def expired_partition(raw: bytes, *, now_ms: int, ttl_ms: int) -> int | None:
    """Re-check one value right before deleting it (it may have been written since it was picked): its
    partition if it is idle for more than ``ttl_ms``, else None."""
    try:
        header = envelope.peek(raw)
    except envelope.EnvelopeError:
        return None
    return header.partition if ttl_ms > 0 and now_ms - header.last_seen_ms > ttl_ms else None


class ExpiryIndex:
    """Every stored run of the owned partitions by last write, oldest first: what a sweep needs, in memory.

    Without it every sweep read and decoded each stored value (O(stored runs) store reads every interval: with
    the default 24 h TTL a busy worker holds millions of runs, and in the soak the sweep alone was about a tenth
    of the worker's CPU). With it a sweep visits only the runs past the TTL, from the front, and the gauges
    are running totals. The store stays the authority: each run is re-read before it is deleted, the index is
    rebuilt from a full read of the store after every rebalance or recovery (Faust then writes the store from
    the changelog, past the worker), and the owner checks it against a full read now and then.

    About 150 bytes of memory per stored run (its key, two ints and the dictionary entry).
    """

    __slots__ = ("_building", "_bytes", "_generation", "_gone", "_runs", "valid")

    def __init__(self) -> None:
        self._runs: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # key -> (last_seen_ms, stored bytes)
        self._bytes = 0
        self._building: dict[bytes, tuple[int, int]] | None = None  # written during a rebuild
        self._gone: set[bytes] = set()  # removed during a rebuild
        self._generation = 0
        self.valid = False

    def invalidate(self) -> None:
        """The store may have changed behind the index (a rebalance, a recovery): rebuild before trusting it."""
        self._runs.clear()
        self._bytes = 0
        self._building = None
        self._gone = set()
        self._generation += 1
        self.valid = False

    def begin_rebuild(self) -> int:
        """Start a rebuild; writes and removals from now on are kept until :meth:`finish_rebuild`. Returns its
        token."""
        self._building = {}
        self._gone = set()
        return self._generation

    def finish_rebuild(self, token: int, scanned: Iterable[tuple[bytes, int, int]]) -> int | None:
        """Install ``(key, last_seen_ms, stored bytes)`` of a full read; None if invalidated meanwhile.

        A write or removal during the read is newer than what the read saw of its key, so it wins. When the
        index was valid before (a check), returns how many runs it had wrong: missing, extra or different.
        """
        if token != self._generation or self._building is None:
            return None
        gone = self._gone
        entries = {key: (seen, size) for key, seen, size in scanned if key not in gone}
        entries.update(self._building)
        wrong = 0
        if self.valid:
            old = self._runs
            wrong = sum(1 for key, entry in entries.items() if old.get(key) != entry)
            wrong += sum(1 for key in old if key not in entries)
        self._runs = OrderedDict(sorted(entries.items(), key=lambda item: item[1][0]))
        self._bytes = sum(size for _, size in self._runs.values())
        self._building = None
        self._gone = set()
        self.valid = True
        return wrong

    def wrote(self, key: bytes, last_seen_ms: int, size: int) -> None:
        """A run's new state is in the store."""
        if self._building is not None:
            self._building[key] = (last_seen_ms, size)
            self._gone.discard(key)
        if not self.valid:
            return
        old = self._runs.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        self._runs[key] = (last_seen_ms, size)
        self._bytes += size

    def removed(self, key: bytes) -> None:
        """A run was deleted from the store."""
        if self._building is not None:
            self._building.pop(key, None)
            self._gone.add(key)
        old = self._runs.pop(key, None)
        if old is not None:
            self._bytes -= old[1]

    def due(self, *, now_ms: int, ttl_ms: int) -> list[bytes]:
        """Runs idle for more than ``ttl_ms``, oldest first (none when ``ttl_ms <= 0``).

        Writes are appended in processing-time order, so the scan stops at the first run still live. A wall
        clock stepped back can delay a run written meanwhile by at most that step; the full read of the
        owner's check catches the rest.
        """
        out: list[bytes] = []
        if ttl_ms <= 0:
            return out
        for key, (seen, _) in self._runs.items():
            if now_ms - seen <= ttl_ms:
                break
            out.append(key)
        return out

    @property
    def runs(self) -> int:
        return len(self._runs)

    @property
    def stored_bytes(self) -> int:
        return self._bytes
