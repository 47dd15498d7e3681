"""``loopwatch replay``: run the detection core over recorded events, offline, for audits and tests.

``--events FILE`` replays a JSON Lines file in file order. ``--topic T --bootstrap B`` replays a topic range
(``--from``/``--to``: ``N`` for every partition, ``P:N,P:N`` per partition, or an RFC 3339 time resolved with
``offsets_for_times`` -- record timestamps, which on the embedded broker are the broker's write time) per
partition in offset order, exactly as the worker does; ``--compare-verdicts`` diffs the result against the
verdicts topic; ``--run RUN_ID`` explains one run. See :mod:`streams.audit.replay`. ``--with-state`` starts each run
(or, with ``--run``, the explained run) from the worker's stored state (its run table's changelog) instead of
empty, so a range that starts in the middle of runs agrees with the worker; see :mod:`streams.audit.with_state` and
:mod:`streams.audit.explain`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from streams.audit import compare, explain, replay, source, with_state
from streams.audit.replay import replay_lines
from streams.audit.source import input_name, lines
from streams.cli._args import (
    bootstrap,
    bootstrap_setting,
    open_events,
    refuse_together,
    refuse_topic_only,
    refuse_without,
    topic_name,
)
from streams.cli._config import load_config, note_detection_off
from streams.cli._range import RANGE_FLAGS, add_range_arguments, note_range, topic_range
from streams.config_file import LoadedConfig
from streams.detection.canonical import js_trim
from streams.errors import EXIT_FINDINGS, CommandError
from streams.kafka import reader
from streams.kafka.reader import KafkaSource, RecordSource
from streams.kafka.security import KafkaSecurity, KafkaSecurityError, add_security_arguments, security_from_args
from streams.profile_choice import add_profile_arguments
from streams.topics import VERDICTS_TOPIC, changelog_topic
from streams.worker.settings import DEFAULT_BOOTSTRAP, DEFAULT_GROUP, env_default


def register(sub: Any) -> None:
    p = sub.add_parser(
        "replay",
        help="replay recorded events through the detectors and print decisions",
        description="Run the detectors over recorded events (a JSON Lines file, or a Kafka topic range read per "
        "partition in offset order, exactly as the worker reads it) and print one JSON object per decision. "
        "Also compares the result with the verdicts the worker published (--compare-verdicts), starts runs from "
        "the worker's stored state (--with-state) and explains one run step by step (--run).",
    )
    given = p.add_mutually_exclusive_group(required=True)
    given.add_argument("--events", type=Path, help="JSON Lines file of events ('-' for stdin)")
    given.add_argument(
        "--topic", type=topic_name, help="replay this Kafka topic (with --bootstrap), per partition in offset order"
    )
    p.add_argument(
        "--bootstrap",
        type=bootstrap,
        help=f"Kafka bootstrap servers HOST:PORT, with --topic (env LOOPWATCH_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})",
    )
    add_range_arguments(p)
    p.add_argument("--strict", action="store_true", help="with --topic: exit 2 when any record was bad")
    p.add_argument(
        "--compare-verdicts", action="store_true", help="with --topic: diff against the verdicts topic (exit 1)"
    )
    p.add_argument(
        "--verdicts-topic",
        metavar="TOPIC",
        type=topic_name,
        help="with --compare-verdicts, or --run with --with-state (their config_hash must be this replay's): the "
        f"verdicts topic (default {VERDICTS_TOPIC})",
    )
    p.add_argument(
        "--run",
        metavar="RUN_ID",
        type=_scope_arg,
        help="explain one run (run id or scope key; trimmed as run ids are) instead of listing",
    )
    p.add_argument("--json", action="store_true", help="JSON output for --compare-verdicts and --run")
    p.add_argument("--config", type=Path, help="OpenClaw config file (JSON5) with tools.loopDetection")
    p.add_argument("--all", action="store_true", help="also print decisions that are not published")
    p.add_argument("--skip-invalid", action="store_true", help="report bad lines and go on")
    _add_state_arguments(p)
    add_profile_arguments(p)
    add_security_arguments(p)
    p.set_defaults(func=run)


def _add_state_arguments(p: argparse.ArgumentParser) -> None:
    """``--with-state``, ``--group`` and ``--state-topic`` of ``loopwatch replay``."""
    p.add_argument(
        "--with-state",
        action="store_true",
        help="with --topic: start each run (with --run: the explained run) from the worker's stored state (its "
        "table changelog) just before the run's first event in the range, instead of from empty; see "
        "docs/auditing.md",
    )
    p.add_argument(
        "--group",
        help="with --with-state: the worker's consumer group; the changelog is GROUP-runs-changelog "
        f"(LOOPWATCH_GROUP, default {DEFAULT_GROUP})",
    )
    p.add_argument(
        "--state-topic", metavar="TOPIC", type=topic_name, help="with --with-state: read this changelog topic instead"
    )


#: Flags that only mean something with ``--topic`` (option string, attribute); given with ``--events`` they are
#: refused, never silently ignored. Their defaults are None/False so that "given" is "not None/False"; the
#: environment's defaults (LOOPWATCH_GROUP, LOOPWATCH_KAFKA_*) are read where the values are used.
_TOPIC_ONLY: tuple[tuple[str, str], ...] = (
    ("--bootstrap", "bootstrap"),
    *RANGE_FLAGS,
    ("--strict", "strict"),
    ("--compare-verdicts", "compare_verdicts"),
    ("--verdicts-topic", "verdicts_topic"),
    ("--with-state", "with_state"),
    ("--group", "group"),
    ("--state-topic", "state_topic"),
)


def _verdicts_topic(args: argparse.Namespace) -> str:
    return str(args.verdicts_topic or VERDICTS_TOPIC)


def _reads_verdicts(args: argparse.Namespace) -> bool:
    """``--compare-verdicts`` compares with the verdicts; ``--run --with-state`` checks their config_hash."""
    return bool(args.compare_verdicts or (args.run is not None and args.with_state))


def _state_topic(args: argparse.Namespace) -> str:
    """The changelog topic ``--state-topic``/``--group`` (else LOOPWATCH_GROUP, else the default group) name."""
    group = args.group or env_default(os.environ, "LOOPWATCH_GROUP", DEFAULT_GROUP) or DEFAULT_GROUP
    return str(args.state_topic or changelog_topic(group))


def _scope_arg(text: str) -> str:
    """A ``--run`` value as the scope key rule reads run ids: trimmed (JavaScript whitespace); blank is refused."""
    trimmed = js_trim(text)
    if not trimmed:
        raise argparse.ArgumentTypeError("must name a run (a run id or a session id), not be blank")
    return trimmed


#: Flags that act only with another (that flag, then them), and flags that exclude each other (with why): given
#: otherwise they are refused, never silently ignored.
_NEEDS: tuple[tuple[tuple[str, str], tuple[tuple[str, str], ...]], ...] = (
    (("--with-state", "with_state"), (("--group", "group"), ("--state-topic", "state_topic"))),
)
_EXCLUSIVE: tuple[tuple[tuple[tuple[str, str], tuple[str, str]], str], ...] = (
    ((("--group", "group"), ("--state-topic", "state_topic")), "each names the stored state's topic"),
    (
        (("--run", "run"), ("--compare-verdicts", "compare_verdicts")),
        "--run explains one run, --compare-verdicts checks the whole range",
    ),
    ((("--run", "run"), ("--all", "all")), "--run shows every decision of its run already"),
    (
        (("--compare-verdicts", "compare_verdicts"), ("--all", "all")),
        "--compare-verdicts compares published verdicts only, --all adds decisions never published",
    ),
    (
        (("--strict", "strict"), ("--skip-invalid", "skip_invalid")),
        "--strict fails on a bad record, --skip-invalid goes on past it",
    ),
)


def run(args: argparse.Namespace) -> int:
    if args.topic is None:
        refuse_topic_only(args, _TOPIC_ONLY, "replay")
    for needs, flags in _NEEDS:
        refuse_without(args, needs, flags, "replay")
    if args.run is None and not args.compare_verdicts:  # a replay's decisions are JSON Lines already
        refuse_without(args, ("--run or --compare-verdicts", "run"), (("--json", "json"),), "replay")
    if not _reads_verdicts(args):  # --run --with-state reads the verdicts too, for their config_hash
        needs = ("--compare-verdicts (or --run with --with-state)", "compare_verdicts")
        refuse_without(args, needs, (("--verdicts-topic", "verdicts_topic"),), "replay")
    for pair, why in _EXCLUSIVE:
        refuse_together(args, pair, why, "replay")
    config = load_config(args.config, args, "replay")
    status = _run(args, config)
    if args.run is None:  # an explanation says it at every step
        note_detection_off(config, "replay")
    return status


def _run(args: argparse.Namespace, config: LoadedConfig) -> int:
    if args.topic is not None:
        return run_topic(args, config)
    with open_events(args.events) as stream:
        name = input_name(args.events)
        if args.run is not None:
            return explain_lines(lines(stream), config, args.run, sys.stdout, as_json=args.json, name=name)
        status = replay_lines(
            lines(stream), config, sys.stdout.buffer, include_all=args.all, skip_invalid=args.skip_invalid, name=name
        )
    if status:  # bad lines, each named above: the last line says what happened and what to do
        raise CommandError(
            f"the replay stopped at the first line of {name} that is not an event (each is named above)",
            hint=source.BAD_LINES_HINT,
        )
    return 0


_HELP = "see 'loopwatch replay --help'"


def explain_lines(
    lines: Iterator[bytes], config: LoadedConfig, run: str, out: IO[str], *, as_json: bool, name: str
) -> int:
    """``--run`` over a file: bad lines are reported and skipped (an explanation is not an audit)."""
    events = [
        source.PositionedEvent(index, event) for index, event in source.decode_lines(lines, name) if event is not None
    ]
    return _explain(events, config, run, out, as_json=as_json, where=name)


def _explain(
    events: list[source.PositionedEvent], config: LoadedConfig, run: str, out: IO[str], *, as_json: bool, where: str
) -> int:
    steps = explain.explain_run(events, config, run)
    if as_json:
        out.write(orjson.dumps({"run": run, "events": explain.explain_json(steps)}).decode() + "\n")
    elif steps:  # no events: the error line says so, once
        out.write(explain.render_explain(steps, run, config))
    return _explained(out, run, bool(steps), where)


def _explained(
    out: IO[str],
    run: str,
    found: bool,
    where: str,
    why: str = "",
    hint: str = "give a run id or scope key as it appears in the events",
) -> int:
    """Exit status 0, or the one line saying the run has no event in ``where`` (the file or topic read), 1."""
    out.flush()
    if not found:
        raise CommandError(f"no event of run {run!r}{why}", where, hint=hint, code=1)
    return 0


def _explain_with_state(
    args: argparse.Namespace,
    config: LoadedConfig,
    read: reader.TopicRead,
    events: dict[int, list[source.PositionedEvent]],
    records: RecordSource,
    security: KafkaSecurity,
) -> int:
    """``--run --with-state``: explain the run from the worker's stored state (see :mod:`streams.audit.explain`)."""
    mine = explain.run_events(events, args.run)
    if not mine:
        return _explain([], config, args.run, sys.stdout, as_json=args.json, where=args.topic)
    _check_config(args, config, read, records, security)
    state_topic = _state_topic(args)
    try:
        plan, warm = asyncio.run(with_state.read_state(records, state_topic, args.topic, read, mine))
    except Exception as exc:
        raise _state_failure(exc, args, security) from None
    for note in plan.notes:
        print(note, file=sys.stderr)
    result = explain.explain_from_state(plan, mine, warm, config, args.run)
    if args.json:
        sys.stdout.write(orjson.dumps(result.to_json(args.run)).decode() + "\n")
    else:
        sys.stdout.write(result.render(args.run, config))
    if not result.skipped:
        return _explained(sys.stdout, args.run, bool(result.steps), args.topic)
    why = f" after its stored state ({result.skipped} events in range already in it)"
    hint = "start the range before the run's stored state (--from), or give replay the worker's config with --config"
    return _explained(sys.stdout, args.run, bool(result.steps), args.topic, why, hint)


