"""Faust table recovery on the embedded broker, with real worker processes (tests/support/counter_app.py).

- With :func:`streams.kafka.compat.apply_kafka_compat` a worker stopped mid-stream and restarted recovers its
  table exactly (RocksDB and memory stores).
- Without the end-offset remedy the same scenario recovers stale values (memory) or crashes with
  ``ConsistencyError`` (RocksDB): the guard matters. Skipped if the changelog's last batches happen to hold one
  record each (then ListOffsets is right and there is nothing to show).
- Two workers in one group: the survivor takes over the partitions of a SIGKILLed worker, state exact.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
import pytest

from streams.kafka.admin import create_topics
from streams.kafka.compat import faust_settings_for, required_topics
from tests.support.counter_app import topics_for
from tests.support.kafka import Record, TopicReader, list_offsets, produce_batches, true_end_offsets
from tests.support.procs import free_port, python_env, start_process, stop_process, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 4
KEYS = [f"k{i}" for i in range(2 * PARTITIONS)]  # key i lives on partition i % PARTITIONS
PER_KEY_PER_PHASE = 250
READY_TIMEOUT = 40.0


@dataclass
class CounterWorker:
    """One ``faust worker`` process of the counter app, with its log, status and data directory."""

    bootstrap: str
    app_id: str
    workdir: Path
    name: str
    store: str = "rocksdb://"
    compat: str = "all"
    data: str = ""  # data directory name (default: the worker's name); share it to restart from local state
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def log(self) -> Path:
        return self.workdir / f"worker-{self.name}.log"

    @property
    def status_file(self) -> Path:
        return self.workdir / f"status-{self.name}.jsonl"

    def start(self) -> CounterWorker:
        self.status_file.write_text("")
        env = python_env(
            {
                "COUNTER_BOOTSTRAP": self.bootstrap,
                "COUNTER_APP_ID": self.app_id,
                "COUNTER_PARTITIONS": str(PARTITIONS),
                "COUNTER_STORE": self.store,
                "COUNTER_COMPAT": self.compat,
                "COUNTER_DATADIR": str(self.workdir / f"data-{self.data or self.name}"),
                "COUNTER_STATUS": str(self.status_file),
                **self.extra_env,
            }
        )
        cmd = [sys.executable, "-m", "faust", "-A", "tests.support.counter_app", "worker", "-l", "info"]
        cmd += ["--web-port", str(free_port()), "--web-bind", "127.0.0.1", "--web-host", "127.0.0.1"]
        self.started_at = time.monotonic()
        self.proc = start_process(cmd, env, self.log)
        return self

    def statuses(self) -> list[dict[str, Any]]:
        text = self.status_file.read_text() if self.status_file.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def wait_ready(self, count: int = 1, partitions: list[int] | None = None) -> float:
        """Wait for the ``count``-th completed rebalance (optionally with exactly these partitions)."""

        def ready() -> bool:
            self.check_alive()
            done = self.statuses()
            return len(done) >= count and (partitions is None or done[-1]["assigned"] == partitions)

        wait_until(ready, READY_TIMEOUT, 0.05, message=f"worker {self.name} ready")
        return time.monotonic() - self.started_at

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"worker {self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")

    def log_tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        return stop_process(proc, 30.0, sig=sig)


@pytest.fixture
def workers() -> Iterator[list[CounterWorker]]:
    """Workers a test starts; all stopped (by pid) when it ends, whatever happened."""
    started: list[CounterWorker] = []
    try:
        yield started
    finally:
        for worker in started:
            worker.stop(signal.SIGKILL)


def _setup(broker: str, tmp_path: Path, prefix: str) -> str:
    app_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topics(broker, topics_for(app_id, PARTITIONS))
    return app_id


def _produce_phase(broker: str, app_id: str) -> None:
    """PER_KEY_PER_PHASE events per key, appended as 50-record batches."""
    for index, key in enumerate(KEYS):
        records = [(key.encode(), b"")] * PER_KEY_PER_PHASE
        produce_batches(broker, f"{app_id}-in", index % PARTITIONS, records, batch_size=50)


def _last_counts(records: list[Record]) -> dict[str, int]:
    last: dict[str, int] = {}
    for record in records:
        assert record.key is not None and record.value is not None
        last[record.key.decode()] = int(record.value)
    return last


def _counts_reached(expected: int) -> Any:
    def done(records: list[Record]) -> bool:
        last = _last_counts(records)
        return len(last) == len(KEYS) and all(value >= expected for value in last.values())

    return done


def _assert_exact(out: TopicReader, expected: int, *, every_value: bool = True) -> None:
    """Final counts exact, and per key the emitted counts never go back (no stale state was resumed).

    ``every_value``: each count 1..expected was emitted. Not after a SIGKILL: an output record still in the
    killed worker's producer buffer is lost while its changelog record may have made it (the counter app does
    not re-emit for events it already applied; loopwatch's RunState does).
    """
    try:
        out.poll_until(_counts_reached(expected), 20.0, message=f"all counters at {expected}")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}: counters {_last_counts(out.records)}") from None
    out.poll(0.5)  # anything late (a double count) would show up now
    assert _last_counts(out.records) == dict.fromkeys(KEYS, expected)
    by_key: dict[str, list[int]] = {}
    for record in sorted(out.records, key=lambda r: (r.partition, r.offset)):
        assert record.key is not None and record.value is not None
        by_key.setdefault(record.key.decode(), []).append(int(record.value))
    for key, values in by_key.items():
        assert values == sorted(values), f"counter {key} went back: stale table state was resumed"
        if every_value:
            assert set(values) == set(range(1, expected + 1)), f"counter {key} skipped values"


def _stop_mid_stream(broker: str, app_id: str, worker: CounterWorker, out: TopicReader) -> None:
    _produce_phase(broker, app_id)
    out.poll_until(lambda records: len(records) >= 300, 30.0, message="first outputs")
    assert worker.stop(signal.SIGTERM) == 0, worker.log_tail()


def _changelog_quirk_visible(broker: str, app_id: str) -> bool:
    changelog = f"{app_id}-counts-changelog"
    raw = list_offsets(broker, changelog, range(PARTITIONS))
    true = true_end_offsets(broker, changelog, range(PARTITIONS))
    assert all(raw[p] <= true[p] for p in range(PARTITIONS))
    return raw != true


def test_required_topics_lists_changelog_and_leader_topics() -> None:
    app = faust.App("req-test", **faust_settings_for("127.0.0.1:1", embedded=True), topic_partitions=3)
    app.Table("t1", partitions=3)
    app.Table("t2")
    topics = required_topics(app, {"req-in": 3})
    assert topics == {
        "req-in": 3,
        "req-test-t1-changelog": 3,
        "req-test-t2-changelog": 3,
        "req-test-__assignor-__leader": 1,
    }


def test_faust_settings_for_embedded_and_real_kafka() -> None:
    embedded = faust_settings_for("127.0.0.1:9092", embedded=True)
    assert embedded["broker"] == "kafka://127.0.0.1:9092"
    assert embedded["broker_session_timeout"] == 3.0
    assert embedded["broker_heartbeat_interval"] == 0.5
    real = faust_settings_for("k1:9092,k2:9092", embedded=False)
    assert real["broker"] == "kafka://k1:9092;kafka://k2:9092"
    assert "broker_session_timeout" not in real  # Faust/Kafka defaults on a real cluster
    app = faust.App("settings-test", **embedded)
    assert app.conf.broker_session_timeout == 3.0


@pytest.mark.parametrize("compat", ["all", "no-pause-changelogs"])
def test_a_recovered_tables_changelog_is_not_fetched(
    broker: str, tmp_path: Path, compat: str, workers: list[CounterWorker]
) -> None:
    """Remedy 5 on a real worker: once its table is recovered, no changelog partition is left fetched by aiokafka
    and never drained by Faust (such records held back every other partition's next fetch by up to 0.1 s)."""
    app_id = _setup(broker, tmp_path, "fetch")
    fetching = tmp_path / "fetching.jsonl"
    with TopicReader(broker, f"{app_id}-out", PARTITIONS) as out:
        worker = CounterWorker(
            broker, app_id, tmp_path, "w", compat=compat, extra_env={"COUNTER_FETCHING": str(fetching)}
        )
        workers.append(worker.start())
        worker.wait_ready()
        _produce_phase(broker, app_id)
        out.poll_until(_counts_reached(PER_KEY_PER_PHASE), 30.0, message="every event counted")  # changelog written
        since = time.time()

        def reported() -> list[dict[str, Any]]:
            worker.check_alive()
            lines = fetching.read_text().splitlines() if fetching.exists() else []
            return [line for line in map(json.loads, lines) if line["time"] > since]

        wait_until(lambda: len(reported()) >= 3, 20.0, 0.1, message="fetching reports")
    for line in reported():
        assert line["assigned"] == list(range(PARTITIONS)) and line["active"] == []  # recovered: Faust reads none
        fetched_never_drained = set(line["assigned"]) - set(line["paused"])
        assert fetched_never_drained == (set() if compat == "all" else set(range(PARTITIONS)))


# Both stores: the memory store recovers every changelog record at each restart, which is what exposed Faust's
# resume-before-seek race (remedy 3 of streams.kafka.compat; records were lost in ~1 of 5 restarts before it).
@pytest.mark.parametrize("store", ["rocksdb://", "memory://"])
def test_restart_mid_stream_recovers_table_exactly(
    broker: str, tmp_path: Path, store: str, workers: list[CounterWorker], timings: list[tuple[str, float]]
) -> None:
    app_id = _setup(broker, tmp_path, "rec")
    label = store.rstrip(":/")
    with TopicReader(broker, f"{app_id}-out", PARTITIONS) as out:
        first = CounterWorker(broker, app_id, tmp_path, "first", store=store)
        workers.append(first.start())
        timings.append((f"worker start to ready ({label})", first.wait_ready()))
        _stop_mid_stream(broker, app_id, first, out)
        quirk = _changelog_quirk_visible(broker, app_id)
        _produce_phase(broker, app_id)

        # same data directory: RocksDB recovers from its local state plus the changelog tail
        second = CounterWorker(broker, app_id, tmp_path, "second", store=store, data="first")
        workers.append(second.start())
        timings.append((f"restart to ready after recovery ({label})", second.wait_ready()))
        _assert_exact(out, 2 * PER_KEY_PER_PHASE)
        assert "ConsistencyError" not in second.log.read_text()
    print(f"ListOffsets under-reported the changelog end before the restart: {quirk}")


# RocksDB makes the stale end offset fail loudly (ConsistencyError) every time; with the memory store the
# symptom (stale counters) depends on how the changelog happened to be batched, so it is not asserted.
@pytest.mark.parametrize("store", ["rocksdb://"])
def test_without_end_offset_remedy_recovery_is_wrong(
    broker: str, tmp_path: Path, store: str, workers: list[CounterWorker]
) -> None:
    app_id = _setup(broker, tmp_path, "norem")
    with TopicReader(broker, f"{app_id}-out", PARTITIONS) as out:
        first = CounterWorker(broker, app_id, tmp_path, "w", store=store, compat="no-end-offsets")
        workers.append(first.start())
        first.wait_ready()
        _stop_mid_stream(broker, app_id, first, out)
        if not _changelog_quirk_visible(broker, app_id):
            pytest.skip("changelog ends with single-record batches: ListOffsets is right this time")
        _produce_phase(broker, app_id)

        second = CounterWorker(broker, app_id, tmp_path, "w2", store=store, compat="no-end-offsets", data="w")
        workers.append(second.start())
        if store.startswith("rocksdb"):
            # the local RocksDB offset lies beyond the end ListOffsets reports
            wait_until(
                lambda: "ConsistencyError" in second.log.read_text(),
                READY_TIMEOUT,
                0.1,
                message="ConsistencyError",
            )
            return
        second.wait_ready()
        expected = 2 * PER_KEY_PER_PHASE
        # wait for the input to be consumed: every key's last output stops changing
        deadline = time.monotonic() + 30.0
        previous: dict[str, int] = {}
        while time.monotonic() < deadline:
            out.poll(1.0)
            current = _last_counts(out.records)
            if current == previous and len(current) == len(KEYS):
                break
            previous = current
        final = _last_counts(out.records)
        assert final != dict.fromkeys(KEYS, expected), "recovered exactly although ListOffsets was wrong"
        assert all(value <= expected for value in final.values())
