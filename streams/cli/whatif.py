"""``loopwatch whatif``: what a candidate loop-detection config (or a sweep of one key) would change.

Reads events like ``loopwatch replay`` (one event per line; a bad line is reported with its line number
and makes the exit status 2 unless ``--skip-invalid``), or a topic (``--topic`` with ``--bootstrap``): all of it,
or the ``--from``/``--to`` range; a record the worker dead-letters is reported and counted in the report. The
events are decoded once and kept in memory, then every config runs over them through the same core path as
replay and the worker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any, NoReturn

import orjson

from streams.audit.source import BAD_LINES_HINT, input_name, lines, read_events, read_records
from streams.cli._args import (
    Once,
    bootstrap,
    bootstrap_setting,
    non_negative_int,
    open_events,
    positive_int,
    refuse_overwriting_inputs,
    refuse_topic_only,
    refuse_without,
    topic_name,
)
from streams.cli._config import install_profiles, profiles_input
from streams.cli._range import RANGE_FLAGS, add_range_arguments, note_range, topic_range
from streams.config_file import ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.detection.profiles import DEFAULT_PROFILE, PROFILES
from streams.errors import CommandError, file_reason
from streams.kafka.security import (
    KafkaSecurityError,
    add_security_arguments,
    client_files,
    security_from_args,
)
from streams.profile_choice import add_profile_arguments
from streams.whatif import (
    TABLE_LIMIT,
    TIMELINE_BUCKETS,
    SweepError,
    build_report,
    parse_sweep,
    render_html,
    render_table,
    to_json,
)
from streams.whatif.sweep import SWEEP_KEYS
from streams.worker.settings import DEFAULT_BOOTSTRAP, environ


def register(sub: Any) -> None:
    p = sub.add_parser(
        "whatif",
        help="compare a candidate loop-detection config with the current one on recorded events",
        description="Replay recorded events (a JSON Lines file, or a topic or a range of it) under the current "
        "config and "
        "a candidate config, or under a sweep of one setting, and show what would change: verdicts gained and "
        "lost, runs stopped earlier or later. Bad lines of a file are reported and make the exit status 2 unless "
        "--skip-invalid; records of a topic that the worker dead-letters are reported and counted in the report.",
    )
    p.add_argument("--config", type=Path, help="current OpenClaw config (JSON5); default: OpenClaw defaults")
    p.add_argument("--candidate", type=Path, help="candidate OpenClaw config (JSON5)")
    p.add_argument(
        "--candidate-profile",
        choices=PROFILES,
        help="judge every event of the candidate by this OpenClaw generation (e.g. openclaw-2026.9: what an "
        "upgrade of these gateways would change); with no --candidate the current config file is used",
    )
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--events", type=Path, help="JSON Lines file of events ('-' for stdin)")
    source.add_argument(
        "--topic", type=topic_name, help="read this topic, from its beginning to its end offsets unless --from/--to"
    )
    p.add_argument(
        "--bootstrap",
        type=bootstrap,
        help=f"Kafka bootstrap servers HOST:PORT, with --topic (env LOOPWATCH_BOOTSTRAP; default {DEFAULT_BOOTSTRAP})",
    )
    add_range_arguments(p)
    p.add_argument(
        "--sweep",
        metavar="KEY=a..b[:step]",
        action=Once,
        help=f"sensitivity table over one key of the current config; KEY is one of {', '.join(SWEEP_KEYS)}",
    )
    p.add_argument("--format", choices=("table", "json"), default="table", help="stdout format")
    p.add_argument("--html", type=Path, help="also write a self-contained HTML report with charts")
    p.add_argument("--all", action="store_true", help="count every decision, not only published ones")
    p.add_argument(
        "--skip-invalid",
        action="store_true",
        help="report bad lines of --events and go on (a topic's bad records are always reported and skipped)",
    )
    p.add_argument("--limit", type=non_negative_int, help=f"changed runs listed in the table (default {TABLE_LIMIT})")
    p.add_argument(
        "--buckets",
        type=positive_int,
        help=f"time buckets of the HTML timeline, with --html (default {TIMELINE_BUCKETS})",
    )
    add_profile_arguments(p)
    add_security_arguments(p)
    p.set_defaults(func=run)


def _error(message: str, where: str | None = None, hint: str | None = None) -> NoReturn:
    raise CommandError(message, where, hint)


def _load(path: Path | None, label: str, *, quiet: bool = False) -> LoadedConfig:
    config = load_openclaw_config(path) if path is not None else LoadedConfig.default()
    for w in () if quiet else config.warnings:
        print(f"loopwatch whatif: {label} config: {format_warning(w)}", file=sys.stderr)
    return config


def run(args: argparse.Namespace) -> int:
    if args.candidate is None and args.sweep is None and args.candidate_profile is None:
        return _error(
            "nothing to compare",
            "--candidate",
            hint="give --candidate FILE and/or --sweep KEY=a..b, or --candidate-profile NAME",
        )
    if args.events is not None:
        refuse_topic_only(args, (("--bootstrap", "bootstrap"), *RANGE_FLAGS), "whatif")
    refuse_without(args, ("--html", "html"), (("--buckets", "buckets"),), "whatif")
    files = (
        *((flag, getattr(args, flag[2:])) for flag in ("--events", "--config", "--candidate")),
        profiles_input(args.profiles),
        *client_files(args, environ() if args.topic is not None else {}),  # the variables count only with Kafka
    )
    refuse_overwriting_inputs(args.html, "--html", files, "whatif")
    if args.limit is not None and args.format == "json":
        return _error("--limit does nothing with --format json", hint="the JSON lists every changed run; leave it out")
    if args.limit is not None and args.candidate is None and args.candidate_profile is None:
        hint = "a sweep alone lists no changed runs; add one, or leave --limit out"
        return _error("--limit does nothing without --candidate or --candidate-profile", hint=hint)
    if args.topic is not None:
        args.bootstrap = bootstrap_setting(args, "whatif")
    start, end = topic_range(args, "whatif")  # None, None with --events (refused above when given)
    try:
        sweep = parse_sweep(args.sweep) if args.sweep is not None else None
    except SweepError as exc:
        return _error(str(exc), "--sweep", "see 'loopwatch whatif --help'")
    try:
        current = _load(args.config, "current")
        for line in install_profiles(current, args):
            print(f"loopwatch whatif: current: {line}", file=sys.stderr)
        candidate: LoadedConfig | None = None
        if args.candidate is not None or args.candidate_profile is not None:
            quiet = args.candidate is None  # the current file again: its warnings are printed already
            candidate = _load(args.candidate if args.candidate is not None else args.config, "candidate", quiet=quiet)
            candidate.choice = current.choice
            profile = args.candidate_profile
            if profile is not None:
                candidate.choice = current.choice.forced(profile)
                if profile != DEFAULT_PROFILE:  # the 2026.7 reading was printed above
                    for w in candidate.warnings_for(profile):
                        print(f"loopwatch whatif: candidate [{profile}]: {format_warning(w)}", file=sys.stderr)
    except ConfigFileError as exc:
        flag = "--candidate" if args.candidate is not None and exc.path == str(args.candidate) else "--config"
        raise exc.to_command_error(f"the path given to {flag}") from None

    if args.events is not None:
        name = str(args.events)
        with open_events(args.events) as stream:
            events, bad = read_events(lines(stream), input_name(name))
        if bad and not args.skip_invalid:
            what = (
                f"{bad} lines of {input_name(name)} are not events"
                if bad > 1
                else f"a line of {input_name(name)} is not an event"
            )
            _error(what, hint=BAD_LINES_HINT)
    else:
        given = [f"{flag} {value}" for flag, value in (("--from", args.start), ("--to", args.end)) if value is not None]
        name = f"topic {args.topic}" + (f" ({' '.join(given)})" if given else "")
        from streams.kafka.reader import KafkaSource, RecordSource, merged, read_failure

        try:
            security = security_from_args(args)
        except KafkaSecurityError as exc:
            return _error(str(exc), hint="see 'loopwatch whatif --help'")
        topic_source: RecordSource = args.record_source or KafkaSource(args.bootstrap, security)
        topic_source.check()
        try:
            read = asyncio.run(topic_source.read(args.topic, start, end))
        except Exception as exc:  # as replay: a wrong topic name is exit status 2, Kafka's errors 3
            raise read_failure(exc, f"cannot read topic {args.topic}", args.bootstrap, security) from None
        note_range("whatif", args, start, end, read)
        events, bad = read_records(merged(read), args.topic)  # the worker dead-letters the rest: reported, counted

    both_off = candidate is not None and not _rolling_enabled(current) and not _rolling_enabled(candidate)
    if both_off:
        print(
            "loopwatch whatif: note: loop detection is off for every agent of both configs (tools.loopDetection."
            "enabled is not true, as in OpenClaw's defaults), so only the post-compaction guard can differ; to "
            "compare loop detection, give --config (and --candidate) files with tools.loopDetection.enabled: true",
            file=sys.stderr,
        )
    rolling_off = not both_off and not _rolling_enabled(current)  # the note above says it for both configs
    if sweep is not None and sweep.key != "postCompactionGuard.windowSize" and rolling_off:
        print(
            "loopwatch whatif: note: loop detection is off for every agent of the current config (enabled is not "
            f"true), so sweeping {sweep.key} cannot change anything",
            file=sys.stderr,
        )

    report = build_report(
        events,
        current,
        candidate,
        sweep=sweep,
        include_all=args.all,
        source=name,
        invalid=bad,
        buckets=args.buckets or TIMELINE_BUCKETS,
    )
    if args.html is not None:
        try:
            args.html.write_text(render_html(report), encoding="utf-8")
        except OSError as exc:
            return _error("cannot write the HTML report", str(args.html), file_reason(exc, args.html, writing=True))
    if args.format == "json":
        sys.stdout.buffer.write(orjson.dumps(to_json(report), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        sys.stdout.write(render_table(report, limit=TABLE_LIMIT if args.limit is None else args.limit))
    sys.stdout.flush()
    return 0


def _rolling_enabled(config: LoadedConfig) -> bool:
    return any(config.for_agent(agent).enabled for agent in (None, *config.agent_ids))
