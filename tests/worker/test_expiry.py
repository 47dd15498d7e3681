"""Idle-run selection: processing-time TTL, active partitions only, gauges from the same pass."""

from __future__ import annotations

from streams.detection import RunState
from streams.worker import envelope
from streams.worker.expiry import is_expired, sweep

NOW = 1_800_000_000_000
TTL = 60_000


def value(partition: int, last_seen_ms: int) -> bytes:
    return envelope.encode(partition, 10, last_seen_ms, RunState())


def test_selects_idle_runs_of_active_partitions() -> None:
    items = [
        (b"fresh", value(0, NOW - 1_000)),
        (b"idle", value(0, NOW - TTL - 1)),
        (b"edge", value(1, NOW - TTL)),  # exactly the TTL: not yet
        (b"standby-idle", value(7, NOW - 10 * TTL)),  # another worker's partition
        (b"junk", b"\x00garbage"),
    ]
    result = sweep(items, now_ms=NOW, ttl_ms=TTL, active_partitions={0, 1})
    assert result.expired == [(b"idle", 0)]
    assert result.live_runs == 2
    assert result.live_bytes == sum(len(k) + len(v) for k, v in items[:1] + items[2:3])
    assert result.unreadable == 1


def test_zero_ttl_never_expires() -> None:
    result = sweep([(b"a", value(0, 0))], now_ms=NOW, ttl_ms=0, active_partitions={0})
    assert result.expired == [] and result.live_runs == 1


def test_results_accumulate_over_chunks() -> None:
    first = sweep([(b"a", value(0, NOW))], now_ms=NOW, ttl_ms=TTL, active_partitions={0})
    both = sweep([(b"b", value(0, 0))], now_ms=NOW, ttl_ms=TTL, active_partitions={0}, result=first)
    assert both is first and both.live_runs == 1 and both.expired == [(b"b", 0)]


def test_recheck_before_delete() -> None:
    assert is_expired(value(0, 0), now_ms=NOW, ttl_ms=TTL)
    assert not is_expired(value(0, NOW), now_ms=NOW, ttl_ms=TTL)
    assert not is_expired(b"junk", now_ms=NOW, ttl_ms=TTL)
    assert not is_expired(value(0, 0), now_ms=NOW, ttl_ms=0)
