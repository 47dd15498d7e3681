"""streams.worker.offsets: forward jumps are reported exactly, re-deliveries never."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from streams.worker.offsets import Jump, OffsetTracker


def test_contiguous_and_redelivered_records_are_no_jump() -> None:
    tracker = OffsetTracker()
    assert [tracker.observe(0, o) for o in (5, 6, 7, 3, 4, 5, 6, 7, 8)] == [None] * 9


def test_a_forward_jump_names_the_missing_offsets() -> None:
    tracker = OffsetTracker()
    for offset in range(0, 178):
        assert tracker.observe(2, offset) is None
    jump = tracker.observe(2, 179)
    assert jump == Jump(2, 178, 178) and jump.count == 1
    assert tracker.observe(2, 180) is None


def test_partitions_are_independent_and_forgotten_on_revocation() -> None:
    tracker = OffsetTracker()
    tracker.observe(0, 10)
    tracker.observe(1, 100)
    assert tracker.observe(0, 11) is None
    tracker.forget([1])
    assert tracker.observe(1, 500) is None  # a new assignment starts wherever the committed offset is
    assert tracker.observe(0, 20) == Jump(0, 12, 19)


@given(st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=80))
def test_jumps_count_exactly_the_offsets_skipped_going_forward(offsets: list[int]) -> None:
    tracker = OffsetTracker()
    reported = 0
    for offset in offsets:
        jump = tracker.observe(7, offset)
        if jump is not None:
            assert jump.first <= jump.last < offset
            reported += jump.count
    expected = sum(max(0, b - a - 1) for a, b in itertools.pairwise(offsets))
    assert reported == expected


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=500))
def test_a_stream_with_one_record_missing_reports_it(start: int, length: int) -> None:
    tracker = OffsetTracker()
    missing = start + length // 2
    jumps = [j for o in range(start, start + length + 1) if o != missing if (j := tracker.observe(0, o))]
    assert jumps == ([Jump(0, missing, missing)] if start < missing < start + length else [])


def test_the_worker_forgets_partitions_faust_revokes(tmp_path: Path) -> None:
    """Wired to Faust's real ``on_partitions_revoked`` signal (a partition owned again later starts afresh)."""
    from faust.types import TP

    from streams.config_file import LoadedConfig
    from streams.metrics import WorkerMetrics
    from streams.worker.app import LoopwatchWorker
    from streams.worker.settings import WorkerSettings

    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", data_dir=str(tmp_path), events_topic="ev")
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    tracker = worker._offsets
    tracker.observe(0, 10)
    tracker.observe(1, 10)

    async def revoke() -> None:
        await worker.app.on_partitions_revoked.send({TP("ev", 1), TP("other", 0)})

    asyncio.run(revoke())
    assert tracker.observe(1, 500) is None
    assert tracker.observe(0, 500) == Jump(0, 11, 499)
