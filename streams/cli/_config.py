"""The judging config of a command: an OpenClaw config file (or the defaults) plus the profile choice."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streams.config_file import ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.profile_choice import configure_profiles


def load_config(path: Path | str | None, args: argparse.Namespace, command: str) -> LoadedConfig:
    """Load ``path`` and install ``--profiles``/``--default-profile``; every warning goes to stderr as
    ``loopwatch <command>: warning: …``. An unusable file or profile raises the command's one-line error."""
    try:
        config = load_openclaw_config(Path(path)) if path else LoadedConfig.default()
        profile_warnings = configure_profiles(config, args.profiles, args.default_profile)
    except ConfigFileError as exc:
        raise exc.to_command_error() from None
    for warning in config.warnings:
        print(f"loopwatch {command}: {format_warning(warning)}", file=sys.stderr)
    for line in profile_warnings:
        print(f"loopwatch {command}: {line}", file=sys.stderr)
    return config
