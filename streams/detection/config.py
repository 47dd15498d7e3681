"""Resolution of ``tools.loopDetection`` (global + per-agent) into a :class:`LoopConfig`, with warnings.

Pure: no I/O, no clock. It reproduces OpenClaw's merge and runtime resolution exactly,
so a config means the same thing to loopwatch as to the gateway, and it explains every value that the runtime
adjusts or ignores, because OpenClaw does that silently while loopwatch never rejects a config.

Warnings come in two kinds, chosen so that resolving many agents of one file and de-duplicating the union
gives exactly one warning per adjustment:

* block warnings depend on one block alone (unknown keys, wrong types, invalid numbers, ordering rules
  within the block), so every resolution that sees the block reports them identically;
* clamp warnings depend on the merged values; they are reported at the agent's path whenever the agent block
  supplied one of the values involved, otherwise at the global path (and then equal the global resolution's).
  A clamp fully explained by one block's own ordering violation is reported once, as that block warning.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from streams.detection.canonical import js_number, js_trim
from streams.detection.types import MISSING, PROFILE_2026_7, PROFILE_2026_9, LoopConfig

DEFAULT_AGENT_ID: Final = "main"
GLOBAL_BLOCK_PATH: Final = "tools.loopDetection"
AGENT_BLOCK_PATH: Final = "agents.list[].tools.loopDetection"

WARNING_BEFORE_CRITICAL: Final = "tools.loopDetection.warningThreshold must be lower than criticalThreshold."
CRITICAL_BEFORE_GLOBAL: Final = (
    "tools.loopDetection.criticalThreshold must be lower than globalCircuitBreakerThreshold."
)

# OpenClaw's defaults and ordering messages, written once: schemas/config.py builds its models from them.
NUMERIC_DEFAULTS: Final[dict[str, int]] = {
    "historySize": 30,
    "warningThreshold": 10,
    "unknownToolThreshold": 10,
    "criticalThreshold": 20,
    "globalCircuitBreakerThreshold": 30,
}
_DETECTOR_KEYS: Final = ("genericRepeat", "knownPollNoProgress", "pingPong")
GUARD_DEFAULT_WINDOW: Final = 3
_TOP_KEYS: Final = frozenset({"enabled", "detectors", "postCompactionGuard", *NUMERIC_DEFAULTS})


@dataclass(frozen=True, slots=True)
class ConfigWarning:
    """One adjusted or ignored config value: where it is, what happened, and what the runtime uses instead.

    ``value_used`` is ``None`` when the value is simply ignored (unknown key, non-object block).
    """

    path: str
    message: str
    value_used: object


_CANONICAL_AGENT_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_NOT_AGENT_ID_CHARS: Final = re.compile(r"[^a-z0-9_-]+")


def normalize_agent_id(agent_id: str | None) -> str:
    """OpenClaw's agent-id rule, the same in 2026.7 and 2026.9: trimmed (JS whitespace) and lower-cased; an id
    that is not already canonical also has each run of other characters made one dash, no dash at either end,
    and at most 64 characters ("My Agent" is my-agent). A missing id, or nothing left, is the default ``main``."""
    if agent_id is None:
        return DEFAULT_AGENT_ID
    trimmed = js_trim(agent_id)
    if _CANONICAL_AGENT_ID.fullmatch(trimmed):
        return trimmed.lower()
    return _kept(trimmed) or DEFAULT_AGENT_ID


def _kept(trimmed: str) -> str:
    """What OpenClaw keeps of a non-canonical id: each run of other characters one dash, none at either end."""
    return _NOT_AGENT_ID_CHARS.sub("-", trimmed.lower()).strip("-")[:64]


def only_read_by(profile: str, qualifier: str = "") -> str:
    """The warning for a key only ``profile`` reads: ``read only by <profile><qualifier>; under <other> it is
    ignored``, the one wording of that, whichever generation reads the key."""
    other = PROFILE_2026_9 if profile == PROFILE_2026_7 else PROFILE_2026_7
    return f"read only by {profile}{qualifier}; under {other} it is ignored"


def has_loop_block(entry: Mapping[object, object]) -> bool:
    """Whether an agent entry sets ``tools.loopDetection`` (to anything, null included)."""
    tools = entry.get("tools")
    return isinstance(tools, dict) and "loopDetection" in tools


def list_entry_id(entry: Mapping[object, object], index: int, warnings: list[ConfigWarning]) -> str | None:
    """The normalised id of ``agents.list[index]``, as both generations' lookup normalises it: a blank string is
    agent ``main`` (warned about). None when ``id`` is missing or not a string: OpenClaw's schema refuses that
    entry, so its block, if it has one, is warned about and ignored."""
    raw_id = entry.get("id")
    path = f"agents.list[{index}].id"
    if isinstance(raw_id, str):
        trimmed = js_trim(raw_id)
        if not trimmed:
            warnings.append(ConfigWarning(path, BLANK_ID, None))
        elif not _kept(trimmed):
            warnings.append(ConfigWarning(path, NOTHING_KEPT_ID, DEFAULT_AGENT_ID))
        return normalize_agent_id(raw_id)
    if has_loop_block(entry):
        warnings.append(ConfigWarning(path, MISSING_ID, None))
    return None


#: Read in both lines' agent-id rule: a blank id normalises to the default agent.
BLANK_ID: Final = "blank: OpenClaw reads this entry as agent 'main' (a blank id normalises to main)"
NOTHING_KEPT_ID: Final = (
    "OpenClaw keeps nothing of it (only letters a-z, digits, '_' and inner '-' remain), so it reads this entry "
    "as agent 'main'"
)
MISSING_ID: Final = (
    "missing or not a string (OpenClaw's config schema requires a string id); this entry's tools.loopDetection is "
    "ignored"
)


#: A ``tools`` (or entry) that is not an object, as the 2026.7 lookup treats it.
NOT_OBJECT_IGNORED: Final = "not an object; ignored"
#: Where a warning about the config's top level is (it has no key path).
ROOT_PATH: Final = "(root)"
ROOT_NOT_OBJECT: Final = "the config is not an object"
#: How a reader words a config part that is not an object: under 2026.7 ``<reason>; ignored`` (None), under
#: 2026.9 the schema's refusal (``streams.detection.gen9_roster.refused``).
Refusal = Callable[[str], str]


def not_an_object(reason: str, refuse: Refusal | None) -> str:
    """``<reason>; ignored`` (2026.7), or ``refuse(reason)`` (2026.9, whose schema refuses the config)."""
    return f"{reason}; ignored" if refuse is None else refuse(reason)


def config_root(document: object, warnings: list[ConfigWarning], refuse: Refusal | None = None) -> dict[object, object]:
    """The config's top level, ``{}`` when it is not an object (an array, a string, a number, null), which is
    warned about at ``(root)``: both generations look keys up in it, so nothing in it is read. 2026.7 ignores it
    (its reader follows the runtime lookup); 2026.9 is given ``refuse``: its root schema is a strict object
    (``OpenClawSchema`` in zod-schema-*.mjs of 2026.9.6), so the gateway does not start."""
    if isinstance(document, dict):
        return document
    warnings.append(ConfigWarning(ROOT_PATH, not_an_object(ROOT_NOT_OBJECT, refuse), None))
    return {}


def loop_block(
    owner: Mapping[object, object],
    owner_path: str,
    warnings: list[ConfigWarning],
    refuse: Refusal | None = None,
) -> object:
    """The raw ``tools.loopDetection`` of the config's top level (``owner_path`` ``""``) or of one agent entry
    (``agents.list[i]``, ``agents.entries.<id>``), None when it has none. Both generations read
    ``owner.tools?.loopDetection`` (tool-loop-detection-config-*.js in 2026.7.35, tool-loop-detection-config-*.mjs
    in 2026.9.6), so a ``tools`` that is not an object gives no block (the global one, or the defaults, apply);
    that is warned about here, for both. 2026.7 ignores it; 2026.9 is given ``refuse``: its schemas (``ToolsSchema``,
    ``AgentToolsSchema`` and ``ToolLoopDetectionSchema`` in zod-schema.agent-runtime-*.mjs) are objects with
    ``.optional()``, which takes a missing key but not null, so there a ``tools`` or ``loopDetection`` set to null
    is refused as well. A ``loopDetection`` of another type is returned as it is: each generation's resolution
    reports it (``resolve_loop_config`` here and in :mod:`streams.detection.gen9_config`)."""
    tools_path = f"{owner_path}.tools" if owner_path else "tools"
    tools = owner.get("tools", MISSING)
    if isinstance(tools, dict):
        block = tools.get("loopDetection")
        if block is None and refuse is not None and "loopDetection" in tools:
            warnings.append(ConfigWarning(f"{tools_path}.loopDetection", refuse("null is not an object"), None))
        return block
    if tools is not MISSING and (tools is not None or refuse is not None):
        warnings.append(ConfigWarning(tools_path, not_an_object("not an object", refuse), None))
    return None


def first_with_id(
    agent_id: str,
    entry_path: str,
    warn_path: str,
    first_paths: dict[str, str],
    has_block: bool,
    warnings: list[ConfigWarning],
) -> bool:
    """Whether the entry at ``entry_path`` is the first for ``agent_id`` (then it is recorded in ``first_paths``).
    OpenClaw's per-agent lookup takes the first entry whose normalised id matches, in both generations
    (``resolveAgentEntry`` in agent-scope-config-*.js of 2026.7.35 and agent-scope-config-*.mjs of 2026.9.6), so a
    later one is never read for that id: warned about at ``warn_path``."""
    first = first_paths.setdefault(agent_id, entry_path)
    if first == entry_path:
        return True
    ignored = "this entry's tools.loopDetection is ignored" if has_block else "OpenClaw uses the first entry"
    warnings.append(ConfigWarning(warn_path, f"duplicate of {first} (agent {agent_id!r}); {ignored}", None))
    return False


def listed_agents(agent_list: list[object], warnings: list[ConfigWarning]) -> list[tuple[str, int, object]]:
    """(normalised id, index, raw ``tools.loopDetection``) of the ``agents.list`` entries OpenClaw's lookup can
    reach, the first of each id; every other entry is warned about (not an object, no string id, a later
    duplicate). 2026.9 loads a list otherwise (:mod:`streams.detection.gen9_roster`)."""
    out: list[tuple[str, int, object]] = []
    first_paths: dict[str, str] = {}
    for index, entry in enumerate(agent_list):
        entry_path = f"agents.list[{index}]"
        if not isinstance(entry, dict):
            warnings.append(ConfigWarning(entry_path, f"{show_value(entry)} is not an object; ignored", None))
            continue
        block = loop_block(entry, entry_path, warnings)
        agent_id = list_entry_id(entry, index, warnings)
        if agent_id is not None and first_with_id(
            agent_id, entry_path, f"{entry_path}.id", first_paths, has_loop_block(entry), warnings
        ):
            out.append((agent_id, index, block))
    return out


def is_positive_integer(value: object) -> bool:
    """JavaScript ``Number.isInteger(v) && v > 0`` on a JSON value: ``5.0`` counts, booleans never do."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and value > 0
    return False


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and value > 0:
        return int(value)
    return None


