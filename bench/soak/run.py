"""The soak: one real worker at half its measured maximum rate for >= 10 minutes over >= 100,000 runs.

Starts the embedded broker (127.0.0.1, free port) and one ``loopwatch worker`` process (RocksDB store, own
temporary data directory, short ``--state-ttl``), optionally measures the worker's maximum rate first (a
backlog drained by a separate calibration worker on separate topics), then produces fleet traffic
(:mod:`bench.soak.traffic`) at a paced steady rate with ``ts`` stamped at send time, keyed by scope key, and
keeps a JSON Lines copy of every event. Every ``--sample`` seconds it records the worker's RSS, active runs
and state bytes (refreshed by the worker's TTL sweep), consumer lag, produced and applied events and the
latency of the verdicts it reads back. Afterwards: drain, a cool-down of one TTL (the table must empty),
all verdicts read back and compared with ``loopwatch replay`` over the recorded events, then
``samples.csv``, ``summary.json`` and plots in ``--out``.

``python -m bench.soak [--duration 600] [--rate R | --rate-fraction 0.5] [--runs 100000] [--ttl 30]``

BURST: events are sent in bursts of ``--burst`` seconds (default 0.1 s: 10 bursts per second), each burst stamped
with its send time, so each partition gets one record batch per burst. The embedded broker (Tansu 0.6.0, memory
storage, no retention) stores every record batch as an object and a fetch costs time proportional to the
number of batches in the partition (measured: a tail fetch took 1.4 ms at 5,000 batches per partition, 27 ms at
160,000; flat at 2 ms for the same records in large batches). With one small batch per event the broker, not
the worker, saturated a core after about 3 minutes at 2,000 events/s and the worker stalled waiting for fetches.
Real Kafka indexes offsets, so this is a property of the test broker only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import functools
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.soak import compare, stats
from bench.soak.traffic import gateways_for, soak_events
from bench.worker_bench import cpu_seconds
from streams.worker.settings import WorkerSettings
from tests.support.procs import sigterm_as_interrupt, stop_all
from tests.support.worker import Names, WorkerProcess, scrape  # the tests' worker process and /metrics parser

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "deploy" / "config" / "openclaw.json5"
README_MAX_RATE = 5015.0  # README, Performance, worker (a), raw input
PAGE = os.sysconf("SC_PAGE_SIZE")
LATENCY = "loopwatch_event_to_verdict_seconds"


# --- processes ------------------------------------------------------------------------------------------------


def rss_bytes(pid: int | None) -> float:
    """Resident set size of ``pid`` (VmRSS), NaN when gone."""
    if pid is None:
        return math.nan
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return math.nan


def disk_bytes(path: Path) -> float:
    """Bytes of the files under ``path`` (the RocksDB files of the run table)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, name)).st_size
    return float(total)


class Worker(WorkerProcess):
    """The tests' worker process (its own topics, group, data dir and ports) with the soak's settings."""

    def __init__(
        self,
        bootstrap: str,
        prefix: str,
        workdir: Path,
        partitions: int,
        ttl: float,
        sweep: float | None = None,
        store: str = "rocksdb",
        extra: Sequence[str] = (),
        write_buffer_mb: float | None = None,
    ) -> None:
        # the worker's own default when no sweep is given (the harness otherwise sweeps every 0.5 s)
        sweep_interval = WorkerSettings(state_ttl=ttl, sweep_interval=sweep).effective_sweep_interval
        flags = ["--state-ttl", str(ttl), "--sweep-interval", str(sweep_interval)]
        if write_buffer_mb is not None:
            flags += ["--rocksdb-write-buffer-mb", str(write_buffer_mb)]
        names = Names(prefix, partitions)
        super().__init__(
            bootstrap, names, workdir, config=CONFIG, store=store, name=f"{prefix}-worker", extra=[*flags, *extra]
        )
        self.events_topic = names.events
        self.verdicts_topic = names.verdicts

    async def ready(self, timeout: float = 90.0) -> None:
        await asyncio.to_thread(self.wait_ready, timeout)


