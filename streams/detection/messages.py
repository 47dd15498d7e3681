"""Texts a gateway can show the model. Written for loopwatch, not copied from OpenClaw.

Every warning starts with ``WARNING:`` and every block or abort with ``CRITICAL:``; each names the tool, the
count and the kind of loop so the model can tell what to change.
"""

from __future__ import annotations


def generic_warning(tool: str, count: int) -> str:
    return (
        f"WARNING: you have called {tool} {count} times with identical arguments. If these calls are not "
        "making progress, stop retrying and report the task as failed."
    )


def generic_critical(tool: str, count: int) -> str:
    return (
        f"CRITICAL: {tool} has been called {count} times with identical arguments and identical outcomes, "
        "so it is stuck in a loop without progress. This call was blocked; change your approach or report "
        "the task as failed."
    )


def poll_warning(tool: str, count: int) -> str:
    return (
        f"WARNING: you have polled {tool} {count} times with identical arguments and no progress. This looks "
        "like a polling loop: wait longer between polls or report the task as failed."
    )


def poll_critical(tool: str, count: int) -> str:
    return (
        f"CRITICAL: {tool} has been called {count} times with identical arguments and no progress. This is "
        "a stuck polling loop and this call was blocked; stop polling and report what is happening."
    )


def ping_pong_warning(tool: str, count: int) -> str:
    return (
        f"WARNING: you are alternating between repeated tool-call patterns ({count} consecutive calls, "
        f"current tool {tool}). This looks like a ping-pong loop; if it is not making progress, stop "
        "alternating and report the task as failed."
    )


def ping_pong_critical(tool: str, count: int) -> str:
    return (
        f"CRITICAL: you have alternated between repeated tool-call patterns for {count} consecutive calls "
        f"(current tool {tool}) with no progress. This is a stuck ping-pong loop and this call was blocked."
    )


def global_critical(tool: str, count: int) -> str:
    return (
        f"CRITICAL: {tool} has produced {count} identical no-progress outcomes in a row. Execution was "
        "blocked by the global circuit breaker; stop repeating this call."
    )


def unknown_tool_critical(tool: str, missing: str, count: int) -> str:
    return (
        f"CRITICAL: the tool {missing} is not available and {tool} has failed for that reason {count} times "
        "in a row. Stop retrying it and answer without it."
    )


def compaction_abort(tool: str, count: int, window: int) -> str:
    return (
        f"CRITICAL: {tool} was called {count} times with identical arguments and identical results after "
        f"auto-compaction (guard window {window}). Compaction did not break the loop, so the run is aborted "
        "to prevent runaway resource use."
    )


def argument_churn_warning(tool: str, variants: int, count: int) -> str:
    return (
        f"WARNING: {tool} has cycled through {variants} repeated argument variants {count} times, all with the "
        "same unchanged outcome. Changing the arguments is not making progress; change approach or report the "
        "task as failed."
    )


def recovery_exhausted(tool: str, detector: str) -> str:
    return (
        f"CRITICAL: another critical tool loop ({detector}, tool {tool}) after the one recovery reply this run "
        "was given. The call was blocked and the run is ended; nothing blocked was executed."
    )
