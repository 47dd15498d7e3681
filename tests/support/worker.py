"""Integration-test harness: real ``loopwatch worker`` subprocesses against the embedded broker.

Each test gets its own topic names and consumer group (a prefix), so tests share one broker without seeing
each other's records. Workers bind 127.0.0.1 on free ports, every wait is bounded, and every process is
stopped by pid (tests.support.procs keeps a registry and stops leftovers at session end).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from streams.audit.replay import replay_lines
from streams.config_file import load_openclaw_config
from streams.detection import RunState
from streams.topics import changelog_topic
from streams.worker import envelope
from streams.worker.processing import InputRecord, RunProcessor, plan_batch
from tests.support.kafka import Record, TopicReader
from tests.support.procs import free_port, kill_process, python_env, start_process, stop_process, wait_until

READY_TIMEOUT = 60.0


def bootstrap_of(broker: Any) -> str:
    """The session broker fixture may be an ``EmbeddedBroker`` or a plain ``host:port``."""
    return broker if isinstance(broker, str) else str(broker.bootstrap)


@dataclass(frozen=True)
class Names:
    """Topic names and group of one test."""

    prefix: str
    partitions: int = 4

    @property
    def events(self) -> str:
        return f"{self.prefix}.events"

    @property
    def verdicts(self) -> str:
        return f"{self.prefix}.verdicts"

    @property
    def dead_letter(self) -> str:
        return f"{self.prefix}.dead-letter"

    @property
    def fleet_alerts(self) -> str:
        return f"{self.prefix}.fleet-alerts"

    @property
    def group(self) -> str:
        return f"{self.prefix}-lw"

    @property
    def changelog(self) -> str:
        return changelog_topic(self.group)


def new_names(tag: str, partitions: int = 4) -> Names:
    return Names(f"it-{tag}-{uuid.uuid4().hex[:8]}", partitions)


class WorkerProcess:
    """One ``python -m streams.cli worker`` subprocess."""

    def __init__(
        self,
        bootstrap: str,
        names: Names,
        workdir: Path,
        *,
        config: Path | None = None,
        store: str = "rocksdb",
        name: str = "w1",
        extra: Sequence[str] = (),
    ) -> None:
        self.bootstrap = bootstrap
        self.names = names
        self.name = name
        self.metrics_port = free_port()
        self.data_dir = workdir / f"data-{name}"
        self.log_path = workdir / f"{name}.log"
        self.cmd = [
            sys.executable, "-m", "streams.cli", "worker",
            "--bootstrap", bootstrap, "--embedded",
            "--group", names.group, "--partitions", str(names.partitions),
            "--events-topic", names.events, "--verdicts-topic", names.verdicts,
            "--dead-letter-topic", names.dead_letter, "--fleet-alerts-topic", names.fleet_alerts,
            "--store", store, "--data-dir", str(self.data_dir),
            "--metrics-port", str(self.metrics_port), "--web-port", str(free_port()),
            "--sweep-interval", "0.5", "--log-level", "info",
            *(["--config", str(config)] if config is not None else []),
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def start(self) -> WorkerProcess:
        if self.log_path.exists():
            self._log_offset = self.log_path.stat().st_size
        self.proc = start_process(self.cmd, env=python_env(), log_path=self.log_path)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        if not self.log_path.exists():
            return ""
        return self.log_path.read_bytes()[self._log_offset :].decode("utf-8", "replace")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until the worker says it is ready (partitions assigned, tables recovered)."""

        def ready() -> bool:
            if not self.alive():
                raise RuntimeError(f"worker {self.name} exited early:\n{self.log()[-3000:]}")
            return "loopwatch worker: ready" in self.log()

        wait_until(ready, timeout, 0.1, message=f"worker {self.name} ready")

    def metrics(self) -> dict[str, float]:
        return scrape(self.metrics_port)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (graceful: commit, LeaveGroup), SIGKILL after ``timeout``."""
        if self.proc is None:
            return None
        return stop_process(self.proc, timeout)

    def kill(self) -> int | None:
        """SIGKILL: a crash."""
        if self.proc is None:
            return None
        return kill_process(self.proc)

    def error_lines(self) -> list[str]:
        """Logged errors, and skipped offsets of the events topic (the producers here are not transactional and
        nothing is compacted, so a skipped offset is a lost event)."""
        pattern = re.compile(r"\[(CRITICAL|ERROR)\]|Traceback|were never delivered")
        return [line for line in self.log().splitlines() if pattern.search(line)]

    def warning_kinds(self) -> list[tuple[str, int]]:
        return warning_kinds(self.log())

    def assert_no_errors(self) -> None:
        bad = self.error_lines()
        assert not bad, f"worker {self.name} logged errors:\n" + "\n".join(bad[:20])


def warning_kinds(log: str) -> list[tuple[str, int]]:
    """A worker log's warnings by kind (numbers, hashes and lists of strings blanked), most frequent first.
    Among them the delivery checks' re-reads: recovered, but each has a cause worth finding, so long runs
    report them."""
    kinds: Counter[str] = Counter()
    for line in log.splitlines():
        found = _WARNING.search(line)
        if found is not None:
            kinds[_NUMBERS.sub("N", _HASHES.sub("H", _STRINGS.sub("[…]", found.group(1).strip())))] += 1
    return kinds.most_common()


_WARNING = re.compile(r"\[WARNING\] (.*)$")
_HASHES = re.compile(r"(?=[0-9a-f]*[a-f])[0-9a-f]{8,}")  # with a letter: a long decimal is a number
_STRINGS = re.compile(r'\["[^\]]*"\]')  # a storm's signature and the like
_NUMBERS = re.compile(r"\d+")
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*(?:\{[^}]*\})?) (\S+)$")


def scrape(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            out[match.group(1)] = float(match.group(2))
    return out


def metric(metrics: dict[str, float], name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for key, value in metrics.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        if all(pairs.get(k) == v for k, v in labels.items()):
            total += value
    return total


# --- input and output ---------------------------------------------------------------------------------------


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, bytes]]) -> None:
    """Send records in order (keyed), waiting for all acknowledgements."""
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_request_size=16 * 1024 * 1024)
        await producer.start()
        try:
            futures = [await producer.send(topic, value, key=key) for key, value in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(run(), 60.0))


class Feeder:
    """Produces records in chunks from a background thread (a stream that keeps flowing across restarts).

    With ``hold_at`` it pauses after that many records until ``release()`` (or ``hold_timeout`` seconds), so a
    test can stop a worker mid-stream however slowly the machine runs: the rest is still unfed.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[bytes | None, bytes]],
        *,
        chunk: int,
        pause: float,
        hold_at: int | None = None,
        hold_timeout: float = 120.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.records = list(records)
        self.chunk = chunk
        self.pause = pause
        self.hold_at = hold_at
        self.hold_timeout = hold_timeout
        self.sent = 0
        self.error: BaseException | None = None
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def start(self) -> Feeder:
        self._thread.start()
        return self

    def release(self) -> None:
        """Lets a held feeder send the rest."""
        self._released.set()

    def _run(self) -> None:
        try:
            starts = list(range(0, len(self.records), self.chunk))
            if self.hold_at is not None:
                starts = sorted(set(starts) | {self.hold_at})
            for start, end in zip(starts, [*starts[1:], len(self.records)], strict=True):
                if start == self.hold_at and not self._released.wait(self.hold_timeout):
                    raise TimeoutError(f"feeder held at {start} records for {self.hold_timeout} s")
                produce(self.bootstrap, self.topic, self.records[start:end])
                self.sent = end
                time.sleep(self.pause)
        except BaseException as exc:  # reported by join()
            self.error = exc

    def join(self, timeout: float = 120.0) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "feeder did not finish"
        if self.error is not None:
            raise self.error


