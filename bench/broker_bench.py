"""What a produce and a fetch cost the embedded broker as its partitions fill (prints figures; not a timed test).

Tansu 0.6.0's memory storage keeps every produced record batch as one object and, at each fetch below the high
watermark, lists all of a partition's objects before it reads the ones asked for. So a fetch costs the broker
more with every batch stored, which is why the latency runs of ``bench/worker_bench.py`` see the broker's CPU
and the p99 grow through their window, and why a long soak falls behind (docs/performance.md). A broker with
an offset index, as real Kafka has, pays the same at any depth. This benchmark measures the growth on its own,
with no worker: a topic is filled with single-record batches, one per partition at a time, and at each depth

* a produce: the broker's CPU per record batch, over ``--rounds`` more batches per partition;
* then a fetch: the broker's CPU and the wall time per fetch of every partition's last record, ``--rounds``
  times (one fetch request covers all partitions, as the worker's do). A row's depth is the fetch's.

Run from the repository root: ``.venv/bin/python -m bench.broker_bench [--depths 0,1000,2000,4000]``. The last
column divides the fetch's growth since the first depth by the batches added to all partitions: the broker's
CPU per stored batch and fetched partition.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import NamedTuple

from bench.worker_bench import cpu_seconds, positive_int

TOPIC = "broker-bench"
VALUE = b"x" * 300  # about one event of the latency runs' traffic


class Depth(NamedTuple):
    """The broker's costs with ``stored`` batches in every partition."""

    stored: int
    produce_us: float  # broker CPU per produced record batch
    fetch_us: float  # broker CPU per fetch of all partitions
    fetch_ms: float  # wall time per fetch, as the consumer saw it


def per_stored_batch(first: Depth, last: Depth, partitions: int) -> float:
    """Broker CPU (µs) a fetch spends per batch stored in each partition it reads: the fetch's growth over the
    batches added to all the partitions it covers."""
    added = (last.stored - first.stored) * partitions
    return (last.fetch_us - first.fetch_us) / added if added else float("nan")


def depths(text: str) -> list[int]:
    """``0,1000,2000``: distinct depths, each at least 0, in rising order."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of whole numbers") from None
    if not values or values[0] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one depth, none below 0")
    return values


async def measure(bootstrap: str, broker_pid: int, targets: Sequence[int], partitions: int, rounds: int) -> list[Depth]:
    """Fill the topic up to each target depth in turn and measure a produce and a fetch there."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from streams.kafka.admin import ensure_topics

    await ensure_topics(bootstrap, {TOPIC: partitions})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
    await producer.start()
    await consumer.start()
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
    consumer.assign(tps)

    async def one_batch_each() -> None:
        sent = []
        for p in range(partitions):
            batch = producer.create_batch()
            batch.append(key=None, value=VALUE, timestamp=None)
            sent.append(await producer.send_batch(batch, TOPIC, partition=p))
        await asyncio.gather(*sent)

    out: list[Depth] = []
    stored = 0
    try:
        for target in targets:
            while stored < target:
                await one_batch_each()
                stored += 1
            before = cpu_seconds(broker_pid)
            for _ in range(rounds):
                await one_batch_each()
            produce_us = (cpu_seconds(broker_pid) - before) / (rounds * partitions) * 1e6
            stored += rounds
            ends = await consumer.end_offsets(tps)
            before, start = cpu_seconds(broker_pid), time.monotonic()
            for _ in range(rounds):
                for tp in tps:
                    consumer.seek(tp, ends[tp] - 1)
                got, deadline = 0, time.monotonic() + 10
                while got < partitions and time.monotonic() < deadline:
                    got += sum(len(records) for records in (await consumer.getmany(timeout_ms=1000)).values())
                if got < partitions:
                    raise RuntimeError(f"a fetch brought {got} of {partitions} records in 10 s")
            fetch_us = (cpu_seconds(broker_pid) - before) / rounds * 1e6
            out.append(Depth(stored, produce_us, fetch_us, (time.monotonic() - start) / rounds * 1e3))
    finally:
        await consumer.stop()
        await producer.stop()
    return out


def table(rows: Sequence[Depth], partitions: int) -> list[str]:
    lines = [
        f"{'batches per partition':>22} {'produce, per batch':>19} {'fetch, broker CPU':>18} {'x first':>8} "
        f"{'fetch, wall':>12} {'per stored batch':>17}"
    ]
    first = rows[0]
    for row in rows:
        growth = f"{per_stored_batch(first, row, partitions):.2f} µs" if row is not first else "-"
        times = f"{row.fetch_us / first.fetch_us:.1f}x" if first.fetch_us else "-"
        lines.append(
            f"{row.stored:>22,} {row.produce_us:>16.0f} µs {row.fetch_us:>15.0f} µs {times:>8} "
            f"{row.fetch_ms:>9.1f} ms {growth:>17}"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--depths", type=depths, default=depths("0,1000,2000,4000"), help="batches per partition")
    parser.add_argument("--partitions", type=positive_int, default=4)
    parser.add_argument("--rounds", type=positive_int, default=100, help="produces and fetches timed per depth")
    args = parser.parse_args(argv)
    from streams.devbroker import EmbeddedBroker

    with EmbeddedBroker() as broker:  # its log is a temporary file it removes again
        assert broker.pid is not None
        rows = asyncio.run(measure(broker.bootstrap, broker.pid, args.depths, args.partitions, args.rounds))
    print(f"embedded broker (Tansu, memory storage): {args.partitions} partitions, single-record batches of")
    print(f"{len(VALUE)} bytes, {args.rounds} produces and fetches per depth; broker CPU from /proc (10 ms ticks)")
    for line in table(rows, args.partitions):
        print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
