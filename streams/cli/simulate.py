"""``loopwatch simulate``: deterministic fleet traffic as JSON Lines, or published to the events topic.

The generator is streams/simulate.py; this module only writes its records somewhere. Publishing keys every
record by its scope key so that a run's events stay in one partition, in order. ``--realtime`` paces records
to the rate and stamps them with the wall clock, so the worker's event-to-verdict latency is real.

A run has at most :data:`MAX_EVENTS` records (``--rate`` × ``--duration``: a bound on work, not on time, so a long
``--realtime`` run stays possible) and ``--duration`` at most :data:`MAX_DURATION` seconds (timestamps stay
valid). A flag that would change nothing is refused rather than ignored: the Kafka flags without ``--bootstrap``,
``--oversized`` without malformed records, ``--hashed`` / ``--usage`` when every record is malformed.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from streams.cli._args import (
    any_int,
    bootstrap,
    fraction,
    positive_float,
    positive_int,
    refuse_without,
    require_stdout,
    topic_name,
)
from streams.cli._sending import (
    Progress,
    add_partitions_argument,
    partitions_setting,
    plural,
    run_counted,
    send_to_topic,
)
from streams.errors import CommandError, file_reason
from streams.kafka.security import (
    PLAINTEXT,
    SECURITY_FLAGS,
    KafkaSecurity,
    KafkaSecurityError,
    add_security_arguments,
    security_from_args,
)
from streams.simulate import DEFAULT_GATEWAYS, DEFAULT_RATE, event_count, simulate
from streams.topics import EVENTS_TOPIC
from streams.worker.settings import DEFAULT_PARTITIONS

DEFAULT_DURATION = 60.0  # a minute of the default fleet: 3,600 records
#: Records of one run at most (rate x duration): about 15 minutes and 40 GB of JSON Lines; --rate 1e12 ran for ever.
MAX_EVENTS = 100_000_000
#: Simulated seconds at most (about 31 years): ample for --realtime, and timestamps stay far inside the 64-bit
#: integers JSON carries (--rate 1e-300 --duration 3e300 crashed writing the second record).
MAX_DURATION = 1_000_000_000.0
#: Flags that act only on records published to Kafka, as (option, attribute), besides SECURITY_FLAGS.
_BOOTSTRAP_ONLY = (("--topic", "topic"), ("--realtime", "realtime"), ("--partitions", "partitions"))
#: Flags that shape valid events only, refused when every record is malformed.
_VALID_ONLY = (("--hashed", "hashed"), ("--usage", "usage"))


def _duration(text: str) -> float:
    value = positive_float(text)
    if value > MAX_DURATION:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_DURATION:,.0f} seconds (about 31 years)")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="generate deterministic fleet traffic (file, stdout or Kafka)",
        description="Generate the events of a simulated fleet of OpenClaw gateways: mostly healthy runs and a few "
        "runs looping in every way the detectors know. The same seed gives the same records; ids and the start "
        "time derive from the seed, so different seeds never collide.",
    )
    p.add_argument(
        "--gateways",
        type=positive_int,
        default=DEFAULT_GATEWAYS,
        help=f"number of simulated gateways (default {DEFAULT_GATEWAYS})",
    )
    p.add_argument(
        "--rate",
        type=positive_float,
        default=DEFAULT_RATE,
        help=f"events per second, whole fleet (default {DEFAULT_RATE:g}); rate x duration at most {MAX_EVENTS:,}",
    )
    p.add_argument(
        "--duration",
        type=_duration,
        default=DEFAULT_DURATION,
        help=f"simulated seconds (default {DEFAULT_DURATION:g}; at most {MAX_DURATION:,.0f})",
    )
    p.add_argument("--seed", type=any_int, default=0, help="random seed (same seed, same bytes; default 0)")
    p.add_argument("--hashed", action="store_true", help="send args_hash/result_hash instead of raw values")
    p.add_argument("--malformed", type=fraction, default=0.0, help="fraction of bad records (0..1)")
    p.add_argument(
        "--oversized", action="store_true", help="with --malformed: include >1 MiB records among the bad ones"
    )
    p.add_argument("--usage", action="store_true", help="precede each tool call by its model call's usage")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--out", type=Path, help="JSON Lines file to write ('-' or absent: stdout)")
    target.add_argument(
        "--bootstrap", type=bootstrap, help="Kafka bootstrap servers HOST:PORT: publish instead of writing"
    )
    p.add_argument(
        "--topic",
        type=topic_name,
        default=None,
        help=f"with --bootstrap: topic to publish to (default {EVENTS_TOPIC})",
    )
    p.add_argument(
        "--realtime",
        action="store_true",
        help="with --bootstrap: pace records to the rate and stamp them with the wall clock",
    )
    add_partitions_argument(p)
    add_security_arguments(p)
    p.set_defaults(func=run)


def _records(args: argparse.Namespace) -> Iterator[tuple[bytes, bytes]]:
    start_ms = int(time.time() * 1000) if args.realtime else None
    return simulate(
        gateways=args.gateways,
        rate=args.rate,
        duration=args.duration,
        seed=args.seed,
        hashed=args.hashed,
        malformed=args.malformed,
        oversized=args.oversized,
        start_ms=start_ms,
        usage=args.usage,
    )


def _check(args: argparse.Namespace) -> int:
    """Refuse flags that would change nothing and runs too large to finish; returns the number of records.

    A silently ignored flag lets the user believe it was applied; rate x duration is bounded because nothing
    else stops a run of 1e12 records. No record at all is a note, not an error: the settings are valid.
    """
    refuse_without(args, ("--bootstrap", "bootstrap"), (*_BOOTSTRAP_ONLY, *SECURITY_FLAGS), "simulate")
    if args.oversized and not args.malformed > 0:
        raise CommandError(
            "flag that needs a --malformed fraction above 0 given without it",
            "--oversized",
            "it makes some of the malformed records over 1 MiB; add --malformed F or drop it",
        )
    given = [flag for flag, name in _VALID_ONLY if getattr(args, name)] if args.malformed == 1.0 else []
    if given:
        one = len(given) == 1
        raise CommandError(
            f"{'flag that shapes' if one else 'flags that shape'} valid events given with --malformed 1",
            ", ".join(given),
            f"every record is malformed; lower --malformed or drop {'it' if one else 'them'}",
        )
    product = args.rate * args.duration
    if not product <= MAX_EVENTS:
        raise CommandError(
            f"rate x duration is {product:.3g} events, above the {MAX_EVENTS:,} a run may have",
            "--rate, --duration",
            "lower either",
        )
    total = event_count(args.rate, args.duration)
    if total == 0:
        print(
            f"loopwatch simulate: note: no event falls in rate x duration ({args.rate:g}/s x {args.duration:g} s "
            f"= {product:.3g}, below 1): raise --rate or --duration to get records",
            file=sys.stderr,
            flush=True,
        )
    return total


def run(args: argparse.Namespace) -> int:
    _check(args)
    if args.topic is None:
        args.topic = EVENTS_TOPIC
    if args.bootstrap:
        from streams.kafka.client import preflight

        try:
            security = security_from_args(args)
        except KafkaSecurityError as exc:
            raise CommandError(str(exc), hint="see 'loopwatch simulate --help'") from None
        partitions = partitions_setting(args, "simulate")
        require_stdout()  # where the line saying what was sent goes
        preflight(args.bootstrap, security)
        started = time.monotonic()
        progress = Progress()
        noun = "record" if args.malformed else "event"

        def sent(count: int) -> str:
            return f"sent {plural(count, noun)} to {args.topic} in {time.monotonic() - started:.1f} s"

        traffic = publish(
            _records(args),
            args.bootstrap,
            args.topic,
            args.rate,
            args.realtime,
            security=security,
            progress=progress,
            partitions=partitions,
        )
        run_counted(traffic, progress, sent, topic=args.topic, bootstrap=args.bootstrap, security=security)
        return 0
    if args.out is None or str(args.out) == "-":
        # A reader that goes away (`| head`) or a full disk: streams.cli.main reports it, as for every command.
        write_lines(_records(args), sys.stdout.buffer)
        return 0
    try:
        with args.out.open("wb") as out:
            write_lines(_records(args), out)
    except OSError as exc:
        reason = file_reason(exc, args.out, writing=True)
        raise CommandError("cannot write the output file", str(args.out), reason) from None
    return 0


def write_lines(records: Iterator[tuple[bytes, bytes]], out: IO[bytes]) -> int:
    """One record value per line (values never contain a raw newline). Returns the number written."""
    count = 0
    for _, value in records:
        out.write(value + b"\n")
        count += 1
    out.flush()
    return count


async def publish(
    records: Iterator[tuple[bytes, bytes]],
    bootstrap: str,
    topic: str,
    rate: float,
    realtime: bool,
    *,
    security: KafkaSecurity = PLAINTEXT,
    progress: Progress | None = None,
    partitions: int = DEFAULT_PARTITIONS,
) -> int:
    """Produce every record (key = scope key) to ``topic``, created with ``partitions`` if missing; with
    ``realtime`` each waits for its simulated time. ``progress`` keeps what the broker confirmed, also when the
    publishing is cancelled (Ctrl-C)."""
    return await send_to_topic(
        bootstrap,
        topic,
        records,
        partitions=partitions,
        security=security,
        progress=progress,
        producer={"linger_ms": 20, "max_request_size": 4 * 1024 * 1024},
        start_timeout=30.0,
        rate=rate if realtime else 0.0,
    )


__all__ = ["publish", "register", "run", "write_lines"]