def keyed(events: Iterable[dict[str, Any]]) -> list[tuple[bytes | None, bytes]]:
    """Wire records keyed by scope key (run id trimmed, else session id)."""
    from streams.decode import scope_key_of

    out: list[tuple[bytes | None, bytes]] = []
    for ev in events:
        key = scope_key_of(ev.get("run_id"), ev["session_id"]).encode()
        out.append((key, orjson.dumps(ev)))
    return out


def read_topic(bootstrap: str, topic: str, partitions: int, *, settle: float = 1.0) -> list[Record]:
    """Every record of a topic (polls until nothing new arrived for ``settle`` seconds, at most 30 s)."""
    with TopicReader(bootstrap, topic, partitions) as reader:
        deadline = time.monotonic() + 30
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if reader.poll(0.2):
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle:
                break
        return list(reader.records)


def replay_published(events: Sequence[dict[str, Any]], config: Path) -> dict[str, dict[str, Any]]:
    """``{verdict_id: verdict}`` as ``loopwatch replay --config`` publishes them, with the event index."""
    out = io.BytesIO()
    lines: Iterator[bytes] = (orjson.dumps(ev) for ev in events)
    code = replay_lines(lines, load_openclaw_config(config), out, include_all=False, skip_invalid=True)
    assert code == 0
    return {row["verdict_id"]: row for row in map(json.loads, out.getvalue().splitlines())}


