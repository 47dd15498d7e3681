"""Worker throughput, latency and state size on the embedded broker (prints figures; not a timed test).

Three systems process the same realistic fleet traffic (:mod:`streams.simulate`, production config
``deploy/config/openclaw.json5``), raw and pre-hashed:

(a) the loopwatch worker (``loopwatch worker``, a subprocess) with ``--delivery bulk`` (records taken in bulk
    from the consumer's fetch loop), the median of ``--a-runs`` drains of the same backlog (:func:`median_run`),
    and, for comparison in the same run, the same backlog written in small producer batches (one or two events
    each, as gateways send them when not busy) and the earlier
    ``--delivery stream`` (one Faust event per record), and with fleet storms off (what counting them costs:
    the signals sent with the verdicts, the storm-count agent reading them); the ratios are of the bulk run;
(b) a textbook Faust agent: per event one table get, one table set and an awaited ``send`` per published
    verdict, same decoding, core and state codec (``worker_bench.py textbook-worker``, a subprocess);
(c) a raw aiokafka loop without Faust: ``getmany`` -> the worker's batch processing with a dict store ->
    produce state (changelog topic) and verdicts -> wait for acks (``worker_bench.py raw-loop``, a
    subprocess; partitions assigned manually, no group, no commits).

For each: events/s over the processing window and CPU per event of that process (``/proc`` user + system
time over the window / events; no profiler). The worker's progress is read from its run-table changelog by
the benchmark itself (every state write names the newest source offset it covers), so nothing asks the worker
anything during the window; its idle CPU and the CPU of one ``/metrics`` scrape are measured after the window
and reported apart, with (a)'s CPU per event less that idle CPU over the window (on the embedded broker the
idle CPU is mostly fetch polling, which also runs during the window). Then:

* ratios a/b and a/c;
* scale-out: 1 and 2 worker processes in one consumer group, settled on a warm-up first, then a backlog;
  throughput and CPU per event (all workers' CPU / events) from the end of producing it to its last event,
  and the cores the workers and the broker used over that window; two workers once with the default standby
  copy of each other's tables and once with ``--standby-replicas 0``;
* event-to-verdict latency at half of (a)'s max rate, on (a)'s fleet (:func:`fleet_for`), with real-time
  ``ts``: p50/p99 and what the p99 is made of (the event's produce ack, the worker's fetch-to-send, the
  verdict's confirmation and state write), the p50/p99 of each second of the traffic (growing figures: the
  worker fell behind, see :func:`by_second`) and the worker's and the broker's cores in each second
  (:func:`sample_cores`), the wait of each batch's oldest record before the worker starts
  it (``loopwatch_batch_wait_seconds``: the broker, the fetch and the worker's queue), the worker's event-loop
  lag (``loopwatch_event_loop_lag_seconds``: how long its own work held the loop that every fetch hand-over
  and batch waits on), the worker's CPU per event, mean batch and state writes per event at that rate
  (keeping up costs more than draining a backlog),
  and the cores the worker, the broker and this process (the load generator, sending 5 ms bursts, see
  :data:`BURST_SECONDS`) used meanwhile;
* stored bytes per run (the newest changelog value of every run).

Everything is printed per variant and then side by side in one table. Every throughput run reads a topic
filled before it started (or, for the scale-out, measures after the producer finished), so the figures are
processing capacity, not producer speed.

Run from the repository root: ``.venv/bin/python bench/worker_bench.py [--events 30000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from bench.soak.stats import histogram_buckets, histogram_quantile  # noqa: E402
from streams.devbroker import cpu_seconds as process_cpu  # noqa: E402
from streams.devbroker import terminate  # noqa: E402
from streams.topics import changelog_topic  # noqa: E402
from tests.support.procs import sigterm_as_interrupt  # noqa: E402
from tests.support.worker import metric, scrape  # noqa: E402  (one /metrics parser for tests and benchmarks)

CONFIG = REPO / "deploy" / "config" / "openclaw.json5"
PYTHON = sys.executable


# --- helpers ------------------------------------------------------------------------------------------------


def cpu_seconds(pid: int, thread: int | None = None) -> float:
    """User + system CPU of a process, or of one of its threads (Linux /proc; NaN once it has exited)."""
    used = process_cpu(pid, thread)
    return math.nan if used is None else used


def loop_cpu_seconds(pid: int) -> float:
    """User + system CPU of a worker's main thread, the one running its event loop (Faust's consumer has its
    own thread): the split shows whether a cost is the processing or the fetching."""
    return cpu_seconds(pid, pid)


def split_text(cpu_us: float, loop_us: float) -> str:
    """CPU per event of the event-loop thread / of the other threads, as the tables show it."""
    return f"{loop_us:.0f} / {cpu_us - loop_us:.0f} µs"


def free_port() -> int:
    from streams.devbroker import free_port as _free

    return _free()


def fleet_for(events: int) -> int:
    """Gateways of the fleet whose traffic a backlog of ``events`` holds (about 4 concurrent runs per gateway,
    runs of a few dozen events). The latency runs send (a)'s fleet, so half of (a) is half of (a)'s capacity
    on the same traffic: a fleet spread over more runs costs more per event (docs/performance.md)."""
    return max(10, events // 600)


def records_for(events: int, *, hashed: bool, seed: int = 7) -> list[tuple[bytes, bytes]]:
    from streams.simulate import simulate

    gateways = fleet_for(events)
    return list(simulate(gateways=gateways, rate=1000.0, duration=events / 1000.0, seed=seed, hashed=hashed))


#: Producer batch bytes of the backlogs: large, as a bulk loader writes them.
LARGE_BATCHES = 256 * 1024
#: A producer batch that holds one or two events, as a gateway's producer sends them when it is not busy.
SMALL_BATCHES = 1200


def mean_batch(after: dict[str, float], before: dict[str, float] | None = None) -> float:
    """Events per worker batch between two ``/metrics`` scrapes (from the start without ``before``)."""
    count = metric(after, "loopwatch_batch_events_count")
    total = metric(after, "loopwatch_batch_events_sum")
    if before is not None:
        count -= metric(before, "loopwatch_batch_events_count")
        total -= metric(before, "loopwatch_batch_events_sum")
    return total / count if count else 0.0


def produce(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes, bytes]],
    partitions: int,
    batch_bytes: int = LARGE_BATCHES,
) -> dict[int, tuple[int, int]]:
    """Write ``records`` to ``topic`` (created if needed); returns (first, last) offset per partition."""
    return asyncio.run(produce_async(bootstrap, topic, records, partitions, batch_bytes))


async def produce_async(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes, bytes]],
    partitions: int,
    batch_bytes: int = LARGE_BATCHES,
) -> dict[int, tuple[int, int]]:
    from aiokafka import AIOKafkaProducer

    from streams.kafka.admin import ensure_topics

    await ensure_topics(bootstrap, {topic: partitions})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=batch_bytes)
    await producer.start()
    try:
        futures = [await producer.send(topic, value, key=key) for key, value in records]
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    span: dict[int, tuple[int, int]] = {}
    for meta in metas:
        first, last = span.get(meta.partition, (meta.offset, meta.offset))
        span[meta.partition] = (min(first, meta.offset), max(last, meta.offset))
    return span


def stop(proc: subprocess.Popen[bytes]) -> None:
    terminate(proc, 20.0)


class Result:
    def __init__(self, name: str, events: int, seconds: float, cpu: float) -> None:
        self.name = name
        self.events = events
        self.seconds = seconds
        self.cpu = cpu
        self.loop_cpu = float("nan")  # of the workers' event-loop threads over the window
        self.cores = (0.0, 0.0)  # of the workers and the broker over the window (group runs)

    @property
    def cores_text(self) -> str:
        return "workers {:.2f}, broker {:.2f}".format(*self.cores)

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("nan")

    @property
    def cpu_per_event_us(self) -> float:
        return self.cpu / self.events * 1e6 if self.events else float("nan")

    @property
    def split_text(self) -> str:
        """CPU per event of the event-loop thread / of the other threads."""
        loop_us = self.loop_cpu / self.events * 1e6 if self.events else float("nan")
        return split_text(self.cpu_per_event_us, loop_us)

    def line(self) -> str:
        return (
            f"  {self.name:34} {self.rate:9.0f} events/s   {self.cpu_per_event_us:6.0f} us CPU/event "
            f"({self.events} events in {self.seconds:.2f} s)"
        )


# --- (a) the loopwatch worker, watched through its changelog ---------------------------------------------------


class ChangelogWatch:
    """Follows a worker group's run-table changelog from the benchmark process.

    Every state write names the newest source offset it covers (the envelope header), and a run's state is
    written only after its verdicts were confirmed, so the changelog tells how far each events partition is
    processed without asking the workers anything: a ``/metrics`` scrape costs a worker about 2 ms of CPU,
    which is measured and reported apart (:func:`idle_and_scrape_cost`). It also yields the stored bytes per
    run (the newest value of every key) and each write's timestamp for the latency breakdown.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.done: dict[int, int] = {}  # source partition -> newest offset covered by a stored state
        self.sizes: dict[bytes, int] = {}
        self.writes: list[tuple[bytes, int, int, int]] = []  # (key, partition, last offset, write timestamp ms)
        self._consumer: Any = None

    async def start(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        from streams.kafka.admin import ensure_topics

        await ensure_topics(self.bootstrap, {self.topic: self.partitions})
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
        )
        await self._consumer.start()
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        self._consumer.assign(tps)
        await self._consumer.seek_to_beginning(*tps)

    async def poll(self, timeout_ms: int = 50) -> None:
        from streams.worker import envelope

        batches = await self._consumer.getmany(timeout_ms=timeout_ms)
        for msgs in batches.values():
            for m in msgs:
                if m.value is None:
                    self.sizes.pop(m.key, None)
                    continue
                header = envelope.peek(m.value)
                if header.last_offset > self.done.get(header.partition, -1):
                    self.done[header.partition] = header.last_offset
                self.sizes[m.key] = len(m.value)
                self.writes.append((m.key, header.partition, header.last_offset, m.timestamp))

    def processed(self, span: dict[int, tuple[int, int]]) -> int:
        """Events of ``span`` (first, last offset per partition) that stored states cover."""
        return sum(max(0, min(self.done.get(p, -1), last) - first + 1) for p, (first, last) in span.items())

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()


