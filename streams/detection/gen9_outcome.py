"""Outcome hashing of the 2026.9 generation: the 2026.7 rules plus what the outcome now says about progress.

Differences from :mod:`streams.detection.outcome` (all read in OpenClaw 2026.9.6's shipped detector):

* every digest canonicalises external-content wrapper ids (:mod:`.wrapper`);
* the detector's own veto is an outcome (``veto``): it enters the history and counts toward no-progress;
* a failed ``exec`` (non-zero exit, not timed out, with output) also carries a *failure identity*: the same
  hash with timestamps, times of day, attempt/retry counters, durations and pids masked (#118402);
* errors and ``write`` results with ``changed: false`` are explicit no-progress outcomes (``no_progress``),
  the only ones argument churn counts; an unchanged write hashes as ``{"status": "unchanged"}``.
"""

from __future__ import annotations

import re
from typing import Any, Final, NamedTuple

from streams.detection.canonical import JS_WHITESPACE, js_number, js_trim
from streams.detection.gen9_wrapper import outcome_digest
from streams.detection.outcome import _process_shape, content_text, process_action
from streams.detection.sends import is_send_like, strip_send_ids
from streams.detection.types import MISSING, Outcome
from streams.detection.unknown_tool import unknown_tool_name

_WS: Final = "[" + JS_WHITESPACE + "]"
_W: Final = "[A-Za-z0-9_\u017f\u212a]"  # JavaScript \w under the i and u flags
_B: Final = f"(?:(?<={_W})(?!{_W})|(?<!{_W})(?={_W}))"  # JavaScript \b under the same flags
_I: Final = re.IGNORECASE
# Applied in this order; each match becomes "#". \d is ASCII in JavaScript.
_VOLATILE: Final = (
    re.compile(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}[t ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:z|[+-][0-9]{2}:[0-9]{2})?", _I
    ),
    re.compile(r"[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?"),
    re.compile(_B + r"(?:attempt|retry)" + _B + "[" + JS_WHITESPACE + "#:=]*[0-9]+", _I),
    re.compile(_B + r"[0-9]+(?:\.[0-9]+)?" + _WS + r"?(?:ns|us|ms|seconds?|minutes?|hours?|s)" + _B, _I),
    re.compile(_B + r"(?:pid|ppid)" + _B + "[" + JS_WHITESPACE + "#:=]*[0-9]+", _I),
)
_EXEC_DONE: Final = frozenset({"completed", "failed"})
_EXEC_APPROVAL: Final = frozenset({"approval-pending", "approval-unavailable"})


class Hashed(NamedTuple):
    """One outcome as the 2026.9 history records it; ``result`` None and ``veto`` False means "no outcome"."""

    result: str | None = None
    unknown: str | None = None
    veto: bool = False
    failure: str | None = None  # failure identity of a terminal exec failure
    no_progress: bool = False


NOTHING: Final = Hashed()
VETO: Final = Hashed(veto=True)


def hash_outcome(tool: str, args: Any, outcome: Outcome | None, poll_action: str | None = None) -> Hashed:
    """The 2026.9 counterpart of :func:`streams.detection.outcome.hash_outcome` (same field precedence and
    the same ``poll_action`` hint for pre-hashed ``process`` arguments)."""
    if outcome is None:
        return NOTHING
    error = outcome.error
    if error is not None:
        return Hashed("error:" + outcome_digest(error), unknown_tool_name(error), no_progress=True)
    result = outcome.result
    if result is not MISSING and result is not None:
        return hash_result(tool, args, result, poll_action)
    if outcome.result_hash is not None:
        # A gateway hash: errors show as such; the gateway says the rest (failure_hash, no_progress).
        rh = outcome.result_hash
        no_progress = outcome.no_progress or rh.startswith("error:")
        return Hashed(rh, outcome.unknown_tool_name, failure=outcome.failure_hash, no_progress=no_progress)
    return NOTHING


def hash_result(tool: str, args: Any, result: Any, poll_action: str | None = None) -> Hashed:
    if not isinstance(result, dict):
        return Hashed(outcome_digest(result))
    raw = result.get("details")
    details: dict[str, Any] = raw if isinstance(raw, dict) else {}
    text = content_text(result.get("content"))
    status = details.get("status", MISSING)
    if status == "blocked" and details.get("deniedReason") == "tool-loop":
        return VETO
    if tool == "exec" and type(status) is str:
        hashed = _exec(status, details, text)
        if hashed is not None:
            return hashed
    if tool == "write" and details.get("changed") is False:
        return Hashed(outcome_digest({"status": "unchanged"}), no_progress=True)
    action = process_action(tool, args, poll_action)
    if action is not None:
        return Hashed(outcome_digest(_process_shape(action, status, details, text)))
    if is_send_like(tool, args):
        return Hashed(outcome_digest(strip_send_ids(details)))
    return Hashed(outcome_digest({"details": details, "text": text}))


def _output(details: dict[str, Any], text: str) -> str:
    aggregated = details.get("aggregated")
    trimmed = js_trim(aggregated) if type(aggregated) is str else ""
    return trimmed or text


def _exec(status: str, details: dict[str, Any], text: str) -> Hashed | None:
    if status == "running":
        tail = details.get("tail")
        return Hashed(outcome_digest({"status": status, "tail": tail if type(tail) is str else ""}))
    if status in _EXEC_DONE:
        raw_code = details.get("exitCode")
        exit_code = raw_code if type(raw_code) in (int, float) else None
        timed_out = details.get("timedOut") is True
        output = _output(details, text)
        shape = {"status": status, "exitCode": exit_code, "timedOut": timed_out, "output": output}
        result = outcome_digest(shape)
        if exit_code is None or exit_code == 0 or timed_out or not output:
            return Hashed(result)
        if output == f"(Command exited with code {js_number(float(exit_code))})":
            return Hashed(result)
        masked = output
        for pattern in _VOLATILE:
            masked = pattern.sub("#", masked)
        return Hashed(result, failure=outcome_digest({**shape, "output": masked}))
    if status in _EXEC_APPROVAL:

        def text_or(key: str, fallback: str | None) -> str | None:
            value = details.get(key)
            return value if type(value) is str else fallback

        return Hashed(
            outcome_digest(
                {
                    "status": status,
                    "reason": text_or("reason", None),
                    "host": text_or("host", None),
                    "command": text_or("command", ""),
                    "warningText": text_or("warningText", ""),
                }
            )
        )
    return None
