"""The judging config of a command: an OpenClaw config file (or the defaults) plus the profile choice."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from streams.config_file import JSON5_HINT, ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.detection.profiles import PROFILES
from streams.errors import CommandError
from streams.profile_choice import configure_profiles


def load_config(path: Path | str | None, args: argparse.Namespace, command: str) -> LoadedConfig:
    """Load ``path`` and install ``--profiles``/``--default-profile``; every warning goes to stderr as
    ``loopwatch <command>: warning: …``. An unusable file or profile raises the command's one-line error."""
    try:
        config = load_openclaw_config(Path(path)) if path else LoadedConfig.default()
    except ConfigFileError as exc:
        # Only the worker takes the path from LOOPWATCH_CONFIG: without the flag, that is where it came from.
        given = getattr(args, "config", None) is not None
        raise exc.to_command_error("the path given to --config" if given else "the path in LOOPWATCH_CONFIG") from None
    profile_warnings = install_profiles(config, args)
    for warning in config.warnings:
        print(f"loopwatch {command}: {format_warning(warning)}", file=sys.stderr)
    for line in profile_warnings:
        print(f"loopwatch {command}: {line}", file=sys.stderr)
    return config


def install_profiles(config: LoadedConfig, args: argparse.Namespace) -> list[str]:
    """``--profiles``/``--default-profile`` on ``config`` (see :func:`configure_profiles`); a profiles file that
    cannot be used is named as such (its own file and flag, not "the config file"), exit status 2. A value from
    LOOPWATCH_PROFILES / LOOPWATCH_DEFAULT_PROFILE is named by its variable: it is not on the command line."""
    default = args.default_profile
    if default is not None and default not in PROFILES:  # argparse checks the flag, not its variable
        variable = os.environ.get("LOOPWATCH_DEFAULT_PROFILE") == default
        what = f"{'LOOPWATCH_DEFAULT_PROFILE=' if variable else ''}{default!r} is not a known profile"
        raise CommandError(what, "--default-profile", f"use one of {', '.join(PROFILES)}")
    try:
        return configure_profiles(config, args.profiles, default)
    except ConfigFileError as exc:
        reason = f"{exc.reason}; {JSON5_HINT}" if exc.syntax else exc.reason
        if exc.fix is not None:
            reason += f"; {exc.fix}"
        elif exc.reason.startswith("cannot read"):  # a wrong path, most likely; the other reasons say what to fix
            reason += f"; check the path given to {_profiles_flag(args.profiles).rstrip(' =')}"
        raise CommandError(
            "cannot use the profiles file", f"{_profiles_flag(args.profiles)}{exc.where}", reason
        ) from None


def _profiles_flag(profiles: Path | None) -> str:
    """``--profiles `` or, when the path is LOOPWATCH_PROFILES's (the flag's default), ``LOOPWATCH_PROFILES=``."""
    return "LOOPWATCH_PROFILES=" if _from_variable(profiles) else "--profiles "


def profiles_input(profiles: Path | None) -> tuple[str, Path | None]:
    """(where, path) of the profiles file, as :func:`streams.cli._args.refuse_overwriting_inputs` names inputs."""
    return ("--profiles via LOOPWATCH_PROFILES" if _from_variable(profiles) else "--profiles", profiles)


def _from_variable(profiles: Path | None) -> bool:
    variable = os.environ.get("LOOPWATCH_PROFILES")
    return variable is not None and variable != "" and profiles == Path(variable)


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
