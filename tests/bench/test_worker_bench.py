"""The worker benchmark's own parts: the latency runs' load generator, per-second views and core sampler, and
which drain (a) counts."""

from __future__ import annotations

import asyncio
import gc
import os

import pytest

from bench.worker_bench import Result, by_second, main, median_run, sample_cores, steady_generator


def test_the_generator_sends_without_collections_and_collects_again_after() -> None:
    assert gc.isenabled()
    with steady_generator():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_collection_comes_back_when_a_run_fails() -> None:
    with pytest.raises(RuntimeError), steady_generator():
        raise RuntimeError("the broker went away")
    assert gc.isenabled()


def test_a_is_the_drain_of_median_rate_with_all_its_own_figures() -> None:
    drains = [Result("(a)", 15000, seconds, cpu) for seconds, cpu in ((0.5, 0.6), (0.8, 0.7), (0.6, 0.9))]
    chosen = median_run(drains)
    assert chosen is drains[2]  # 25,000 events/s between 18,750 and 30,000
    assert chosen.cpu_per_event_us == pytest.approx(60.0)
    assert median_run(drains[:2]) is drains[0]  # of two, the faster: the higher, harder half of (a)
    assert median_run(drains[:1]) is drains[0]


def test_a_needs_at_least_one_drain(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--a-runs", "0"])
    assert exit_info.value.code == 2
    assert "0 is not a positive count" in capsys.readouterr().err


def test_latency_by_second_shows_a_queue_growing_through_the_window() -> None:
    start = 1_700_000_000_000.0
    stamped = [start + 250.0 * n for n in range(12)]  # three seconds, four events each
    latencies = [10.0, 12.0, 11.0, 13.0, 20.0, 22.0, 21.0, 25.0, 40.0, 45.0, 42.0, 90.0]
    assert by_second(stamped, latencies) == [(12.0, 13.0), (22.0, 25.0), (45.0, 90.0)]
    # a quiet second keeps its place (no figures) and the order is by stamp, not by arrival
    gap = [stamped[0] + 2500.0, stamped[0]]
    assert by_second(gap, [7.0, 3.0])[0] == (3.0, 3.0)
    assert [str(p50) for p50, _ in by_second(gap, [7.0, 3.0])[1:]] == ["nan", "7.0"]
    assert by_second([], []) == []


def test_cores_are_sampled_for_each_whole_second_of_sending_only() -> None:
    async def sample() -> dict[str, list[float]]:
        out: dict[str, list[float]] = {"benchmark": []}
        sending = asyncio.Event()
        sending.set()
        task = asyncio.ensure_future(sample_cores({"benchmark": os.getpid()}, sending, out))
        deadline = asyncio.get_running_loop().time() + 1.3
        while asyncio.get_running_loop().time() < deadline:  # busy, so the share is well above zero
            sum(range(10_000))
            await asyncio.sleep(0)
        sending.clear()
        await asyncio.wait_for(task, 2.0)
        return out

    shares = asyncio.run(sample())["benchmark"]
    assert len(shares) == 1  # the part of the second after it is not a second
    assert 0.05 < shares[0] <= (os.cpu_count() or 1)  # busy, but on a shared CI host; at most every core
