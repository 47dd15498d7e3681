"""The rolling detectors: quantities over a scope's history and the first-match evaluation order.

Everything is computed on the history *before* the current call is added. Walks stop as early as the
definitions allow, since most calls are unique and must cost little.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from streams.detection import messages
from streams.detection.records import History, Records, RecordView
from streams.detection.types import LoopConfig

GENERIC = "generic_repeat"
POLL = "known_poll_no_progress"
PING_PONG = "ping_pong"
UNKNOWN_TOOL = "unknown_tool_repeat"
GLOBAL = "global_circuit_breaker"


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A warning or critical result of the detectors for one call."""

    critical: bool
    detector: str
    count: int
    threshold: int
    key: str  # warning key, used for de-duplication of warnings
    message: str
    paired_tool: str | None = None
    outcome: str | None = None  # the result hash the loop keeps producing, when one is known


def unknown_tool_streak(history: Records, tool: str) -> tuple[int, str | None]:
    """Trailing failures of ``tool`` that all name the same missing tool as the newest one."""
    name: str | None = None
    count = 0
    for rec in reversed(history):
        if rec.tool != tool or rec.unknown is None:
            break
        if name is None:
            name = rec.unknown
        elif rec.unknown != name:
            break
        count += 1
    return count, name


def no_progress_streak(history: History, sig: str) -> tuple[int, str | None]:
    """Consecutive identical outcome hashes among this signature's hashed records, newest first."""
    latest: str | None = None
    count = 0
    for rec in reversed(history):
        if rec.sig != sig or rec.result is None:
            continue
        if latest is None:
            latest = rec.result
        elif rec.result != latest:
            break
        count += 1
    return count, latest


class PingPong(NamedTuple):
    length: int  # alternating tail + the current call
    last: RecordView
    tail: int


def ping_pong(history: Records, sig: str) -> PingPong | None:
    """The alternation the current call continues, or None (count includes the current call)."""
    size = len(history)
    if size < 2:
        return None
    last = history[-1]
    other_at = size - 2
    while other_at >= 0 and history[other_at].sig == last.sig:
        other_at -= 1
    if other_at < 0 or history[other_at].sig != sig:
        return None  # no second signature, or the call does not continue the alternation
    tail = 0
    for at in range(size - 1, -1, -1):
        if history[at].sig != (last.sig if tail % 2 == 0 else sig):
            break
        tail += 1
    if tail < 2:
        return None
    return PingPong(tail + 1, last, tail)


def ping_pong_evidence(history: Records, pp: PingPong) -> bool:
    """Every tail record hashed, and each side of the alternation with a single outcome hash."""
    side_last: str | None = None
    side_other: str | None = None
    last_sig = pp.last.sig
    for rec in history[len(history) - pp.tail :]:
        result = rec.result
        if result is None:
            return False
        if rec.sig == last_sig:
            if side_last is None:
                side_last = result
            elif side_last != result:
                return False
        elif side_other is None:
            side_other = result
        elif side_other != result:
            return False
    return side_last is not None and side_other is not None


def ping_pong_key(sig: str, pp: PingPong) -> str:
    """One key for the pair in both directions: the two signatures sorted as JavaScript sorts strings."""
    a, b = sig, pp.last.sig
    if a.isascii() and b.isascii():
        lo, hi = (a, b) if a <= b else (b, a)
    else:
        ua, ub = a.encode("utf-16-be", "surrogatepass"), b.encode("utf-16-be", "surrogatepass")
        lo, hi = (a, b) if ua <= ub else (b, a)
    return "pingpong:" + lo + "|" + hi


def detect(history: History, tool: str, sig: str, known_poll: bool, cfg: LoopConfig) -> Finding | None:
    """The first matching row of the evaluation order, or None."""
    if not history:
        return None
    last = history[-1]
    if last.unknown is not None and last.tool == tool:
        streak, missing = unknown_tool_streak(history, tool)
        if missing is not None and streak >= cfg.unknown_tool_threshold:
            return Finding(
                critical=True,
                detector=UNKNOWN_TOOL,
                count=streak,
                threshold=cfg.unknown_tool_threshold,
                key=f"unknown-tool:{tool}:{missing}",
                message=messages.unknown_tool_critical(tool, missing, streak),
                outcome=last.result,
            )

    # recentCount: records with this signature anywhere in the window, pending ones included.
    matches = [rec.sig for rec in history].count(sig)
    streak, latest = no_progress_streak(history, sig) if matches else (0, None)  # most calls are unique
    latest_key = latest if latest is not None else "none"
    glob = cfg.global_circuit_breaker_threshold
    if streak >= glob:
        return Finding(
            critical=True,
            detector=GLOBAL,
            count=streak,
            threshold=glob,
            key=f"global:{tool}:{sig}:{latest_key}",
            message=messages.global_critical(tool, streak),
            outcome=latest,
        )

    critical = cfg.critical_threshold
    warning = cfg.warning_threshold
    if known_poll and cfg.known_poll_no_progress:
        if streak >= critical:
            return Finding(
                critical=True,
                detector=POLL,
                count=streak,
                threshold=critical,
                key=f"poll:{tool}:{sig}:{latest_key}",
                message=messages.poll_critical(tool, streak),
                outcome=latest,
            )
        if streak >= warning:
            return Finding(
                critical=False,
                detector=POLL,
                count=streak,
                threshold=warning,
                key=f"poll:{tool}:{sig}:{latest_key}",
                message=messages.poll_warning(tool, streak),
                outcome=latest,
            )

    if cfg.ping_pong:
        pp = ping_pong(history, sig)
        if pp is not None:
            count = pp.length
            if count >= critical and ping_pong_evidence(history, pp):
                return Finding(
                    critical=True,
                    detector=PING_PONG,
                    count=count,
                    threshold=critical,
                    key=ping_pong_key(sig, pp),
                    message=messages.ping_pong_critical(tool, count),
                    paired_tool=pp.last.tool,
                    outcome=latest,
                )
            if count >= warning:
                return Finding(
                    critical=False,
                    detector=PING_PONG,
                    count=count,
                    threshold=warning,
                    key=ping_pong_key(sig, pp),
                    message=messages.ping_pong_warning(tool, count),
                    paired_tool=pp.last.tool,
                    outcome=latest,
                )

    if not known_poll and cfg.generic_repeat:
        if streak >= critical:
            return Finding(
                critical=True,
                detector=GENERIC,
                count=streak,
                threshold=critical,
                key=f"generic:{tool}:{sig}:{latest_key}",
                message=messages.generic_critical(tool, streak),
                outcome=latest,
            )
        if matches >= warning:
            return Finding(
                critical=False,
                detector=GENERIC,
                count=matches,
                threshold=warning,
                key=f"generic:{tool}:{sig}",
                message=messages.generic_warning(tool, matches),
                outcome=latest,
            )
    return None