@functools.cache
def checkout() -> dict[str, Any]:
    """The commit and the files modified in the working tree when the soak ran (what was measured)."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", *argv], cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
        return done.stdout.strip()

    return {
        "commit": git("rev-parse", "HEAD"),
        "modified": git("status", "--short", "--untracked-files=no").split("\n"),
    }


async def metrics_of(worker: Worker) -> dict[str, float]:
    return await asyncio.to_thread(scrape, worker.metrics_port)


def applied(metrics: dict[str, float]) -> float:
    """Records the worker has taken in: applied events, duplicates and dead-lettered records."""
    return (
        stats.metric_sum(metrics, "loopwatch_events_total")
        + stats.metric_sum(metrics, "loopwatch_invalid_events_total")
        + stats.metric_sum(metrics, "loopwatch_duplicate_events_total")
    )


# --- producing ------------------------------------------------------------------------------------------------


class Producer:
    """One aiokafka producer; every event gets ``ts`` = send time, is keyed by scope key, and is written to
    the events file in send order."""

    def __init__(self, bootstrap: str, topic: str, events_path: Path | None, *, rate: float, seed: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.events = soak_events(rate=rate, seed=seed)
        self.file = events_path.open("wb") if events_path is not None else None
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.runs: set[str] = set()
        self.pending: list[asyncio.Future[Any]] = []
        self._producer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaProducer

        # one record batch per partition per burst: see BURST in the module docstring
        self._producer = AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=5, acks=1, max_batch_size=4 * 2**20, max_request_size=8 * 2**20
        )
        await self._producer.start()

    async def send(self, count: int) -> None:
        """Send the next ``count`` events as one burst, all stamped with the time the burst is sent."""
        burst = [next(self.events) for _ in range(count)]
        ts = int(time.time() * 1000)
        for key, event in burst:
            event["ts"] = ts
            value = orjson.dumps(event)
            if self.file is not None:
                self.file.write(value + b"\n")
            self.runs.add(key)
            self.pending.append(await self._producer.send(self.topic, value, key=key.encode("utf-8")))
            self.sent += 1
        self._reap()

    def _reap(self) -> None:
        keep = []
        for fut in self.pending:
            if not fut.done():
                keep.append(fut)
            elif fut.exception() is not None:
                self.failed += 1
            else:
                self.acked += 1
        self.pending = keep

    async def flush(self, timeout: float = 60.0) -> None:
        await asyncio.wait_for(self._producer.flush(), timeout)
        if self.pending:
            await asyncio.wait(self.pending, timeout=timeout)
        self._reap()

    async def stop(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._producer.stop(), 30)
        if self.file is not None:
            self.file.close()


# --- calibration: the worker's maximum rate on a backlog ------------------------------------------------------


async def calibrate(
    bootstrap: str, workdir: Path, *, events: int, partitions: int, ttl: float, extra: Sequence[str] = ()
) -> dict[str, float]:
    """Fill a topic with ``events`` soak events, start a fresh worker on it, and measure how fast it drains
    (between 10 % and 95 % of the backlog, so start-up and the tail do not count)."""
    from streams.kafka.admin import ensure_topics

    worker = Worker(bootstrap, "cal", workdir, partitions, ttl, extra=extra)
    await ensure_topics(bootstrap, {worker.events_topic: partitions})
    producer = Producer(bootstrap, worker.events_topic, None, rate=events / 45.0, seed=4242)
    await producer.start()
    try:
        for _ in range(events // 1000 + 1):
            await producer.send(min(1000, events - producer.sent))
            await producer.flush(60)  # whole batches: see BURST
            if producer.sent >= events:
                break
        await producer.flush(120)
    finally:
        await producer.stop()
    if producer.failed:
        raise RuntimeError(f"calibration: {producer.failed} events not acknowledged")
    worker.start()
    try:
        await worker.ready()
        points: list[tuple[float, float, float]] = []
        deadline = time.monotonic() + max(120.0, events / 500.0)
        while time.monotonic() < deadline:
            n = applied(await metrics_of(worker))
            points.append((time.monotonic(), n, cpu_seconds(worker.pid)))
            if n >= events:
                break
            if not worker.alive():
                raise RuntimeError(f"calibration worker exited:\n{worker.log()[-3000:]}")
            await asyncio.sleep(0.5)
        else:
            raise TimeoutError("calibration worker did not drain its backlog in time")
    finally:
        worker.stop()
    lo = next(p for p in points if p[1] >= 0.10 * events)
    hi = next(p for p in points if p[1] >= 0.95 * events)
    seconds = hi[0] - lo[0]
    rate = (hi[1] - lo[1]) / seconds if seconds > 0 else math.nan
    cpu_per_event = (hi[2] - lo[2]) / (hi[1] - lo[1]) if hi[1] > lo[1] else math.nan
    return {"events": float(events), "rate": rate, "seconds": seconds, "cpu_us_per_event": cpu_per_event * 1e6}


# --- the soak -------------------------------------------------------------------------------------------------


@dataclass
class VerdictReader:
    """Reads the verdicts topic from the beginning; latency = verdict record timestamp - event ``ts``."""

    bootstrap: str
    topic: str
    partitions: int
    records: list[dict[str, Any]] = field(default_factory=list)
    latencies: list[tuple[float, float, float]] = field(default_factory=list)  # (t, publish ms, read ms)
    _consumer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=50,
        )
        await self._consumer.start()
        self._consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])

    async def poll(self) -> int:
        batches = await self._consumer.getmany(timeout_ms=200, max_records=2000)
        now = time.time() * 1000
        t = time.monotonic()
        n = 0
        for msgs in batches.values():
            for m in msgs:
                verdict = orjson.loads(m.value)
                self.records.append(verdict)
                ts = verdict.get("event_ts")
                if isinstance(ts, int | float):
                    self.latencies.append((t, float(m.timestamp - ts), float(now - ts)))
                n += 1
        return n

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.poll()

    async def catch_up(self, timeout: float = 60.0) -> bool:
        """Read until every partition's position reaches its true end offset."""
        from aiokafka import TopicPartition

        from streams.kafka.compat import end_offsets

        ends = await end_offsets(self.bootstrap, [(self.topic, p) for p in range(self.partitions)])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            positions = [await self._consumer.position(TopicPartition(self.topic, p)) for p in range(self.partitions)]
            if all(pos >= ends[TopicPartition(self.topic, p)] for p, pos in enumerate(positions)):
                return True
            await self.poll()
        return False

    async def stop(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._consumer.stop(), 30)


