"""``loopwatch broker``: run the embedded Tansu broker in the foreground until Ctrl-C or SIGTERM.

``--cert``/``--key`` make the listener TLS (``--client-ca``: clients must present a certificate signed by that
CA). Tansu 0.6.0 cannot serve TLS itself, so a TLS front in this process relays to Tansu on a private
127.0.0.1 port (streams/devbroker/tls_front.py). SASL is not offered: see docs/embedded-broker.md
for what Tansu's ``--authentication`` does and why it cannot be used with memory storage.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from types import FrameType
from typing import Any

from streams.cli._args import port, positive_float, refuse_without
from streams.devbroker import BrokerError, BrokerFileError, EmbeddedBroker, PortInUseError, cpu_seconds
from streams.errors import EXIT_UNAVAILABLE, CommandError
from streams.integers import TooLarge, parse_integer, shown
from streams.kafka.admin import create_topics
from streams.kafka.security import (
    SECURITY_FLAGS,
    KafkaSecurity,
    KafkaSecurityError,
    add_security_arguments,
    security_from_args,
)
from streams.topics import MAX_PARTITIONS, TOPIC_NAME_RULE, partition_count_problem, topic_name_problem


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run the embedded Kafka-compatible broker (Tansu, memory only) on 127.0.0.1",
        description="Run the embedded Kafka-compatible broker (Tansu, keeping everything in memory) on 127.0.0.1 "
        "until Ctrl-C or SIGTERM, for local use and tests; production runs real Kafka. It keeps everything and each "
        "fetch looks through all its partition holds, so it grows slower as topics fill: restart it for a clean "
        "slate (docs/embedded-broker.md). With --cert and --key the listener speaks TLS.",
    )
    parser.add_argument(
        "--port", type=port, default=9092, help="listen port on 127.0.0.1 (default 9092; 0: pick a free one)"
    )
    parser.add_argument(
        "--log-file", default=None, help="broker log file (default: a temporary file, removed when the broker stops)"
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create this topic once the broker is ready (repeatable); auto-created topics get 4 partitions",
    )
    parser.add_argument(
        "--ready-timeout", type=positive_float, default=15.0, help="seconds to wait for readiness (default 15)"
    )
    parser.add_argument("--cert", metavar="PEM", default=None, help="serve TLS with this certificate (chain)")
    parser.add_argument("--key", metavar="PEM", default=None, help="private key of --cert (unencrypted PEM)")
    parser.add_argument(
        "--client-ca", metavar="PEM", default=None, help="with --cert: require client certificates signed by this CA"
    )
    add_security_arguments(parser)  # how --topic creation connects (default with --cert: trust --cert itself)
    parser.set_defaults(func=run)


_HELP = "see 'loopwatch broker --help'"

BUSY_WINDOW = 60.0  # seconds over which the broker's CPU share is read
BUSY_SHARE = 0.5  # of one core: where a session's slowdown starts to show in the worker's latency


class BusyWatch:
    """Tells once when the broker's CPU share over a window first reaches ``share`` of a core.

    Its memory storage looks through every record batch a partition holds at each fetch and never deletes one,
    so in a long session the broker's CPU climbs while the traffic stays the same; without a word, an operator
    sees only a slower worker. Fed samples of (wall clock, CPU seconds); pure, so it is tested without waiting.
    """

    def __init__(self, window: float = BUSY_WINDOW, share: float = BUSY_SHARE) -> None:
        self.window = window
        self.share = share
        self._start: tuple[float, float] | None = None
        self.told = False

    def sample(self, now: float, cpu: float | None) -> float | None:
        """The share of a core over the window just ended, the first time it reaches ``share``; else None."""
        if cpu is None or self.told:
            return None
        if self._start is None or cpu < self._start[1]:
            self._start = (now, cpu)
            return None
        began, used = self._start
        if now - began < self.window:
            return None
        self._start = (now, cpu)
        busy = (cpu - used) / (now - began)
        if busy < self.share:
            return None
        self.told = True
        return busy


def _parse_topics(specs: list[str]) -> dict[str, int]:
    """``{name: partitions}`` of the ``--topic`` values: ``ValueError`` when one is not NAME:PARTITIONS, and
    :class:`CommandError` for a name Kafka refuses (the embedded broker would create it all the same)."""
    topics: dict[str, int] = {}
    for spec in specs:
        name, sep, count = spec.rpartition(":")
        try:
            partitions = parse_integer(count) if sep and name else None
        except TooLarge:
            partitions = MAX_PARTITIONS + 1  # thousands of digits: past the bound, whatever they say
        except ValueError:
            partitions = None
        if partitions is None:
            raise ValueError(f"--topic expects NAME:PARTITIONS, got {shown(spec)}")
        problem = partition_count_problem(partitions)
        if problem is not None:
            raise CommandError(f"{shown(spec)}: the partition count {problem}", "--topic")
        problem = topic_name_problem(name)
        if problem is not None:
            raise CommandError(problem, "--topic", TOPIC_NAME_RULE)
        if topics.setdefault(name, partitions) != partitions:
            raise CommandError(
                f"topic {name} given with {topics[name]} and {count} partitions", "--topic", "give each topic once"
            )
    return topics


_TLS_FLAGS = {"tls_cert": "--cert", "tls_key": "--key", "tls_client_ca": "--client-ca"}


def file_error(exc: BrokerFileError) -> CommandError:
    """An unusable input file as a bad value (exit 2). A TLS file is named with its flag, since "the TLS key"
    alone does not say which flag to fix; the log file by its path ("the log file" names --log-file)."""
    flag = _TLS_FLAGS.get(exc.role)
    return CommandError(exc.what, f"{flag} {exc.path}" if flag else exc.path, exc.reason)


def topic_security(args: argparse.Namespace) -> KafkaSecurity:
    """How ``--topic`` creation connects: the shared flags/env/file, else (TLS) trust the served certificate."""
    security = security_from_args(args)
    # The embedded broker speaks no SASL, and TLS only with --cert: any other setting would wait for an answer
    # that cannot come (a TLS hello to a plaintext listener), then blame the broker.
    if security.uses_sasl:
        raise KafkaSecurityError(f"--topic over {security.security_protocol}: the embedded broker has no SASL")
    if security.uses_tls and not args.cert:
        raise KafkaSecurityError(
            f"--topic over {security.security_protocol}, but this broker serves plaintext: give --cert and --key "
            "to serve TLS, or leave the security settings out"
        )
    if args.cert and security.is_plaintext:
        if args.client_ca:
            raise KafkaSecurityError(
                "--topic with --client-ca needs a client certificate: --security-protocol SSL --ssl-cafile CA "
                "--ssl-certfile CERT --ssl-keyfile KEY"
            )
        # The exact certificate served is the trust anchor, so the host name adds nothing.
        security = KafkaSecurity(security_protocol="SSL", ssl_cafile=args.cert, ssl_check_hostname=False)
    return security


def run(args: argparse.Namespace) -> int:
    # The Kafka security flags say how --topic creation connects; the broker itself serves TLS by --cert/--key.
    refuse_without(args, ("--topic", "topic"), SECURITY_FLAGS, "broker")
    try:
        topics = _parse_topics(args.topic)
    except ValueError as exc:
        raise CommandError(str(exc), "--topic", "e.g. --topic loopwatch.events:12") from None
    if (args.cert is None) != (args.key is None) or (args.client_ca and not args.cert):
        raise CommandError("--cert and --key go together (and --client-ca needs both)", hint=_HELP)
    try:
        security = topic_security(args) if topics else None
    except KafkaSecurityError as exc:
        raise CommandError(str(exc), hint=_HELP) from None
    broker = EmbeddedBroker(
        port=args.port or None,
        log_path=args.log_file,
        ready_timeout=args.ready_timeout,
        tls_cert=args.cert,
        tls_key=args.key,
        tls_client_ca=args.client_ca,
    )
    try:
        broker.check_files()  # before any port is bound: a wrong file is the operator's to fix, not a busy port
    except BrokerFileError as exc:
        raise file_error(exc) from None
    stop = threading.Event()

    def _on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        where = f"127.0.0.1:{args.port}" if args.port else "127.0.0.1"
        try:
            broker.start()
        except PortInUseError:
            raise CommandError(
                "port in use", where, "another broker or program listens there; pick another --port (0: a free one)",
                code=EXIT_UNAVAILABLE,
            ) from None  # fmt: skip
        except BrokerFileError as exc:  # changed since the check above
            raise file_error(exc) from None
        except BrokerError as exc:
            raise CommandError("the broker did not start", where, str(exc), code=EXIT_UNAVAILABLE) from None
        if topics:
            from streams.kafka.client import kafka_failure

            assert security is not None
            try:
                create_topics(broker.bootstrap, topics, security=security)
            except Exception as exc:  # TopicMismatchError, Kafka errors
                raise kafka_failure(exc, "cannot create topics", broker.bootstrap, security) from None
        tls = " TLS" + (" with client certificates" if args.client_ca else "") if broker.tls else ""
        print(f"broker ready on {broker.bootstrap}{tls} (pid {broker.pid}, log {broker.log_path})", flush=True)
        busy = BusyWatch()
        while not stop.wait(0.5):
            if not broker.is_running():
                raise CommandError(
                    "the broker exited unexpectedly", broker.bootstrap, " ".join(broker.log_tail(400).split()),
                    code=EXIT_UNAVAILABLE,
                )  # fmt: skip
            share = busy.sample(time.monotonic(), cpu_seconds(broker.pid) if broker.pid else None)
            if share is not None:
                print(
                    f"note: the broker used {share:.0%} of a core over the last minute; it keeps every record and "
                    "each fetch looks through all that a partition holds, so this climbs as topics fill: restart it "
                    "for a clean slate (docs/embedded-broker.md)",
                    flush=True,
                )
        print("stopping broker", flush=True)
        return 0
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