def _check_config(
    args: argparse.Namespace,
    config: LoadedConfig,
    read: reader.TopicRead,
    records: RecordSource,
    security: KafkaSecurity,
) -> None:
    """``--run --with-state``: the stored states were computed with the worker's config. Recorded verdicts in the
    range with another config_hash (:func:`streams.audit.compare.config_mismatch`) fail the explanation (exit
    status 1, as ``--compare-verdicts --with-state``); without the default verdicts topic a note says it was not
    checked."""
    verdicts = _verdicts_topic(args)
    try:
        verdict_read = asyncio.run(records.read(verdicts))
    except reader.NoSuchTopic as exc:
        if args.verdicts_topic is not None:
            raise reader.read_failure(
                exc, f"cannot read topic {verdicts}", args.bootstrap, security, "--verdicts-topic"
            ) from None
        print(
            f"loopwatch replay: note: no topic {verdicts}: whether the stored states were computed with this config "
            "is not checked (--verdicts-topic names the worker's verdicts topic)",
            file=sys.stderr,
        )
        return
    except Exception as exc:
        raise reader.read_failure(exc, f"cannot read topic {verdicts}", args.bootstrap, security) from None
    recorded, _ = compare.verdict_values(verdict_read, verdicts)  # an explanation does not list undecodable ones
    mismatch = compare.config_mismatch(
        (v for v in recorded if compare.in_range(v, args.topic, read.ranges)), config.config_hash
    )
    if mismatch is not None:
        raise CommandError(
            f"cannot explain run {args.run!r} from the worker's stored state: {mismatch.describe()}",
            f"--config {args.config}" if args.config is not None else "no --config: OpenClaw's defaults",
            "the stored states were computed with the worker's config: give replay that config file with --config "
            "(or leave out --with-state to explain the run from empty)",
            code=EXIT_FINDINGS,
        )