SAMPLE_FIELDS = (
    "t_s", "phase", "produced", "applied", "produce_rate", "apply_rate", "backlog", "lag_gauge",
    "worker_rss_mb", "worker_rss_metric_mb", "worker_cpu_pct", "active_runs", "state_mb", "expired_runs",
    "runs_started", "verdicts_read", "verdicts_interval", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
    "read_latency_p99_ms", "hist_p50_ms", "hist_p99_ms", "store_disk_mb", "broker_rss_mb", "broker_cpu_pct",
)  # fmt: skip


class Sampler:
    def __init__(self, worker: Worker, producer: Producer, reader: VerdictReader, broker_pid: int | None) -> None:
        self.worker = worker
        self.producer = producer
        self.reader = reader
        self.broker_pid = broker_pid
        self.rows: list[dict[str, Any]] = []
        self.phase = "traffic"
        self.t0 = time.monotonic()
        self._last: tuple[float, float, float, float, float] | None = None  # (t, produced, applied, cpu, broker)
        self._last_hist: dict[float, float] = {}
        self._lat_index = 0
        self.last_metrics: dict[str, float] = {}

    async def sample(self) -> dict[str, Any]:
        m = await metrics_of(self.worker)
        now = time.monotonic()
        produced = float(self.producer.acked)
        done = applied(m)
        cpu = cpu_seconds(self.worker.pid)
        broker_cpu = cpu_seconds(self.broker_pid) if self.broker_pid is not None else math.nan
        lats = self.reader.latencies[self._lat_index :]
        self._lat_index = len(self.reader.latencies)
        hist = stats.histogram_buckets(m, LATENCY)
        row: dict[str, Any] = {
            "t_s": round(now - self.t0, 2),
            "phase": self.phase,
            "produced": int(produced),
            "applied": int(done),
            "backlog": int(max(0.0, self.producer.sent - done)),
            "lag_gauge": int(stats.metric_sum(m, "loopwatch_consumer_lag")),
            "worker_rss_mb": rss_bytes(self.worker.pid) / 2**20,
            "worker_rss_metric_mb": m.get("process_resident_memory_bytes", math.nan) / 2**20,
            "active_runs": int(m.get("loopwatch_active_runs", 0)),
            "state_mb": m.get("loopwatch_state_bytes", math.nan) / 2**20,
            "expired_runs": int(m.get("loopwatch_expired_runs_total", 0)),
            "runs_started": len(self.producer.runs),
            "verdicts_read": len(self.reader.records),
            "verdicts_interval": len(lats),
            "latency_p50_ms": stats.percentile([x[1] for x in lats], 0.50),
            "latency_p99_ms": stats.percentile([x[1] for x in lats], 0.99),
            "latency_max_ms": max((x[1] for x in lats), default=math.nan),
            "read_latency_p99_ms": stats.percentile([x[2] for x in lats], 0.99),
            "hist_p50_ms": stats.histogram_quantile(self._last_hist, hist, 0.50) * 1000,
            "hist_p99_ms": stats.histogram_quantile(self._last_hist, hist, 0.99) * 1000,
            "store_disk_mb": disk_bytes(self.worker.data_dir) / 2**20,
            "broker_rss_mb": rss_bytes(self.broker_pid) / 2**20,
        }
        if self._last is not None:
            dt = now - self._last[0]
            row["produce_rate"] = (produced - self._last[1]) / dt
            row["apply_rate"] = (done - self._last[2]) / dt
            row["worker_cpu_pct"] = 100 * (cpu - self._last[3]) / dt
            row["broker_cpu_pct"] = 100 * (broker_cpu - self._last[4]) / dt
        else:
            row["produce_rate"] = row["apply_rate"] = row["worker_cpu_pct"] = row["broker_cpu_pct"] = math.nan
        self._last = (now, produced, done, cpu, broker_cpu)
        self._last_hist = hist
        self.last_metrics = m
        self.rows.append(row)
        return row

    async def run(self, stop: asyncio.Event, interval: float) -> None:
        while not stop.is_set():
            row = await self.sample()
            print(
                f"  t={row['t_s']:6.0f}s {row['phase']:8} produced {row['produced']:>9} applied {row['applied']:>9} "
                f"lag {row['lag_gauge']:>5} rss {row['worker_rss_mb']:6.1f} MB runs {row['active_runs']:>6} "
                f"state {row['state_mb']:5.1f} MB disk {row['store_disk_mb']:5.0f} MB "
                f"cpu {row['worker_cpu_pct']:4.0f}% broker {row['broker_cpu_pct']:4.0f}% "
                f"verdict p99 {row['latency_p99_ms']:6.0f} ms",
                flush=True,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)


