"""The pure detection core: OpenClaw ``tools.loopDetection`` semantics as a function of (state, event).

No I/O, clocks or randomness: shells decode events into :class:`ToolEvent`, call :func:`apply` with the
event's resolved :class:`LoopConfig`, store the returned :class:`RunState` and publish the decisions.
"""

from streams.detection.canonical import canonical, digest, js_number, js_trim
from streams.detection.engine import apply
from streams.detection.outcome import args_hash, hash_outcome, is_known_poll
from streams.detection.state import RunState
from streams.detection.types import MISSING, Decision, LoopConfig, Outcome, ToolEvent
from streams.detection.unknown_tool import unknown_tool_name

__all__ = [
    "MISSING",
    "Decision",
    "LoopConfig",
    "Outcome",
    "RunState",
    "ToolEvent",
    "apply",
    "args_hash",
    "canonical",
    "digest",
    "hash_outcome",
    "is_known_poll",
    "js_number",
    "js_trim",
    "unknown_tool_name",
]
