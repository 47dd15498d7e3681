"""Idle-run selection: processing-time TTL, active partitions only, gauges from the same pass; the index."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.detection import RunState
from streams.worker import envelope
from streams.worker.expiry import ExpiryIndex, expired_partition, sweep

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
    assert result.expired == [b"idle"]
    assert [key for key, _, _ in result.seen] == [b"fresh", b"idle", b"edge"]
    assert result.unreadable == 1


def test_zero_ttl_never_expires() -> None:
    result = sweep([(b"a", value(0, 0))], now_ms=NOW, ttl_ms=0, active_partitions={0})
    assert result.expired == [] and len(result.seen) == 1


def test_recheck_before_delete() -> None:
    assert expired_partition(value(3, 0), now_ms=NOW, ttl_ms=TTL) == 3
    assert expired_partition(value(0, NOW), now_ms=NOW, ttl_ms=TTL) is None
    assert expired_partition(b"junk", now_ms=NOW, ttl_ms=TTL) is None
    assert expired_partition(value(0, 0), now_ms=NOW, ttl_ms=0) is None


def test_sweep_reports_every_run_it_read() -> None:
    items = [(b"live", value(0, NOW)), (b"idle", value(0, 0)), (b"standby", value(9, 0))]
    result = sweep(items, now_ms=NOW, ttl_ms=TTL, active_partitions={0})
    assert result.seen == [(b"live", NOW, 4 + len(items[0][1])), (b"idle", 0, 4 + len(items[1][1]))]


def built(entries: list[tuple[bytes, int, int]]) -> ExpiryIndex:
    index = ExpiryIndex()
    assert index.finish_rebuild(index.begin_rebuild(), entries) == 0
    return index


def test_index_names_idle_runs_oldest_first_and_keeps_totals() -> None:
    index = built([(b"b", NOW - 2 * TTL, 10), (b"a", NOW - 3 * TTL, 20), (b"c", NOW, 30)])
    assert index.due(now_ms=NOW, ttl_ms=TTL) == [b"a", b"b"]
    assert (index.runs, index.stored_bytes) == (3, 60)
    index.wrote(b"a", NOW, 25)  # written again: live, and last in line
    assert index.due(now_ms=NOW, ttl_ms=TTL) == [b"b"]
    index.removed(b"b")
    assert index.due(now_ms=NOW, ttl_ms=TTL) == []
    assert (index.runs, index.stored_bytes) == (2, 55)
    assert index.due(now_ms=NOW + 2 * TTL, ttl_ms=TTL) == [b"c", b"a"]
    assert index.due(now_ms=NOW + 2 * TTL, ttl_ms=0) == []


def test_index_is_not_trusted_until_rebuilt_after_a_change_behind_it() -> None:
    index = built([(b"a", 0, 1)])
    index.invalidate()
    assert not index.valid and index.runs == 0
    index.wrote(b"x", NOW, 5)  # not kept: only a full read makes the index whole again
    assert index.runs == 0
    token = index.begin_rebuild()
    index.invalidate()  # a rebalance during the read
    assert index.finish_rebuild(token, [(b"a", 0, 1)]) is None
    assert not index.valid


def test_writes_and_removals_during_a_rebuild_win_over_the_read() -> None:
    index = ExpiryIndex()
    token = index.begin_rebuild()
    index.wrote(b"a", NOW, 7)  # newer than what the read saw
    index.removed(b"b")  # expired while the read went on
    assert index.finish_rebuild(token, [(b"a", 0, 3), (b"b", 0, 4), (b"c", 5, 6)]) == 0
    assert index.due(now_ms=NOW, ttl_ms=TTL) == [b"c"]
    assert (index.runs, index.stored_bytes) == (2, 13)


def test_a_check_counts_what_the_index_had_wrong() -> None:
    index = built([(b"a", 1, 1), (b"b", 2, 2), (b"c", 3, 3)])
    # the store holds b with another write time, d that the index missed, and not c
    assert index.finish_rebuild(index.begin_rebuild(), [(b"a", 1, 1), (b"b", 9, 2), (b"d", 4, 4)]) == 3
    assert index.finish_rebuild(index.begin_rebuild(), [(b"a", 1, 1), (b"b", 9, 2), (b"d", 4, 4)]) == 0


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.sampled_from([b"k0", b"k1", b"k2", b"k3", b"k4"]), st.integers(0, 3 * TTL)),
        st.tuples(st.just("remove"), st.sampled_from([b"k0", b"k1", b"k2", b"k3", b"k4"]), st.just(0)),
        st.tuples(st.just("rebuild"), st.just(b""), st.just(0)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(OPS, st.integers(0, 6 * TTL))
def test_index_agrees_with_a_full_read_of_the_store(ops: list[tuple[str, bytes, int]], later: int) -> None:
    """Any history of writes (in processing-time order), removals and rebuilds: the index names exactly the
    idle runs a full read would, and a check finds nothing wrong."""
    store: dict[bytes, tuple[int, int]] = {}
    index = ExpiryIndex()
    now = 0
    for op, key, step in ops:
        if op == "write":
            now += step
            store[key] = (now, len(key) + step % 7)
            index.wrote(key, *store[key])
        elif op == "remove":
            store.pop(key, None)
            index.removed(key)
        else:
            index.invalidate()
            index.finish_rebuild(index.begin_rebuild(), [(k, seen, size) for k, (seen, size) in store.items()])
    if not index.valid:
        assert index.finish_rebuild(index.begin_rebuild(), [(k, *v) for k, v in store.items()]) == 0
    at = now + later
    due = index.due(now_ms=at, ttl_ms=TTL)
    assert set(due) == {k for k, (seen, _) in store.items() if at - seen > TTL} and len(due) == len(set(due))
    assert [store[k][0] for k in due] == sorted(store[k][0] for k in due)  # oldest first
    assert (index.runs, index.stored_bytes) == (len(store), sum(size for _, size in store.values()))
    assert index.finish_rebuild(index.begin_rebuild(), [(k, *v) for k, v in store.items()]) == 0
