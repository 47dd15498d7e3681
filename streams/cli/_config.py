"""The judging config of a command: an OpenClaw config file (or the defaults) plus the profile choice."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streams.config_file import JSON5_HINT, ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.errors import CommandError
from streams.profile_choice import configure_profiles


def load_config(path: Path | str | None, args: argparse.Namespace, command: str) -> LoadedConfig:
    """Load ``path`` and install ``--profiles``/``--default-profile``; every warning goes to stderr as
    ``loopwatch <command>: warning: …``. An unusable file or profile raises the command's one-line error."""
    try:
        config = load_openclaw_config(Path(path)) if path else LoadedConfig.default()
    except ConfigFileError as exc:
        raise exc.to_command_error() from None
    profile_warnings = install_profiles(config, args)
    for warning in config.warnings:
        print(f"loopwatch {command}: {format_warning(warning)}", file=sys.stderr)
    for line in profile_warnings:
        print(f"loopwatch {command}: {line}", file=sys.stderr)
    return config


def install_profiles(config: LoadedConfig, args: argparse.Namespace) -> list[str]:
    """``--profiles``/``--default-profile`` on ``config`` (see :func:`configure_profiles`); a profiles file that
    cannot be used is named as such (its own file and flag, not "the config file"), exit status 2."""
    try:
        return configure_profiles(config, args.profiles, args.default_profile)
    except ConfigFileError as exc:
        reason = f"{exc.reason}; {JSON5_HINT}" if exc.syntax else exc.reason
        raise CommandError("cannot use the profiles file", f"--profiles {exc.where}", reason) from None


def note_detection_off(config: LoadedConfig, command: str, flag: str = "--config") -> None:
    """One stderr line when no agent runs the loop detectors. OpenClaw's default has them off, so a first run
    without ``--config`` publishes next to nothing, and without this line nothing would say why."""
    configs = config.every_config()
    if any(c.enabled for c in configs):
        return
    guard = any(c.guard_enabled for c in configs)
    print(
        f"loopwatch {command}: note: loop detection is off for every agent (tools.loopDetection.enabled is not "
        "true, as in OpenClaw's defaults), so "
        + ("only the post-compaction guard can abort runs" if guard else "no event can get a verdict")
        + f"; to detect loops, give {flag} an OpenClaw config file with tools.loopDetection.enabled: true",
        file=sys.stderr,
    )