async def soak(args: argparse.Namespace, bootstrap: str, broker_pid: int | None, workdir: Path) -> dict[str, Any]:
    from streams.kafka.admin import ensure_topics

    summary: dict[str, Any] = {"command": "python -m bench.soak " + " ".join(args.argv), "checkout": checkout()}
    # 1. the rate
    if args.rate is not None:
        rate, how = args.rate, "given (--rate)"
    elif args.max_rate is not None:
        rate, how = args.max_rate * args.rate_fraction, f"{args.rate_fraction:g} x --max-rate {args.max_rate:.0f}"
    elif args.calibrate_seconds > 0:
        events = int(args.calibrate_seconds * README_MAX_RATE)
        print(f"calibrating: {events} events of backlog for a fresh worker ...", flush=True)
        cal = await calibrate(
            bootstrap,
            workdir,
            events=events,
            partitions=args.partitions,
            ttl=args.ttl,
            extra=shlex.split(args.worker_args),
        )
        summary["calibration"] = cal
        rate = cal["rate"] * args.rate_fraction
        how = (
            f"{args.rate_fraction:g} x calibrated max {cal['rate']:.0f} events/s "
            f"({cal['cpu_us_per_event']:.0f} us CPU/event, backlog drained over {cal['seconds']:.1f} s)"
        )
    else:
        rate, how = README_MAX_RATE * args.rate_fraction, f"{args.rate_fraction:g} x README max {README_MAX_RATE:.0f}"
    summary["rate_target"] = rate
    summary["rate_source"] = how
    print(f"rate: {rate:.0f} events/s = {how}", flush=True)
    print(
        f"soak: {args.duration:.0f} s (longer if fewer than {args.runs} runs have started), TTL {args.ttl:g} s, "
        f"{args.partitions} partitions, {gateways_for(rate)} gateways",
        flush=True,
    )

    # 2. the worker
    worker = Worker(
        bootstrap,
        "soak",
        workdir,
        args.partitions,
        args.ttl,
        args.sweep,
        args.store,
        shlex.split(args.worker_args),
        args.rocksdb_write_buffer_mb,
    )
    await ensure_topics(bootstrap, {worker.events_topic: args.partitions, worker.verdicts_topic: args.partitions})
    worker.start()
    producer = Producer(bootstrap, worker.events_topic, args.events_file, rate=rate, seed=args.seed)
    reader = VerdictReader(bootstrap, worker.verdicts_topic, args.partitions)
    try:
        await worker.ready()
        await producer.start()
        await reader.start()
        sampler = Sampler(worker, producer, reader, broker_pid)
        stop_sampling = asyncio.Event()
        stop_reading = asyncio.Event()
        sample_task = asyncio.ensure_future(sampler.run(stop_sampling, args.sample))
        read_task = asyncio.ensure_future(reader.run(stop_reading))

        # 3. traffic: paced in bursts of --burst seconds, until the duration is over and enough runs have started
        start = time.monotonic()
        hard_end = start + args.duration * args.max_extend
        while True:
            now = time.monotonic()
            if now >= hard_end or (now - start >= args.duration and len(producer.runs) >= args.runs):
                break
            due = int((now - start) * rate)
            if due > producer.sent:
                await producer.send(min(due - producer.sent, max(1, int(rate))))
            if not worker.alive():
                raise RuntimeError(f"worker exited during the soak:\n{worker.log()[-3000:]}")
            if sample_task.done():
                sample_task.result()  # re-raise a sampler failure
            next_tick = start + args.burst * (math.floor((time.monotonic() - start) / args.burst) + 1)
            await asyncio.sleep(max(0.001, next_tick - time.monotonic()))
        traffic_seconds = time.monotonic() - start
        await producer.flush()
        summary["traffic_seconds"] = traffic_seconds
        print(f"traffic done: {producer.sent} events over {len(producer.runs)} runs in {traffic_seconds:.0f} s")

        # 4. drain, then a cool-down of one TTL plus two sweeps: every run must expire
        sampler.phase = "drain"
        deadline = time.monotonic() + args.drain_timeout
        drained = False
        while time.monotonic() < deadline:
            if applied(await metrics_of(worker)) >= producer.sent:
                drained = True
                break
            await asyncio.sleep(0.5)
        summary["drain_seconds"] = time.monotonic() - start - traffic_seconds
        summary["drained"] = drained
        sampler.phase = "cooldown"
        sweep = worker_sweep_interval(args.ttl, args.sweep)
        cool_end = time.monotonic() + args.ttl + 2 * sweep + 2 * args.sample
        while time.monotonic() < cool_end:
            last = sampler.rows[-1] if sampler.rows else {}
            if last.get("phase") == "cooldown" and last.get("active_runs") == 0:
                break  # every run expired
            await asyncio.sleep(0.5)
        stop_sampling.set()
        await sample_task
        await sampler.sample()  # a final row
        stop_reading.set()
        await read_task
        summary["verdicts_complete"] = await reader.catch_up()
        final_metrics = sampler.last_metrics
    finally:
        await producer.stop()
        await reader.stop()
        errors = worker.error_lines()
        warnings = worker.warning_kinds()
        code = worker.stop(30.0)
    summary["worker_exit"] = code
    summary["worker_error_lines"] = errors[:20]
    summary["worker_errors"] = len(errors)
    summary["worker_warnings"] = {kind: count for kind, count in warnings[:20]}  # by kind, most frequent first
    summary["produced"] = producer.sent
    summary["acknowledged"] = producer.acked
    summary["produce_failures"] = producer.failed
    summary["distinct_runs"] = len(producer.runs)
    summary["applied_final"] = applied(final_metrics)
    summary["expired_runs_final"] = final_metrics.get("loopwatch_expired_runs_total", math.nan)
    summary["duplicates_final"] = final_metrics.get("loopwatch_duplicate_events_total", math.nan)
    summary["invalid_final"] = stats.metric_sum(final_metrics, "loopwatch_invalid_events_total")
    summary["redelivered_final"] = final_metrics.get("loopwatch_redelivered_events_total", math.nan)
    return {"summary": summary, "rows": sampler.rows, "verdicts": reader.records, "latencies": reader.latencies}


