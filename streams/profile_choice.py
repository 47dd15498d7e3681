"""Loading loopwatch's profiles file: which semantics profile judges an event (:class:`ProfileChoice`).

Order: an ``agents`` entry for ``<gateway>/<agent>``, then for ``<agent>``, then a ``gateways`` entry, then
the event's ``openclaw_version`` through the version table (:data:`streams.detection.profiles.VERSION_TABLE`,
or the file's own ``versions``), then ``default``. The file (JSON5)::

    { default: "openclaw-2026.7",
      versions: [{ from: "2026.8.0", profile: "openclaw-2026.9" }],   // optional: replaces the built-in table
      gateways: { "gw-eu-1": "openclaw-2026.9" },
      agents: { "gw-eu-1/ops": "openclaw-2026.7", "research": "openclaw-2026.9" } }
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

from streams.config_file import ConfigFileError, LoadedConfig, format_warning, parse_json5, unreadable
from streams.detection.config import normalize_agent_id, show_value
from streams.detection.profiles import DEFAULT_PROFILE, PROFILES, VERSION_TABLE, ProfileChoice, Version, parse_version

_KEYS = frozenset({"default", "versions", "gateways", "agents"})
_ROW = f'each row is {{from: "2026.8.0", profile: "{PROFILES[-1]}"}}'


def check_profile(name: object, where: str, path: str) -> str:
    """``name`` when it is a profile; a value that is not even a string is shown as JSON (``null``, not ``None``)."""
    known = f"(known: {', '.join(PROFILES)})"
    if not isinstance(name, str):
        raise ConfigFileError(path, f"{where}: {show_value(name)} is not a profile name {known}")
    if name not in PROFILES:
        raise ConfigFileError(path, f"{where}: unknown profile {name!r} {known}")
    return name


def load_profile_choice(path: str | os.PathLike[str]) -> ProfileChoice:
    """Read a profiles file; any mistake is a :class:`ConfigFileError` naming the file and the entry."""
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8-sig") as handle:
            text = handle.read()
    except OSError as exc:
        raise unreadable(name, exc) from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(name, f"cannot read: {exc}") from None
    doc = parse_json5(text, name)
    if not isinstance(doc, dict):
        raise ConfigFileError(name, "the profiles file must be an object")
    unknown = sorted(str(k) for k in doc if k not in _KEYS)
    if unknown:
        raise ConfigFileError(name, f"unknown key {unknown[0]!r} (known: default, versions, gateways, agents)")
    default = check_profile(doc.get("default", DEFAULT_PROFILE), "default", name)
    table = VERSION_TABLE
    if "versions" in doc:
        rows = doc["versions"]
        if not isinstance(rows, list) or not rows:
            raise ConfigFileError(name, "versions must be a non-empty list of {from, profile}")
        parsed: list[tuple[Version, str]] = []
        for at, row in enumerate(rows):
            if not isinstance(row, dict):
                raise ConfigFileError(name, f"versions[{at}] is not an object; {_ROW}")
            for key in ("from", "profile"):
                if key not in row:  # was "unknown profile None", which hid that the key is missing
                    raise ConfigFileError(name, f"versions[{at}] lacks {key}; {_ROW}")
            first = parse_version(row["from"]) if isinstance(row["from"], str) else None
            if first is None:
                raise ConfigFileError(name, f"versions[{at}].from must be a version like 2026.8.0")
            parsed.append((first, check_profile(row["profile"], f"versions[{at}].profile", name)))
        table = tuple(sorted(parsed))
    maps: dict[str, dict[str, str]] = {}
    for key in ("gateways", "agents"):
        raw = doc.get(key, {})
        if not isinstance(raw, dict):
            raise ConfigFileError(name, f"{key} must be an object of id -> profile")
        maps[key] = {}
        for ident, profile in raw.items():
            checked = check_profile(profile, f"{key}.{ident}", name)
            if key == "agents":
                gateway, slash, agent = str(ident).rpartition("/")
                ident = f"{gateway}/{normalize_agent_id(agent)}" if slash else normalize_agent_id(agent)
            maps[key][str(ident)] = checked
    return ProfileChoice(default, maps["gateways"], maps["agents"], table)


@dataclasses.dataclass(frozen=True, slots=True)
class ProfileFlag:
    """A flag of the profile choice (worker and replay), as its ``--help`` and docs/operating.md's table show it."""

    flag: str
    env: str
    kind: str
    default: str
    help: str


PROFILE_FLAGS: tuple[ProfileFlag, ...] = (
    ProfileFlag(
        "--profiles",
        "LOOPWATCH_PROFILES",
        "path",
        "none",
        "profiles file (JSON5): per-gateway/agent semantics profile overrides, version table",
    ),
    ProfileFlag(
        "--default-profile",
        "LOOPWATCH_DEFAULT_PROFILE",
        "/".join(PROFILES),
        DEFAULT_PROFILE,
        "profile for events without an OpenClaw version",
    ),
)


def add_profile_arguments(parser: argparse.ArgumentParser) -> None:
    files, default = PROFILE_FLAGS
    parser.add_argument(
        files.flag, type=Path, default=os.environ.get(files.env) or None, help=f"{files.help} (env {files.env})"
    )
    parser.add_argument(
        default.flag,
        choices=PROFILES,
        default=os.environ.get(default.env) or None,
        help=f"{default.help} (default {default.default}; env {default.env})",
    )


def configure_profiles(config: LoadedConfig, profiles: Path | None, default_profile: str | None) -> list[str]:
    """Install the profile choice on ``config``; returns the config warning lines of every profile it names
    beyond 2026.7 (whose warnings the commands already print). Raises :class:`ConfigFileError`."""
    choice = load_profile_choice(profiles) if profiles is not None else ProfileChoice()
    if default_profile is not None:
        choice = dataclasses.replace(choice, default=check_profile(default_profile, "--default-profile", "-"))
    config.choice = choice
    named = {choice.default, *choice.gateways.values(), *choice.agents.values(), *(p for _, p in choice.table)}
    if profiles is None and default_profile is None:
        named = {DEFAULT_PROFILE}
    return [
        f"[{profile}] {format_warning(w)}"
        for profile in PROFILES
        if profile in named and profile != DEFAULT_PROFILE
        for w in config.warnings_for(profile)
    ]
