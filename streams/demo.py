"""``make run``: the embedded broker, one worker and simulated fleet traffic, with verdicts printed live.

Each run's escalation is shown once per decision level (its first warning, block and abort; a looping run
repeats its verdicts on every call) next to fleet storm alerts, in lines of at most 120 columns. Traffic is
stamped with the wall clock, so verdict and storm times agree and the latency metric is real. With
``--bootstrap`` the demo uses that cluster instead of starting a broker; ``LOOPWATCH_BOOTSTRAP`` alone, set for a
worker, does not send demo traffic to a real cluster (it is noted and left aside). Every process it starts is
stopped by pid on Ctrl-C, on SIGTERM and on any failure; a second Ctrl-C kills them at once. Its logs and state
live in a temporary directory, removed when the demo ends as it should (its traffic over, Ctrl-C, SIGTERM) and
kept, with its path printed, when something failed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from streams.devbroker import EmbeddedBroker, free_port, terminate
from streams.errors import EXIT_INTERRUPTED, CommandError
from streams.simulate import DEFAULT_GATEWAYS, DEFAULT_RATE
from streams.topics import FLEET_ALERTS_TOPIC, VERDICTS_TOPIC

WIDTH = 120
LAST_WORDS = 10.0  # seconds the verdicts are still followed after the traffic's end, for the last ones

DEMO_CONFIG = """{
  // The demo enables OpenClaw's rolling detectors (off by default) with the default thresholds,
  // and gives the "coder" agent a stricter override, as a per-agent config would.
  tools: { loopDetection: { enabled: true } },
  agents: { list: [ { id: "coder", tools: { loopDetection: { warningThreshold: 8, criticalThreshold: 16 } } } ] },
}
"""


_BOOTSTRAP_VARIABLE = "LOOPWATCH_BOOTSTRAP"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m streams.demo", description=__doc__)
    p.add_argument("--gateways", type=int, default=DEFAULT_GATEWAYS)
    p.add_argument("--rate", type=float, default=DEFAULT_RATE, help="events per second, whole fleet")
    p.add_argument(
        "--duration",
        type=float,
        default=600.0,
        help="seconds of traffic (Ctrl-C stops earlier). Ten minutes by default: the embedded broker's fetches cost "
        "more with every record batch it stores (docs/embedded-broker.md), so an hour would end with it busy",
    )
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--max-verdicts", type=int, default=None, help="stop after this many verdicts")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument(
        "--bootstrap",
        default=None,
        help="HOST:PORT of a Kafka cluster to run on instead of starting the embedded broker (its loopwatch topics "
        f"get the demo's traffic and --partitions; default: the embedded broker, whatever {_BOOTSTRAP_VARIABLE} says)",
    )
    return p.parse_args(argv)


def _stop_everything(
    procs: Sequence[subprocess.Popen[bytes]], broker: EmbeddedBroker | None, then: Callable[[], None] | None = None
) -> None:
    """Stop the demo's processes by pid, the last started first, then run ``then`` (the clean-up of their files,
    which must wait until none writes there). A second Ctrl-C (or SIGTERM) meanwhile kills what is left at once
    instead of interrupting the stop: nothing is left running, and no traceback."""

    def hurry(signum: int, frame: FrameType | None) -> None:
        print("killing what is left…", flush=True)
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        if broker is not None:
            broker.kill()

    previous = {signum: signal.signal(signum, hurry) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        if procs or broker is not None:
            print("\nstopping… (Ctrl-C again to kill at once)", flush=True)
        for proc in reversed(procs):
            terminate(proc, 10.0)
        if broker is not None:
            broker.stop()
        if then is not None:
            then()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _ended_early(procs: Sequence[subprocess.Popen[bytes]], broker: EmbeddedBroker | None) -> str:
    """What stopped before the demo stopped it ('' if nothing): the broker and the worker run until stopped, the
    traffic ends by itself after its duration with status 0. The tail alone would not tell: it just sees no more
    verdicts."""
    ended = []
    if broker is not None and broker.pid is not None and not broker.is_running():
        ended.append("the embedded broker exited by itself")
    for name, proc in zip(("worker", "demo traffic"), procs, strict=False):
        code = proc.poll()
        if code is not None and (code != 0 or name == "worker"):
            ended.append(f"the {name} exited by itself with status {code}")
    return "; ".join(ended)


def _leave(work: Path, failed: bool) -> None:
    """Remove the demo's directory after a normal end; after a failure keep it, its logs tell what happened."""
    if failed:
        print(f"stopped everything the demo started; its logs are kept in {work}", file=sys.stderr, flush=True)
        return
    try:
        shutil.rmtree(work)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        print(f"stopped everything the demo started; cannot remove {work}: {reason}", file=sys.stderr, flush=True)
        return
    print(f"stopped everything the demo started and removed its files ({work})", flush=True)


