"""Millions of distinct run ids: the core's cost per event stays flat and each run's state stays small.

The core keeps nothing global: all it remembers lives in one ``RunState`` per scope key, so N distinct runs
cost N small states, and bounding those (TTL expiry, the store) is the worker's job. This drives distinct
runs through :func:`streams.runner.step` with a bounded LRU of decoded states, as the worker's cache does,
and checks that time is linear (the second half costs about what the first did) and states stay small. The
budget here is 20,000 runs; ``python -m tests.fuzz.test_many_runs 1000000`` runs the same loop for a
million and prints the figures.
"""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from dataclasses import dataclass

import msgpack

from streams.decode import decode_event, scope_key
from streams.detection import RunState
from tests.fuzz.hostile import EAGER_CONFIG, no_gc, strict_step

#: One tool call with an inline result per run; ``%d`` is the run number.
TEMPLATE = (
    b'{"type":"tool_call","event_id":"e-%d","gateway_id":"gw-1","agent_id":"main",'
    b'"session_id":"agent:main:telegram:dm:%d","run_id":"run-%d-7f3a9c2e-1b4d","ts":1767225600000,'
    b'"tool":"exec","call_id":"call_%d","args":{"command":"pytest -x tests/","cwd":"/repo"},'
    b'"result":{"content":[{"type":"text","text":"1 failed"}],"details":{"status":"completed","exitCode":1,'
    b'"aggregated":"1 failed"}}}'
)
CACHE_SIZE = 4096


@dataclass(slots=True)
class Figures:
    runs: int
    cpu_first_half_s: float
    cpu_second_half_s: float
    max_state_bytes: int
    total_state_bytes: int
    cached: int


def drive(runs: int) -> Figures:
    cache: OrderedDict[str, RunState] = OrderedDict()
    halves = [0.0, 0.0]
    max_bytes = total_bytes = 0
    with no_gc():
        for half in (0, 1):
            started = time.thread_time()
            for n in range(half * runs // 2, (half + 1) * runs // 2):
                event = decode_event(TEMPLATE % (n, n, n, n))
                result = strict_step(cache.get(scope_key(event)), event, EAGER_CONFIG)
                cache[result.scope] = result.state
                if len(cache) > CACHE_SIZE:
                    cache.popitem(last=False)
                size = len(msgpack.packb(result.state.to_primitive(), use_bin_type=True))
                total_bytes += size
                max_bytes = max(max_bytes, size)
            halves[half] = time.thread_time() - started
    return Figures(runs, halves[0], halves[1], max_bytes, total_bytes, len(cache))


def test_distinct_run_ids_are_linear_and_small() -> None:
    figures = drive(20_000)
    assert figures.cached == CACHE_SIZE
    # Linear: no per-run cost grows with the number of runs seen (generous for a shared machine).
    assert figures.cpu_second_half_s < 2.0 * figures.cpu_first_half_s + 0.2, figures
    assert figures.max_state_bytes < 400, figures  # one pending-free record, one dedup digest


if __name__ == "__main__":  # pragma: no cover - manual measurement
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    f = drive(count)
    per_event_us = (f.cpu_first_half_s + f.cpu_second_half_s) / count * 1e6
    print(
        f"{count} runs: {per_event_us:.1f} us CPU per event (first half "
        f"{f.cpu_first_half_s:.1f} s, second half {f.cpu_second_half_s:.1f} s); state per run "
        f"max {f.max_state_bytes} B, mean {f.total_state_bytes / count:.0f} B "
        f"({f.total_state_bytes / 2**20:.0f} MiB for all runs); LRU holds {f.cached} states"
    )