def verdicts_by_id(records: Sequence[Record]) -> tuple[dict[str, dict[str, Any]], int]:
    """``({verdict_id: verdict}, duplicates)``; asserts that duplicates are byte-for-byte identical."""
    seen: dict[str, bytes] = {}
    duplicates = 0
    for rec in records:
        assert rec.value is not None
        vid = orjson.loads(rec.value)["verdict_id"]
        if vid in seen:
            duplicates += 1
            assert seen[vid] == rec.value, f"verdict {vid} re-published with different content"
        else:
            seen[vid] = rec.value
    return {vid: orjson.loads(value) for vid, value in seen.items()}, duplicates


def without_source(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in verdict.items() if k not in ("source", "index", "published")}


def assert_matches_replay(
    got: dict[str, dict[str, Any]],
    want: dict[str, dict[str, Any]],
    events_by_offset: dict[tuple[int, int], dict[str, Any]],
    topic: str,
) -> None:
    """Same verdict ids, same fields, and each ``source`` points at the triggering event's record."""
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"{len(missing)} missing, {len(extra)} unexpected verdicts"
    for vid, verdict in got.items():
        assert without_source(verdict) == without_source(want[vid]), vid
        source = verdict["source"]
        assert source["topic"] == topic
        event = events_by_offset[(source["partition"], source["offset"])]
        assert event["event_id"] == verdict["event_id"]


def event_positions(records: Sequence[Record]) -> dict[tuple[int, int], dict[str, Any]]:
    out = {}
    for rec in records:
        try:
            out[(rec.partition, rec.offset)] = orjson.loads(rec.value or b"")
        except orjson.JSONDecodeError:
            continue
    return out


def last_states(records: Sequence[Record]) -> dict[bytes, RunState | None]:
    """The state each key's last changelog record holds (None for a tombstone)."""
    out: dict[bytes, RunState | None] = {}
    for rec in records:
        assert rec.key is not None
        out[rec.key] = None if rec.value is None else envelope.decode(rec.value).state
    return out


def assert_states_equal(changelog: Sequence[Record], want: dict[bytes, RunState]) -> None:
    """Each run's last changelog state equals ``want``; on failure, say which runs and how they differ."""
    got = last_states(changelog)
    if got == want:
        return
    last: dict[bytes, Record] = {}
    for rec in changelog:
        assert rec.key is not None
        last[rec.key] = rec
    lines = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) == want.get(key):
            continue
        rec = last.get(key)
        where = "no changelog record"
        if rec is not None and rec.value is not None:
            stored = envelope.decode(rec.value)
            where = f"changelog p{rec.partition}@{rec.offset}: covers events up to offset {stored.last_offset}"
        mine, clean = got.get(key), want.get(key)
        calls = (len(mine.history) if mine else None, len(clean.history) if clean else None)
        lines.append(f"{key.decode(errors='replace')}: {where}; history lengths stored/clean {calls}")
    raise AssertionError(f"{len(lines)} of {len(want)} runs' stored state differs:\n" + "\n".join(lines[:20]))


def clean_states(events: Sequence[dict[str, Any]], config: Path) -> dict[bytes, RunState]:
    """Each run's state after applying ``events`` once, in order (what a crash-free worker stores)."""
    processor = RunProcessor(load_openclaw_config(config))
    recs = [InputRecord("t", 0, i, key, value) for i, (key, value) in enumerate(keyed(events))]
    store: dict[bytes, bytes] = {}
    plan = plan_batch(recs, 0)
    for group in plan.groups.values():
        result = processor.process(group, recs, store.get(group.key), 0)
        assert result.value is not None
        store[group.key] = result.value
    return {key: envelope.decode(value).state for key, value in store.items()}