def _state_failure(exc: BaseException, args: argparse.Namespace, security: KafkaSecurity) -> CommandError:
    """A failed read of the worker's stored state (a missing topic names --group or --state-topic)."""
    flag = "--state-topic" if args.state_topic is not None else "--group"
    action = f"cannot read the worker's stored state in {_state_topic(args)}"
    return reader.read_failure(exc, action, args.bootstrap, security, flag)


def _check_named(records: RecordSource, topic: str, failure: Callable[[Exception], CommandError]) -> None:
    """Read nothing of ``topic``: a wrong name fails now, not after reading (and reporting the bad records of)
    the whole events range."""
    nothing = reader.OffsetBound(default=0)
    try:
        asyncio.run(records.read(topic, nothing, nothing))
    except Exception as exc:
        raise failure(exc) from None


def run_topic(args: argparse.Namespace, config: LoadedConfig) -> int:
    """``--topic``: replay a topic range like the worker; optionally compare or explain."""
    args.bootstrap = bootstrap_setting(args, "replay")
    start, end = topic_range(args, "replay")
    try:
        security = security_from_args(args)
    except KafkaSecurityError as exc:
        raise CommandError(str(exc), hint=_HELP) from None
    records: RecordSource = args.record_source or KafkaSource(args.bootstrap, security)
    records.check()
    if args.compare_verdicts:
        verdicts = _verdicts_topic(args)
        _check_named(records, verdicts, lambda exc: reader.read_failure(
            exc, f"cannot read topic {verdicts}", args.bootstrap, security, "--verdicts-topic"
        ))  # fmt: skip
    if args.with_state:
        _check_named(records, _state_topic(args), lambda exc: _state_failure(exc, args, security))
    try:
        read = asyncio.run(records.read(args.topic, start, end))
    except Exception as exc:
        raise reader.read_failure(exc, f"cannot read topic {args.topic}", args.bootstrap, security) from None
    note_range("replay", args, start, end, read)
    events, bad = source.decode_records(read.records)
    reader.check_kind(args.topic, "events", sum(map(len, events.values())), [b.describe(args.topic) for b in bad])
    if args.run is not None and bad:
        # An explanation is about one run: one line for the bad records, not one per record of every partition.
        print(
            f"loopwatch replay: warning: {len(bad)} records of {args.topic} are not valid events and were skipped "
            "(replay without --run lists them)",
            file=sys.stderr,
        )
    else:
        for b in bad:
            print(b.describe(args.topic), file=sys.stderr)
    if args.run is not None:
        if args.with_state:
            status = _explain_with_state(args, config, read, events, records, security)
        else:
            flat = [pe for partition in sorted(events) for pe in events[partition]]
            status = _explain(flat, config, args.run, sys.stdout, as_json=args.json, where=args.topic)
        return 2 if bad and args.strict else status
    stateful: with_state.StatefulReplay | None = None
    if args.with_state:
        try:
            stateful = asyncio.run(
                with_state.replay_with_state(
                    records, _state_topic(args), args.topic, read, events, config, include_all=args.all
                )
            )
        except Exception as exc:
            raise _state_failure(exc, args, security) from None
        for note in stateful.notes:
            print(note, file=sys.stderr)
        print(stateful.summary(), file=sys.stderr)
        replayed = stateful.records
    else:
        replayed = replay.replay_partitions(events, config, args.topic, include_all=args.all)
    if args.compare_verdicts:
        status = _compare(args, config, read, replayed, stateful, len(bad), records, security)
        return status or (2 if bad and args.strict else 0)
    out = sys.stdout.buffer
    for record in replayed:
        out.write(orjson.dumps(record) + b"\n")
    out.flush()
    return 2 if bad and args.strict else 0


