"""SIGKILL at seeded random points while thousands of events flow, and a takeover between two workers.

Afterwards every verdict ``loopwatch replay`` publishes is on the topic at least once, re-published
duplicates are byte-for-byte identical (same ``verdict_id``), nothing differs from replay, and the state in
the changelog equals a crash-free run's. ``LOOPWATCH_TEST_SEED`` picks other kill points.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from streams.errors import EXIT_FATAL
from streams.kafka.compat import EMBEDDED_SESSION_TIMEOUT
from tests.support.worker import (
    Feeder,
    WorkerProcess,
    bootstrap_of,
    check_stream,
    env_seed,
    fleet_traffic,
    keyed,
    metric,
    new_names,
    replay_published,
    wait_complete,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration


# Two seeds: before remedy 3 of streams.kafka.compat (stream partitions held until positioned) about one
# restart in four skipped an event, so one seed alone let the race through CI now and then. One seed per delivery.
@pytest.mark.parametrize(("default_seed", "delivery"), [(20240, "bulk"), (1006, "stream")])
def test_sigkill_at_random_points(broker: Any, tmp_path: Path, default_seed: int, delivery: str) -> None:
    seed = env_seed(default_seed)
    rng = random.Random(seed)
    bootstrap = bootstrap_of(broker)
    names = new_names("crash")
    config = write_config(tmp_path)
    events = fleet_traffic(4000, seed=seed)
    workers: list[WorkerProcess] = []
    redelivered = 0.0
    killed_while_feeding = 0
    try:
        feeder = Feeder(bootstrap, names.events, keyed(events), chunk=100, pause=0.25)
        for life in range(4):
            worker = WorkerProcess(
                bootstrap, names, tmp_path, config=config, name=f"life{life}", extra=("--delivery", delivery)
            ).start()
            workers.append(worker)
            worker.wait_ready()
            if life == 0:
                feeder.start()
            if life == 3:
                break
            # kill after a seeded number of processed events (or at once, before any)
            target = rng.choice([0, rng.randint(1, 400), rng.randint(400, 1200)])
            wait_for(
                lambda w=worker, t=target: metric(w.metrics(), "loopwatch_events_total") >= t,
                60,
                f"life {life}: {target} events processed",
            )
            time.sleep(rng.uniform(0.0, 0.3))
            worker.kill()
            killed_while_feeding += feeder.sent < len(events)
        final = workers[-1]
        assert killed_while_feeding, "no kill happened while events were still being produced"
        feeder.join()
        want = set(replay_published(events, config))
        wait_complete(bootstrap, names, [final], want, 150)
        duplicates, got = check_stream(bootstrap, names, events, config)
        assert len(got) == len(want) > 50
        redelivered = metric(final.metrics(), "loopwatch_redelivered_events_total")
        for worker in workers:
            worker.assert_no_errors()
        print(f"seed {seed}: {len(got)} verdicts, {duplicates} duplicate records, {redelivered:.0f} redelivered")
    finally:
        for worker in workers:
            worker.stop()


def test_two_workers_share_partitions_and_take_over(broker: Any, tmp_path: Path) -> None:
    """A second worker joins mid-stream (rebalance), both share the partitions, then the first is killed."""
    bootstrap, names, config, events, first, second = _two_workers(broker, tmp_path, "group", 4000, seed=7)
    try:
        first.wait_ready()
        feeder = Feeder(bootstrap, names.events, keyed(events), chunk=100, pause=0.35).start()
        wait_for(lambda: metric(first.metrics(), "loopwatch_events_total") > 300, 60, "first worker busy")
        second.start()

        def split() -> list[set[str]] | None:
            owned = [{k for k in w.metrics() if k.startswith("loopwatch_consumer_lag{")} for w in (first, second)]
            both = all(metric(w.metrics(), "loopwatch_events_total") > 0 for w in (first, second))
            return owned if both and all(owned) and not owned[0] & owned[1] else None

        owned = wait_for(split, 60, "both workers own partitions and process events")
        assert len(owned[0] | owned[1]) == names.partitions
        assert feeder.sent < len(events), "the stream should still be flowing"
        first.kill()
        feeder.join()
        want = set(replay_published(events, config))
        wait_complete(bootstrap, names, [second], want, 150)
        duplicates, got = check_stream(bootstrap, names, events, config)
        assert len(got) == len(want) > 50
        first.assert_no_errors()
        second.assert_no_errors()
        print(f"takeover: {len(got)} verdicts, {duplicates} duplicate records")
    finally:
        first.stop()
        second.stop()


def test_a_frozen_worker_writes_nothing_once_its_partitions_moved_on(broker: Any, tmp_path: Path) -> None:
    """SIGSTOP a worker while traffic flows, for twice the session, let the other take its partitions over and
    finish every event, then SIGCONT it. It resumes with batches whose verdicts were sent but whose states were
    not stored (under steady traffic a store step gathers for up to 0.2 s); written now, they would end the
    changelog with older states of those runs than the new owner's (the final check below). It must stop
    without writing: its ownership lease lapsed (streams.kafka.lease). Frozen between two store steps, it has
    nothing to write, and joins the group again."""
    bootstrap, names, config, events, first, second = _two_workers(broker, tmp_path, "frozen", 12000, seed=13)
    frozen = False
    try:
        first.wait_ready()
        second.start().wait_ready()

        def split() -> bool:
            owned = [{k for k in w.metrics() if k.startswith("loopwatch_consumer_lag{")} for w in (first, second)]
            return all(owned) and not owned[0] & owned[1]

        wait_for(split, 60, "both workers own partitions")
        feeder = Feeder(bootstrap, names.events, keyed(events), chunk=100, pause=0.02).start()
        wait_for(lambda: metric(first.metrics(), "loopwatch_events_total") > 1000, 60, "first worker busy")
        assert feeder.sent < len(events), "the traffic should still be flowing"
        os.kill(first.pid, signal.SIGSTOP)
        frozen = True
        feeder.join()
        time.sleep(2 * EMBEDDED_SESSION_TIMEOUT)  # its session expires: the group goes on without it
        want = set(replay_published(events, config))
        wait_complete(bootstrap, names, [second], want, 150)  # the other owns every partition and is done
        os.kill(first.pid, signal.SIGCONT)
        frozen = False
        ended = wait_until_exit(first, 30)
        time.sleep(2.0)  # anything it still wrote has reached the broker
        duplicates, got = check_stream(bootstrap, names, events, config)
        assert len(got) == len(want) > 50  # every state exact: nothing stale was written (the invariant)
        log = first.log()
        if ended is None:
            # Frozen between two store steps (once in a fresh-clone CI run): nothing unstored, so no write had to
            # be refused. It must then have learnt that it was evicted, and joined again instead of writing.
            evicted = ("member_id was not recognized", "session expired", "UnknownMemberId")
            assert any(sign in log for sign in evicted), log[-3000:]
            assert "can no longer be sure that it owns its partitions" not in log
        else:
            assert ended == EXIT_FATAL, f"the frozen worker ended with {ended}:\n{log[-3000:]}"
            assert "can no longer be sure that it owns its partitions" in log
        second.assert_no_errors()
        print(f"frozen worker: exit {ended}; {len(got)} verdicts, {duplicates} duplicate records")
    finally:
        if frozen:
            os.kill(first.pid, signal.SIGCONT)
        first.stop()
        second.stop()


def _two_workers(
    broker: Any, tmp_path: Path, tag: str, count: int, *, seed: int
) -> tuple[str, Any, Path, list[dict[str, Any]], WorkerProcess, WorkerProcess]:
    """A group's names, config and fleet traffic, its first worker started and its second not yet (memory
    stores: every takeover restores the state from the changelog)."""
    bootstrap = bootstrap_of(broker)
    names = new_names(tag)
    config = write_config(tmp_path)
    first = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory", name="a").start()
    second = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory", name="b")
    return bootstrap, names, config, fleet_traffic(count, seed=seed), first, second


def wait_until_exit(worker: WorkerProcess, timeout: float) -> int | None:
    """The worker's exit status once it ends within ``timeout`` seconds, else None (it is still running)."""
    assert worker.proc is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = worker.proc.poll()
        if status is not None:
            return status
        time.sleep(0.1)
    return None