def assert_changelog_copartitioned(changelog: Sequence[Record], events: Sequence[Record]) -> None:
    """Every changelog record sits in the partition of its key's events (what recovery relies on)."""
    partition_of: dict[bytes | None, set[int]] = {}
    for rec in events:
        partition_of.setdefault(rec.key, set()).add(rec.partition)
    assert changelog
    for rec in changelog:
        assert partition_of.get(rec.key) == {rec.partition}, (rec.key, rec.partition, partition_of.get(rec.key))


LOW_THRESHOLDS = {
    "tools": {
        "loopDetection": {
            "enabled": True,
            "warningThreshold": 3,
            "criticalThreshold": 6,
            "globalCircuitBreakerThreshold": 12,
        }
    }
}


def write_config(directory: Path, document: dict[str, Any] | None = None) -> Path:
    path = directory / "openclaw.json5"
    path.write_text(json.dumps(document or LOW_THRESHOLDS), encoding="utf-8")
    return path


def fleet_traffic(events: int, *, seed: int, gateways: int = 30) -> list[dict[str, Any]]:
    """Realistic fleet traffic (streams.simulate): many runs, loops of every kind, in time order."""
    from streams.simulate import simulate

    return [
        orjson.loads(value)
        for _, value in simulate(gateways=gateways, rate=1000.0, duration=events / 1000.0, seed=seed)
    ]


def wait_complete(
    bootstrap: str, names: Names, workers: Sequence[WorkerProcess], want: set[str], timeout: float
) -> None:
    """Until every expected verdict is on the topic and the live workers have no lag on any partition."""
    deadline = time.monotonic() + timeout
    with TopicReader(bootstrap, names.verdicts, names.partitions) as reader:
        seen: set[str] = set()
        while not want <= seen:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(want - seen)} of {len(want)} verdicts missing after {timeout:.0f}s")
            for rec in reader.poll(0.3):
                seen.add(orjson.loads(rec.value or b"{}").get("verdict_id", ""))

    def caught_up() -> bool:
        lags: dict[str, float] = {}
        for worker in workers:
            if worker.alive():
                for key, value in worker.metrics().items():
                    if key.startswith("loopwatch_consumer_lag{"):
                        lags[key] = lags.get(key, 0.0) + value
        return len(lags) == names.partitions and not any(lags.values())

    wait_until(caught_up, max(5.0, deadline - time.monotonic()), 0.3, message="workers caught up")


def check_stream(
    bootstrap: str, names: Names, events: Sequence[dict[str, Any]], config: Path
) -> tuple[int, dict[str, dict[str, Any]]]:
    """Verdicts equal replay (at least once, duplicates identical), changelog co-partitioned, state exact.

    Returns ``(duplicate verdict records, verdicts)``.
    """
    want = replay_published(events, config)
    records = read_topic(bootstrap, names.events, names.partitions, settle=0.3)
    got, duplicates = verdicts_by_id(read_topic(bootstrap, names.verdicts, names.partitions, settle=0.5))
    assert_matches_replay(got, want, event_positions(records), names.events)
    changelog = read_topic(bootstrap, names.changelog, names.partitions, settle=0.3)
    assert_changelog_copartitioned(changelog, records)
    assert_states_equal(changelog, clean_states(events, config))
    return duplicates, got


def wait_for(predicate: Any, timeout: float, message: str, interval: float = 0.2) -> Any:
    return wait_until(predicate, timeout, interval, message=message)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    it = iter(range(0, len(items), size))
    for start in it:
        yield items[start : start + size]


def env_seed(default: int) -> int:
    return int(os.environ.get("LOOPWATCH_TEST_SEED", default))


__all__ = [
    "LOW_THRESHOLDS",
    "Feeder",
    "Names",
    "WorkerProcess",
    "assert_changelog_copartitioned",
    "assert_matches_replay",
    "bootstrap_of",
    "check_stream",
    "chunks",
    "clean_states",
    "env_seed",
    "event_positions",
    "fleet_traffic",
    "keyed",
    "last_states",
    "metric",
    "new_names",
    "produce",
    "read_topic",
    "replay_published",
    "scrape",
    "verdicts_by_id",
    "wait_complete",
    "wait_for",
    "without_source",
    "write_config",
]
