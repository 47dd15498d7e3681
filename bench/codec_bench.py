"""Per-event decode and per-write state codec costs of the worker's hot path (CPU µs; prints figures only).

The same fleet traffic as ``bench/worker_bench.py`` (:mod:`streams.simulate`, production config) goes through
the worker's batch processing once to get realistic run states; then each step is timed alone, as CPU time
(``time.process_time``), median of ``--repeat`` passes, so other processes on a shared machine distort it
less than wall-clock time would:

* decode: ``orjson.loads``, pydantic validation of the parsed record, ``to_tool_event``, all three together;
* the whole batch processing as the worker does it (plan, decode, core, state codec), without Kafka: the
  floor of the worker's CPU per event;
* state write: the envelope encode (the record codec's memoised path), the general path it replaced, and
  the envelope decode the worker does when its decoded-state cache misses; bytes per stored state.

Run from the repository root: ``.venv/bin/python -m bench.codec_bench [--seconds 30] [--repeat 7]``.
"""

from __future__ import annotations

import argparse
import statistics
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from schemas.events import EVENT_MODELS
from streams.config_file import load_openclaw_config
from streams.decode import decode_event, to_tool_event
from streams.detection import RunState
from streams.detection import state_codec as codec
from streams.simulate import simulate
from streams.worker import envelope
from streams.worker.processing import InputRecord, RunProcessor, plan_batch

CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "config" / "openclaw.json5"
#: What the decoder calls per record (streams.decode keeps its own, private table): each model's validator.
VALIDATORS = {kind: model.__pydantic_validator__.validate_python for kind, model in EVENT_MODELS.items()}


def cpu_median(repeat: int, count: int, fn: Callable[[], Any]) -> float:
    """Median CPU µs per item of ``fn`` over ``repeat`` passes of ``count`` items."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) / count * 1e6


def input_records(values: Sequence[tuple[bytes, bytes]], partitions: int = 4) -> list[InputRecord]:
    return [InputRecord("events", zlib.crc32(k) % partitions, i, k, v) for i, (k, v) in enumerate(values)]


def process_all(records: Sequence[InputRecord], *, collect: bool = True, batch: int = 500) -> list[RunState]:
    """The worker's batch processing over ``records`` with a fresh processor and a dict store; with ``collect``
    the states written (one write per run and batch). Without it, this is what every delivery (and the raw
    loop of worker_bench) pays per event before any Kafka work."""
    processor = RunProcessor(load_openclaw_config(CONFIG))
    store: dict[bytes, bytes] = {}
    states = []
    for start in range(0, len(records), batch):
        chunk = records[start : start + batch]
        for group in processor_groups(chunk):
            result = processor.process(group, chunk, store.get(group.key), 0)
            assert result.value is not None
            store[group.key] = result.value
            if collect:
                stored = processor.decode(group.key, result.value)  # the cached state object the core made
                assert stored is not None
                states.append(stored.state)
    return states


def processor_groups(records: Sequence[InputRecord]) -> Any:
    return plan_batch(records, 0).groups.values()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30.0, help="simulated traffic at 1,000 events/s")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    general = getattr(codec, "encode_records_general", None)
    print(f"codec bench: CPU us, median of {args.repeat} passes")
    for variant in ("raw", "prehashed"):
        values = list(simulate(gateways=50, rate=1000.0, duration=args.seconds, seed=7, hashed=variant == "prehashed"))
        raws = [v for _, v in values]
        objs = [orjson.loads(v) for v in raws]
        events = [decode_event(v) for v in raws]
        n = len(raws)
        r = args.repeat
        decode_parts = [
            ("orjson.loads", cpu_median(r, n, lambda: [orjson.loads(v) for v in raws])),  # noqa: B023
            ("pydantic validate", cpu_median(r, n, lambda: [VALIDATORS[o["type"]](o) for o in objs])),  # noqa: B023
            ("to_tool_event", cpu_median(r, n, lambda: [to_tool_event(e) for e in events])),  # noqa: B023
            ("decode_event + to_tool_event", cpu_median(r, n, lambda: [to_tool_event(decode_event(v)) for v in raws])),  # noqa: B023
        ]
        records = input_records(values)
        states = process_all(records)
        whole = cpu_median(r, n, lambda: process_all(records, collect=False))  # noqa: B023
        w = len(states)
        blobs = [envelope.encode(1, 2, 3, s) for s in states]
        histories = [s.history for s in states]
        codec_parts = [
            ("envelope encode", cpu_median(r, w, lambda: [envelope.encode(1, 2, 3, s) for s in states])),  # noqa: B023
            ("  of which records (memoised)", cpu_median(r, w, lambda: [codec.encode_records(h) for h in histories])),  # noqa: B023
        ]
        if general is not None:
            codec_parts.append(
                ("  records, general path", cpu_median(r, w, lambda: [general(h) for h in histories]))  # noqa: B023
            )
        codec_parts.append(("envelope decode", cpu_median(r, w, lambda: [envelope.decode(b) for b in blobs])))  # noqa: B023
        print(f"\n{variant} input: {n} events, {w} state writes at batches of 500 (4 partitions)")
        for label, value in decode_parts:
            print(f"  {label:32} {value:7.2f} us/event")
        for label, value in codec_parts:
            print(f"  {label:32} {value:7.2f} us/write   ({value * w / n:6.2f} us/event)")
        print(f"  {'whole batch processing':32} {whole:7.2f} us/event (decode, core, state codec; no Kafka)")
        if general is not None:
            print(f"  record encoding general/memoised = {codec_parts[2][1] / codec_parts[1][1]:.2f}x")
        print(f"  state bytes per write: median {statistics.median(map(len, blobs)):.0f}, max {max(map(len, blobs))}")


if __name__ == "__main__":
    main()
