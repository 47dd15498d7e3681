"""Worker throughput, latency and state size on the embedded broker (prints figures; not a timed test).

Three systems process the same realistic fleet traffic (:mod:`streams.simulate`, production config
``deploy/config/openclaw.json5``), raw and pre-hashed:

(a) the loopwatch worker (``loopwatch worker``, a subprocess);
(b) a textbook Faust agent: per event one table get, one table set and an awaited ``send`` per published
    verdict, same decoding, core and state codec (``worker_bench.py textbook-worker``, a subprocess);
(c) a raw aiokafka loop without Faust: ``getmany`` -> the worker's batch processing with a dict store ->
    produce state (changelog topic) and verdicts -> wait for acks (``worker_bench.py raw-loop``, a
    subprocess; partitions assigned manually, no group, no commits).

For each: events/s over the processing window and CPU per event of that process. Then ratios a/b and a/c,
the worker's event-to-verdict latency p50/p99 at half of (a)'s max rate (verdict record timestamp minus the
event's ``ts``, stamped at produce time), and stored bytes per active run. Every system reads topics that
were filled before it started, so the figures are processing capacity, not producer speed.

Run from the repository root: ``.venv/bin/python bench/worker_bench.py [--events 30000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import orjson  # noqa: E402

from streams.topics import changelog_topic  # noqa: E402
from tests.support.worker import scrape  # noqa: E402  (one /metrics parser for tests and benchmarks)

CONFIG = REPO / "deploy" / "config" / "openclaw.json5"
PYTHON = sys.executable
TICKS = os.sysconf("SC_CLK_TCK")


# --- helpers ------------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def metric_sum(metrics: dict[str, float], prefix: str) -> float:
    return sum(v for k, v in metrics.items() if k.startswith(prefix))


def free_port() -> int:
    from streams.broker import free_port as _free

    return _free()


def records_for(events: int, *, hashed: bool, seed: int = 7) -> list[tuple[bytes, bytes]]:
    from streams.simulate import simulate

    gateways = max(10, events // 600)  # about 4 concurrent runs per gateway, runs of a few dozen events
    return list(simulate(gateways=gateways, rate=1000.0, duration=events / 1000.0, seed=seed, hashed=hashed))


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes]], partitions: int) -> None:
    from aiokafka import AIOKafkaProducer

    from streams.broker import ensure_topics

    async def run() -> None:
        await ensure_topics(bootstrap, {topic: partitions})
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=256 * 1024)
        await producer.start()
        try:
            futures = [await producer.send(topic, value, key=key) for key, value in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(run())


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


class Result:
    def __init__(self, name: str, events: int, seconds: float, cpu: float) -> None:
        self.name = name
        self.events = events
        self.seconds = seconds
        self.cpu = cpu

    @property
    def rate(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("nan")

    def line(self) -> str:
        return (
            f"  {self.name:34} {self.rate:9.0f} events/s   {self.cpu / self.events * 1e6:6.0f} us CPU/event "
            f"({self.events} events in {self.seconds:.2f} s)"
        )


# --- (a) the loopwatch worker -------------------------------------------------------------------------------


def start_worker(
    bootstrap: str, prefix: str, partitions: int, store: str, workdir: Path, *, sweep: float | None = 1.0
) -> tuple[Any, int]:
    metrics_port = free_port()
    cmd = [
        PYTHON, "-m", "streams.cli", "worker",
        "--bootstrap", bootstrap, "--embedded", "--group", f"{prefix}-lw",
        "--events-topic", f"{prefix}.events", "--verdicts-topic", f"{prefix}.verdicts",
        "--dead-letter-topic", f"{prefix}.dead", "--partitions", str(partitions),
        "--store", store, "--data-dir", str(workdir / f"{prefix}-lw"),
        "--metrics-port", str(metrics_port), "--web-port", str(free_port()),
        "--config", str(CONFIG), "--log-level", "warn",
        *(["--sweep-interval", str(sweep)] if sweep is not None else []),
    ]  # fmt: skip
    log = open(workdir / f"{prefix}-lw.log", "wb")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    return proc, metrics_port


def run_worker(bootstrap: str, prefix: str, total: int, partitions: int, store: str, workdir: Path) -> Result:
    proc, port = start_worker(bootstrap, prefix, partitions, store, workdir)
    try:
        first_t = first_cpu = None
        first_n = 0.0
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            m = scrape(port)
            n = metric_sum(m, "loopwatch_events_total") + metric_sum(m, "loopwatch_invalid_events_total")
            now = time.monotonic()
            if n > 0 and first_t is None:
                first_t, first_cpu, first_n = now, cpu_seconds(proc.pid), n
            if n >= total:
                cpu = cpu_seconds(proc.pid) - (first_cpu or 0.0)
                assert first_t is not None
                result = Result("(a) loopwatch worker", int(total - first_n), now - first_t, cpu)
                break
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited with {proc.returncode}; see {workdir}/{prefix}-lw.log")
            time.sleep(0.05)
        else:
            raise RuntimeError("worker did not finish in time")
        # state size: wait for a sweep to count the runs
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = scrape(port)
            if m.get("loopwatch_active_runs", 0) > 0:
                break
            time.sleep(0.2)
        runs = m.get("loopwatch_active_runs", 0.0)
        result.state_per_run = m.get("loopwatch_state_bytes", 0.0) / runs if runs else float("nan")  # type: ignore[attr-defined]
        result.runs = runs  # type: ignore[attr-defined]
        return result
    finally:
        stop(proc)


def latency_run(
    bootstrap: str, prefix: str, rate: float, seconds: float, partitions: int, store: str, workdir: Path, hashed: bool
) -> tuple[list[float], list[float], int]:
    """Produce at ``rate`` with real-time ``ts``; return latencies (ms) and the number of events sent.

    Two measures: verdicts (record timestamp of each verdict minus its ``event_ts``), and every state write
    (record timestamp of each changelog record minus the ``ts`` of the last event it applied): the latter
    covers almost every event, not just the few that produce verdicts, so its percentiles are stable.
    """
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streams.broker import ensure_topics
    from streams.kafka_compat import end_offsets
    from streams.simulate import simulate
    from streams.worker import envelope

    topics = {f"{prefix}.events": partitions, f"{prefix}.verdicts": partitions}
    asyncio.run(ensure_topics(bootstrap, topics))
    warm = list(simulate(gateways=20, rate=100.0, duration=2.0, seed=99, hashed=hashed))
    produce(bootstrap, f"{prefix}.events", warm, partitions)
    proc, port = start_worker(bootstrap, prefix, partitions, store, workdir, sweep=None)  # default sweep
    try:
        deadline = time.monotonic() + 60
        while metric_sum(scrape(port), "loopwatch_events_total") < len(warm):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("worker not ready for the latency run")
            time.sleep(0.1)
        gateways = max(10, int(rate * seconds) // 600)
        traffic = list(simulate(gateways=gateways, rate=rate, duration=seconds, seed=5, hashed=hashed))
        changelog = changelog_topic(f"{prefix}-lw")

        async def run() -> tuple[list[float], list[float], int]:
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
            await consumer.start()
            tps = [TopicPartition(t, p) for t in (f"{prefix}.verdicts", changelog) for p in range(partitions)]
            consumer.assign(tps)
            ends = await end_offsets(bootstrap, [(tp.topic, tp.partition) for tp in tps])
            for tp in tps:
                consumer.seek(tp, ends[tp])
            producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
            await producer.start()
            verdict_latency: list[float] = []
            writes: list[tuple[int, int, int]] = []  # (partition, last offset, write time)
            sent_ts: dict[tuple[int, int], int] = {}
            stop_reading = asyncio.Event()

            async def reader() -> None:
                while not stop_reading.is_set():
                    batches = await consumer.getmany(timeout_ms=100)
                    for tp, msgs in batches.items():
                        for m in msgs:
                            if tp.topic == changelog:
                                if m.value is not None:
                                    header = envelope.peek(m.value)
                                    writes.append((header.partition, header.last_offset, m.timestamp))
                                continue
                            ts = orjson.loads(m.value).get("event_ts")
                            if isinstance(ts, int | float):
                                verdict_latency.append(m.timestamp - ts)

            task = asyncio.ensure_future(reader())
            start = time.monotonic()
            pending = []
            for i, (key, value) in enumerate(traffic):
                due = start + i / rate
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                event = orjson.loads(value)
                ts = event["ts"] = int(time.time() * 1000)
                pending.append((ts, await producer.send(f"{prefix}.events", orjson.dumps(event), key=key)))
            await producer.flush()
            for ts, fut in pending:
                meta = await fut
                sent_ts[(meta.partition, meta.offset)] = ts
            await asyncio.sleep(2.0)
            stop_reading.set()
            await task
            await producer.stop()
            await consumer.stop()
            write_latency = [float(at - sent_ts[(p, o)]) for p, o, at in writes if (p, o) in sent_ts]
            return verdict_latency, write_latency, len(traffic)

        return asyncio.run(run())
    finally:
        stop(proc)


# --- (b) textbook Faust agent and (c) raw aiokafka loop: subprocess entry points ------------------------------


def _progress_line(n: int, first: float | None, first_cpu: float, first_n: int) -> str:
    now = time.monotonic()
    cpu = time.process_time() - first_cpu
    return json.dumps({"done": n, "seconds": now - (first or now), "cpu": cpu, "first_n": first_n})


def textbook_worker(args: argparse.Namespace) -> int:
    import faust
    import msgpack

    from schemas import SourceRef
    from streams.broker import create_topics
    from streams.config_file import load_openclaw_config
    from streams.decode import InvalidEvent, decode_event
    from streams.detection import RunState
    from streams.kafka_compat import apply_kafka_compat, faust_settings_for, required_topics
    from streams.runner import step, to_verdict

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
            result = step(state, ev, config)
            table[event.key] = msgpack.packb([event.message.offset, result.state.to_primitive()])
            message = event.message
            for decision in result.decisions:
                if decision.published:
                    verdict = to_verdict(
                        ev, decision, config_hash=config.config_hash,
                        source=SourceRef(topic=message.topic, partition=message.partition, offset=message.offset),
                    )  # fmt: skip
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

    from streams.broker import ensure_topics
    from streams.config_file import load_openclaw_config
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
        producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, acks="all", linger_ms=0)
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
    parser.add_argument("--events", type=int, default=30000, help="events per throughput run")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--store", choices=("rocksdb", "memory"), default="rocksdb")
    parser.add_argument("--latency-seconds", type=float, default=15.0)
    parser.add_argument(
        "--latency-rates", default="", help="comma-separated extra rates (events/s) for latency runs, e.g. 500,1000"
    )
    parser.add_argument("--variants", default="raw,prehashed", help="comma-separated: raw, prehashed")
    args = parser.parse_args(argv)
    if args.command == "textbook-worker":
        return textbook_worker(args)
    if args.command == "raw-loop":
        return raw_loop(args)

    from streams.broker import EmbeddedBroker

    workdir = Path(tempfile.mkdtemp(prefix="worker-bench-"))
    print(f"worker bench: {args.events} events per run, {args.partitions} partitions, store {args.store}")
    print(f"  config {CONFIG.relative_to(REPO)}; logs in {workdir}")
    with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
        boot = broker.bootstrap
        for variant in args.variants.split(","):
            hashed = variant == "prehashed"
            records = records_for(args.events, hashed=hashed)
            runs = len({k for k, _ in records})
            print(f"\n{variant} input: {len(records)} events over {runs} runs")
            results: dict[str, Result] = {}
            prefix = f"a-{variant}"
            produce(boot, f"{prefix}.events", records, args.partitions)
            a = run_worker(boot, prefix, len(records), args.partitions, args.store, workdir)
            results["a"] = a
            print(a.line())
            prefix = f"b-{variant}"
            produce(boot, f"{prefix}.events", records, args.partitions)
            cmd = [
                PYTHON, str(Path(__file__).resolve()), "textbook-worker", "--bootstrap", boot,
                "--topic", f"{prefix}.events", "--verdicts", f"{prefix}.verdicts",
                "--partitions", str(args.partitions), "--expect", str(len(records)),
                "--group", f"{prefix}-tb", "--store", args.store, "--data-dir", str(workdir / f"{prefix}-tb"),
                "--web-port", str(free_port()),
            ]  # fmt: skip
            results["b"] = run_subprocess_system("(b) textbook Faust agent", cmd, len(records), workdir, prefix)
            print(results["b"].line())
            prefix = f"c-{variant}"
            produce(boot, f"{prefix}.events", records, args.partitions)
            cmd = [
                PYTHON, str(Path(__file__).resolve()), "raw-loop", "--bootstrap", boot,
                "--topic", f"{prefix}.events", "--verdicts", f"{prefix}.verdicts",
                "--partitions", str(args.partitions), "--expect", str(len(records)),
            ]  # fmt: skip
            results["c"] = run_subprocess_system("(c) raw aiokafka loop", cmd, len(records), workdir, prefix)
            print(results["c"].line())
            print(f"  ratio a/b = {a.rate / results['b'].rate:.2f}   a/c = {a.rate / results['c'].rate:.2f}")
            print(
                f"  state: {a.state_per_run:.0f} bytes per active run "  # type: ignore[attr-defined]
                f"({a.runs:.0f} runs after the run)"  # type: ignore[attr-defined]
            )
            extra = [float(r) for r in args.latency_rates.split(",") if r.strip()]
            for n, rate in enumerate([a.rate / 2, *extra]):
                lat, writes, sent = latency_run(
                    boot, f"l{n}-{variant}", rate, args.latency_seconds, args.partitions, args.store, workdir, hashed
                )
                what = "half of a" if n == 0 else "fixed rate"
                print(f"  latency at {rate:.0f} events/s ({what}) for {args.latency_seconds:.0f} s, {sent} events:")
                for label, values in (("event -> verdict", lat), ("event -> state write", writes)):
                    top = max(values) if values else float("nan")
                    mean = statistics.fmean(values) if values else float("nan")
                    print(
                        f"    {label:21} p50 {percentile(values, 0.5):6.1f} ms  "
                        f"p99 {percentile(values, 0.99):6.1f} ms  max {top:6.1f} ms  "
                        f"mean {mean:5.1f} ms  ({len(values)} samples)"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