def worker_sweep_interval(ttl: float, sweep: float | None) -> float:
    if sweep is not None:
        return sweep
    return min(10.0, max(0.5, ttl / 10.0)) if ttl > 0 else 30.0


# --- results --------------------------------------------------------------------------------------------------


def summarise(result: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    summary: dict[str, Any] = result["summary"]
    rows: list[dict[str, Any]] = result["rows"]
    traffic = [r for r in rows if r["phase"] == "traffic"]
    # skip the first TTL + two sweeps: the table fills until the first runs expire
    warm = args.ttl + 2 * worker_sweep_interval(args.ttl, args.sweep)
    steady = [r for r in traffic if r["t_s"] >= warm]
    ts = [r["t_s"] for r in steady]
    seconds = summary["traffic_seconds"]
    summary["events_per_s"] = summary["produced"] / seconds if seconds else math.nan
    summary["steady_from_s"] = warm
    for name in ("worker_rss_mb", "active_runs", "state_mb"):
        summary[f"{name}_trend"] = stats.plateau(ts, [float(r[name]) for r in steady])
    summary["worker_rss_mb_start"] = traffic[0]["worker_rss_mb"] if traffic else math.nan
    summary["worker_rss_mb_max"] = max((r["worker_rss_mb"] for r in rows), default=math.nan)
    summary["worker_rss_mb_end_of_traffic"] = traffic[-1]["worker_rss_mb"] if traffic else math.nan
    summary["worker_rss_mb_after_cooldown"] = rows[-1]["worker_rss_mb"] if rows else math.nan
    summary["active_runs_max"] = max((r["active_runs"] for r in rows), default=0)
    summary["active_runs_after_cooldown"] = rows[-1]["active_runs"] if rows else None
    summary["state_mb_max"] = max((r["state_mb"] for r in rows), default=math.nan)
    summary["state_bytes_per_run"] = (
        stats.mean([r["state_mb"] * 2**20 / r["active_runs"] for r in steady if r["active_runs"]]) if steady else None
    )
    summary["lag_gauge_max"] = max((r["lag_gauge"] for r in traffic), default=0)
    summary["backlog_max"] = max((r["backlog"] for r in traffic), default=0)
    half = ts[len(ts) // 2] if ts else 0.0
    summary["backlog_max_first_half"] = max((r["backlog"] for r in steady if r["t_s"] < half), default=0)
    summary["backlog_max_last_half"] = max((r["backlog"] for r in steady if r["t_s"] >= half), default=0)
    summary["worker_cpu_pct_mean"] = stats.mean([r["worker_cpu_pct"] for r in traffic])
    summary["broker_cpu_pct_first_minute"] = stats.mean([r["broker_cpu_pct"] for r in traffic if r["t_s"] <= 60])
    summary["broker_cpu_pct_last_minute"] = stats.mean(
        [r["broker_cpu_pct"] for r in traffic if r["t_s"] >= traffic[-1]["t_s"] - 60] if traffic else []
    )
    summary["worker_args"] = args.worker_args
    summary["rocksdb_write_buffer_mb"] = args.rocksdb_write_buffer_mb
    summary["broker_rss_mb_end"] = rows[-1]["broker_rss_mb"] if rows else math.nan
    summary["store_disk_mb_max"] = max((r["store_disk_mb"] for r in rows), default=math.nan)
    summary["store"] = args.store
    lats = [x[1] for x in result["latencies"]]
    reads = [x[2] for x in result["latencies"]]
    summary["verdict_latency_ms"] = {
        "p50": stats.percentile(lats, 0.5),
        "p99": stats.percentile(lats, 0.99),
        "p999": stats.percentile(lats, 0.999),
        "max": max(lats, default=math.nan),
        "samples": len(lats),
        "read_back_p50": stats.percentile(reads, 0.5),
        "read_back_p99": stats.percentile(reads, 0.99),
    }
    return summary


def write_outputs(out: Path, summary: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "samples.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(SAMPLE_FIELDS))
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()})
    (out / "summary.json").write_text(json.dumps(_clean(summary), indent=2, sort_keys=True) + "\n")


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, 4)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def report(summary: dict[str, Any]) -> str:
    lat = summary["verdict_latency_ms"]
    cmp_ = summary.get("comparison", {})
    gaps = summary.get("run_gaps", {})

    def trend(name: str, unit: str) -> str:
        t = summary[f"{name}_trend"]
        return (
            f"first half {t.get('first_half_mean', math.nan):.1f} {unit}, "
            f"last half {t.get('last_half_mean', math.nan):.1f} {unit}, "
            f"slope over the last half {t.get('slope_per_min', math.nan):+.2f} {unit}/min "
            f"({100 * t.get('last_half_growth', math.nan):+.1f} % across it, "
            f"{100 * t.get('growth_per_10min', math.nan):+.1f} % per 10 min) -> "
            + ("PLATEAU" if t.get("plateau") else "NO PLATEAU")
        )

    lines = [
        "",
        "soak summary",
        f"  rate            {summary['events_per_s']:.0f} events/s ({summary['rate_source']})",
        f"  traffic         {summary['produced']} events over {summary['distinct_runs']} distinct runs in "
        f"{summary['traffic_seconds']:.0f} s; drained {summary['drained']} after {summary['drain_seconds']:.1f} s",
        f"  worker RSS      start {summary['worker_rss_mb_start']:.1f} MB, max {summary['worker_rss_mb_max']:.1f} MB, "
        f"end of traffic {summary['worker_rss_mb_end_of_traffic']:.1f} MB, "
        f"after cool-down {summary['worker_rss_mb_after_cooldown']:.1f} MB",
        f"                  {trend('worker_rss_mb', 'MB')}",
        f"  active runs     max {summary['active_runs_max']}, after cool-down {summary['active_runs_after_cooldown']}; "
        f"{trend('active_runs', 'runs')}",
        f"  state           max {summary['state_mb_max']:.2f} MB "
        f"({summary['state_bytes_per_run'] or math.nan:.0f} B/run); "
        f"{trend('state_mb', 'MB')}",
        f"  lag             gauge max {summary['lag_gauge_max']}, produced-applied max {summary['backlog_max']} "
        f"(first half {summary['backlog_max_first_half']}, last half {summary['backlog_max_last_half']})",
        f"  verdict latency p50 {lat['p50']:.0f} ms, p99 {lat['p99']:.0f} ms, p99.9 {lat['p999']:.0f} ms, "
        f"max {lat['max']:.0f} ms ({lat['samples']} verdicts)",
        f"  worker CPU      {summary['worker_cpu_pct_mean']:.0f} % of one core on average; broker CPU "
        f"{summary['broker_cpu_pct_first_minute']:.0f} % in the first minute, "
        f"{summary['broker_cpu_pct_last_minute']:.0f} % in the last",
        f"  verdicts        published {cmp_.get('published_distinct')} distinct ({cmp_.get('published_records')} "
        f"records, {cmp_.get('duplicates')} duplicates), replay {cmp_.get('replay_verdicts')}: "
        f"LOST {cmp_.get('lost')}, extra {cmp_.get('extra')}, differing {cmp_.get('differing')}",
        f"  TTL check       largest gap inside a run {gaps.get('largest_gap_s')} s, "
        f"runs resumed after the TTL {gaps.get('resumed_after_ttl')}",
        f"  expired runs    {summary['expired_runs_final']:.0f} of {summary['distinct_runs']}",
        f"  worker log      {summary.get('worker_errors', len(summary['worker_error_lines']))} error lines, "
        f"warnings by kind: {summary.get('worker_warnings') or 'none'}",
    ]
    return "\n".join(lines)


