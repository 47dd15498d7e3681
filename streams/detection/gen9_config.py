"""``tools.loopDetection`` under the 2026.9 profile: one switch, a plain per-agent override, with warnings.

Since the numeric knobs were removed (#111382) the block has only ``enabled``; detection runs when it is
exactly ``true`` and the post-compaction guard (window 3) unless it is exactly ``false``. The per-agent block
(``agents.entries.<id>.tools.loopDetection``, or a legacy ``agents.list[]`` entry) overrides ``enabled``; no
merge of nested objects, no clamping. Retired 2026.7 keys are reported and ignored, never rejected.
"""

from __future__ import annotations

from typing import Final

from streams.detection.config import ConfigWarning, show_value
from streams.detection.gen9_detectors import (
    CRITICAL,
    GLOBAL_BREAKER,
    GUARD_WINDOW,
    HISTORY_SIZE,
    UNKNOWN_TOOL_LIMIT,
    WARNING,
)
from streams.detection.types import MISSING, PROFILE_2026_9, LoopConfig

# Retired keys and the built-in value that applies instead (None: no single value, e.g. a nested object).
RETIRED_KEYS: Final[dict[str, int | None]] = {
    "historySize": HISTORY_SIZE,
    "warningThreshold": WARNING,
    "unknownToolThreshold": UNKNOWN_TOOL_LIMIT,
    "criticalThreshold": CRITICAL,
    "globalCircuitBreakerThreshold": GLOBAL_BREAKER,
    "detectors": None,
    "postCompactionGuard": None,
    "windowSize": GUARD_WINDOW,
    "genericRepeat": None,
    "knownPollNoProgress": None,
    "pingPong": None,
}
ENTRIES_BLOCK_PATH: Final = "agents.entries.<id>.tools.loopDetection"


def block_warnings(block: dict[object, object], path: str) -> list[ConfigWarning]:
    """What 2026.9 ignores in one block, in key order."""
    out: list[ConfigWarning] = []
    for key, value in block.items():
        key_path = f"{path}.{key}"
        if key == "enabled":
            if not isinstance(value, bool) and value is not None:
                out.append(
                    ConfigWarning(
                        key_path,
                        f"{show_value(value)} is not a boolean; detection stays off (only true enables it) and the "
                        "post-compaction guard stays on (only false disables it)",
                        False,
                    )
                )
        elif key in RETIRED_KEYS:
            out.append(
                ConfigWarning(
                    key_path, "retired since OpenClaw 2026.8 (openclaw doctor removes it); built-in value applies", None
                )
            )
        else:
            out.append(
                ConfigWarning(key_path, "unknown key (not in the 2026.9 tools.loopDetection schema); ignored", None)
            )
    return out


def resolve_loop_config(
    global_block: object,
    agent_block: object,
    *,
    global_path: str = "tools.loopDetection",
    agent_path: str = ENTRIES_BLOCK_PATH,
) -> tuple[LoopConfig, list[ConfigWarning]]:
    """The agent's ``enabled`` (when it is set) wins over the global one; that is all 2026.9 merges."""
    warnings: list[ConfigWarning] = []
    enabled: object = None
    for block, path in ((global_block, global_path), (agent_block, agent_path)):
        if block is None or block is MISSING:
            continue
        if not isinstance(block, dict):
            warnings.append(ConfigWarning(path, f"{show_value(block)} is not an object; treated as absent", None))
            continue
        warnings.extend(block_warnings(block, path))
        value = block.get("enabled")
        if value is not None:
            enabled = value
    config = LoopConfig(
        enabled=enabled is True,
        guard_enabled=enabled is not False,
        guard_window_size=GUARD_WINDOW,
        profile=PROFILE_2026_9,
    )
    return config, warnings
