"""Test helpers: a tiny independent resolver of ``tools.loopDetection`` and event builders.

The resolver follows OpenClaw's rules for the per-agent merge, fallbacks and clamping and guard enabling,
written again independently of ``streams.detection.config`` so the core's tests do not depend on it.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path
from typing import Any

from streams.detection import LoopConfig, Outcome, ToolEvent

SCENARIOS_PATH = Path(__file__).resolve().parents[2].parent / "shared" / "conformance" / "scenarios.json"


@cache
def load_scenarios() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCENARIOS_PATH.read_text(encoding="utf-8"))
    return data


def _positive_int(value: Any, default: int) -> int:
    if type(value) is int and value > 0:
        return value
    if type(value) is float and math.isfinite(value) and value.is_integer() and value > 0:
        return int(value)
    return default


def _truthy(value: Any) -> bool:
    if value is None or value is False or value == "" or (type(value) in (int, float) and value == 0):
        return False
    return not (type(value) is float and math.isnan(value))


def _flag(value: Any, default: bool) -> bool:
    return default if value is None else _truthy(value)


def merge_blocks(global_block: Any, agent_block: Any) -> Any:
    if agent_block is None:
        return global_block
    if global_block is None:
        return agent_block
    merged = {**global_block, **agent_block}
    for nested in ("detectors", "postCompactionGuard"):
        g = global_block.get(nested)
        a = agent_block.get(nested)
        merged[nested] = {**(g if isinstance(g, dict) else {}), **(a if isinstance(a, dict) else {})}
    return merged


def resolve(global_block: Any = None, agent_block: Any = None) -> LoopConfig:
    merged = merge_blocks(global_block, agent_block)
    block: dict[str, Any] = merged if isinstance(merged, dict) else {}
    detectors = block.get("detectors") if isinstance(block.get("detectors"), dict) else {}
    guard = block.get("postCompactionGuard") if isinstance(block.get("postCompactionGuard"), dict) else {}
    assert isinstance(detectors, dict) and isinstance(guard, dict)
    warning = _positive_int(block.get("warningThreshold"), 10)
    critical = _positive_int(block.get("criticalThreshold"), 20)
    glob = _positive_int(block.get("globalCircuitBreakerThreshold"), 30)
    if critical <= warning:
        critical = warning + 1
    if glob <= critical:
        glob = critical + 1
    return LoopConfig(
        enabled=_flag(block.get("enabled"), False),
        history_size=_positive_int(block.get("historySize"), 30),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=_positive_int(block.get("unknownToolThreshold"), 10),
        global_circuit_breaker_threshold=glob,
        generic_repeat=_flag(detectors.get("genericRepeat"), True),
        known_poll_no_progress=_flag(detectors.get("knownPollNoProgress"), True),
        ping_pong=_flag(detectors.get("pingPong"), True),
        guard_enabled=block.get("enabled") is not False,
        guard_window_size=_positive_int(guard.get("windowSize"), 3),
    )


def scenario_scope(run_id: str | None) -> str:
    trimmed = run_id.strip() if isinstance(run_id, str) else ""
    return trimmed if trimmed else "session-1"


def scenario_event(index: int, raw: dict[str, Any]) -> ToolEvent:
    """A scenario event as the shell would build it: distinct call ids, inline outcome."""
    scope = scenario_scope(raw.get("run_id"))
    if raw["type"] == "compaction_retry":
        return ToolEvent(kind="compaction_retry", scope=scope)
    outcome: Outcome | None = None
    if raw.get("error") is not None:
        outcome = Outcome(error=raw["error"])
    elif raw.get("result") is not None:
        outcome = Outcome(result=raw["result"])
    return ToolEvent(
        kind="tool_call",
        scope=scope,
        tool=raw["tool"],
        call_id=f"call-{index}",
        args=raw.get("args"),
        outcome=outcome,
    )


_UNSET: Any = object()


def call(
    tool: str,
    args: Any = _UNSET,
    *,
    result: Any = _UNSET,
    error: str | None = None,
    result_hash: str | None = None,
    call_id: str | None = None,
    scope: str = "run-1",
    dedup: str | None = None,
    args_hash: str | None = None,
) -> ToolEvent:
    """A ``tool_call`` event; ``result``/``error``/``result_hash`` give the inline outcome."""
    outcome = None
    if result is not _UNSET or error is not None or result_hash is not None:
        outcome = Outcome(result=None if result is _UNSET else result, error=error, result_hash=result_hash)
    kwargs: dict[str, Any] = {} if args is _UNSET else {"args": args}
    return ToolEvent(
        kind="tool_call",
        scope=scope,
        tool=tool,
        call_id=call_id,
        args_hash=args_hash,
        outcome=outcome,
        dedup_key=dedup,
        **kwargs,
    )


def tool_result(
    tool: str,
    args: Any = _UNSET,
    *,
    result: Any = _UNSET,
    error: str | None = None,
    call_id: str | None = None,
    scope: str = "run-1",
    dedup: str | None = None,
) -> ToolEvent:
    outcome = Outcome(result=None if result is _UNSET else result, error=error)
    kwargs: dict[str, Any] = {} if args is _UNSET else {"args": args}
    return ToolEvent(
        kind="tool_result",
        scope=scope,
        tool=tool,
        call_id=call_id,
        outcome=outcome,
        dedup_key=dedup,
        **kwargs,
    )


def compaction(scope: str = "run-1", dedup: str | None = None) -> ToolEvent:
    return ToolEvent(kind="compaction_retry", scope=scope, dedup_key=dedup)


def text_result(text: str, **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}