# --- command line ---------------------------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds of traffic (at least)")
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--rate", type=float, help="events/s (skips calibration)")
    rate.add_argument("--max-rate", type=float, help="take this as the worker's max instead of calibrating")
    p.add_argument("--rate-fraction", type=float, default=0.5, help="fraction of the max rate to run at")
    p.add_argument(
        "--calibrate-seconds", type=float, default=45.0, help="backlog size in README-max seconds; 0 = README max"
    )
    p.add_argument("--runs", type=int, default=100_000, help="extend the traffic until this many runs have started")
    p.add_argument("--max-extend", type=float, default=1.5, help="never more than this x --duration of traffic")
    p.add_argument("--ttl", type=float, default=30.0, help="worker --state-ttl seconds")
    p.add_argument("--sweep", type=float, default=None, help="worker --sweep-interval (default TTL/10)")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--store", choices=("rocksdb", "memory"), default="rocksdb", help="worker --store")
    p.add_argument(
        "--rocksdb-write-buffer-mb",
        type=float,
        help="worker --rocksdb-write-buffer-mb (default: the worker's, 4 MiB; 64 reproduces Faust's own default)",
    )
    p.add_argument("--worker-args", default="", help="more worker options, e.g. '--storm-runs 0 --storm-agent-runs 0'")
    p.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    p.add_argument("--burst", type=float, default=0.1, help="seconds of traffic sent together (see BURST)")
    p.add_argument("--drain-timeout", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", type=Path, default=REPO / "bench" / "soak" / "results")
    p.add_argument("--events-file", type=Path, help="where to keep the produced events (default: a temp dir)")
    p.add_argument("--keep-events", action="store_true", help="keep the events file, logs and RocksDB files")
    args = p.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    from streams.config_file import load_openclaw_config
    from streams.devbroker import EmbeddedBroker

    workdir = Path(tempfile.mkdtemp(prefix="loopwatch-soak-"))
    if args.events_file is None:
        args.events_file = workdir / "events.jsonl"
    print(f"soak work dir {workdir} (logs, RocksDB, events file)", flush=True)

    interrupt = contextlib.ExitStack()
    interrupt.enter_context(sigterm_as_interrupt())
    try:
        with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
            try:
                result = asyncio.run(soak(args, broker.bootstrap, broker.pid, workdir))
            finally:
                stop_all()
        summary = summarise(result, args)
        print("comparing the published verdicts with replay over the recorded events ...", flush=True)
        t = time.monotonic()
        replayed = compare.replay_file(args.events_file, load_openclaw_config(CONFIG))
        summary["comparison"] = compare.compare(result["verdicts"], replayed).as_dict()
        summary["run_gaps"] = compare.run_gaps(args.events_file, args.ttl)
        summary["replay_seconds"] = time.monotonic() - t
        summary["ttl_s"] = args.ttl
        summary["partitions"] = args.partitions
        write_outputs(args.out, summary, result["rows"])
        print(report(summary))
        try:
            from bench.soak.plot import plot

            plots = ", ".join(p.name for p in plot(result["rows"], summary, args.out))
        except ImportError:  # the soak extra is not installed (make soak installs it)
            plots = "no plots (matplotlib missing: make soak installs it)"
        print(f"  outputs         {args.out}/summary.json, samples.csv, {plots}")
        ok = summary["comparison"]["lost"] == 0 and summary["drained"] and summary["run_gaps"]["resumed_after_ttl"] == 0
        if ok and not args.keep_events:
            shutil.rmtree(workdir, ignore_errors=True)  # logs and RocksDB files; kept when something failed
        return 0 if ok else 1
    except KeyboardInterrupt:
        print("interrupted: every process stopped", file=sys.stderr)
        return 130
    finally:
        interrupt.close()
        if not args.keep_events:
            with contextlib.suppress(OSError):
                args.events_file.unlink()
        if workdir.exists():
            print(f"(work dir {workdir} kept: logs, RocksDB files)", flush=True)
