"""An OpenClaw config file read the 2026.9 way: ``tools.loopDetection.enabled`` and per-agent overrides.

2026.9 keeps agents in ``agents.entries`` (keyed by id; when present it wins) and still reads a legacy
``agents.list``, whose move it reports. Each agent's block is a plain override of ``enabled``
(:mod:`streams.detection.gen9_config`). Like the 2026.7 reader it never rejects a file for its values.
"""

from __future__ import annotations

from typing import Any

from streams.detection.canonical import js_trim
from streams.detection.config import ConfigWarning, normalize_agent_id
from streams.detection.gen9_config import resolve_loop_config
from streams.detection.types import LoopConfig


class Config2026_9:
    """Every agent's resolved 2026.9 config from one parsed OpenClaw config document, plus its warnings."""

    def __init__(self, document: object = None) -> None:
        warnings: list[ConfigWarning] = []
        doc: dict[Any, Any] = document if isinstance(document, dict) else {}
        tools = doc.get("tools")
        self.global_block: object = tools.get("loopDetection") if isinstance(tools, dict) else None
        self.default_config, global_warnings = resolve_loop_config(self.global_block, None)
        warnings.extend(global_warnings)
        self._by_id: dict[str, LoopConfig] = {}
        for agent_id, path, block in _agent_blocks(doc.get("agents"), warnings):
            if agent_id in self._by_id:
                continue
            config, agent_warnings = resolve_loop_config(self.global_block, block, agent_path=path)
            self._by_id[agent_id] = config
            warnings.extend(agent_warnings)
        unique: dict[tuple[str, str], ConfigWarning] = {}
        for warning in warnings:
            unique.setdefault((warning.path, warning.message), warning)
        self.warnings: tuple[ConfigWarning, ...] = tuple(unique.values())

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


def _agent_blocks(agents: object, warnings: list[ConfigWarning]) -> list[tuple[str, str, object]]:
    """(normalised id, path, raw loopDetection block) of each agent entry, in file order."""
    if not isinstance(agents, dict):
        return []
    out: list[tuple[str, str, object]] = []
    entries = agents.get("entries")
    if entries is not None:
        if not isinstance(entries, dict):
            warnings.append(ConfigWarning("agents.entries", "not an object; ignored", None))
            return []
        if agents.get("list") is not None:
            warnings.append(ConfigWarning("agents.list", "ignored because agents.entries is set", None))
        for key, entry in entries.items():
            if isinstance(entry, dict) and isinstance(key, str) and js_trim(key):
                tools = entry.get("tools")
                block = tools.get("loopDetection") if isinstance(tools, dict) else None
                out.append((normalize_agent_id(key), f"agents.entries.{key}.tools.loopDetection", block))
        return out
    agent_list = agents.get("list")
    if isinstance(agent_list, list):
        if agent_list:
            warnings.append(ConfigWarning("agents.list", "moved to keyed agents.entries in 2026.8+; still read", None))
        for index, entry in enumerate(agent_list):
            if isinstance(entry, dict) and isinstance(entry.get("id"), str) and js_trim(entry["id"]):
                tools = entry.get("tools")
                block = tools.get("loopDetection") if isinstance(tools, dict) else None
                out.append((normalize_agent_id(entry["id"]), f"agents.list[{index}].tools.loopDetection", block))
    return out
