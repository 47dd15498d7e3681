"""``tools.loopDetection`` under the 2026.9 profile: one switch, a plain per-agent override, with warnings.

Since the numeric knobs were removed (#111382) the block has only ``enabled``; detection runs when it is
exactly ``true`` and the post-compaction guard (window 3) unless it is exactly ``false``. The per-agent block
(``agents.entries.<id>.tools.loopDetection``, or a legacy ``agents.list[]`` entry) overrides ``enabled``; no
merge of nested objects, no clamping. Retired 2026.7 keys are reported (naming 2026.7) and ignored, never rejected.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from streams.detection.config import ConfigWarning, only_read_by, show_value
from streams.detection.gen9_detectors import (
    CRITICAL,
    GLOBAL_BREAKER,
    GUARD_WINDOW,
    HISTORY_SIZE,
    UNKNOWN_TOOL_LIMIT,
    WARNING,
)
from streams.detection.gen9_roster import refused
from streams.detection.types import MISSING, PROFILE_2026_7, PROFILE_2026_9, LoopConfig


class Retired(NamedTuple):
    """A retired key: the built-in value 2026.9 uses instead (None: no single value), where in the block 2026.7
    reads it (None: right there), and what 2026.9 does instead."""

    built_in: int | None
    read_by_2026_7_as: str | None
    instead: str


_BUILT_IN = "the built-in value applies"
_DETECTORS = "every detector runs when enabled is true"
_GUARD = f"the post-compaction guard (window {GUARD_WINDOW}) follows enabled, on unless it is false"
RETIRED_KEYS: Final[dict[str, Retired]] = {
    "historySize": Retired(HISTORY_SIZE, None, _BUILT_IN),
    "warningThreshold": Retired(WARNING, None, _BUILT_IN),
    "unknownToolThreshold": Retired(UNKNOWN_TOOL_LIMIT, None, _BUILT_IN),
    "criticalThreshold": Retired(CRITICAL, None, _BUILT_IN),
    "globalCircuitBreakerThreshold": Retired(GLOBAL_BREAKER, None, _BUILT_IN),
    "detectors": Retired(None, None, _DETECTORS),
    "postCompactionGuard": Retired(None, None, _GUARD),
    "windowSize": Retired(GUARD_WINDOW, "postCompactionGuard.windowSize", _GUARD),
    "genericRepeat": Retired(None, "detectors.genericRepeat", _DETECTORS),
    "knownPollNoProgress": Retired(None, "detectors.knownPollNoProgress", _DETECTORS),
    "pingPong": Retired(None, "detectors.pingPong", _DETECTORS),
}
_RETIRED = "retired in OpenClaw 2026.8, openclaw doctor removes it"
ENTRIES_BLOCK_PATH: Final = "agents.entries.<id>.tools.loopDetection"


def block_warnings(block: dict[object, object], path: str) -> list[ConfigWarning]:
    """What 2026.9 ignores in one block, in key order."""
    out: list[ConfigWarning] = []
    for key, value in block.items():
        key_path = f"{path}.{key}"
        if key == "enabled":
            if not isinstance(value, bool):  # the schema's boolean().optional() takes no null either
                out.append(
                    ConfigWarning(
                        key_path,
                        refused(
                            f"{show_value(value)} is not a boolean (read anyway: detection off, as only true enables "
                            "it, and the post-compaction guard on, as only false disables it)"
                        ),
                        False,
                    )
                )
        elif key in RETIRED_KEYS:  # gateway startup strips these (stripRetiredTuningKnobs in legacy-*.mjs)
            out.append(_retired_key_warning(key_path, RETIRED_KEYS[key]))
        else:  # the block's schema is strict (ToolLoopDetectionSchema in zod-schema.agent-runtime-*.mjs)
            out.append(
                ConfigWarning(key_path, refused("unknown key (not in the 2026.9 tools.loopDetection schema)"), None)
            )
    return out


def _retired_key_warning(path: str, retired: Retired) -> ConfigWarning:
    """Names the generation that reads the key (2026.7) and what 2026.9 does instead."""
    if retired.read_by_2026_7_as is None:
        read = only_read_by(PROFILE_2026_7, f" ({_RETIRED})")
    else:  # misplaced for 2026.7 too
        where = f"{PROFILE_2026_7} reads it only as {retired.read_by_2026_7_as}"
        read = f"{_RETIRED}; {where}, under {PROFILE_2026_9} it is ignored"
    return ConfigWarning(path, f"{read}: {retired.instead}", retired.built_in)


def resolve_loop_config(
    global_block: object,
    agent_block: object,
    *,
    global_path: str = "tools.loopDetection",
    agent_path: str = ENTRIES_BLOCK_PATH,
) -> tuple[LoopConfig, list[ConfigWarning]]:
    """The agent's ``enabled`` (when it is set) wins over the global one; that is all 2026.9 merges. ``None`` (or
    ``MISSING``) is no block; a block that is not an object is refused by the 2026.9 schema (reported) and read as
    absent."""
    warnings: list[ConfigWarning] = []
    enabled: object = None
    for block, path in ((global_block, global_path), (agent_block, agent_path)):
        if block is None or block is MISSING:
            continue
        if not isinstance(block, dict):  # ToolLoopDetectionSchema is an object (null: streams.detection.config)
            warnings.append(ConfigWarning(path, refused(f"{show_value(block)} is not an object"), None))
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
