"""``loopwatch tail``: follow ``loopwatch.verdicts``, one line per verdict (or the JSON record with --json).

Reads every partition without joining a consumer group (nothing is committed, any number of tails can run).
Starts at the current end unless ``--from-beginning``; end offsets come from
:func:`streams.kafka_compat.end_offsets` because the embedded broker's ListOffsets answer is wrong.
``--max N`` stops after N matching verdicts (exit status 1 if ``--timeout`` ends the wait first).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
import time
from typing import IO, Any

import orjson

from streams.kafka_security import (
    PLAINTEXT,
    KafkaSecurity,
    KafkaSecurityError,
    add_security_arguments,
    security_from_args,
)
from streams.topics import FLEET_ALERTS_TOPIC, VERDICTS_TOPIC
from streams.worker.settings import DEFAULT_BOOTSTRAP, env_default, environ


def register(subparsers: Any) -> None:
    env = environ()
    p = subparsers.add_parser("tail", help="follow loopwatch.verdicts")
    p.add_argument(
        "--bootstrap",
        default=env_default(env, "LOOPWATCH_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        help="Kafka bootstrap servers (LOOPWATCH_BOOTSTRAP)",
    )
    p.add_argument(
        "--topic",
        action="append",
        default=None,
        help=f"topic to follow, repeatable (default {VERDICTS_TOPIC}; fleet alerts: {FLEET_ALERTS_TOPIC})",
    )
    p.add_argument("--json", action="store_true", help="print each verdict record as one JSON line")
    p.add_argument("--gateway", help="only verdicts of this gateway_id")
    p.add_argument("--agent", help="only verdicts of this agent_id")
    p.add_argument("--decision", choices=("warning", "block", "abort"), help="only this decision")
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest retained verdict")
    p.add_argument("--max", type=int, default=None, metavar="N", help="stop after N matching verdicts")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="stop after S seconds")
    add_security_arguments(p)
    p.set_defaults(func=run)


def matches(verdict: dict[str, Any], args: argparse.Namespace) -> bool:
    return (
        (args.gateway is None or verdict.get("gateway_id") == args.gateway)
        and (args.agent is None or verdict.get("agent_id") == args.agent)
        and (args.decision is None or verdict.get("decision") == args.decision)
    )


def _when(ts: Any) -> str:
    """Event time for people: epoch milliseconds become RFC 3339 (UTC); strings are shown as sent."""
    if isinstance(ts, int | float) and not isinstance(ts, bool):
        try:
            moment = datetime.datetime.fromtimestamp(ts / 1000.0, tz=datetime.UTC)
        except (OverflowError, OSError, ValueError):
            return str(ts)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(ts) if ts else "-"


def topics_of(args: argparse.Namespace) -> list[str]:
    """The followed topics: ``--topic`` may be repeated (a plain string is accepted too)."""
    topic = args.topic
    if not topic:
        return [VERDICTS_TOPIC]
    return [topic] if isinstance(topic, str) else list(dict.fromkeys(topic))


def storm_line(alert: dict[str, Any]) -> str:
    """One line per fleet alert: window, kind, detector, what storms, how many runs, where."""
    what = (
        f"agent={alert.get('agent_id')}"
        if alert.get("kind") == "agent"
        else (f"tool={alert.get('tool')} outcome={str(alert.get('outcome_hash') or '-')[:12]}")
    )
    gateways = ",".join(str(g) for g in alert.get("gateways") or [])
    return (
        f"{alert.get('window_start')} FLEET-STORM {alert.get('kind')} {alert.get('detector')} {what} "
        f"runs={alert.get('distinct_runs')}/{alert.get('threshold')} verdicts={alert.get('verdicts')} "
        f"gateways={gateways or '-'} window={alert.get('window_seconds')}s alert={alert.get('alert_id')}"
    )


def human_line(verdict: dict[str, Any]) -> str:
    """One line: time, decision, detector, count/threshold, who, tool, and the message."""
    if "alert_id" in verdict:
        return storm_line(verdict)
    run = verdict.get("run_id") or "-"
    message = " ".join(str(verdict.get("message", "")).split())
    paired = f"<->{verdict['paired_tool']}" if verdict.get("paired_tool") else ""
    return (
        f"{_when(verdict.get('event_ts'))} {str(verdict.get('decision', '?')).upper():7} "
        f"{verdict.get('detector', '?')} {verdict.get('count')}/{verdict.get('threshold')} "
        f"gw={verdict.get('gateway_id')} agent={verdict.get('agent_id')} session={verdict.get('session_id')} "
        f"run={run} tool={verdict.get('tool')}{paired} event={verdict.get('event_id')} | {message}"
    )


async def follow(args: argparse.Namespace, out: IO[str], security: KafkaSecurity = PLAINTEXT) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streams.kafka_compat import end_offsets
    from streams.kafka_io import partition_counts

    deadline = time.monotonic() + args.timeout if args.timeout is not None else None
    counts = await partition_counts(args.bootstrap, security=security)
    topics = topics_of(args)
    for topic in topics:
        if topic not in counts:
            print(f"loopwatch tail: topic {topic} does not exist (no worker has started yet?)", file=sys.stderr)
            return 1
    tps = [TopicPartition(topic, p) for topic in topics for p in range(counts[topic])]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        enable_auto_commit=False,
        fetch_max_wait_ms=200,
        client_id="loopwatch-tail",
        **security.aiokafka_kwargs(),
    )
    await asyncio.wait_for(consumer.start(), 15.0)
    shown = 0
    try:
        consumer.assign(tps)
        if args.from_beginning:
            for tp in tps:
                consumer.seek(tp, 0)
        else:
            ends = await end_offsets(
                args.bootstrap, [(tp.topic, tp.partition) for tp in tps], **security.aiokafka_kwargs()
            )
            for tp in tps:
                consumer.seek(tp, ends[tp])
        while args.max is None or shown < args.max:
            wait = 0.5
            if deadline is not None:
                wait = min(wait, deadline - time.monotonic())
                if wait <= 0:
                    break
            batches = await consumer.getmany(timeout_ms=max(1, int(wait * 1000)))
            records = sorted((m for msgs in batches.values() for m in msgs), key=lambda m: m.timestamp)
            for message in records:
                try:
                    verdict = orjson.loads(message.value or b"")
                except orjson.JSONDecodeError:
                    print(
                        f"loopwatch tail: skipping a non-JSON record at offset {message.offset}",
                        file=sys.stderr,
                    )
                    continue
                if not isinstance(verdict, dict) or not matches(verdict, args):
                    continue
                out.write((orjson.dumps(verdict).decode() if args.json else human_line(verdict)) + "\n")
                out.flush()
                shown += 1
                if args.max is not None and shown >= args.max:
                    break
    finally:
        await consumer.stop()
    return 1 if args.max is not None and shown < args.max else 0


def run(args: argparse.Namespace) -> int:
    try:
        security = security_from_args(args)
    except KafkaSecurityError as exc:
        print(f"loopwatch tail: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(follow(args, sys.stdout, security))
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        return 0
    except Exception as exc:
        from streams.kafka_io import describe_failure

        print(f"loopwatch tail: {describe_failure(exc, args.bootstrap, security)}", file=sys.stderr)
        return 1
