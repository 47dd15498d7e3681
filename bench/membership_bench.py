"""Processing stalls on membership changes, dynamic vs static group membership (prints figures; no assertions).

Two workers in one group on a broker of their own while fleet traffic flows; one of them is SIGKILLed (or
SIGTERMed) and restarted at once. Measured on the other one: the longest time its processed-events counter did
not move, and how many assignments it went through, over 25 s from the restart. Static membership gives each
worker a ``--group-instance-id``.

Run from the repository root: ``.venv/bin/python -m bench.membership_bench [--modes dynamic,static]``. With
``--embedded`` sessions (3 s) static membership made Tansu 0.6.0 rebalance the group every ~6 s without end, so
the worker refuses ``--group-instance-id`` with ``--embedded``; static mode here runs without it (Faust's 60 s
session: a restart well inside it, which is what static membership is for).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from streams.devbroker import EmbeddedBroker
from tests.support.procs import sigterm_as_interrupt
from tests.support.worker import Feeder, WorkerProcess, fleet_traffic, keyed, metric, new_names, write_config

WINDOW = 25.0


def measure(mode: str, restart: str) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix=f"membership-{mode}-{restart}-"))
    with EmbeddedBroker(log_path=tmp / "tansu.log") as broker:
        names = new_names(f"m{mode}{restart}")
        config = write_config(tmp)

        def worker(name: str) -> WorkerProcess:
            extra = ["--group-instance-id", f"lw-{name}"] if mode == "static" else []
            proc = WorkerProcess(broker.bootstrap, names, tmp, config=config, name=name, store="memory", extra=extra)
            if mode == "static":  # --embedded refuses static membership: Faust's own 60 s session instead
                proc.cmd.remove("--embedded")
            return proc

        first, other = worker("w1").start(), worker("w2").start()
        restarted: WorkerProcess | None = None
        try:
            first.wait_ready()
            other.wait_ready()
            feeder = Feeder(broker.bootstrap, names.events, keyed(fleet_traffic(12000, seed=3)), chunk=20, pause=0.05)
            feeder.start()
            time.sleep(6.0)
            started = time.monotonic()
            first.kill() if restart == "kill" else first.stop()
            restarted = worker("w1").start()
            samples: list[tuple[float, float]] = []
            while time.monotonic() - started < WINDOW:
                samples.append((time.monotonic() - started, metric(other.metrics(), "loopwatch_events_total")))
                time.sleep(0.1)
            longest, (since, value) = 0.0, samples[0]
            for at, count in samples[1:]:
                if count > value:
                    longest, since, value = max(longest, at - since), at, count
            longest = max(longest, samples[-1][0] - since)
            assignments = other.log().count("loopwatch worker: partitions reassigned")  # per rebalance after ready
            feeder.join(120.0)
        finally:
            for proc in (first, other, restarted):
                if proc is not None:
                    proc.stop()
    return {"membership": mode, "restart": restart, "longest_stall_s": round(longest, 2), "rebalances": assignments}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--modes", default="dynamic,static")
    parser.add_argument("--restarts", default="kill,term")
    args = parser.parse_args()
    for mode in args.modes.split(","):
        for restart in args.restarts.split(","):
            print(json.dumps(measure(mode, restart)), flush=True)


if __name__ == "__main__":
    try:
        with sigterm_as_interrupt():  # a stopped benchmark stops its broker and workers too
            main()
    except KeyboardInterrupt:
        sys.exit("membership bench: interrupted; the processes it started are stopped")
