"""CPU instructions per event of the worker's batch processing, counted by valgrind: the same on a busy machine.

CPU time on a shared host swings by half between runs (steal time, the other core's load), so a change of a few
per cent to the hot path cannot be seen in ``bench.codec_bench``'s microseconds. Valgrind's callgrind counts
the instructions the interpreter executes instead, which does not depend on what else runs: the same code,
traffic and Python give the same count (to 0.1 %; to 0.01 % run after run).

Each figure is one child process under ``valgrind --tool=callgrind`` that builds the traffic of
``bench.codec_bench`` (:mod:`streams.simulate`, 50 gateways, seed 7), warms up, then runs one measured pass:
collection is switched on only inside the C function behind ``functools.reduce``, which the pass is wrapped
in, so imports and set-up are not counted. Two parts, raw and pre-hashed input side by side:

* ``decode``: :func:`streams.decode.accept` of every record (orjson, the limits, pydantic, the key check);
* ``whole``: the whole batch processing (``bench.codec_bench.process_all``: plan, decode, core, state codec
  over a dict store; no Kafka), the floor of the worker's CPU per event.

Run from the repository root: ``.venv/bin/python -m bench.instructions [--seconds 2] [--baseline REV]`` (about
a minute and a half; the children run two at a time). With ``--baseline`` the same counts are also taken in a
temporary git worktree of ``REV`` (its own ``streams`` and ``bench.codec_bench``, this file's measuring code),
and printed beside them with the ratio: what a change did to the hot path, in one run. Instructions are not
microseconds: the ratio between them is the machine's.
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
_TREE = re.compile(r"^tree (.+)$", re.MULTILINE)
ROOT = Path(__file__).resolve().parents[1]


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
    import streams

    print(f"events {len(records)} runs {len({k for k, _ in values})}", flush=True)
    print(f"tree {Path(streams.__file__).resolve().parents[1]}", flush=True)
    functools.reduce(lambda _acc, _item: run(records), [None], None)


def count(job: tuple[Path, str, str], seconds: float, workdir: Path) -> tuple[int, int, int]:
    """``(instructions, events, runs)`` of one child under callgrind, importing the code of the tree ``job[0]``."""
    tree, variant, part = job
    out = workdir / f"callgrind.{abs(hash(tree))}.{variant}.{part}"
    command = [
        "valgrind",
        "--tool=callgrind",
        "--collect-atstart=no",
        f"--toggle-collect={MARKER}",
        f"--callgrind-out-file={out}",
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        variant,
        part,
        str(seconds),
    ]
    # The tree first on the path (before this checkout's editable install); string hashes (dict and set layouts)
    # the same in every run.
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tree, timeout=1800, check=False)
    collected = _COLLECTED.search(done.stderr)
    events = _EVENTS.search(done.stdout)
    where = _TREE.search(done.stdout)
    if done.returncode != 0 or collected is None or events is None or where is None:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"instructions: the {variant} {part} child failed ({done.returncode}): {tail}")
    if Path(where.group(1)) != tree.resolve():
        raise SystemExit(f"instructions: the child measured {where.group(1)}, not {tree}")
    if int(collected.group(1)) == 0:
        raise SystemExit(f"instructions: callgrind counted nothing: this Python shows no {MARKER} symbol")
    return int(collected.group(1)), int(events.group(1)), int(events.group(2))


def worktree(rev: str, workdir: Path) -> Path:
    """A detached git worktree of ``rev`` under ``workdir`` (removed by :func:`drop_worktree`)."""
    path = workdir / "baseline"
    done = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"instructions: no worktree of {rev!r}: {tail}")
    return path


def drop_worktree(path: Path) -> None:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], capture_output=True, check=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=2.0, help="simulated traffic at 1,000 events/s")
    parser.add_argument("--baseline", metavar="REV", help="also count a git revision's code, side by side")
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "PART", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, part, seconds = args.child
        child(variant, part, float(seconds))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="loopwatch-instructions-") as tmp:
        trees = [ROOT]
        if args.baseline:
            trees.append(worktree(args.baseline, Path(tmp)))
        try:
            jobs = [(tree, variant, part) for tree in trees for part in PARTS for variant in VARIANTS]
            with ThreadPoolExecutor(2) as pool:
                counts = list(pool.map(lambda job: count(job, args.seconds, Path(tmp)), jobs))
        finally:
            if args.baseline:
                drop_worktree(trees[1])
    per_event = {job: n / events for job, (n, events, _) in zip(jobs, counts, strict=True)}
    _, events, runs = counts[0]
    print(f"instructions per event (valgrind callgrind, {sys.implementation.name} {sys.version.split()[0]})")
    print(f"  traffic: {events:,} events over {runs:,} runs, batches of 500, 4 partitions")
    header = f"  {'':26} {'raw':>10} {'pre-hashed':>10} {'raw/pre':>8}"
    print(header + (f"   {args.baseline + ' raw':>14} {'pre-hashed':>10}   this/base" if args.baseline else ""))
    for part, label in (("decode", "decode (accept)"), ("whole", "whole batch processing")):
        this = [per_event[(ROOT, variant, part)] for variant in VARIANTS]
        line = f"  {label:26} {this[0]:>10,.0f} {this[1]:>10,.0f} {this[0] / this[1]:>8.2f}"
        if args.baseline:
            base = [per_event[(trees[1], variant, part)] for variant in VARIANTS]
            ratios = f"{this[0] / base[0]:.3f} {this[1] / base[1]:.3f}"
            line += f"   {base[0]:>14,.0f} {base[1]:>10,.0f}   {ratios}"
        print(line)


if __name__ == "__main__":
    main()