def _compare(
    args: argparse.Namespace,
    config: LoadedConfig,
    read: reader.TopicRead,
    replayed: list[dict[str, Any]],
    stateful: with_state.StatefulReplay | None,
    bad_records: int,
    records: RecordSource,
    security: KafkaSecurity,
) -> int:
    """``--compare-verdicts``: diff the replayed verdicts with the published ones in the range; 1 if they differ."""
    verdicts = _verdicts_topic(args)
    try:
        verdict_read = asyncio.run(records.read(verdicts))
    except Exception as exc:
        raise reader.read_failure(
            exc, f"cannot read topic {verdicts}", args.bootstrap, security, "--verdicts-topic"
        ) from None
    recorded, notes = compare.verdict_values(verdict_read, verdicts)
    for note in notes:
        print(note, file=sys.stderr)
    whole_range = [v for v in recorded if compare.in_range(v, args.topic, read.ranges)]
    in_range = whole_range
    if stateful is not None:  # events a newer stored state already covers were not replayed
        in_range = [v for v in in_range if stateful.replayed_in_range(v)]
    comparison = compare.compare_verdicts(replayed, in_range)
    hint = config_hash_hint(whole_range, config.config_hash, with_state=stateful is not None)
    if args.json:
        doc: dict[str, Any] = {"ranges": {str(p): list(r) for p, r in read.ranges.items()}, "bad_records": bad_records}
        if stateful is not None:
            doc["state"] = stateful.to_json()
        sys.stdout.write(orjson.dumps({**doc, **comparison.to_json()}).decode() + "\n")
    else:
        sys.stdout.write(comparison.summary() + "\n")
        for diff in comparison.differences:
            sys.stdout.write(diff.describe() + "\n")
    sys.stdout.flush()
    if hint:
        print(hint, file=sys.stderr)
    # With --with-state a config other than the worker's makes its stored states look newer than the events
    # (their replay from empty differs), so their runs' events are skipped and their verdicts compared with nothing:
    # "equal" would then hide exactly the differences asked about.
    return 1 if not comparison.equal or (hint and stateful is not None) else 0


def config_hash_hint(recorded: list[dict[str, Any]], replay_hash: str, *, with_state: bool = False) -> str | None:
    """When recorded verdicts in the range were decided with another config, say so (and what to pass): always,
    since equal verdicts under another config are a finding too, and with ``--with-state`` a failed comparison."""
    mismatch = compare.config_mismatch(recorded, replay_hash)
    if mismatch is None:
        return None
    return f"loopwatch replay: note: {mismatch.describe()}: pass the worker's config file with --config" + (
        f"; {compare.STATES_UNDER_ANOTHER_CONFIG}, so the comparison fails" if with_state else ""
    )
