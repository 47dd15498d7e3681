"""A run whose state outgrows a Kafka record, on a real worker: its partition must go on.

A config with a long ``historySize`` and calls with ids at their length limit can make a run's state larger
than the producer accepts. The store step used to fail on it, and the partition stopped at that record on
every worker. Now the events that would take the run past ``MAX_STATE_BYTES`` are dead-lettered
(``state_too_large``), exactly those that replay skips, and the runs behind them in the partition get their
verdicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.limits import MAX_STATE_BYTES
from tests.support.worker import (
    WorkerProcess,
    assert_matches_replay,
    bootstrap_of,
    clean_states,
    event_positions,
    keyed,
    last_states,
    metric,
    new_names,
    produce,
    read_topic,
    replay_published,
    verdicts_by_id,
    wait_for,
    write_config,
)
from tests.worker.support import event, long_id_calls

pytestmark = pytest.mark.integration


def test_a_run_that_outgrows_a_record_is_dead_lettered_and_its_partition_goes_on(broker: Any, tmp_path: Path) -> None:
    bootstrap = bootstrap_of(broker)
    names = new_names("state-limit", partitions=1)  # every run in one partition: behind the big one
    document = {"tools": {"loopDetection": {"enabled": True, "historySize": 200, "warningThreshold": 3,
                                            "criticalThreshold": 5, "globalCircuitBreakerThreshold": 8}}}  # fmt: skip
    config = write_config(tmp_path, document)
    big = long_id_calls(135, "big")  # about 8 KB of state per call
    small = [event(i, "small") for i in range(10)]  # the same call and outcome again and again
    events = [*big, *small]
    want = replay_published(events, config)
    assert want, "the small run loops: it must have verdicts"
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config).start()
    try:
        worker.wait_ready()
        produce(bootstrap, names.events, keyed(events))

        def done() -> dict[str, float] | None:
            m = worker.metrics()
            processed = metric(m, "loopwatch_events_total") + metric(m, "loopwatch_invalid_events_total")
            return m if processed >= len(events) else None

        metrics = wait_for(done, 90, "worker processed every record")
        verdicts = read_topic(bootstrap, names.verdicts, names.partitions)
        got, _ = verdicts_by_id(verdicts)
        positions = event_positions(read_topic(bootstrap, names.events, 1, settle=0.3))
        assert_matches_replay(got, want, positions, names.events)
        dead = [orjson.loads(r.value) for r in read_topic(bootstrap, names.dead_letter, 1, settle=0.3) if r.value]
        assert {d["reason"] for d in dead} == {"state_too_large"}
        skipped = sorted(d["source"]["offset"] for d in dead)
        assert skipped and skipped == list(range(skipped[0], len(big)))  # every call after the state filled
        assert metric(metrics, "loopwatch_invalid_events_total", reason="state_too_large") == len(dead)
        changelog = read_topic(bootstrap, names.changelog, 1, settle=0.3)
        assert last_states(changelog) == clean_states(events, config)
        biggest = max(len(r.value) for r in changelog if r.key == b"big" and r.value is not None)
        assert MAX_STATE_BYTES - 20_000 < biggest < 1_000_000
        assert "dead-lettered (state_too_large): the run's state would take" in worker.log()
        worker.assert_no_errors()
    finally:
        worker.stop()
