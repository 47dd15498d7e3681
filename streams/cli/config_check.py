"""``loopwatch config check FILE``: show what an OpenClaw config means to loop detection, per agent.

OpenClaw silently falls back and clamps; this command makes every such adjustment visible and lets CI fail on
it. Exit status: 0 nothing adjusted, 1 something adjusted or ignored (warnings on stderr), 2 unreadable or
unparseable file.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from streams.config_2026_9 import Config2026_9
from streams.config_file import (
    ConfigFileError,
    LoadedConfig,
    format_value,
    format_warning,
    json_numbers,
    load_openclaw_config,
)
from streams.detection.profiles import DEFAULT_PROFILE, PROFILES
from streams.detection.types import PROFILE_2026_9

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("enabled", "enabled"),
    ("history", "historySize"),
    ("warn", "warningThreshold"),
    ("crit", "criticalThreshold"),
    ("unknown", "unknownToolThreshold"),
    ("global", "globalCircuitBreakerThreshold"),
    ("generic", "detectors.genericRepeat"),
    ("poll", "detectors.knownPollNoProgress"),
    ("pingpong", "detectors.pingPong"),
    ("guard", "postCompactionGuard.enabled"),
    ("window", "postCompactionGuard.windowSize"),
)


def register(subparsers: Any) -> None:
    """Add ``config`` with its ``check`` sub-command."""
    config = subparsers.add_parser(
        "config",
        help="inspect OpenClaw loop-detection config",
        description="Inspect an OpenClaw config file the way loop detection reads it.",
    )
    config_sub = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    check = config_sub.add_parser(
        "check",
        help="resolve tools.loopDetection per agent and report every adjusted value",
        description="Show what an OpenClaw config file means to loop detection, per agent. OpenClaw silently "
        "falls back and clamps; this prints a warning for every value it would adjust or ignore, so CI can fail "
        "on it. Exit status: 0 nothing adjusted, 1 something adjusted or ignored, 2 unreadable or unparseable.",
    )
    check.add_argument("file", metavar="FILE", help="OpenClaw config file (JSON5)")
    check.add_argument("--json", action="store_true", help="print the resolved configs as JSON")
    check.add_argument(
        "--profile",
        choices=PROFILES,
        default=DEFAULT_PROFILE,
        help=f"read the file as this OpenClaw generation does (default {DEFAULT_PROFILE})",
    )
    check.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        loaded = load_openclaw_config(args.file)
    except ConfigFileError as exc:
        raise exc.to_command_error() from None
    if args.profile == PROFILE_2026_9:
        return _run_2026_9(loaded.gen9, loaded.path, as_json=args.json)
    if args.json:
        print(json.dumps(json_numbers(_as_json(loaded)), indent=2, sort_keys=False))
    else:
        print(_table(loaded))
    for warning in loaded.warnings:
        print(format_warning(warning), file=sys.stderr)
    return 1 if loaded.warnings else 0


def _run_2026_9(config: Config2026_9, path: str | None, *, as_json: bool) -> int:
    """The 2026.9 reading: one switch per agent (thresholds are built in), and that generation's warnings."""
    resolved = config.resolved()
    if as_json:
        document = {
            "file": path,
            "profile": PROFILE_2026_9,
            **resolved,
            "warnings": [{"path": w.path, "message": w.message, "value_used": w.value_used} for w in config.warnings],
        }
        print(json.dumps(json_numbers(document), indent=2))
    else:
        rows = [["agent", "enabled", "guard", "window"]]
        for label, view in [("(default)", resolved["default"]), *resolved["agents"].items()]:
            assert isinstance(view, dict) and isinstance(view["postCompactionGuard"], dict)
            guard = view["postCompactionGuard"]
            rows.append(
                [label, format_value(view["enabled"]), *(format_value(guard[k]) for k in ("enabled", "windowSize"))]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        print("\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows))
        print("thresholds (built in): warning 10, critical 20, global 30, unknown tool 10, history 30")
    for warning in config.warnings:
        print(format_warning(warning), file=sys.stderr)
    return 1 if config.warnings else 0


def _as_json(loaded: LoadedConfig) -> dict[str, object]:
    resolved = loaded.resolved()
    return {
        "file": loaded.path,
        "config_hash": loaded.config_hash,
        "default": resolved["default"],
        "agents": resolved["agents"],
        "warnings": [{"path": w.path, "message": w.message, "value_used": w.value_used} for w in loaded.warnings],
    }


def _cell(config: dict[str, object], dotted: str) -> str:
    value: object = config
    for part in dotted.split("."):
        assert isinstance(value, dict)
        value = value[part]
    return format_value(value)


def _table(loaded: LoadedConfig) -> str:
    rows = [["agent", *(name for name, _ in _COLUMNS)]]
    resolved = loaded.resolved()
    entries: list[tuple[str, dict[str, object]]] = [("(default)", resolved["default"])]
    agents = resolved["agents"]
    entries.extend((agent_id, config) for agent_id, config in agents.items() if isinstance(config, dict))
    for label, config in entries:
        rows.append([label, *(_cell(config, dotted) for _, dotted in _COLUMNS)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.append(f"config_hash {loaded.config_hash}")
    return "\n".join(lines)
