"""Value types shared by the pure detection core and the shells around it.

The core never sees wire formats: shells turn decoded records into these types,
call :func:`streams.detection.engine.apply`, and turn the decisions back into
verdict records. Nothing here imports Faust, Kafka, a clock or randomness.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, Literal, NamedTuple

EventKind = Literal["tool_call", "tool_result", "compaction_retry"]
DecisionKind = Literal["warning", "block", "abort"]


class _Missing(Enum):
    """Marks a field that is absent (JavaScript ``undefined``), distinct from JSON ``null``."""

    MISSING = "MISSING"


MISSING: Final = _Missing.MISSING

# Semantics profiles: which OpenClaw generation's loop-detection rules decide (streams.detection.profiles).
PROFILE_2026_7: Final = "openclaw-2026.7"
PROFILE_2026_9: Final = "openclaw-2026.9"


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """The runtime view of ``tools.loopDetection`` for one agent, after merge, fallback and clamping."""

    enabled: bool = False
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    guard_enabled: bool = True
    guard_window_size: int = 3
    profile: str = PROFILE_2026_7  # which OpenClaw generation's rules apply (streams.detection.profiles)


class Outcome(NamedTuple):
    """What a tool call produced. Exactly one of the three is meaningful (error wins, then result, then hash).

    A named tuple, like :class:`ToolEvent`: both are built for every event, and a tuple costs a fifth of a
    frozen dataclass to build while being just as immutable.

    ``result`` is the raw tool-result object (or any JSON value); ``error`` the thrown message;
    ``result_hash`` a gateway-computed outcome hash, with ``unknown_tool_name`` parsed on the gateway.
    """

    result: Any = MISSING
    error: str | None = None
    result_hash: str | None = None
    unknown_tool_name: str | None = None
    # With a gateway hash, what the 2026.9 profile also needs to know (the 2026.7 rules ignore both):
    failure_hash: str | None = None  # failure identity of a terminal exec failure
    no_progress: bool = False  # an explicit no-progress outcome (an unchanged write)


class ToolEvent(NamedTuple):
    """One event of a run, already validated. ``scope`` is the scope key (trimmed run id, else session id).

    For tool events, ``args`` is the raw JSON value (``MISSING`` when only ``args_hash`` was sent) and
    ``args_hash`` the gateway's hex digest (``None`` when raw args were sent), with ``poll_action`` when
    the hashed call is a ``process`` poll/log. ``outcome`` is the inline
    outcome of a ``tool_call`` or the outcome of a ``tool_result``. ``dedup_key`` identifies the event for
    de-duplication (the last 256 keys of a scope are remembered; a repeat is ignored).
    """

    kind: EventKind
    scope: str
    tool: str = ""
    call_id: str | None = None
    args: Any = MISSING
    args_hash: str | None = None
    outcome: Outcome | None = None
    dedup_key: str | None = None  # gateway_id + "\x00" + event_id; a repeated key is ignored
    poll_action: str | None = None  # with args_hash: the gateway's "poll"/"log" hint for a process call


@dataclass(frozen=True, slots=True)
class Decision:
    """One detector verdict for one event. ``published`` is loopwatch's de-duplicated publication flag."""

    decision: DecisionKind
    detector: str  # generic_repeat | known_poll_no_progress | ping_pong | unknown_tool_repeat |
    #                global_circuit_breaker | compaction_loop_persisted
    count: int
    threshold: int
    message: str
    tool: str
    call_id: str | None
    warning_key: str
    published: bool
    paired_tool: str | None = None
    outcome_hash: str | None = None  # the repeated outcome's hash: the same loop in another run has the same one
