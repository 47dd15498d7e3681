"""CPU instructions per event of the worker's batch processing, counted by valgrind: the same on a busy machine.

CPU time on a shared host swings by half between runs (steal time, the other core's load), so a change of a few
per cent to the hot path cannot be seen in ``bench.codec_bench``'s microseconds. Valgrind's callgrind counts
the instructions the interpreter executes instead, which does not depend on what else runs: the same code,
traffic and Python give the same count (within 0.01 %).

Each figure is one child process under ``valgrind --tool=callgrind`` that builds the traffic of
``bench.codec_bench`` (:mod:`streams.simulate`, 50 gateways, seed 7), warms up, then runs one measured pass:
collection is switched on only inside the C function behind ``functools.reduce``, which the pass is wrapped
in, so imports and set-up are not counted. Two parts, raw and pre-hashed input side by side:

* ``decode``: :func:`streams.decode.accept` of every record (orjson, the limits, pydantic, the key check);
* ``whole``: the whole batch processing (``bench.codec_bench.process_all``: plan, decode, core, state codec
  over a dict store; no Kafka), the floor of the worker's CPU per event.

Run from the repository root: ``.venv/bin/python -m bench.instructions [--seconds 2]`` (about a minute; the
children run two at a time). Instructions are not microseconds: the ratio between them is the machine's.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PARTS = ("decode", "whole")
VARIANTS = ("raw", "prehashed")
#: The C function the measured pass runs inside (CPython's ``functools.reduce``): callgrind counts only there.
MARKER = "functools_reduce"
_COLLECTED = re.compile(r"Collected : (\d+)")
_EVENTS = re.compile(r"^events (\d+) runs (\d+)$", re.MULTILINE)


def child(variant: str, part: str, seconds: float) -> None:
    """The measured process: build the traffic, warm up, run one pass inside ``functools.reduce``."""
    from bench.codec_bench import input_records, process_all
    from streams.decode import accept
    from streams.simulate import simulate
    from streams.worker.processing import InputRecord

    hashed = variant == "prehashed"
    values = list(simulate(gateways=50, rate=1000.0, duration=seconds, seed=7, hashed=hashed))
    records = input_records(values)
    # Warm-up on other traffic of the same mix: imports done, per-shape memos filled as in a running worker,
    # but none of the measured runs' call records memoised yet.
    warm = input_records(list(simulate(gateways=50, rate=1000.0, duration=seconds, seed=8, hashed=hashed)))

    def decode(batch: Sequence[InputRecord]) -> None:
        for rec in batch:
            accept(rec.key, rec.value or b"")

    def whole(batch: Sequence[InputRecord]) -> None:
        process_all(batch, collect=False)

    run = decode if part == "decode" else whole
    run(warm)
    print(f"events {len(records)} runs {len({k for k, _ in values})}", flush=True)
    functools.reduce(lambda _acc, _item: run(records), [None], None)


def count(variant: str, part: str, seconds: float, workdir: Path) -> tuple[int, int, int]:
    """``(instructions, events, runs)`` of one child under callgrind."""
    out = workdir / f"callgrind.{variant}.{part}"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--collect-atstart=no",
        f"--toggle-collect={MARKER}",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-m",
        "bench.instructions",
        "--child",
        variant,
        part,
        str(seconds),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # string hashes (dict and set layouts) the same in every run
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800, check=False)
    collected = _COLLECTED.search(done.stderr)
    events = _EVENTS.search(done.stdout)
    if done.returncode != 0 or collected is None or events is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"instructions: the {variant} {part} child failed ({done.returncode}): {tail}")
    if int(collected.group(1)) == 0:
        raise SystemExit(f"instructions: callgrind counted nothing: this Python shows no {MARKER} symbol")
    return int(collected.group(1)), int(events.group(1)), int(events.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated traffic at 1,000 events/s")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "PART", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, part, seconds = args.child
        child(variant, part, float(seconds))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    jobs = [(variant, part) for part in PARTS for variant in VARIANTS]
    with tempfile.TemporaryDirectory(prefix="loopwatch-instructions-") as tmp, ThreadPoolExecutor(2) as pool:
        results = dict(
            zip(jobs, pool.map(lambda job: count(job[0], job[1], args.seconds, Path(tmp)), jobs), strict=True)
        )
    _, events, runs = results[("raw", "whole")]
    print(f"instructions per event (valgrind callgrind, {sys.implementation.name} {sys.version.split()[0]})")
    print(f"  traffic: {events:,} events over {runs:,} runs, batches of 500, 4 partitions")
    print(f"  {'':34} {'raw':>12} {'pre-hashed':>12} {'raw/pre':>8}")
    for part, label in (("decode", "decode (accept)"), ("whole", "whole batch processing")):
        per = [results[(variant, part)][0] / results[(variant, part)][1] for variant in VARIANTS]
        print(f"  {label:34} {per[0]:>12,.0f} {per[1]:>12,.0f} {per[0] / per[1]:>8.2f}")


if __name__ == "__main__":
    main()