def start_worker(
    bootstrap: str,
    prefix: str,
    partitions: int,
    store: str,
    workdir: Path,
    *,
    sweep: float | None = None,
    worker_id: str | None = None,
    delivery: str = "bulk",
    extra: Sequence[str] = (),
    tree: Path = REPO,
) -> tuple[Any, int]:
    """A ``loopwatch worker`` subprocess (``tree``'s code) on the benchmark's topics; (process, metrics port)."""
    metrics_port = free_port()
    name = f"{prefix}-lw" + (f"-{worker_id}" if worker_id else "")
    cmd = [
        PYTHON, "-m", "streams.cli", "worker",
        "--bootstrap", bootstrap, "--embedded", "--group", f"{prefix}-lw",
        "--events-topic", f"{prefix}.events", "--verdicts-topic", f"{prefix}.verdicts",
        "--dead-letter-topic", f"{prefix}.dead", "--partitions", str(partitions),
        "--store", store, "--data-dir", str(workdir / name),
        "--metrics-port", str(metrics_port), "--web-port", str(free_port()),
        "--config", str(CONFIG), "--log-level", "warn", "--delivery", delivery,
        *(["--sweep-interval", str(sweep)] if sweep is not None else []),
        *extra,
    ]  # fmt: skip
    env = dict(os.environ, **({"LOOPWATCH_WORKER_ID": worker_id} if worker_id else {}))
    if tree != REPO:
        env["PYTHONPATH"] = str(tree)  # before this checkout's editable install
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=tree, stdout=log, stderr=subprocess.STDOUT, env=env)
    return proc, metrics_port


def changelog_of(prefix: str) -> str:
    return changelog_topic(f"{prefix}-lw")


class Window(NamedTuple):
    """What a :func:`watch_until_done` window took."""

    events: int
    seconds: float
    cpu: float  # CPU seconds of all workers
    broker: float  # CPU seconds of the broker process (0 when not watched)
    loop: float  # CPU seconds of the workers' event-loop threads (:func:`loop_cpu_seconds`)


async def watch_until_done(
    watch: ChangelogWatch,
    procs: Sequence[subprocess.Popen[bytes]],
    span: dict[int, tuple[int, int]],
    *,
    start_after: asyncio.Future[Any] | None = None,
    timeout: float = 600.0,
    broker_pid: int | None = None,
) -> Window:
    """Poll until ``span`` is processed; what the window took.

    The window opens at the first progress seen (after ``start_after`` is done, when given: e.g. the end of
    producing the backlog) and closes when the last event of every partition is covered by a stored state.
    """
    total = sum(last - first + 1 for first, last in span.values())
    first: tuple[float, float, int, float, float] | None = None

    def workers_cpu() -> float:
        return sum(cpu_seconds(p.pid) for p in procs)

    def broker_cpu() -> float:
        return cpu_seconds(broker_pid) if broker_pid is not None else 0.0

    def loop_cpu() -> float:
        return sum(loop_cpu_seconds(p.pid) for p in procs)

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await watch.poll()
        n = watch.processed(span)
        now = time.monotonic()
        ready = start_after is None or start_after.done()
        if first is None and ready and n > 0:
            first = (now, workers_cpu(), n, broker_cpu(), loop_cpu())
        if n >= total and first is not None:
            cpu = workers_cpu() - first[1]
            return Window(total - first[2], now - first[0], cpu, broker_cpu() - first[3], loop_cpu() - first[4])
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a worker exited with {proc.returncode}; see its log")
    raise RuntimeError("the workers did not finish in time")


