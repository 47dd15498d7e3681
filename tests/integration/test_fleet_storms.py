"""Fleet storms on a real broker and a real worker: N runs looping the same way raise one alert, N-1 none.

The worker runs with ``--storm-runs 3 --storm-agent-runs 4``, once with each delivery (``bulk`` counts the signals
in batches, ``stream`` one Faust event at a time). Two runs (on different gateways) loop on the
same call with the same result: verdicts, storm signals, no alert. A third run with the same loop makes exactly
one signature alert naming 3 distinct runs. A fourth run of the same agent loops on a *different* call: the
agent storm fires (4 runs of that agent with generic_repeat verdicts) but no second signature alert (that loop
is in one run only). The metrics count both, by kind and detector.

A worker started on a backlog (a storm first, then many quiet events) alerts the storm while it is still
working through the backlog: the storm agents' topics do not wait for the events topic's intake.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.fleet_alert import FleetAlert
from streams.kafka.admin import create_topics
from tests.support.kafka import TopicReader
from tests.support.worker import (
    Names,
    WorkerProcess,
    bootstrap_of,
    keyed,
    metric,
    new_names,
    produce,
    read_topic,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.integration

WINDOW = 3600
CONFIG = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}}}


def window_middle_ms() -> int:
    """An event time in the middle of the current window: all runs land in one window, whenever this runs."""
    now = time.time()
    return int((now - now % WINDOW + WINDOW / 2) * 1000)


def looping_run(run: int, *, command: str, result: str, ts: int) -> list[dict[str, Any]]:
    """4 identical exec calls with identical results: one generic_repeat warning (threshold 3)."""
    events: list[dict[str, Any]] = []
    for i in range(4):
        base = {
            "gateway_id": f"gw-{run}",
            "agent_id": "storm-agent",
            "session_id": f"sess-{run}",
            "run_id": f"run-{run}",
            "ts": ts + i,
            "tool": "exec",
            "call_id": f"r{run}c{i}",
        }
        events.append({**base, "type": "tool_call", "event_id": f"r{run}-call-{i}", "args": {"command": command}})
        events.append(
            {
                **base,
                "type": "tool_result",
                "event_id": f"r{run}-result-{i}",
                "args": {"command": command},
                "result": {"content": [{"type": "text", "text": result}]},
            }
        )
    return events


def alerts(bootstrap: str, names: Names) -> list[FleetAlert]:
    records = read_topic(bootstrap, names.fleet_alerts, names.partitions, settle=0.5)
    return [FleetAlert.model_validate_json(r.value) for r in records if r.value is not None]


def verdict_count(bootstrap: str, names: Names) -> int:
    return len(read_topic(bootstrap, names.verdicts, names.partitions, settle=0.3))


@pytest.fixture(scope="module", params=["bulk", "stream"])
def storm_worker(
    broker: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[str, Names, WorkerProcess]]:
    """A worker counting storms in bulk (the default), and one counting them one Faust event at a time."""
    bootstrap = bootstrap_of(broker)
    workdir: Path = tmp_path_factory.mktemp("storms")
    names = new_names("storm")
    config = write_config(workdir, CONFIG)
    extra = ["--storm-runs", "3", "--storm-agent-runs", "4", "--storm-window", str(WINDOW), "--delivery", request.param]
    worker = WorkerProcess(bootstrap, names, workdir, config=config, extra=extra).start()
    try:
        worker.wait_ready()
        yield bootstrap, names, worker
    finally:
        worker.stop()


def test_a_storm_fires_for_n_runs_and_not_for_n_minus_one(storm_worker: tuple[str, Names, WorkerProcess]) -> None:
    bootstrap, names, worker = storm_worker
    ts = window_middle_ms()
    same = {"command": "npm test", "result": "Error: registry unreachable"}

    # N-1 = 2 runs: verdicts and their storm signals arrive, no alert.
    produce(bootstrap, names.events, keyed([*looping_run(1, **same, ts=ts), *looping_run(2, **same, ts=ts)]))
    wait_for(lambda: verdict_count(bootstrap, names) >= 2, 60, "two verdicts")
    signals = f"{names.group}-storm-signals"
    wait_for(lambda: len(read_topic(bootstrap, signals, names.partitions, settle=0.3)) >= 4, 60, "storm signals")
    time.sleep(3)  # the counting agent has had every chance to (wrongly) fire
    assert alerts(bootstrap, names) == []
    assert metric(worker.metrics(), "loopwatch_fleet_alerts_total") == 0

    # The N-th run with the same loop: exactly one signature alert, naming the three runs.
    produce(bootstrap, names.events, keyed(looping_run(3, **same, ts=ts)))
    found = wait_for(lambda: alerts(bootstrap, names) or None, 60, "a fleet alert")
    assert len(found) == 1
    alert = found[0]
    assert alert.kind == "signature" and alert.detector == "generic_repeat" and alert.tool == "exec"
    assert alert.distinct_runs == 3 and alert.threshold == 3
    assert alert.outcome_hash is not None
    assert sorted(s.run_id or "" for s in alert.sample_runs) == ["run-1", "run-2", "run-3"]
    assert sorted(alert.gateways) == ["gw-1", "gw-2", "gw-3"] and alert.agents == ["storm-agent"]
    assert alert.window_seconds == WINDOW
    verdicts = [orjson.loads(r.value or b"{}") for r in read_topic(bootstrap, names.verdicts, names.partitions)]
    assert {v["outcome_hash"] for v in verdicts} == {alert.outcome_hash}

    # A 4th run of the same agent, a different loop: the agent storm fires, the signature one does not again.
    produce(bootstrap, names.events, keyed(looping_run(4, command="ls /tmp", result="nothing", ts=ts)))

    def both() -> list[FleetAlert] | None:
        got = alerts(bootstrap, names)
        return got if len(got) >= 2 else None

    found = wait_for(both, 60, "the agent storm alert")
    time.sleep(2)
    found = alerts(bootstrap, names)
    by_kind = {a.kind: a for a in found}
    assert len(found) == 2 and set(by_kind) == {"signature", "agent"}
    agent = by_kind["agent"]
    assert agent.agent_id == "storm-agent" and agent.detector == "generic_repeat"
    assert agent.distinct_runs == 4 and agent.tool is None and agent.outcome_hash is None
    assert len({a.alert_id for a in found}) == 2

    m = worker.metrics()
    assert metric(m, "loopwatch_fleet_alerts_total", kind="signature", detector="generic_repeat") == 1
    assert metric(m, "loopwatch_fleet_alerts_total", kind="agent", detector="generic_repeat") == 1
    assert metric(m, "loopwatch_fleet_alerts_total") == 2
    assert metric(m, "loopwatch_storm_skipped_records_total") == 0
    worker.assert_no_errors()


BACKLOG = 40_000  # quiet events behind the storm: seconds of work for one worker


def quiet_run(run: int, calls: int, ts: int) -> list[dict[str, Any]]:
    """Distinct calls, each with its own result: applied, no verdict."""
    base = {"gateway_id": f"quiet-gw-{run % 7}", "agent_id": "quiet", "session_id": f"q-{run}", "run_id": f"q-{run}"}
    events: list[dict[str, Any]] = []
    for i in range(calls // 2):
        call = {**base, "call_id": f"q{run}-{i}", "ts": ts + i, "tool": "read", "args": {"path": f"/srv/{run}/{i}"}}
        events.append({**call, "type": "tool_call", "event_id": f"q{run}-call-{i}"})
        result = {"content": [{"type": "text", "text": f"contents of {run}/{i}"}]}
        events.append({**call, "type": "tool_result", "event_id": f"q{run}-result-{i}", "result": result})
    return events


def storm_runs_on_every_partition(partitions: int, per_partition: int) -> list[int]:
    """Run numbers whose events land ``per_partition`` on each events partition (the producer's partitioner):
    whichever partition the worker reads first starts with a storm."""
    from aiokafka.partitioner import DefaultPartitioner

    choose = DefaultPartitioner()
    every = list(range(partitions))
    picked: dict[int, list[int]] = {p: [] for p in every}
    run = 0
    while any(len(runs) < per_partition for runs in picked.values()):
        run += 1
        runs = picked[choose(f"run-{run}".encode(), every, every)]
        if len(runs) < per_partition:
            runs.append(run)
    return sorted(r for runs in picked.values() for r in runs)


def test_a_storm_is_alerted_while_the_worker_is_still_draining_a_backlog(
    broker: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The events topic's bulk intake fills with the first fetch; the fetch loop must go on serving the
    verdicts and storm-signals topics meanwhile. When it waited for room instead, the storm agents saw the
    first verdicts only once the whole first fetch was applied: here, after the whole backlog."""
    bootstrap = bootstrap_of(broker)
    workdir: Path = tmp_path_factory.mktemp("storm-backlog")
    names = new_names("storm-backlog")
    create_topics(bootstrap, {names.events: names.partitions})
    ts = window_middle_ms()
    same = {"command": "npm test", "result": "Error: registry unreachable"}
    storm = [e for run in storm_runs_on_every_partition(names.partitions, 3) for e in looping_run(run, **same, ts=ts)]
    quiet = [event for run in range(BACKLOG // 100) for event in quiet_run(run, 100, ts)]
    produce(bootstrap, names.events, keyed([*storm, *quiet]))
    total = len(storm) + len(quiet)
    extra = ["--storm-runs", "3", "--storm-agent-runs", "0", "--storm-window", str(WINDOW), "--log-level", "warn"]
    worker = WorkerProcess(bootstrap, names, workdir, config=write_config(workdir, CONFIG), extra=extra).start()
    try:
        with TopicReader(bootstrap, names.fleet_alerts, names.partitions) as reader:
            deadline = time.monotonic() + 120
            while not reader.records and time.monotonic() < deadline:
                assert worker.alive(), worker.log()[-3000:]
                reader.poll(0.05)
            assert reader.records, "no fleet alert within 120 s"
            applied_at_alert = metric(worker.metrics(), "loopwatch_events_total")
        wait_for(lambda: metric(worker.metrics(), "loopwatch_events_total") >= total, 120, "the whole backlog")
        assert applied_at_alert < total / 2, f"alerted only after {applied_at_alert:.0f} of {total} events"
        assert len(alerts(bootstrap, names)) == 1
        worker.assert_no_errors()
    finally:
        worker.stop()
