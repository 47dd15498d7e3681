"""Standby copies: each worker's RocksDB copy of a peer's partitions equals that partition's changelog, and a
takeover from it is exact.

The worker applies a peer's changelog records to its standby copy a fetch at a time
(``CompatConsumer.apply_standbys_in_bulk``), past Faust's per-record recovery path; a takeover then restores
only what the copy's persisted offset says is missing. A copy that skipped or reordered a record would differ
from the changelog here, and the new owner would decide from a wrong state.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from rocksdict import AccessType, Options, Rdict

from tests.support.procs import wait_until
from tests.support.worker import (
    Feeder,
    Names,
    WorkerProcess,
    bootstrap_of,
    check_stream,
    fleet_traffic,
    keyed,
    metric,
    new_names,
    read_topic,
    replay_published,
    wait_complete,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

_OFFSET_KEY = b"__faust\0offset__"  # where Faust's RocksDB store keeps a partition's persisted offset


def store_of(worker: WorkerProcess, partition: int) -> tuple[int | None, dict[bytes, bytes]]:
    """(persisted offset, contents) of a worker's RocksDB copy of one run-table partition, read while it runs."""
    path = worker.data_dir / "v1" / "tables" / f"runs-{partition}.db"
    if not path.exists():
        return None, {}
    try:  # a read-only open beside the writer can meet files it is replacing: the caller polls again
        db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    except Exception:
        return None, {}
    try:
        contents = {bytes(k): bytes(v) for k, v in db.items()}
    finally:
        db.close()
    offset = contents.pop(_OFFSET_KEY, None)
    return (int(offset) if offset is not None else None), contents


def changelog_states(bootstrap: str, names: Names) -> dict[int, tuple[int, dict[bytes, bytes]]]:
    """Per changelog partition: its last offset and the contents its records leave, in offset order."""
    out: dict[int, tuple[int, dict[bytes, bytes]]] = {}
    for rec in sorted(read_topic(bootstrap, names.changelog, names.partitions), key=lambda r: r.offset):
        _, contents = out.get(rec.partition, (-1, {}))
        assert rec.key is not None
        if rec.value is None:
            contents.pop(rec.key, None)
        else:
            contents[rec.key] = rec.value
        out[rec.partition] = (rec.offset, contents)
    return out


def owned(worker: WorkerProcess) -> set[int]:
    keys = [k for k in worker.metrics() if k.startswith("loopwatch_consumer_lag{")]
    return {int(k.split('partition="')[1].split('"')[0]) for k in keys}


def test_standby_copies_equal_the_changelog_and_a_takeover_from_them_is_exact(broker: Any, tmp_path: Path) -> None:
    bootstrap = bootstrap_of(broker)
    names = new_names("standby")
    config = write_config(tmp_path)
    events = fleet_traffic(3000, seed=31)
    first_half, second_half = events[:1800], events[1800:]
    a = WorkerProcess(bootstrap, names, tmp_path, config=config, name="a").start()
    b = WorkerProcess(bootstrap, names, tmp_path, config=config, name="b")
    try:
        a.wait_ready()
        b.start()

        def split() -> tuple[set[int], set[int]] | None:
            mine = owned(a), owned(b)
            return mine if all(mine) and not mine[0] & mine[1] and len(mine[0] | mine[1]) == 4 else None

        wait_for(split, 90, "both workers own partitions")
        Feeder(bootstrap, names.events, keyed(first_half), chunk=200, pause=0.1).start().join()
        wait_complete(bootstrap, names, [a, b], set(replay_published(first_half, config)), 120)
        owned_a, owned_b = split() or (set(), set())
        want = changelog_states(bootstrap, names)
        assert set(want) == {0, 1, 2, 3}

        def copies_current() -> bool:  # standby copies and the owners' own stores alike
            return all(store_of(worker, partition) == want[partition] for worker in (a, b) for partition in range(4))

        wait_until(copies_current, 60, 0.5, message="every copy equal to its changelog partition")
        assert owned_a and owned_b  # so each worker held a standby copy of the other's partitions

        a.kill()  # b takes over a's partitions from its standby copies
        feeder = Feeder(bootstrap, names.events, keyed(second_half), chunk=200, pause=0.1).start()
        feeder.join()
        wait_complete(bootstrap, names, [b], set(replay_published(events, config)), 150)
        duplicates, got = check_stream(bootstrap, names, events, config)
        assert len(got) > 50
        assert metric(b.metrics(), "loopwatch_events_total") > 0
        b.assert_no_errors()
        assert "flow not active" not in a.log() + b.log()  # the rebalances' stale seeks stay quiet (STALE_SEEK)
        print(f"standby takeover: {len(got)} verdicts, {duplicates} duplicate records")
    finally:
        started = time.monotonic()
        a.stop()
        b.stop()
        assert time.monotonic() - started < 60