def idle_and_scrape_cost(
    proc: subprocess.Popen[bytes], port: int, seconds: float = 3.0, scrapes: int = 20
) -> tuple[float, float]:
    """(idle CPU ms per second, CPU ms per ``/metrics`` scrape beyond that) of an idle worker."""
    cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
    time.sleep(seconds)
    idle = (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0)
    cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
    for _ in range(scrapes):
        scrape(port)
    used = cpu_seconds(proc.pid) - cpu0 - idle * (time.monotonic() - t0)
    return idle * 1000, max(0.0, used) / scrapes * 1000


def run_worker(
    bootstrap: str,
    prefix: str,
    records: Sequence[tuple[bytes, bytes]],
    partitions: int,
    store: str,
    workdir: Path,
    delivery: str = "bulk",
    batch_bytes: int = LARGE_BATCHES,
    label: str | None = None,
    extra: Sequence[str] = (),
) -> Result:
    """(a): one worker drains a backlog produced before it started (in producer batches of ``batch_bytes``)."""
    span = produce(bootstrap, f"{prefix}.events", records, partitions, batch_bytes)
    proc, port = start_worker(bootstrap, prefix, partitions, store, workdir, delivery=delivery, extra=extra)

    async def run() -> Result:
        watch = ChangelogWatch(bootstrap, changelog_of(prefix), partitions)
        await watch.start()
        try:
            window = await watch_until_done(watch, [proc], span)
            for _ in range(10):  # the last writes of runs whose final event was not their partition's last
                await watch.poll()
        finally:
            await watch.stop()
        result = Result(label or f"(a) loopwatch worker, {delivery}", window.events, window.seconds, window.cpu)
        result.loop_cpu = window.loop
        result.sizes = sorted(watch.sizes.values())  # type: ignore[attr-defined]
        result.writes_per_event = len(watch.writes) / len(records)  # type: ignore[attr-defined]
        return result

    try:
        result = asyncio.run(run())
        # after the window: how large the batches grew
        result.mean_batch = mean_batch(scrape(port))  # type: ignore[attr-defined]
        result.idle_ms, result.scrape_ms = idle_and_scrape_cost(proc, port)  # type: ignore[attr-defined]
        return result
    finally:
        stop(proc)


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive count")
    return value