def _wait_until_ready(worker: subprocess.Popen[bytes], log: Path, timeout: float = 60.0) -> None:
    """Until the worker prints its ready line; its own error line if it stops first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        if "loopwatch worker: ready" in text:
            return
        if worker.poll() is not None:
            errors = [line for line in text.splitlines() if line.startswith("loopwatch worker: ")]
            raise RuntimeError(errors[-1] if errors else f"the worker exited with status {worker.returncode}")
        time.sleep(0.2)
    raise RuntimeError(f"the worker was not ready within {timeout:.0f}s; see {log}")


def _worker_command(
    py: list[str], bootstrap: str, config: Path, work: Path, partitions: int, metrics_port: int
) -> list[str]:
    """The demo's worker: memory store, its own group and ports."""
    return [
        *py,
        "worker",
        "--bootstrap",
        bootstrap,
        "--config",
        str(config),
        "--store",
        "memory",
        "--data-dir",
        str(work / "state"),
        "--partitions",
        str(partitions),
        "--group",
        "loopwatch-demo",
        "--metrics-port",
        str(metrics_port),
        "--web-port",
        str(free_port()),
        "--log-level",
        "warn",
    ]


def _traffic_command(py: list[str], bootstrap: str, args: argparse.Namespace) -> list[str]:
    """Simulated fleet traffic in real time, 1 % malformed records, with model usage."""
    return [
        *py,
        "simulate",
        "--gateways",
        str(args.gateways),
        "--rate",
        str(args.rate),
        "--duration",
        str(args.duration),
        "--seed",
        str(args.seed),
        "--malformed",
        "0.01",
        "--usage",
        "--bootstrap",
        bootstrap,
        "--realtime",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    work = Path(tempfile.mkdtemp(prefix="loopwatch-demo-"))
    bootstrap = (args.bootstrap or "").strip()
    if not bootstrap and os.environ.get(_BOOTSTRAP_VARIABLE, "").strip():
        print(
            f"note: {_BOOTSTRAP_VARIABLE} is set, but the demo runs on its own embedded broker, not on that cluster "
            '(make run RUN_ARGS="--bootstrap HOST:PORT" sends its traffic there)',
            flush=True,
        )
    broker: EmbeddedBroker | None = None
    procs: list[subprocess.Popen[bytes]] = []
    failed = True  # until the demo ends as it should: a failed run keeps its directory for its logs

    def _terminate(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    def _outcome(code: int) -> int:
        """``code``, unless a process ended early: then a failure, told, whose logs are kept."""
        nonlocal failed
        ended = _ended_early(procs, broker)
        if ended:
            print(f"make run: {ended}", file=sys.stderr, flush=True)
            return 1
        failed = code != 0
        return code

    signal.signal(signal.SIGTERM, _terminate)
    try:
        if not bootstrap:
            broker = EmbeddedBroker(log_path=work / "broker.log")  # named first: a Ctrl-C while it starts stops it
            broker.start()
            bootstrap = broker.bootstrap
            print(f"embedded broker pid {broker.pid} on {bootstrap}", flush=True)
        config = work / "openclaw.json5"
        config.write_text(DEMO_CONFIG, encoding="utf-8")
        py = [sys.executable, "-m", "streams.cli"]
        worker_log = work / "worker.log"
        metrics_port = free_port()
        worker_cmd = _worker_command(py, bootstrap, config, work, args.partitions, metrics_port)
        if broker is not None:
            worker_cmd.append("--embedded")
        with worker_log.open("ab") as wlog:
            procs.append(subprocess.Popen(worker_cmd, stdout=wlog, stderr=subprocess.STDOUT, start_new_session=True))
        print(
            f"worker pid {procs[0].pid}, metrics on http://127.0.0.1:{metrics_port}/metrics, log {worker_log}",
            flush=True,
        )
        _wait_until_ready(procs[0], worker_log)
        traffic_cmd = _traffic_command(py, bootstrap, args)
        with (work / "traffic.log").open("ab") as tlog:
            procs.append(subprocess.Popen(traffic_cmd, stdout=tlog, stderr=subprocess.STDOUT, start_new_session=True))
        print(
            f"demo traffic pid {procs[1].pid}: {args.gateways} gateways, {args.rate:g} events/s; "
            "verdicts follow (Ctrl-C to stop)\n",
            flush=True,
        )
        from streams.cli import main as loopwatch  # the verdicts are shown by `loopwatch tail`, run in-process

        tail = ["tail", "--bootstrap", bootstrap, "--topic", VERDICTS_TOPIC, "--topic", FLEET_ALERTS_TOPIC]
        tail += [
            "--from-beginning",
            "--escalations",
            "--width",
            str(WIDTH),
            "--timeout",
            str(args.duration + LAST_WORDS),
        ]
        if args.max_verdicts is not None:
            tail += ["--max", str(args.max_verdicts)]
        code = loopwatch(tail)
        if procs[1].poll() is not None:
            over = f"the demo's {args.duration:g} s of traffic are over"
            print(f'\n{over} (make run RUN_ARGS="--duration S" sends more)', flush=True)
        return _outcome(0 if code == EXIT_INTERRUPTED else code)  # Ctrl-C before the tail took over: a normal stop
    except KeyboardInterrupt:
        return _outcome(0)
    except RuntimeError as exc:
        print(f"make run: {exc}", file=sys.stderr, flush=True)
        return 1
    except CommandError as exc:
        print(f"make run: {exc.text()}", file=sys.stderr, flush=True)
        return exc.code
    finally:
        _stop_everything(procs, broker, then=lambda: _leave(work, failed))


if __name__ == "__main__":
    sys.exit(main())
