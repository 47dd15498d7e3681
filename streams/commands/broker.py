"""``loopwatch broker``: run the embedded Tansu broker in the foreground until Ctrl-C or SIGTERM."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from streams.broker import BrokerError, EmbeddedBroker, create_topics


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run the embedded Kafka-compatible broker (Tansu, memory only) on 127.0.0.1",
        description=__doc__,
    )
    parser.add_argument("--port", type=int, default=9092, help="listen port on 127.0.0.1 (0: pick a free one)")
    parser.add_argument("--log-file", default=None, help="broker log file (default: a temporary file)")
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create this topic once the broker is ready (repeatable); auto-created topics get 4 partitions",
    )
    parser.add_argument("--ready-timeout", type=float, default=15.0, help="seconds to wait for readiness")
    parser.set_defaults(func=run)


def _parse_topics(specs: list[str]) -> dict[str, int]:
    topics: dict[str, int] = {}
    for spec in specs:
        name, sep, count = spec.rpartition(":")
        if not sep or not name or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--topic expects NAME:PARTITIONS, got {spec!r}")
        topics[name] = int(count)
    return topics


def run(args: argparse.Namespace) -> int:
    try:
        topics = _parse_topics(args.topic)
    except ValueError as exc:
        print(f"loopwatch broker: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    broker = EmbeddedBroker(port=args.port or None, log_path=args.log_file, ready_timeout=args.ready_timeout)
    try:
        try:
            broker.start()
            if topics:
                create_topics(broker.bootstrap, topics)
        except Exception as exc:  # BrokerError, TopicMismatchError, Kafka errors
            kind = "" if isinstance(exc, BrokerError) else f"{type(exc).__name__}: "
            print(f"loopwatch broker: {kind}{exc}", file=sys.stderr)
            return 1
        print(f"broker ready on {broker.bootstrap} (pid {broker.pid}, log {broker.log_path})", flush=True)
        while not stop.wait(0.5):
            if not broker.is_running():
                print(f"loopwatch broker: broker exited unexpectedly: {broker.log_tail()}", file=sys.stderr)
                return 1
        print("stopping broker", flush=True)
        return 0
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
