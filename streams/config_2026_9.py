"""An OpenClaw config file read the 2026.9 way: ``tools.loopDetection.enabled`` and per-agent overrides.

2026.9 keeps agents in ``agents.entries`` (keyed by id; when present it wins) and converts a legacy
``agents.list`` to it when loading, if it can; this reports the move, and where the 2026.9 schema refuses the
roster (:mod:`streams.detection.gen9_roster`: the gateway does not start), while still giving its best-effort
reading. Each agent's block is a plain override of ``enabled`` (:mod:`streams.detection.gen9_config`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from streams.detection.config import (
    ConfigWarning,
    config_root,
    loop_block,
    normalize_agent_id,
    only_read_by,
)
from streams.detection.gen9_config import resolve_loop_config
from streams.detection.gen9_roster import (
    doctor_ids,
    empty_roster_warning,
    entries_warnings,
    entry_key_path,
    list_warning,
    refused,
)
from streams.detection.types import MISSING, PROFILE_2026_7, LoopConfig

_INDEX = re.compile(r"\[(\d+)\]")


class Config2026_9:
    """Every agent's resolved 2026.9 config from one parsed OpenClaw config document, plus its warnings."""

    def __init__(self, document: object = MISSING) -> None:
        warnings: list[ConfigWarning] = []
        # The top level, tools and tools.loopDetection are looked up as under 2026.7 (one rule, in
        # streams.detection.config); what that reader ignores, the 2026.9 schema refuses (null included).
        doc = config_root({} if document is MISSING else document, warnings, refused)
        self.global_block: object = loop_block(doc, "", warnings, refused)
        self.default_config, global_warnings = resolve_loop_config(self.global_block, None)
        warnings.extend(global_warnings)
        self._by_id: dict[str, LoopConfig] = {}
        for agent_id, path, block in _agent_blocks(doc.get("agents", MISSING), warnings):
            if agent_id in self._by_id:
                continue
            config, agent_warnings = resolve_loop_config(self.global_block, block, agent_path=path)
            self._by_id[agent_id] = config
            warnings.extend(agent_warnings)
        unique: dict[tuple[str, str], ConfigWarning] = {}
        for warning in warnings:
            unique.setdefault((warning.path, warning.message), warning)
        self.warnings: tuple[ConfigWarning, ...] = in_document_order(unique.values(), doc)

    @property
    def agent_ids(self) -> tuple[str, ...]:
        return tuple(self._by_id)

    def for_agent(self, agent_id: str | None = None) -> LoopConfig:
        return self._by_id.get(normalize_agent_id(agent_id), self.default_config)

    def resolved(self) -> dict[str, dict[str, object]]:
        def view(cfg: LoopConfig) -> dict[str, object]:
            return {
                "enabled": cfg.enabled,
                "postCompactionGuard": {"enabled": cfg.guard_enabled, "windowSize": cfg.guard_window_size},
            }

        return {"default": view(self.default_config), "agents": {a: view(c) for a, c in self._by_id.items()}}


def in_document_order(warnings: Iterable[ConfigWarning], document: object) -> tuple[ConfigWarning, ...]:
    """``warnings`` sorted by where their paths are in ``document`` (stable: warnings at one place keep their
    order). Both readers collect structural warnings before resolving blocks, so without this an entry's id
    warning came before an earlier entry's block warning (list[1], list[3], list[2])."""
    return tuple(sorted(warnings, key=lambda warning: document_position(document, warning.path)))


def document_position(document: object, path: str) -> tuple[int, ...]:
    """The key positions (in each object's key order) and list indexes on the way to ``path`` in ``document``.
    A part the document does not have (a clamp reported at a key the block lacks) sorts after what is there.
    Keys may contain dots (``agents.entries.<id>``), so the longest key that starts the rest of the path wins."""
    position: list[int] = []
    node = document
    rest = path
    while rest:
        if isinstance(node, dict):
            matches = [
                (len(shown), at, key)
                for at, key in enumerate(node)
                if isinstance(key, str)
                for shown in (key, json.dumps(key))  # a blank key is shown quoted
                if rest == shown or rest.startswith((f"{shown}.", f"{shown}["))
            ]
            if not matches:
                position.append(len(node))
                break
            length, at, key = max(matches)
            position.append(at)
            node, rest = node[key], rest[length:]
        elif isinstance(node, list):
            match = _INDEX.match(rest)
            if match is None or int(match.group(1)) >= len(node):
                position.append(len(node))
                break
            position.append(int(match.group(1)))
            node, rest = node[int(match.group(1))], rest[match.end() :]
        else:
            break
        rest = rest.removeprefix(".")
    return tuple(position)


def _agent_blocks(agents: object, warnings: list[ConfigWarning]) -> list[tuple[str, str, object]]:
    """(normalised id, path, raw loopDetection block) of the first entry of each agent id, in file order. The
    per-agent lookup (agent-scope-config-*.mjs in 2026.9.6) reads ``agents.entries`` when it is set, else
    ``agents.list`` (which the load converts to entries when it can, :mod:`streams.detection.gen9_roster`); in
    either the first entry whose normalised id matches wins. Where the 2026.9 schema refuses the roster (the
    gateway does not start) this says so and keeps the best-effort reading (a blank key or id is ``main``). A
    section set to null is refused like any other non-object: the schema's optional keys may be left out, not null.
    """
    if agents is MISSING:
        return []
    if not isinstance(agents, dict):
        warnings.append(ConfigWarning("agents", refused("not an object"), None))
        return []
    out: list[tuple[str, str, object]] = []
    seen: set[str] = set()
    ownership = agents.get("ownership")
    entries = agents.get("entries", MISSING)
    if entries is not MISSING:
        if not isinstance(entries, dict):
            warnings.append(ConfigWarning("agents.entries", refused("not an object"), None))
            return []
        if agents.get("list") is not None:
            warnings.append(
                ConfigWarning("agents.list", only_read_by(PROFILE_2026_7, " when agents.entries is set"), None)
            )
        if not entries and ownership == "explicit":
            warnings.append(empty_roster_warning("agents.entries", ownership))
        warnings.extend(entries_warnings(entries))
        for key, entry in entries.items():
            entry_path = entry_key_path(key)
            agent_id = normalize_agent_id(str(key))
            if not isinstance(entry, dict) or agent_id in seen:
                continue  # reported by entries_warnings; the first entry of an id is the one read
            seen.add(agent_id)
            block = loop_block(entry, entry_path, warnings, refused)
            out.append((agent_id, f"{entry_path}.tools.loopDetection", block))
        return out
    agent_list = agents.get("list", MISSING)
    if agent_list is MISSING:
        return out
    if not isinstance(agent_list, list):
        warnings.append(ConfigWarning("agents.list", refused("not an array"), None))
        return out
    if not agent_list and ownership == "explicit":
        warnings.append(empty_roster_warning("agents.list", ownership))
    listed = list_warning(agent_list)
    if listed is not None:
        warnings.append(listed)
    # Converted when loaded, the ids stay as they are; not converted, a gateway that starts has rewritten the list
    # as doctor does (a repeated id is <id>-2, a missing or blank one 'agent'). doctor_ids gives both.
    for index, (entry, doctor_id) in enumerate(zip(agent_list, doctor_ids(agent_list), strict=True)):
        if isinstance(entry, dict) and doctor_id is not None:
            path = f"agents.list[{index}]"
            out.append((doctor_id, f"{path}.tools.loopDetection", loop_block(entry, path, warnings, refused)))
    return out
