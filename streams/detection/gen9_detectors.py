"""The 2026.9 rolling detectors: fixed thresholds, vetoes and exec failure identity in the no-progress
streak, argument churn, and the 2026.9 evaluation order. Ping-pong and unknown-tool are the 2026.7 ones.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from streams.detection import messages
from streams.detection.detectors import (
    GENERIC,
    GLOBAL,
    PING_PONG,
    POLL,
    UNKNOWN_TOOL,
    Finding,
    ping_pong,
    ping_pong_evidence,
    ping_pong_key,
    unknown_tool_streak,
)
from streams.detection.gen9_records import CallRecord9, History9

ARGUMENT_CHURN: Final = "argument_churn"
# Built in since the numeric knobs were removed (#111382): only `enabled` is configurable.
WARNING: Final = 10
CRITICAL: Final = 20
GLOBAL_BREAKER: Final = 30
UNKNOWN_TOOL_LIMIT: Final = 10
HISTORY_SIZE: Final = 30
MIN_STABLE_CALLS_PER_VARIANT: Final = 3
GUARD_WINDOW: Final = 3  # the post-compaction guard's window, no longer configurable (#128148)


class Streak(NamedTuple):
    length: int
    latest: str | None  # the reference (newest) result hash


def _streak(history: History9, tool: str, sig: str, exec_failures: bool) -> Streak:
    """Identical no-progress outcomes of this call, newest first; the detector's vetoes in between count.

    With ``exec_failures`` the walk runs over consecutive ``exec`` records of any arguments that are
    terminal failures, and two failures with the same failure identity count as the same outcome; it may
    leave the current arguments once but not come back to them.
    """
    streak = 0
    latest: CallRecord9 | None = None
    crossed = False
    vetoes = 0
    for rec in reversed(history):
        if rec.tool != tool:
            if exec_failures:
                break
            continue
        if not exec_failures and rec.sig != sig:
            continue
        if rec.veto:
            vetoes += 1
            continue
        if not rec.result:
            continue
        if exec_failures and rec.failure is None:
            break
        if latest is None:
            latest = rec
            crossed = rec.sig != sig
            streak = vetoes + 1
            vetoes = 0
            continue
        if exec_failures:
            if crossed and rec.sig == sig:
                break
            if rec.sig != sig:
                crossed = True
        same_failure = exec_failures and rec.failure is not None and rec.failure == latest.failure
        if rec.result != latest.result and not same_failure:
            break
        streak += vetoes + 1
        vetoes = 0
    if latest is None:
        return Streak(0 if exec_failures else vetoes, None)
    return Streak(streak, latest.result)


def no_progress_streak(history: History9, tool: str, sig: str) -> Streak:
    """The repeated-arguments streak; for ``exec`` the terminal-failure streak when that one is longer."""
    repeated = _streak(history, tool, sig, False)
    if tool != "exec":
        return repeated
    failures = _streak(history, tool, sig, True)
    return failures if failures.length > repeated.length else repeated


class Churn(NamedTuple):
    calls: int
    variants: int
    outcome: str | None = None  # the one outcome every variant keeps producing


def argument_churn(history: History9, tool: str, sig: str) -> Churn:
    """A trailing run of ``tool`` calls cycling several argument variants, each repeated at least three
    times, all with one shared no-progress outcome, the current call's variant among them (#112620)."""
    results: dict[str, str] = {}
    counts: dict[str, int] = {}
    for rec in reversed(history):
        if rec.tool != tool:
            break
        result = rec.result
        if not result:
            continue
        if not rec.no_progress:
            break
        if results.setdefault(rec.sig, result) != result:
            break
        counts[rec.sig] = counts.get(rec.sig, 0) + 1
    stable = [s for s, n in counts.items() if n >= MIN_STABLE_CALLS_PER_VARIANT]
    shared = {results[s] for s in stable}
    total = sum(counts.values())
    only_stable = sum(counts[s] for s in stable) == total
    if len(stable) > 1 and only_stable and len(shared) == 1 and counts.get(sig, 0) >= MIN_STABLE_CALLS_PER_VARIANT:
        return Churn(total, len(stable), shared.pop())
    return Churn(0, 0)


def detect(history: History9, tool: str, sig: str, known_poll: bool) -> Finding | None:
    """The first matching rule of the 2026.9 evaluation order, or None."""
    if not history:
        return None
    unknown, missing = unknown_tool_streak(history, tool)
    if unknown >= UNKNOWN_TOOL_LIMIT:
        name = missing or tool
        return Finding(
            critical=True,
            detector=UNKNOWN_TOOL,
            count=unknown,
            threshold=UNKNOWN_TOOL_LIMIT,
            key=f"unknown-tool:{tool}:{missing or 'unknown'}",
            message=messages.unknown_tool_critical(tool, name, unknown),
            outcome=history[-1].result,
        )
    streak, latest = no_progress_streak(history, tool, sig)
    latest_key = latest if latest is not None else "none"
    if streak >= GLOBAL_BREAKER:
        return Finding(
            critical=True,
            detector=GLOBAL,
            count=streak,
            threshold=GLOBAL_BREAKER,
            key=f"global:{tool}:{sig}:{latest_key}",
            message=messages.global_critical(tool, streak),
            outcome=latest,
        )
    if known_poll and streak >= CRITICAL:
        key = f"poll:{tool}:{sig}:{latest_key}"
        return Finding(
            critical=True,
            detector=POLL,
            count=streak,
            threshold=CRITICAL,
            key=key,
            message=messages.poll_critical(tool, streak),
            outcome=latest,
        )
    if known_poll and streak >= WARNING:
        key = f"poll:{tool}:{sig}:{latest_key}"
        return Finding(
            critical=False,
            detector=POLL,
            count=streak,
            threshold=WARNING,
            key=key,
            message=messages.poll_warning(tool, streak),
            outcome=latest,
        )
    pp = ping_pong(history, sig)
    if pp is not None:
        count = pp.length
        if count >= CRITICAL and ping_pong_evidence(history, pp):
            message = messages.ping_pong_critical(tool, count)
            return Finding(
                critical=True,
                detector=PING_PONG,
                count=count,
                threshold=CRITICAL,
                key=ping_pong_key(sig, pp),
                message=message,
                paired_tool=pp.last.tool,
                outcome=latest,
            )
        if count >= WARNING:
            message = messages.ping_pong_warning(tool, count)
            return Finding(
                critical=False,
                detector=PING_PONG,
                count=count,
                threshold=WARNING,
                key=ping_pong_key(sig, pp),
                message=message,
                paired_tool=pp.last.tool,
                outcome=latest,
            )
    if not known_poll and streak >= CRITICAL:
        key = f"generic:{tool}:{sig}:{latest_key}"
        return Finding(
            critical=True,
            detector=GENERIC,
            count=streak,
            threshold=CRITICAL,
            key=key,
            message=messages.generic_critical(tool, streak),
            outcome=latest,
        )
    churn = argument_churn(history, tool, sig)
    if churn.calls >= WARNING:
        message = messages.argument_churn_warning(tool, churn.variants, churn.calls)
        return Finding(
            critical=False,
            detector=ARGUMENT_CHURN,
            count=churn.calls,
            threshold=WARNING,
            key=f"argument-churn:{tool}",
            message=message,
            outcome=churn.outcome,
        )
    recent = [rec.sig for rec in history].count(sig)
    if not known_poll and recent >= WARNING:
        return Finding(
            critical=False,
            detector=GENERIC,
            count=recent,
            threshold=WARNING,
            key=f"generic:{tool}:{sig}",
            message=messages.generic_warning(tool, recent),
            outcome=latest,
        )
    return None