def median_run(results: Sequence[Result]) -> Result:
    """The run of median rate (the upper one of an even count): all its figures come from one window, and one
    short window caught in a fast or a slow moment of a shared host no longer sets (a) and half of (a)."""
    return sorted(results, key=lambda r: r.rate)[len(results) // 2]


def run_group(
    bootstrap: str,
    prefix: str,
    records: Sequence[tuple[bytes, bytes]],
    warm: Sequence[tuple[bytes, bytes]],
    workers: int,
    partitions: int,
    store: str,
    workdir: Path,
    broker_pid: int | None,
    standby: int | None = None,
) -> Result:
    """``workers`` processes in one group: started on a warm-up first, so the group is settled, then a backlog.

    The window opens when the backlog is fully produced (the producer shares the cores) and closes when it is
    processed, so it measures the group's capacity, not the producer's speed or the group's start-up. The
    cores the workers and the broker used over it show what a second worker could still get on this machine.
    """
    extra = () if standby is None else ("--standby-replicas", str(standby))
    started = [
        start_worker(
            bootstrap, prefix, partitions, store, workdir, worker_id=f"w{i}" if workers > 1 else None, extra=extra
        )
        for i in range(workers)
    ]
    procs = [proc for proc, _ in started]

    async def run() -> Result:
        watch = ChangelogWatch(bootstrap, changelog_of(prefix), partitions)
        await watch.start()
        try:
            # Warm-up rounds until every worker applied events of the last one: the group is settled (these
            # scrapes are outside the window).
            seen = [0.0] * workers
            for _ in range(15):
                span = await produce_async(bootstrap, f"{prefix}.events", warm, partitions)
                await watch_until_done(watch, procs, span, timeout=120)
                await asyncio.sleep(1.0)
                counts = [metric(scrape(port), "loopwatch_events_total") for _, port in started]
                settled = all(now > before for now, before in zip(counts, seen, strict=True))
                seen = counts
                if settled:
                    break
            else:
                raise RuntimeError("the group did not settle: a worker got no partition")
            produced = asyncio.ensure_future(produce_async(bootstrap, f"{prefix}.events", records, partitions))
            span_future: asyncio.Future[Any] = produced
            while not produced.done():  # keep the watch current while the backlog is written
                await watch.poll()
            span = span_future.result()
            window = await watch_until_done(watch, procs, span, start_after=produced, broker_pid=broker_pid)
        finally:
            await watch.stop()
        label = f"{workers} worker{'s' if workers > 1 else ''} in one group" + (
            f", {standby} standby" if standby is not None else ""
        )
        result = Result(label, window.events, window.seconds, window.cpu)
        result.cores = (window.cpu / window.seconds, window.broker / window.seconds)
        return result

    try:
        return asyncio.run(run())
    finally:
        for proc in procs:
            stop(proc)


class LatencyRun(NamedTuple):
    """What :func:`latency_run` measured."""

    samples: dict[str, list[float]]
    cpu_us: float  # the worker's CPU per event over the traffic
    loop_us: float  # of which its event-loop thread's (:func:`loop_cpu_seconds`)
    batch: float  # its mean batch over the traffic
    wait: tuple[float, float]  # p50 and p99 (ms) of its loopwatch_batch_wait_seconds over the traffic
    lag: tuple[float, float]  # p50 and p99 (ms) of its loopwatch_event_loop_lag_seconds over the traffic
    cores: dict[str, float]  # cores used over the traffic by the worker, the broker and this benchmark process
    events: int  # events of the traffic
    cores_by_second: dict[str, list[float]]  # the worker's and the broker's cores in each second of the traffic


BURST_SECONDS = 0.005
"""The latency runs send their traffic in bursts of this many seconds' events, one record batch per partition.

A producer call per event made this process (the load generator, on the same 2 cores as the worker and the
broker) use most of a core at half of (a), mostly in aiokafka's per-message futures and one produce request
per millisecond; gateways batch their events the same way. Each burst is stamped with its send time, so the
measured latency starts there: the up to 5 ms an event waits for its burst is not in it. Each burst also adds
one record batch per partition to the broker, which the embedded broker lists again at every later fetch
(:func:`sample_cores`)."""


@contextlib.contextmanager
def steady_generator() -> Iterator[None]:
    """No garbage collection in this process (the load generator) while it sends: its full collections, up to
    0.4 s once a long benchmark has grown its heap, held up the send loop; events stamped before one reached the
    broker after it, and the traffic that fell due meanwhile went out as one burst, so the p99 measured this
    process's collector, not the worker. What the traffic allocates is collected after."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def latency_run(
    bootstrap: str,
    prefix: str,
    rate: float,
    seconds: float,
    partitions: int,
    store: str,
    workdir: Path,
    hashed: bool,
    gateways: int,
    broker_pid: int | None = None,
) -> LatencyRun:
    """Produce ``gateways``' traffic at ``rate`` with real-time ``ts``; return latency samples (ms) by name, and
    the worker's load.

    Per verdict (matched to its event by the verdict's ``source``): ``verdict`` = verdict record timestamp (the
    worker's send) minus the event's ``ts``, made of ``ack`` (the event's produce round trip, our producer and
    the broker), ``worker`` (from the event's ack to the worker's verdict send: the worker's fetch wait, queues,
    batching and processing) and ``store`` (verdict send to the covering state write: the verdict's
    confirmation and the table write). Every figure comes from record timestamps, so the verdicts are read
    after the traffic and the changelog only a few times a second during it (:data:`FOLLOW_SECONDS`).
    ``write`` = every state write minus the ``ts`` of the newest event it covers (almost every event, so stable
    percentiles). ``top_*`` are the components of the verdicts at or above the p99. The worker's CPU per event
    and mean batch over the traffic are what it costs to keep up at this rate, next to what draining a backlog
    costs in (a); the cores each process used over the traffic show who had the machine.
    """
    from aiokafka import AIOKafkaProducer
    from aiokafka.partitioner import DefaultPartitioner

    from streams.kafka.admin import ensure_topics
    from streams.kafka.reader import read_partitions
    from streams.simulate import simulate

    topics = {f"{prefix}.events": partitions, f"{prefix}.verdicts": partitions}
    asyncio.run(ensure_topics(bootstrap, topics))
    warm = disjoint(simulate_records(20, 2.0, hashed), "warm-")
    warm_span = produce(bootstrap, f"{prefix}.events", warm, partitions)
    proc, port = start_worker(bootstrap, prefix, partitions, store, workdir)
    changelog = changelog_of(prefix)
    try:
        partition_of = DefaultPartitioner()
        every = list(range(partitions))
        traffic = [
            (partition_of(key, every, every), key, orjson.loads(value))
            for key, value in simulate(gateways=gateways, rate=rate, duration=seconds, seed=5, hashed=hashed)
        ]

        async def run() -> LatencyRun:
            watch = ChangelogWatch(bootstrap, changelog, partitions)
            await watch.start()
            await watch_until_done(watch, [proc], warm_span, timeout=120)
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0, max_batch_size=2**20)
            await producer.start()
            before = scrape(port)  # one scrape each side of the traffic: its cost is a few ms of the worker's CPU
            pids = {"worker": proc.pid, **({"broker": broker_pid} if broker_pid else {})}
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            loop_before = loop_cpu_seconds(proc.pid)
            own_before, wall_before = time.process_time(), time.monotonic()
            stop_reading = asyncio.Event()

            async def follow() -> None:
                while not stop_reading.is_set():
                    await watch.poll()
                    if sending.is_set():
                        await asyncio.sleep(FOLLOW_SECONDS)

            async def send(partition: int, burst: list[tuple[bytes, bytes]], ts: int) -> None:
                """One record batch per partition and burst (more only if a batch fills), in order."""
                at = 0
                while at < len(burst):
                    batch, keys = producer.create_batch(), []
                    for key, value in burst[at:]:
                        if batch.append(key=key, value=value, timestamp=None) is None:
                            break  # full: send what it holds, the rest goes in the next batch
                        keys.append(key)
                    at += len(keys)
                    fut = await producer.send_batch(batch, f"{prefix}.events", partition=partition)
                    index = len(bursts)
                    fut.add_done_callback(lambda _f, index=index: acked_at.__setitem__(index, time.time() * 1000))
                    bursts.append((partition, keys, ts, fut))

            by_second_cores: dict[str, list[float]] = {name: [] for name in pids}
            sending = asyncio.Event()
            sending.set()
            tasks = [
                asyncio.ensure_future(follow()),
                asyncio.ensure_future(sample_cores(pids, sending, by_second_cores)),
            ]
            start = time.monotonic()
            bursts: list[tuple[int, list[bytes], int, Any]] = []  # (partition, keys, ts, future of its metadata)
            acked_at: dict[int, float] = {}
            sent = 0
            while sent < len(traffic):
                due = min(len(traffic), int((time.monotonic() - start) * rate) + 1)
                ts = int(time.time() * 1000)
                by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
                for partition, key, event in traffic[sent:due]:
                    event["ts"] = ts
                    by_partition.setdefault(partition, []).append((key, orjson.dumps(event)))
                sent = due
                for partition, burst in by_partition.items():
                    await send(partition, burst, ts)
                await asyncio.sleep(max(0.0, BURST_SECONDS - (time.monotonic() - start) % BURST_SECONDS))
            sending.clear()
            await producer.flush()
            events: dict[tuple[int, int], tuple[bytes, int, float]] = {}
            span: dict[int, tuple[int, int]] = {}
            for at, (partition, keys, ts, fut) in enumerate(bursts):
                base = (await fut).offset
                for i, key in enumerate(keys):
                    events[(partition, base + i)] = (key, ts, acked_at.get(at, float("nan")))
                first, last = span.get(partition, (base, base + len(keys) - 1))
                span[partition] = (min(first, base), max(last, base + len(keys) - 1))
            total = sum(last - first + 1 for first, last in span.values())
            deadline = time.monotonic() + 60
            while watch.processed(span) < total and time.monotonic() < deadline:
                await asyncio.sleep(0.1)  # every state stored (the follow task polls the changelog)
            wall = time.monotonic() - wall_before
            used = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in pids.items()}
            loop_us = (loop_cpu_seconds(proc.pid) - loop_before) / len(traffic) * 1e6
            used["benchmark"] = time.process_time() - own_before
            after = scrape(port)
            stop_reading.set()
            await asyncio.gather(*tasks)
            await producer.stop()
            await watch.stop()
            # the warm-up's verdicts match no event of the traffic: breakdown() leaves them out
            read = await read_partitions(bootstrap, f"{prefix}.verdicts")
            verdicts = [verdict_source(r.value, r.timestamp) for rs in read.records.values() for r in rs]
            samples = breakdown(events, verdicts, watch.writes)
            cores = {name: cpu / wall for name, cpu in used.items()}
            cpu_us = used["worker"] / len(traffic) * 1e6
            # interpolated in their buckets as Prometheus does, so only as fine as the buckets
            wait, lag = (quantiles_ms(before, after, name) for name in ("batch_wait", "event_loop_lag"))
            return LatencyRun(
                samples, cpu_us, loop_us, mean_batch(after, before), wait, lag, cores, len(traffic), by_second_cores
            )

        with steady_generator():
            return asyncio.run(run())
    finally:
        stop(proc)


FOLLOW_SECONDS = 0.25
"""How often the latency runs read the changelog while their traffic runs (as fast as it comes after it).

Each fetch costs the embedded broker a listing of every record batch the fetched partitions hold, on the cores the
worker shares (:func:`sample_cores`); the benchmark's own reading is no part of what it measures, and the
latencies come from record timestamps, not from when the benchmark reads them."""


def verdict_source(value: bytes, timestamp: int) -> tuple[int, int, int]:
    """(source partition, source offset, record timestamp) of one verdict record."""
    source: dict[str, int] = orjson.loads(value).get("source") or {}
    return source.get("partition", -1), source.get("offset", -1), timestamp


async def sample_cores(pids: dict[str, int], sending: asyncio.Event, out: dict[str, list[float]]) -> None:
    """Append each process's cores over every whole second to ``out`` while ``sending`` is set.

    On the embedded broker they show whether the broker's share grew through the window: Tansu's memory
    storage lists every record batch a partition holds at each fetch, so its cost per fetch grows with the
    traffic sent so far (docs/performance.md)."""
    last = {name: cpu_seconds(pid) for name, pid in pids.items()}
    since = time.monotonic()
    while sending.is_set():
        await asyncio.sleep(max(0.0, since + 1.0 - time.monotonic()))
        now = time.monotonic()
        if not sending.is_set():
            return  # a part of a second: the last whole one is in
        used = {name: cpu_seconds(pid) for name, pid in pids.items()}
        for name, cpu in used.items():
            out[name].append((cpu - last[name]) / (now - since))
        last, since = used, now


def quantiles_ms(before: dict[str, float], after: dict[str, float], name: str) -> tuple[float, float]:
    """p50 and p99 (ms) of the worker's ``loopwatch_<name>_seconds`` histogram between two scrapes."""
    series = f"loopwatch_{name}_seconds"
    first, last = histogram_buckets(before, series), histogram_buckets(after, series)
    p50, p99 = (1000 * histogram_quantile(first, last, q, interpolate=True) for q in (0.5, 0.99))
    return p50, p99


def breakdown(
    events: dict[tuple[int, int], tuple[bytes, int, float]],
    verdicts: list[tuple[int, int, int]],
    writes: list[tuple[bytes, int, int, int]],
) -> dict[str, list[float]]:
    """Latency samples by name from matched events, verdicts and state writes (see :func:`latency_run`)."""
    by_key: dict[bytes, list[tuple[int, int]]] = {}
    names = ("verdict", "ack", "worker", "store", "write", "verdict_ts")
    out: dict[str, list[float]] = {name: [] for name in names}
    for key, partition, last_offset, at in writes:
        by_key.setdefault(key, []).append((last_offset, at))
        covered = events.get((partition, last_offset))
        if covered is not None:
            out["write"].append(float(at - covered[1]))
    rows = []
    for partition, offset, at in verdicts:
        event = events.get((partition, offset))
        if event is None:
            continue
        key, ts, acked = event
        store = next((w for o, w in by_key.get(key, []) if o >= offset), None)
        row = (at - ts, acked - ts, at - acked, (store - at) if store is not None else float("nan"))
        rows.append(row)
        for name, value in zip(("verdict", "ack", "worker", "store"), row, strict=True):
            out[name].append(float(value))
        out["verdict_ts"].append(float(ts))  # when its event was stamped, for :func:`by_second`
    if rows:
        p99 = percentile([r[0] for r in rows], 0.99)
        top = [r for r in rows if r[0] >= p99]
        for at_, name in enumerate(("ack", "worker", "store")):
            out[f"top_{name}"] = [float(r[at_ + 1]) for r in top]
    return out


# --- (b) textbook Faust agent and (c) raw aiokafka loop: subprocess entry points ------------------------------


def _progress_line(n: int, first: float | None, first_cpu: float, first_n: int) -> str:
    now = time.monotonic()
    cpu = time.process_time() - first_cpu
    return json.dumps({"done": n, "seconds": now - (first or now), "cpu": cpu, "first_n": first_n})


def textbook_worker(args: argparse.Namespace) -> int:
    import faust
    import msgpack

    from streams.config_file import load_openclaw_config
    from streams.decode import InvalidEvent, decode_event
    from streams.detection import RunState
    from streams.kafka.admin import create_topics
    from streams.kafka.compat import apply_kafka_compat, faust_settings_for, required_topics
    from streams.runner import step

    config = load_openclaw_config(CONFIG)
    app = faust.App(
        args.group,
        **faust_settings_for(args.bootstrap, embedded=True),
        store="rocksdb://" if args.store == "rocksdb" else "memory://",
        datadir=args.data_dir,
        topic_partitions=args.partitions,
        web_port=args.web_port,
        web_host="127.0.0.1",
        web_bind="127.0.0.1",
        autodiscover=False,
    )
    apply_kafka_compat(app)
    source = app.topic(args.topic, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    verdicts = app.topic(args.verdicts, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
    table = app.Table("state", key_type=bytes, value_type=bytes, partitions=args.partitions)
    progress: dict[str, Any] = {"n": 0, "first": None, "cpu": 0.0}

    @app.agent(source)
    async def detect(stream: Any) -> None:
        async for event in stream.events():
            if progress["first"] is None:
                progress["first"], progress["cpu"] = time.monotonic(), time.process_time()
            progress["n"] += 1
            try:
                ev = decode_event(event.value)
            except InvalidEvent:
                continue
            stored = table.get(event.key)
            state = RunState.from_primitive(msgpack.unpackb(stored)[1]) if stored else None
            message = event.message
            result = step(state, ev, config, source=(message.topic, message.partition, message.offset))
            table[event.key] = msgpack.packb([message.offset, result.state.to_primitive()])
            for _decision, _cost, verdict in result.rendered():
                if verdict is not None:
                    await verdicts.send(key=event.key, value=orjson.dumps(verdict.model_dump(mode="json")))
            if progress["n"] >= args.expect:
                print(_progress_line(progress["n"], progress["first"], progress["cpu"], 1), flush=True)
                os._exit(0)

    create_topics(args.bootstrap, required_topics(app, {args.topic: args.partitions, args.verdicts: args.partitions}))
    worker = faust.Worker(app, loglevel="warn", quiet=True, redirect_stdouts=False)
    worker.spinner = None  # as in the loopwatch worker: the spinner puts the root logger at DEBUG
    worker.execute_from_commandline()
    return 0


def raw_loop(args: argparse.Namespace) -> int:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streams.config_file import load_openclaw_config
    from streams.kafka.admin import ensure_topics
    from streams.kafka.compat import PRODUCE_BATCH_BYTES
    from streams.worker.processing import InputRecord, RunProcessor, plan_batch

    processor = RunProcessor(load_openclaw_config(CONFIG))
    store: dict[bytes, bytes] = {}

    async def run() -> None:
        changelog = f"{args.topic}-state"
        dead = f"{args.topic}-dead"
        await ensure_topics(
            args.bootstrap,
            {args.topic: args.partitions, args.verdicts: args.partitions, changelog: args.partitions,
             dead: args.partitions},
        )  # fmt: skip
        consumer = AIOKafkaConsumer(bootstrap_servers=args.bootstrap, enable_auto_commit=False, max_poll_records=500)
        # the worker's produce batch size, so (a)/(c) compares the processing and not a producer setting
        producer = AIOKafkaProducer(
            bootstrap_servers=args.bootstrap, acks="all", linger_ms=0, max_batch_size=PRODUCE_BATCH_BYTES
        )
        await consumer.start()
        await producer.start()
        tps = [TopicPartition(args.topic, p) for p in range(args.partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        done = 0
        first: float | None = None
        first_cpu = 0.0
        try:
            while done < args.expect:
                batches = await consumer.getmany(timeout_ms=200, max_records=500)
                if not batches:
                    continue
                if first is None:
                    first, first_cpu = time.monotonic(), time.process_time()
                records = [
                    InputRecord(m.topic, m.partition, m.offset, m.key, m.value)
                    for msgs in batches.values()
                    for m in msgs
                ]
                now_ms = int(time.time() * 1000)
                plan = plan_batch(records, now_ms)
                futures = []
                for group in plan.groups.values():
                    result = processor.process(group, records, store.get(group.key), now_ms)
                    if result.value is not None:
                        store[group.key] = result.value
                        futures.append(
                            await producer.send(changelog, result.value, key=group.key, partition=result.partition)
                        )
                    for pub in result.publications:
                        futures.append(await producer.send(args.verdicts, pub.value, key=pub.key))
                    plan.dead_letters.extend(result.dead_letters)
                for d in plan.dead_letters:
                    futures.append(await producer.send(dead, d.value, key=d.key))
                await asyncio.gather(*futures)
                done += len(records)
        finally:
            await consumer.stop()
            await producer.stop()
        print(_progress_line(done, first, first_cpu, 0), flush=True)

    asyncio.run(run())
    return 0


def run_subprocess_system(name: str, cmd: list[str], total: int, workdir: Path, tag: str) -> Result:
    log = open(workdir / f"{tag}.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=log)
    try:
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # the Faust worker's spinner may put terminal escapes in front of the line
    lines = [line[line.index("{") :] for line in out.decode().splitlines() if '{"done"' in line]
    if not lines:
        tail = out.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{name} produced no result (exit {proc.returncode}); see {workdir}/{tag}.log\n{tail}")
    data = json.loads(lines[-1])
    return Result(name, int(data["done"]) - int(data["first_n"]), float(data["seconds"]), float(data["cpu"]))


# --- main -----------------------------------------------------------------------------------------------------


def by_second(stamped: Sequence[float], values: Sequence[float]) -> list[tuple[float, float]]:
    """p50 and p99 of ``values`` per second of the traffic, by their ``stamped`` times (ms), first second first.

    A worker that keeps up has about the same figures every second; one that falls behind shows them growing
    through the window, so its p99 is the queue it built, not a steady tail.
    """
    if not stamped:
        return []
    start = min(stamped)
    seconds: dict[int, list[float]] = {}
    for at, value in zip(stamped, values, strict=True):
        seconds.setdefault(int((at - start) // 1000), []).append(value)
    each = [seconds.get(n, []) for n in range(max(seconds) + 1)]
    return [(percentile(second, 0.5), percentile(second, 0.99)) for second in each]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    tb = sub.add_parser("textbook-worker")
    rl = sub.add_parser("raw-loop")
    for p in (tb, rl):
        p.add_argument("--bootstrap", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--verdicts", required=True)
        p.add_argument("--partitions", type=int, required=True)
        p.add_argument("--expect", type=int, required=True)
    tb.add_argument("--group", required=True)
    tb.add_argument("--store", default="rocksdb")
    tb.add_argument("--data-dir", required=True)
    tb.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--events", type=int, default=30000, help="events per throughput run of (a), (b), (c)")
    parser.add_argument(
        "--a-runs",
        type=positive_int,
        default=3,
        help="drains of (a), each on its own topics; (a) is the one of median rate (its window is under a second)",
    )
    parser.add_argument("--group-events", type=int, default=60000, help="events per run of the 1 vs 2 workers")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--store", choices=("rocksdb", "memory"), default="rocksdb")
    parser.add_argument("--latency-seconds", type=float, default=15.0)
    parser.add_argument(
        "--latency-gateways",
        type=int,
        help="gateways of the latency runs' fleet (default: (a)'s, so half of (a) is on the same traffic)",
    )
    parser.add_argument(
        "--latency-rates", default="", help="comma-separated extra rates (events/s) for latency runs, e.g. 500,1000"
    )
    parser.add_argument("--variants", default="raw,prehashed", help="comma-separated: raw, prehashed")
    parser.add_argument(
        "--skip", default="", help="comma-separated parts to leave out: small, storms, stream, b, c, group, latency"
    )
    args = parser.parse_args(argv)
    if args.command == "textbook-worker":
        return textbook_worker(args)
    if args.command == "raw-loop":
        return raw_loop(args)

    from streams.devbroker import EmbeddedBroker

    skip = {part.strip() for part in args.skip.split(",") if part.strip()}
    workdir = Path(tempfile.mkdtemp(prefix="worker-bench-"))
    print(f"worker bench: {args.events} events per run, {args.partitions} partitions, store {args.store}")
    print(f"  config {CONFIG.relative_to(REPO)}; logs in {workdir}")
    print(f"  {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    table: dict[str, dict[str, str]] = {}
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        boot = broker.bootstrap
        for variant in args.variants.split(","):
            column = table.setdefault(variant, {})
            hashed = variant == "prehashed"
            records = records_for(args.events, hashed=hashed)
            runs = len({k for k, _ in records})
            print(f"\n{variant} input: {len(records)} events over {runs} runs")
            results: dict[str, Result] = {}
            drains = [
                run_worker(boot, f"a{n}-{variant}", records, args.partitions, args.store, workdir)
                for n in range(args.a_runs)
            ]
            a = results["a"] = median_run(drains)
            rates = ", ".join(f"{r.rate:,.0f}" for r in drains)
            print(f"  (a) {len(drains)} drain(s): {rates} events/s; the median one:")
            print(a.line())
            column["(a) drains (the median one is (a))"] = f"{rates} events/s"
            idle_ms, scrape_ms = a.idle_ms, a.scrape_ms  # type: ignore[attr-defined]
            print(
                f"  (a) apart from the window: idle {idle_ms:.0f} ms CPU/s, {scrape_ms:.1f} ms CPU per /metrics "
                f"scrape; {a.mean_batch:.0f} events per batch on average"  # type: ignore[attr-defined]
            )
            column["(a) loopwatch worker, --delivery bulk"] = (
                f"{a.rate:,.0f} events/s, {a.cpu_per_event_us:.0f} µs CPU/event"
            )
            column["(a) idle CPU, per /metrics scrape"] = f"{idle_ms:.0f} ms/s, {scrape_ms:.1f} ms"
            # An idle worker's CPU is mostly fetch polling (the embedded broker's short fetch wait); the same
            # polling runs during the window, so this is the per-event work without it (an estimate).
            net_us = a.cpu_per_event_us - idle_ms * 1000 / a.rate
            column["(a) CPU/event less the idle CPU over the window"] = f"{net_us:.0f} µs"
            # Next to the same split at half of (a): what the live traffic costs more is the processing (the
            # event-loop thread) or the fetching (the consumer's thread).
            print(f"  (a) CPU/event, event-loop thread / other threads: {a.split_text}")
            column["(a) CPU/event, event-loop thread / other threads"] = a.split_text
            column["(a) events per batch, mean"] = f"{a.mean_batch:.0f}"  # type: ignore[attr-defined]
            # Each batch writes one state per run it touched: the fewer events a run has in a batch, the more
            # of the per-run work (table read, state encode, store write, changelog record) each event pays.
            column["(a) state writes per event"] = f"{a.writes_per_event:.2f}"  # type: ignore[attr-defined]
            if "small" not in skip:
                # The same backlog as a fleet writes it when no gateway is busy: one or two events per record
                # batch. The consumer's cost per fetched record batch shows here, hidden in (a)'s large batches.
                small = run_worker(
                    boot, f"m-{variant}", records, args.partitions, args.store, workdir,
                    batch_bytes=SMALL_BATCHES, label="(a) bulk, small producer batches",
                )  # fmt: skip
                print(small.line())
                print(f"  (a) small producer batches: {small.mean_batch:.0f} events per batch on average")  # type: ignore[attr-defined]
                column["(a) backlog in small producer batches (1–2 events each)"] = (
                    f"{small.rate:,.0f} events/s, {small.cpu_per_event_us:.0f} µs CPU/event"
                )
            if "storms" not in skip:
                # What the fleet-storm count costs: the signals the worker sends with its verdicts and the
                # storm-count agent that reads them one Faust event at a time.
                calm = run_worker(
                    boot, f"q-{variant}", records, args.partitions, args.store, workdir,
                    label="(a) bulk, fleet storms off", extra=("--storm-runs", "0", "--storm-agent-runs", "0"),
                )  # fmt: skip
                print(calm.line())
                column["(a) with fleet storms off (--storm-runs 0 --storm-agent-runs 0)"] = (
                    f"{calm.rate:,.0f} events/s, {calm.cpu_per_event_us:.0f} µs CPU/event"
                )
            if "stream" not in skip:
                old = run_worker(boot, f"s-{variant}", records, args.partitions, args.store, workdir, "stream")
                print(old.line())
                print(
                    f"  (a) stream apart from the window: idle {old.idle_ms:.0f} ms CPU/s; "  # type: ignore[attr-defined]
                    f"{old.mean_batch:.0f} events per batch on average"  # type: ignore[attr-defined]
                )
                print(f"  bulk / stream delivery: throughput {a.rate / old.rate:.2f}x")
                column["(a) with --delivery stream"] = f"{old.rate:,.0f} events/s, {old.cpu_per_event_us:.0f} µs"
            if "b" not in skip:
                prefix = f"b-{variant}"
                produce(boot, f"{prefix}.events", records, args.partitions)
                cmd = [
                    PYTHON, str(Path(__file__).resolve()), "textbook-worker", "--bootstrap", boot,
                    "--topic", f"{prefix}.events", "--verdicts", f"{prefix}.verdicts",
                    "--partitions", str(args.partitions), "--expect", str(len(records)),
                    "--group", f"{prefix}-tb", "--store", args.store, "--data-dir", str(workdir / f"{prefix}-tb"),
                    "--web-port", str(free_port()),
                ]  # fmt: skip
                b = results["b"] = run_subprocess_system("(b) textbook Faust agent", cmd, len(records), workdir, prefix)
                print(b.line())
                column["(b) textbook Faust agent"] = f"{b.rate:,.0f} events/s, {b.cpu_per_event_us:.0f} µs"
            if "c" not in skip:
                prefix = f"c-{variant}"
                produce(boot, f"{prefix}.events", records, args.partitions)
                cmd = [
                    PYTHON, str(Path(__file__).resolve()), "raw-loop", "--bootstrap", boot,
                    "--topic", f"{prefix}.events", "--verdicts", f"{prefix}.verdicts",
                    "--partitions", str(args.partitions), "--expect", str(len(records)),
                ]  # fmt: skip
                c = results["c"] = run_subprocess_system("(c) raw aiokafka loop", cmd, len(records), workdir, prefix)
                print(c.line())
                column["(c) raw aiokafka loop"] = f"{c.rate:,.0f} events/s, {c.cpu_per_event_us:.0f} µs"
            ratios = []
            for other in ("b", "c"):
                if other in results:
                    r = results[other]
                    ratios.append(
                        f"a/{other} = {a.rate / r.rate:.2f} (CPU/event {other}/a = "
                        f"{r.cpu_per_event_us / a.cpu_per_event_us:.2f})"
                    )
            if ratios:
                print("  " + "   ".join(ratios))
                column["throughput ratios"] = ", ".join(r.split(" (")[0] for r in ratios)
            sizes = a.sizes  # type: ignore[attr-defined]
            if sizes:
                mean = statistics.fmean(sizes)
                print(
                    f"  state: {mean:.0f} bytes per run on average, median {statistics.median(sizes):.0f}, "
                    f"max {max(sizes)} ({len(sizes)} runs)"
                )
                column["state per run (mean / max)"] = f"{mean:,.0f} B / {max(sizes):,} B"
            if "group" not in skip:
                group_records = records_for(args.group_events, hashed=hashed, seed=11)
                warm = disjoint(list(simulate_records(20, 1.0, hashed)), "warm-")
                group: list[Result] = []
                # one worker holds no standby copy (only another worker can); 0: two workers without them
                for n, standby in ((1, None), (2, None), (2, 0)):
                    prefix = f"g{n}{'' if standby is None else f's{standby}'}-{variant}"
                    res = run_group(
                        boot, prefix, group_records, warm, n, args.partitions, args.store, workdir, broker.pid, standby
                    )
                    group.append(res)
                    print(res.line())
                    print(f"    cores used over the window: {res.cores_text}")
                one, two, bare = group
                for name, res in (("", two), (", --standby-replicas 0", bare)):
                    print(
                        f"  2 workers{name} / 1 worker: throughput {res.rate / one.rate:.2f}x, "
                        f"CPU/event {res.cpu_per_event_us / one.cpu_per_event_us:.2f}x"
                    )
                column["1 worker, warm group"] = f"{one.rate:,.0f} events/s, {one.cpu_per_event_us:.0f} µs"
                column["2 workers, one group"] = f"{two.rate:,.0f} events/s, {two.cpu_per_event_us:.0f} µs"
                column["2 workers / 1 worker"] = f"{two.rate / one.rate:.2f}x"
                column["2 workers, --standby-replicas 0"] = f"{bare.rate:,.0f} events/s, {bare.cpu_per_event_us:.0f} µs"
                column["2 workers, --standby-replicas 0 / 1 worker"] = f"{bare.rate / one.rate:.2f}x"
                column["cores used: 1 worker; 2 workers; 2, no standby"] = "; ".join(res.cores_text for res in group)
            if "latency" in skip:
                continue
            extra = [float(r) for r in args.latency_rates.split(",") if r.strip()]
            fleet = args.latency_gateways or fleet_for(args.events)
            for n, rate in enumerate([a.rate / 2, *extra]):
                samples, cpu_us, loop_us, batch, wait, lag, cores, events, cores_by_second = latency_run(
                    boot, f"l{n}-{variant}", rate, args.latency_seconds, args.partitions, args.store, workdir, hashed,
                    fleet, broker.pid,
                )  # fmt: skip
                what = "half of (a)" if n == 0 else "fixed rate"
                at = "half of (a)" if n == 0 else f"{rate:.0f}/s"
                print(
                    f"  latency at {rate:.0f} events/s ({what}) for {args.latency_seconds:.0f} s, "
                    f"{fleet} gateways' traffic:"
                )
                writes = len(samples.get("write", [])) / events
                print(
                    f"    worker CPU {cpu_us:.0f} µs/event (event-loop thread / other threads "
                    f"{split_text(cpu_us, loop_us)}), {batch:.0f} events per batch on average, "
                    f"{writes:.2f} state writes per event"
                )
                used = ", ".join(f"{name} {share:.2f}" for name, share in cores.items())
                print(f"    cores used over the traffic: {used} (of {os.cpu_count()})")
                for label, name in (
                    ("event -> verdict sent", "verdict"),
                    ("  event produce ack", "ack"),
                    ("  ack -> verdict sent", "worker"),
                    ("  verdict -> state stored", "store"),
                    ("event -> state write", "write"),
                ):
                    values = samples.get(name, [])
                    top = max(values) if values else float("nan")
                    print(
                        f"    {label:26} p50 {percentile(values, 0.5):6.1f} ms  "
                        f"p99 {percentile(values, 0.99):6.1f} ms  max {top:6.1f} ms  ({len(values)} samples)"
                    )
                tops = {name: samples.get(f"top_{name}", []) for name in ("ack", "worker", "store")}
                made_of = ", ".join(f"{name} {statistics.fmean(v):.0f} ms" for name, v in tops.items() if v)
                print(f"    the p99 verdicts (slowest 1 %) are made of, on average: {made_of}")
                waited = f"{wait[0]:.0f} / {wait[1]:.0f} ms"
                print(f"    batch wait before processing (per batch, its oldest record; histogram) p50 / p99: {waited}")
                lagged = f"{lag[0]:.1f} / {lag[1]:.0f} ms"
                print(f"    event-loop lag (how late a timer every 0.1 s woke; histogram) p50 / p99: {lagged}")
                verdict = samples.get("verdict", [])
                seconds = by_second(samples.get("verdict_ts", []), verdict)
                per_second = ", ".join(f"{p50:.0f}/{p99:.0f}" for p50, p99 in seconds)
                print(f"    event -> verdict p50/p99 per second of the traffic (ms; growing: behind): {per_second}")
                for name, shares in cores_by_second.items():
                    print(f"    {name} cores per second of the traffic: " + ", ".join(f"{c:.2f}" for c in shares))
                column[f"event → verdict p50 / p99 at {at}"] = (
                    f"{percentile(verdict, 0.5):.0f} / {percentile(verdict, 0.99):.0f} ms"
                )
                column[f"at {at}: worker CPU/event, batch, state writes per event"] = (
                    f"{cpu_us:.0f} µs, {batch:.0f}, {writes:.2f}"
                )
                column[f"at {at}: worker CPU/event, event-loop thread / other threads"] = split_text(cpu_us, loop_us)
                column[f"at {at}: cores used by " + ", ".join(cores)] = ", ".join(f"{v:.2f}" for v in cores.values())
                if n == 0:
                    column["p99 made of (ack, worker, store)"] = made_of
                    if seconds:
                        column["at half of (a): p50 / p99 in the first and the last second of the traffic"] = (
                            "{:.0f} / {:.0f} and {:.0f} / {:.0f} ms".format(*seconds[0], *seconds[-1])
                        )
                    broker_shares = cores_by_second.get("broker", [])
                    if broker_shares:
                        column["at half of (a): broker cores in the first and the last second of the traffic"] = (
                            f"{broker_shares[0]:.2f} and {broker_shares[-1]:.2f}"
                        )
                column[f"at {at}: batch wait p50 / p99 (its oldest record's age when the worker starts it)"] = waited
                column[f"at {at}: event-loop lag p50 / p99 (how late the worker's loop woke a timer)"] = lagged
    print("\nside by side (one run; on a shared machine repeat it and quote medians):")
    variants = list(table)
    rows = list(dict.fromkeys(row for col in table.values() for row in col))
    print("  " + " | ".join(["", *variants]))
    for row in rows:
        print("  " + " | ".join([row, *(table[v].get(row, "") for v in variants)]))
    return 0


def simulate_records(gateways: int, seconds: float, hashed: bool) -> list[tuple[bytes, bytes]]:
    from streams.simulate import simulate

    return list(simulate(gateways=gateways, rate=100.0, duration=seconds, seed=99, hashed=hashed))


def disjoint(records: Sequence[tuple[bytes, bytes]], tag: str) -> list[tuple[bytes, bytes]]:
    """``records`` with ``tag`` in front of every id, so warm-up events share no run or event with the rest."""
    from streams.decode import scope_key_of

    out = []
    for _key, value in records:
        event = orjson.loads(value)
        for name in ("gateway_id", "event_id", "session_id", "run_id"):
            if isinstance(event.get(name), str) and event[name].strip():
                event[name] = tag + event[name]
        out.append((scope_key_of(event.get("run_id"), event["session_id"]).encode(), orjson.dumps(event)))
    return out


if __name__ == "__main__":
    try:
        with sigterm_as_interrupt():  # a stopped benchmark stops its broker and workers too
            sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("worker bench: interrupted; the processes it started are stopped")
