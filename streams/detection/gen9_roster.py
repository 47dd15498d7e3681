"""The agent roster as OpenClaw 2026.9 loads it: where the load converts ``agents.list``, and where its schema
refuses the config (then the gateway does not start). Pure: rules only, the 2026.9 reader applies them.

Read in ``openclaw@2026.9.6``: the load-time conversion (``parseLegacyAgentRoster`` in legacy.roster-*.mjs, called
by the config load in io.factory-*.mjs / io.snapshot-*.mjs), the schema (``AgentsSchema`` and the agent entry
schema in zod-schema-*.mjs, zod-schema.agent-runtime-*.mjs), and what ``openclaw doctor --fix`` makes of a list
(``projectLegacyAgentRosterEntries``, used by the agents-entries migration in legacy-*.mjs). Gateway startup
applies those doctor migrations itself to a single-file config and starts when the result validates
(automatic-startup-config-repair-*.mjs, docs/gateway/configuration.md); a config using ``$include`` (or
Nix-managed, or written by a newer OpenClaw) is not rewritten, so there the refusal stands.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Final

from streams.detection.canonical import js_trim
from streams.detection.config import ConfigWarning, normalize_agent_id, show_value

#: The schema's pattern for an ``agents.entries`` key (AgentsSchema in zod-schema-*.mjs).
ENTRY_KEY: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,63}")
KEY_INVALID: Final = "not a valid agent id as a key (1 to 64 of a-z, 0-9, _ and -, not starting with -)"
#: What every refusal says happens.
REFUSED: Final = "OpenClaw 2026.9 refuses the config (schema), so the gateway does not start"
#: The id doctor gives an entry without a usable id (projectLegacyAgentRosterEntries).
DOCTOR_FALLBACK_ID: Final = "agent"
CONVERTED: Final = (
    "moved to keyed agents.entries in 2026.8+; OpenClaw 2026.9 converts it to agents.entries (same ids) when it "
    "loads the config; still read"
)
NOT_CONVERTED: Final = (
    "OpenClaw 2026.9 converts agents.list to agents.entries when loading only if every entry is an object whose id "
    "is a string in canonical form and unique; this list stays, and the 2026.9 schema refuses a config with "
    "agents.list. Gateway startup rewrites a single-file config as `openclaw doctor --fix` does (entries that are "
    "not objects dropped, a missing or blank id becomes 'agent', ids trimmed and normalised, a repeated id gets -2, "
    "-3, ...) and then starts; a config with $include, Nix-managed or written by a newer OpenClaw is not rewritten "
    "and the gateway does not start"
)


def refused(reason: str) -> str:
    """The one wording of a refusal: ``<reason>; OpenClaw 2026.9 refuses the config ...``."""
    return f"{reason}; {REFUSED}"


def list_problem(agent_list: list[object]) -> tuple[int, str, str] | None:
    """Why the load-time conversion leaves ``agent_list`` as it is: (index of the first entry it stops at, the path
    to report, the reason), or None when it converts the list (``parseLegacyAgentRoster``: every entry an object,
    every id a non-empty string, already trimmed and canonical, no id twice)."""
    first_index: dict[str, int] = {}
    for index, entry in enumerate(agent_list):
        path = f"agents.list[{index}]"
        if not isinstance(entry, dict):
            return index, path, f"{show_value(entry)} is not an object"
        raw_id = entry.get("id")
        if not isinstance(raw_id, str):
            if "id" not in entry:
                return index, path, "no id"
            return index, f"{path}.id", f"id {show_value(raw_id)} is not a string"
        if not js_trim(raw_id):
            return index, f"{path}.id", f"blank id {show_value(raw_id)}"
        if js_trim(raw_id) != raw_id:
            return index, f"{path}.id", f"id {show_value(raw_id)} has whitespace around it"
        if normalize_agent_id(raw_id) != raw_id:
            canonical = normalize_agent_id(raw_id)
            return index, f"{path}.id", f"id {show_value(raw_id)} is not canonical (would be {canonical})"
        first = first_index.setdefault(raw_id, index)
        if first != index:
            return index, f"{path}.id", f"id {show_value(raw_id)} repeats agents.list[{first}]"
    return None


def doctor_ids(agent_list: list[object]) -> list[str | None]:
    """The ``agents.entries`` key ``openclaw doctor --fix`` (and gateway startup) gives each list entry, None for one
    it drops (not an object): the trimmed id, or 'agent' when it is missing, not a string or blank, normalised;
    an id already given gets ``-2``, ``-3``, ... (``projectLegacyAgentRosterEntries``)."""
    given: set[str] = set()
    out: list[str | None] = []
    for entry in agent_list:
        if not isinstance(entry, dict):
            out.append(None)
            continue
        raw_id = entry.get("id")
        trimmed = js_trim(raw_id) if isinstance(raw_id, str) else ""
        requested = normalize_agent_id(trimmed or DOCTOR_FALLBACK_ID)
        agent_id, suffix = requested, 2
        while agent_id in given:
            agent_id, suffix = f"{requested}-{suffix}", suffix + 1
        given.add(agent_id)
        out.append(agent_id)
    return out


def list_warning(agent_list: list[object]) -> ConfigWarning | None:
    """The one warning about a non-empty ``agents.list``: converted when loaded (at ``agents.list``), or, on the
    first entry the conversion stops at, why not, the id doctor gives that entry, and what follows. No value used:
    loopwatch's best-effort reading of such a list is not that id (the message says what OpenClaw does)."""
    problem = list_problem(agent_list)
    if problem is None:
        return ConfigWarning("agents.list", CONVERTED, None) if agent_list else None
    index, path, reason = problem
    doctor_id = doctor_ids(agent_list)[index]
    becomes = f"doctor makes it agents.entries.{doctor_id}" if doctor_id else "doctor drops it"
    return ConfigWarning(path, f"{reason} ({becomes}): {NOT_CONVERTED}", None)


def entry_key_path(key: object) -> str:
    """``agents.entries.<key>``, a blank key shown quoted."""
    return f"agents.entries.{json.dumps(key) if not js_trim(str(key)) else key}"


def entries_warnings(entries: Mapping[object, object]) -> list[ConfigWarning]:
    """Every ``agents.entries`` key or value the 2026.9 schema refuses, one warning each, in key order: a key that
    is not a valid agent id (blank ones included), a key resolving to the id of an earlier key, a value that is
    not an object."""
    out: list[ConfigWarning] = []
    first_keys: dict[str, str] = {}
    for key, entry in entries.items():
        path = entry_key_path(key)
        text = str(key)
        agent_id = normalize_agent_id(text)
        first = first_keys.setdefault(agent_id, path)
        if not ENTRY_KEY.fullmatch(text):
            out.append(ConfigWarning(path, refused(KEY_INVALID), None))
        elif first != path:
            out.append(ConfigWarning(path, refused(f"resolves to agent {agent_id!r} like {first}"), None))
        if not isinstance(entry, dict):
            out.append(ConfigWarning(path, refused(f"{show_value(entry)} is not an object"), None))
    return out


def empty_roster_warning(path: str, ownership: object) -> ConfigWarning:
    """An empty roster (``agents.entries: {}``, or ``agents.list: []``, which loads as that) with
    ``agents.ownership: "explicit"``: the schema needs one agent (without explicit ownership the load adds main)."""
    return ConfigWarning(path, refused(f"empty while agents.ownership is {show_value(ownership)}"), None)
