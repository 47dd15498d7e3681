"""The post-compaction guard: after a compaction retry, abort if the next calls all repeat one outcome.

It shares only the outcome hashes with the rolling detectors. The enable flag and window size come from the
agent of the ``compaction_retry`` event that armed it.

OpenClaw keeps the window's observations and counts those equal to the newest one. A window never holds more
than ``windowSize`` observations, so that count reaches ``windowSize`` only on the window's last observation
and only if all of them are equal: remembering the first observation and whether another one differed is
exactly equivalent, and keeps the state small and each step O(1) whatever the configured window size.
"""

from __future__ import annotations

from typing import NamedTuple

from streams.detection.types import LoopConfig

Observation = tuple[str, str, str]  # (tool, sig, result hash)


class GuardState(NamedTuple):
    """``remaining`` attempts of the current window; its first observation and whether another differed."""

    enabled: bool
    window_size: int
    remaining: int
    first: Observation | None = None
    mixed: bool = False


def arm(config: LoopConfig) -> GuardState:
    """Arm for ``windowSize`` attempts, discarding any unfinished window."""
    size = config.guard_window_size
    return GuardState(config.guard_enabled, size, size)


def observe(guard: GuardState | None, tool: str, sig: str, result: str) -> tuple[GuardState | None, int]:
    """Feed one hashed outcome; returns the new guard and the abort count (0 = no abort).

    The window disarms after ``window_size`` observations whatever the verdict.
    """
    if guard is None or not guard.enabled or guard.remaining <= 0:
        return guard, 0
    seen = (tool, sig, result)
    first = guard.first or seen
    mixed = guard.mixed or seen != first
    remaining = guard.remaining - 1
    if remaining > 0:
        return GuardState(True, guard.window_size, remaining, first, mixed), 0
    return GuardState(True, guard.window_size, 0), (0 if mixed else guard.window_size)
