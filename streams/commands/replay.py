"""``loopwatch replay``: run the detection core over recorded events, offline, for audits and tests."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from streams.config_file import ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.decode import InvalidEvent, decode_event
from streams.detection import RunState
from streams.runner import step, to_verdict


def register(sub: Any) -> None:
    p = sub.add_parser("replay", help="replay recorded events through the detectors and print decisions")
    p.add_argument("--events", required=True, type=Path, help="JSON Lines file of events ('-' for stdin)")
    p.add_argument("--config", type=Path, help="OpenClaw config file (JSON5) with tools.loopDetection")
    p.add_argument("--all", action="store_true", help="also print decisions that are not published")
    p.add_argument("--skip-invalid", action="store_true", help="report bad lines and go on")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_openclaw_config(args.config) if args.config else LoadedConfig.default()
    except ConfigFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for w in config.warnings:
        print(format_warning(w), file=sys.stderr)
    try:
        source = sys.stdin.buffer if str(args.events) == "-" else args.events.open("rb")
    except OSError as exc:
        print(f"error: cannot read {args.events}: {exc.strerror}", file=sys.stderr)
        return 2
    with source:
        return replay_lines(
            _lines(source),
            config,
            sys.stdout.buffer,
            include_all=args.all,
            skip_invalid=args.skip_invalid,
            name=str(args.events),
        )


def _lines(stream: IO[bytes]) -> Iterator[bytes]:
    for raw in stream:
        yield raw.rstrip(b"\r\n")


def replay_lines(
    lines: Iterator[bytes],
    config: LoadedConfig,
    out: IO[bytes],
    *,
    include_all: bool,
    skip_invalid: bool,
    name: str = "<events>",
) -> int:
    """Apply every line in order; write one JSON object per decision.

    Without ``skip_invalid`` the first bad line stops the replay (later lines are still checked so that every
    bad line is reported) and the exit status is 2: an audit must not silently diverge from the input.
    """
    states: dict[str, RunState] = {}
    bad = 0
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            bad += 1
            print(f"{name}:{index + 1}: invalid event ({exc.reason}): {exc.detail}", file=sys.stderr)
            continue
        if bad and not skip_invalid:
            continue
        result = step(states.get, event, config)
        states[result.scope] = result.state
        for decision in result.decisions:
            if not (decision.published or include_all):
                continue
            verdict = to_verdict(event, decision, config_hash=config.config_hash)
            record = {"index": index, "published": decision.published, **verdict.model_dump(mode="json")}
            out.write(orjson.dumps(record) + b"\n")
    out.flush()
    if bad and not skip_invalid:
        return 2
    return 0