def js_truthy(value: object) -> bool:
    """JavaScript truthiness of a JSON value: ``false``, ``null``, ``0``, ``NaN`` and ``""`` are falsy."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True


#: Beyond this an integer is not exact in a JavaScript number, so OpenClaw's ``+ 1`` rounds.
_JS_EXACT: Final = 2**53


def above(threshold: int) -> int:
    """``threshold + 1`` as OpenClaw's clamps compute it: in doubles, so past 2**53 it rounds (1e20 + 1 is 1e20).
    The config reader gives a number beyond that range as the double it parses to (``streams.config_file``)."""
    if threshold < _JS_EXACT:
        return threshold + 1
    return int(float(threshold) + 1.0)


def show_value(value: object) -> str:
    """A short JSON-like rendering of a config value for messages (a number as JavaScript prints it)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return show_number(value)
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    except RecursionError:  # nested about as deep as the recursion limit: only its start shows anyway
        text, node = "", value
        while len(text) <= 60 and isinstance(node, list | dict) and node:
            if isinstance(node, list):
                text, node = f"{text}[", node[0]
            else:
                key = min(node, key=str)
                text, node = f"{text}{{{json.dumps(str(key))}: ", node[key]
    return text if len(text) <= 60 else text[:57] + "..."


def show_number(value: int | float) -> str:
    """A number as OpenClaw prints it (JavaScript's ``String(n)``). The readers make an integer beyond 2**53 the
    double OpenClaw computes with (``streams.config_file.js_numbers``, :func:`above`); JavaScript prints such a
    double in its shortest digits, without an exponent below 1e21 (``100000000000000000000``, 2**60 as
    ``1152921504606847000``) and with one from there (``1e+21``, ``1e+308``), where Python's ``str`` gave all 309
    digits of 1e308."""
    if isinstance(value, int) and -_JS_EXACT <= value <= _JS_EXACT:
        return str(value)
    try:
        double = float(value)
    except OverflowError:  # an integer beyond the double range: Infinity in JavaScript
        return "Infinity" if value > 0 else "-Infinity"
    if math.isnan(double):
        return "NaN"
    if math.isinf(double):
        return "Infinity" if double > 0 else "-Infinity"
    return js_number(double)


