"""What an idle worker costs with many stored runs: the TTL sweep's share (prints figures; not a timed test).

A worker keeps every run it has seen until the idle TTL (default 24 h) expires it, so a busy fleet leaves it
holding hundreds of thousands of runs; the sweep that finds the idle ones runs every ``--sweep-interval``. For
each number of stored runs this fills a fresh topic with one event per run, starts a fresh ``loopwatch
worker`` (RocksDB, the embedded broker, ``--sweep-interval 1``), waits until every run is stored, then
measures its CPU (``/proc``) and resident memory over ``--seconds`` with nothing arriving. The CPU at 0 runs
is the fetch polling alone; what grows with the runs is the sweep. With ``--baseline REV`` the same is
measured, in the same run, for a git revision's code (a temporary worktree), side by side.

Run from the repository root: ``.venv/bin/python -m bench.sweep_bench [--runs 0,20000,100000] [--baseline REV]``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

from bench.instructions import drop_worktree, worktree
from bench.worker_bench import (
    REPO,
    ChangelogWatch,
    changelog_of,
    cpu_seconds,
    produce,
    start_worker,
    stop,
    watch_until_done,
)

PARTITIONS = 4


def run_events(runs: int, tag: str) -> list[tuple[bytes, bytes]]:
    """One valid tool call for each of ``runs`` distinct runs."""
    out = []
    for i in range(runs):
        run = f"{tag}-run-{i}"
        event = {
            "type": "tool_call", "event_id": f"{run}-e0", "gateway_id": f"gw-{i % 50}", "session_id": f"s-{run}",
            "run_id": run, "ts": 1_767_225_600_000 + i, "tool": "read", "call_id": f"{run}-c0",
            "args": {"path": f"/files/{i % 97}"},
        }  # fmt: skip
        out.append((run.encode(), orjson.dumps(event)))
    return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(bootstrap: str, tree: Path, runs: int, seconds: float, workdir: Path, tag: str) -> tuple[float, float]:
    """(idle CPU ms per second, resident MB) of a worker of ``tree`` holding ``runs`` stored runs."""
    prefix = f"sweep-{tag}-{runs}"
    records = run_events(runs, prefix)
    span = produce(bootstrap, f"{prefix}.events", records, PARTITIONS) if records else {}
    proc, _ = start_worker(bootstrap, prefix, PARTITIONS, "rocksdb", workdir, sweep=1.0, tree=tree)
    try:

        async def filled() -> None:
            watch = ChangelogWatch(bootstrap, changelog_of(prefix), PARTITIONS)
            await watch.start()
            try:
                if span:
                    await watch_until_done(watch, [proc], span, timeout=600)
                else:
                    await asyncio.sleep(8.0)  # joined and assigned
            finally:
                await watch.stop()

        asyncio.run(filled())
        time.sleep(3.0)  # the last batches confirmed, a full sweep done (it rebuilds an index once)
        cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        idle = (cpu_seconds(proc.pid) - cpu0) / (time.monotonic() - t0) * 1000
        if proc.poll() is not None:
            raise SystemExit(f"sweep bench: the worker exited with {proc.returncode}; see {workdir}")
        return idle, rss_mb(proc.pid)
    finally:
        stop(proc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="0,20000,100000", help="comma-separated numbers of stored runs")
    parser.add_argument("--seconds", type=float, default=10.0, help="idle window per measurement")
    parser.add_argument("--baseline", metavar="REV", help="also measure a git revision's code, side by side")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.runs.split(",") if n.strip()]

    from streams.devbroker import EmbeddedBroker

    workdir = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    trees = {"this": REPO}
    if args.baseline:
        trees[args.baseline] = worktree(args.baseline, workdir)
    print(f"sweep bench: idle worker, RocksDB, {PARTITIONS} partitions, --sweep-interval 1, logs in {workdir}")
    rows: dict[int, dict[str, tuple[float, float]]] = {}
    try:
        with EmbeddedBroker(log_path=workdir / "broker.log") as broker:
            for n in counts:
                for name, tree in trees.items():
                    tag = "this" if tree == REPO else "base"
                    idle, rss = measure(broker.bootstrap, tree, n, args.seconds, workdir, tag)
                    rows.setdefault(n, {})[name] = (idle, rss)
                    print(f"  {n:>7} runs, {name:>10}: idle {idle:6.0f} ms CPU/s, RSS {rss:6.0f} MB", flush=True)
    finally:
        if args.baseline:
            drop_worktree(trees[args.baseline])
    names = list(trees)
    ratio = " | this / base CPU" if len(names) > 1 else ""
    print("\nstored runs | " + " | ".join(f"{n}: idle CPU, RSS" for n in names) + ratio)
    for n, by in rows.items():
        cells = [f"{by[name][0]:,.0f} ms/s, {by[name][1]:,.0f} MB" for name in names]
        if len(names) > 1:
            cells.append(f"{by['this'][0] / by[names[1]][0]:.2f}")
        print(f"{n:,} | " + " | ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
