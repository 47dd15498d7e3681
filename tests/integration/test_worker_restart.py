"""A graceful restart mid-stream, and idle-run expiry: real worker processes on the embedded broker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.worker import envelope
from tests.support.kafka import TopicReader
from tests.support.worker import (
    Feeder,
    WorkerProcess,
    bootstrap_of,
    check_stream,
    fleet_traffic,
    keyed,
    metric,
    new_names,
    produce,
    read_topic,
    replay_published,
    wait_complete,
    wait_for,
    write_config,
)
from tests.worker.support import event

pytestmark = pytest.mark.integration


def test_sigterm_mid_stream_then_restart(broker: Any, tmp_path: Path) -> None:
    """SIGTERM while events flow, start again: no verdict lost or changed, state recovered exactly."""
    bootstrap = bootstrap_of(broker)
    names = new_names("restart")
    config = write_config(tmp_path)
    events = fleet_traffic(3000, seed=11)
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config).start()
    second: WorkerProcess | None = None
    try:
        worker.wait_ready()
        # the feeder holds at half the stream until the worker is stopped, so the stop lands mid-stream however
        # slowly this machine runs: events are in flight while it stops and the rest flows during the restart
        feeder = Feeder(bootstrap, names.events, keyed(events), chunk=150, pause=0.1, hold_at=1500).start()
        wait_for(lambda: metric(worker.metrics(), "loopwatch_events_total") >= 800, 60, "first quarter processed")
        assert worker.stop() == 0, worker.log()[-3000:]
        assert "loopwatch worker: stopped (exit status 0)" in worker.log()
        fed_at_stop = feeder.sent
        feeder.release()
        second = WorkerProcess(bootstrap, names, tmp_path, config=config).start()
        second.wait_ready()
        feeder.join()
        want = set(replay_published(events, config))
        wait_complete(bootstrap, names, [second], want, 120)
        _, got = check_stream(bootstrap, names, events, config)
        assert len(got) == len(want) > 50
        # a clean stop commits what it acknowledged: little or nothing is redelivered
        assert metric(second.metrics(), "loopwatch_redelivered_events_total") < 500
        assert fed_at_stop <= 1500 < len(events)  # the second worker met events the first never saw
        worker.assert_no_errors()
        second.assert_no_errors()
        assert "loopwatch worker: ready" in second.log()  # recovered: check_stream compared the state above
    finally:
        worker.stop()
        if second is not None:
            second.stop()


def test_idle_runs_expire_and_stay_expired_after_recovery(broker: Any, tmp_path: Path) -> None:
    """TTL expiry deletes idle runs (store and changelog, in the run's partition); recovery keeps them gone."""
    bootstrap = bootstrap_of(broker)
    names = new_names("ttl")
    config = write_config(tmp_path)
    extra = ["--state-ttl", "1.5", "--sweep-interval", "0.3"]
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory", extra=extra).start()
    restarted: WorkerProcess | None = None
    try:
        worker.wait_ready()
        first = [event(i, "run-a") for i in range(4)] + [event(i, "run-b") for i in range(2)]
        produce(bootstrap, names.events, keyed(first))
        wait_for(lambda: metric(worker.metrics(), "loopwatch_active_runs") == 2, 20, "two live runs")
        wait_for(lambda: metric(worker.metrics(), "loopwatch_expired_runs_total") == 2, 20, "both expired")
        assert metric(worker.metrics(), "loopwatch_active_runs") == 0
        changelog = read_topic(bootstrap, names.changelog, names.partitions, settle=0.3)
        events_topic = read_topic(bootstrap, names.events, names.partitions, settle=0.3)
        partition_of = {r.key: r.partition for r in events_topic}
        tombstones = [r for r in changelog if r.value is None]
        assert {r.key for r in tombstones} == {b"run-a", b"run-b"}
        assert all(partition_of[r.key] == r.partition for r in tombstones)
        # run-a comes back: a fresh state (one event applied), not the old one
        produce(bootstrap, names.events, keyed([event(10, "run-a")]))
        wait_for(lambda: metric(worker.metrics(), "loopwatch_active_runs") == 1, 20, "run-a again")
        worker.stop()
        # a new worker recovers from the changelog: expired runs stay expired, run-a's fresh state is back
        restarted = WorkerProcess(
            bootstrap, names, tmp_path, config=config, store="memory", name="w2", extra=["--state-ttl", "3600"]
        ).start()
        restarted.wait_ready()
        wait_for(lambda: metric(restarted.metrics(), "loopwatch_active_runs") == 1, 20, "recovered one run")
        with TopicReader(bootstrap, names.changelog, names.partitions) as reader:
            reader.poll_until(lambda recs: len(recs) >= len(changelog) + 1, 10)
            last = [r for r in reader.records if r.key == b"run-a"][-1]
        assert last.value is not None
        stored = envelope.decode(last.value)
        assert len(stored.state.history) == 1
        verdicts = read_topic(bootstrap, names.verdicts, names.partitions, settle=0.3)
        assert all(orjson.loads(v.value or b"")["count"] for v in verdicts)
        worker.assert_no_errors()
        restarted.assert_no_errors()
    finally:
        worker.stop()
        if restarted is not None:
            restarted.stop()


def test_idle_runs_expire_once_where_a_rebalance_moved_them(broker: Any, tmp_path: Path) -> None:
    """A second worker joins while runs are live, and more runs arrive after: each run expires exactly once, on
    the worker that owns it then (the joiner through the index it rebuilt from what it recovered, the later runs
    through the index kept up by every write), and no check finds an index disagreeing with its store."""
    bootstrap = bootstrap_of(broker)
    names = new_names("ttl-move")
    config = write_config(tmp_path)
    extra = ["--state-ttl", "15", "--sweep-interval", "0.3"]
    early = [f"early-{i:02d}" for i in range(16)]
    late = [f"late-{i:02d}" for i in range(16)]
    first = WorkerProcess(bootstrap, names, tmp_path, config=config, extra=extra).start()
    second: WorkerProcess | None = None
    try:
        first.wait_ready()
        produce(bootstrap, names.events, keyed([event(i, run) for run in early for i in range(2)]))
        wait_for(lambda: metric(first.metrics(), "loopwatch_active_runs") == len(early), 20, "early runs live")
        second = WorkerProcess(bootstrap, names, tmp_path, config=config, name="w2", extra=extra).start()
        second.wait_ready()
        workers = (first, second)

        def total(name: str) -> float:
            return sum(metric(w.metrics(), name) for w in workers)

        wait_for(lambda: metric(second.metrics(), "loopwatch_active_runs") > 0, 20, "the joiner holds runs")
        produce(bootstrap, names.events, keyed([event(i, run) for run in late for i in range(2)]))
        wait_for(lambda: total("loopwatch_expired_runs_total") == len(early) + len(late), 60, "every run expired")
        wait_for(lambda: total("loopwatch_active_runs") == 0, 10, "no run left")
        assert metric(second.metrics(), "loopwatch_expired_runs_total") > 0
        assert total("loopwatch_expiry_index_mismatches_total") == 0
        changelog = read_topic(bootstrap, names.changelog, names.partitions, settle=0.3)
        tombstones = sorted(r.key for r in changelog if r.value is None)
        assert tombstones == sorted(run.encode() for run in early + late)  # one each: none expired twice
        first.assert_no_errors()  # a check that found the index wrong logs an error
        second.assert_no_errors()
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_a_data_directory_from_an_earlier_broker_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    """A worker restarted on a fresh broker with its old RocksDB directory (the embedded broker forgets
    everything when it restarts): it discards the table partitions ahead of their new changelogs, says so, and
    judges the same events again exactly as replay does; the old states neither crash it (Faust's consistency
    check) nor make the events look applied already."""
    from streams.devbroker import EmbeddedBroker

    names = new_names("rebroker")
    config = write_config(tmp_path)
    events = fleet_traffic(1500, seed=23)
    want = set(replay_published(events, config))
    assert len(want) > 10
    for round_ in ("first", "second"):
        with EmbeddedBroker(log_path=tmp_path / f"tansu-{round_}.log") as fresh:
            worker = WorkerProcess(fresh.bootstrap, names, tmp_path, config=config).start()
            try:
                worker.wait_ready()
                produce(fresh.bootstrap, names.events, keyed(events))
                wait_complete(fresh.bootstrap, names, [worker], want, 120)
                _, got = check_stream(fresh.bootstrap, names, events, config)
                assert set(got) == want
                assert worker.stop() == 0, worker.log()[-3000:]
                worker.assert_no_errors()
                noted = "note: discarded the local state of table partitions ahead of their changelogs" in worker.log()
                assert noted == (round_ == "second"), worker.log()[-3000:]
            finally:
                worker.stop()


@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_a_broker_restarted_under_a_running_worker_ends_it_with_one_line(tmp_path: Path, store: str) -> None:
    """The embedded broker restarted with empty storage under a running worker: it used to go on consuming the
    new events topic and publish nowhere (verdicts lost while it looked healthy, then a stop that hung), or crash
    with Faust's ConsistencyError (RocksDB). Now it ends with one line and exit status 3, and started again on
    the new broker it is ready and judges as replay does."""
    from streams.devbroker import EmbeddedBroker, PortInUseError

    names = new_names(f"lost-{store}")
    config = write_config(tmp_path)
    events = fleet_traffic(1500, seed=29)
    want = set(replay_published(events, config))
    first = EmbeddedBroker(log_path=tmp_path / "tansu-1.log").start()
    port = int(first.bootstrap.rsplit(":", 1)[1])
    second: EmbeddedBroker | None = None
    worker = WorkerProcess(first.bootstrap, names, tmp_path, config=config, store=store).start()
    again: WorkerProcess | None = None
    try:
        worker.wait_ready()
        produce(first.bootstrap, names.events, keyed(events[:500]))
        first.stop()
        deadline = time.monotonic() + 30
        while second is None:  # the old listener's port may take a few seconds to come free
            try:
                second = EmbeddedBroker(port=port, log_path=tmp_path / "tansu-2.log").start()
            except PortInUseError:
                assert time.monotonic() < deadline, "the port did not come free"
                time.sleep(0.5)
        assert worker.proc is not None
        code = worker.proc.wait(60)
        told = [line for line in worker.log().splitlines() if "the cluster lost the worker's topics (" in line]
        assert code == 3, worker.log()[-3000:]
        assert len(told) == 1 and told[0].startswith("loopwatch worker: "), worker.log()[-3000:]
        assert "Traceback" not in worker.log() and "experienced a crash" not in worker.log(), worker.log()[-3000:]
        again = WorkerProcess(second.bootstrap, names, tmp_path, config=config, store=store).start()
        again.wait_ready()
        produce(second.bootstrap, names.events, keyed(events))
        wait_complete(second.bootstrap, names, [again], want, 120)
        _, got = check_stream(second.bootstrap, names, events, config)
        assert set(got) == want
        again.assert_no_errors()
    finally:
        worker.stop()
        if again is not None:
            again.stop()
        first.stop()
        if second is not None:
            second.stop()