def _js(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return show_number(value) if isinstance(value, int | float) else str(value)


def _block_warnings(block: Mapping[object, object], path: str) -> list[ConfigWarning]:
    """Everything wrong with one block on its own, in the order of its keys."""
    out: list[ConfigWarning] = []
    for key, value in block.items():
        key_path = f"{path}.{key}"
        if key not in _TOP_KEYS:
            out.append(ConfigWarning(key_path, "unknown key (not in the tools.loopDetection schema); ignored", None))
        elif key == "enabled":
            out.extend(_flag_warnings(value, key_path, default=False, is_enabled=True))
        elif key in ("detectors", "postCompactionGuard"):
            if not isinstance(value, dict):
                out.append(ConfigWarning(key_path, f"{show_value(value)} is not an object; ignored", None))
                continue
            for sub_key, sub_value in value.items():
                sub_path = f"{key_path}.{sub_key}"
                if key == "detectors" and sub_key in _DETECTOR_KEYS:
                    out.extend(_flag_warnings(sub_value, sub_path, default=True, is_enabled=False))
                elif key == "postCompactionGuard" and sub_key == "windowSize":
                    if not is_positive_integer(sub_value):
                        out.append(_fallback(sub_value, sub_path, GUARD_DEFAULT_WINDOW))
                else:
                    out.append(ConfigWarning(sub_path, f"unknown key in {key}; ignored", None))
        elif not is_positive_integer(value):
            out.append(_fallback(value, key_path, NUMERIC_DEFAULTS[str(key)]))
    warning = _positive_int(block.get("warningThreshold"))
    critical = _positive_int(block.get("criticalThreshold"))
    global_ = _positive_int(block.get("globalCircuitBreakerThreshold"))
    if warning is not None and critical is not None and warning >= critical:
        out.append(
            ConfigWarning(
                f"{path}.criticalThreshold",
                f"{WARNING_BEFORE_CRITICAL} ({_js(warning)} >= {_js(critical)}; raised to warningThreshold + 1)",
                above(warning),
            )
        )
    if critical is not None and global_ is not None and critical >= global_:
        effective_warning = warning if warning is not None else NUMERIC_DEFAULTS["warningThreshold"]
        effective_critical = critical if critical > effective_warning else above(effective_warning)
        out.append(
            ConfigWarning(
                f"{path}.globalCircuitBreakerThreshold",
                f"{CRITICAL_BEFORE_GLOBAL} ({_js(critical)} >= {_js(global_)}; raised to criticalThreshold + 1)",
                above(effective_critical),
            )
        )
    return out


def _fallback(value: object, path: str, default: int) -> ConfigWarning:
    return ConfigWarning(path, f"{show_value(value)} is not a positive integer; the default applies", default)


def _flag_warnings(value: object, path: str, *, default: bool, is_enabled: bool) -> list[ConfigWarning]:
    if isinstance(value, bool):
        return []
    if value is None:
        used = default
        message = f"null is not a boolean; the default ({_js(default)}) applies"
    else:
        used = js_truthy(value)
        message = f"{show_value(value)} is not a boolean; JavaScript truthiness makes it {_js(used)}"
    if is_enabled and not used:
        message += " (the post-compaction guard stays on: only false disables it)"
    return [ConfigWarning(path, message, used)]


def resolve_loop_config(
    global_block: object,
    agent_block: object,
    *,
    global_path: str = GLOBAL_BLOCK_PATH,
    agent_path: str = AGENT_BLOCK_PATH,
) -> tuple[LoopConfig, list[ConfigWarning]]:
    """Merge the global and the agent's block and resolve the runtime config.

    ``None`` (or ``MISSING``) means "no block". A block that is not an object is reported and treated as
    absent. The paths name the blocks in warnings (e.g. ``agents.list[2].tools.loopDetection``).
    """
    warnings: list[ConfigWarning] = []
    blocks: list[tuple[str, dict[object, object]]] = []  # (path, block), global first: later wins
    for block, path in ((global_block, global_path), (agent_block, agent_path)):
        if block is None or block is MISSING:
            continue
        if not isinstance(block, dict):
            warnings.append(ConfigWarning(path, f"{show_value(block)} is not an object; treated as absent", None))
            continue
        warnings.extend(_block_warnings(block, path))
        blocks.append((path, block))

    # Shallow spread (agent wins per top-level key) + key-by-key merge of the two nested objects.
    top: dict[object, tuple[object, str]] = {}
    detectors: dict[object, object] = {}
    guard: dict[object, object] = {}
    for path, block in blocks:
        for key, value in block.items():
            top[key] = (value, path)
        for name, target in (("detectors", detectors), ("postCompactionGuard", guard)):
            nested = block.get(name)
            if isinstance(nested, dict):
                target.update(nested)

    def numeric(key: str) -> tuple[int, str | None, bool]:
        """(value used, path of the block that supplied the key or None, whether the raw value was valid)."""
        if key not in top:
            return NUMERIC_DEFAULTS[key], None, False
        raw, path = top[key]
        value = _positive_int(raw)
        return (value, path, True) if value is not None else (NUMERIC_DEFAULTS[key], path, False)

    warning, w_src, w_ok = numeric("warningThreshold")
    critical, c_src, c_ok = numeric("criticalThreshold")
    global_, g_src, g_ok = numeric("globalCircuitBreakerThreshold")

    def clamp_path(key: str, sources: set[str | None]) -> str:
        return f"{agent_path if agent_path in sources else global_path}.{key}"

    def origin(src: str | None, key: str, ok: bool) -> str:
        return f"from {src}.{key}" if src is not None and ok else "default"

    critical_sources = {w_src, c_src}
    if critical <= warning:
        # A block whose own ordering rule explains this clamp already reported it (same value).
        if not (w_src == c_src and w_src is not None and w_ok and c_ok):
            warnings.append(
                ConfigWarning(
                    clamp_path("criticalThreshold", critical_sources),
                    f"criticalThreshold {_js(critical)} ({origin(c_src, 'criticalThreshold', c_ok)}) is not above "
                    f"warningThreshold {_js(warning)} ({origin(w_src, 'warningThreshold', w_ok)}); "
                    "raised to warningThreshold + 1",
                    above(warning),
                )
            )
        critical = above(warning)
    if global_ <= critical:
        sources = {*critical_sources, g_src}
        explained = len(sources - {None}) == 1 and g_src is not None and g_src == c_src and g_ok and c_ok
        if not explained:
            warnings.append(
                ConfigWarning(
                    clamp_path("globalCircuitBreakerThreshold", sources),
                    f"globalCircuitBreakerThreshold {_js(global_)} "
                    f"({origin(g_src, 'globalCircuitBreakerThreshold', g_ok)}) is not above "
                    f"criticalThreshold {_js(critical)}; raised to criticalThreshold + 1",
                    above(critical),
                )
            )
        global_ = above(critical)

    enabled_raw = top["enabled"][0] if "enabled" in top else None
    window = _positive_int(guard.get("windowSize"))
    config = LoopConfig(
        enabled=js_truthy(enabled_raw),
        history_size=numeric("historySize")[0],
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=numeric("unknownToolThreshold")[0],
        global_circuit_breaker_threshold=global_,
        generic_repeat=_flag(detectors, "genericRepeat"),
        known_poll_no_progress=_flag(detectors, "knownPollNoProgress"),
        ping_pong=_flag(detectors, "pingPong"),
        guard_enabled=enabled_raw is not False,
        guard_window_size=window if window is not None else GUARD_DEFAULT_WINDOW,
    )
    return config, warnings


def _flag(detectors: Mapping[object, object], key: str) -> bool:
    value = detectors.get(key)
    return True if value is None else js_truthy(value)


def loop_config_to_dict(config: LoopConfig) -> dict[str, object]:
    """The resolved config in OpenClaw's key names (for ``config check`` output and the config hash)."""
    return {
        "enabled": config.enabled,
        "historySize": config.history_size,
        "warningThreshold": config.warning_threshold,
        "criticalThreshold": config.critical_threshold,
        "unknownToolThreshold": config.unknown_tool_threshold,
        "globalCircuitBreakerThreshold": config.global_circuit_breaker_threshold,
        "detectors": {
            "genericRepeat": config.generic_repeat,
            "knownPollNoProgress": config.known_poll_no_progress,
            "pingPong": config.ping_pong,
        },
        "postCompactionGuard": {"enabled": config.guard_enabled, "windowSize": config.guard_window_size},
    }
