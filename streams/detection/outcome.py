"""Call signatures and outcome hashes: what counts as "the same call" and "the same result".

Outcome hashing deliberately forgets what changes on every call without being progress (exec pids and
durations, poll session ids, send receipts) so that a stuck loop hashes to one value, and returns no hash for
the loop detector's own veto so blocked calls never enter the history.
"""

from __future__ import annotations

from typing import Any, Final

from streams.detection.canonical import canonical, digest, js_trim, sha256_hex
from streams.detection.sends import is_send_like, strip_send_ids
from streams.detection.types import MISSING, Outcome
from streams.detection.unknown_tool import unknown_tool_name

_EXEC_DONE: Final = frozenset({"completed", "failed"})
_EXEC_APPROVAL: Final = frozenset({"approval-pending", "approval-unavailable"})
_POLL_ACTIONS: Final = frozenset({"poll", "log"})


def args_hash(tool: str, args: Any = MISSING, args_hash: str | None = None) -> str:
    """The call signature ``tool:<sha256 of canonical args>``; a gateway's ``args_hash`` is used as is."""
    return tool + ":" + (args_hash if args_hash is not None else digest(args))


def process_action(tool: str, args: Any, poll_action: str | None = None) -> str | None:
    """``poll`` or ``log`` for a ``process`` call asking for that action, else None.

    Raw object args speak for themselves; pre-hashed args (``args`` is ``MISSING``) rely on the gateway's
    ``poll_action`` hint, the one fact about the arguments the poll detector and the poll outcome need.
    """
    if tool != "process":
        return None
    if args is MISSING:
        return poll_action if poll_action in _POLL_ACTIONS else None
    if not isinstance(args, dict):
        return None
    action = args.get("action")
    return action if type(action) is str and action in _POLL_ACTIONS else None


def is_known_poll(tool: str, args: Any = MISSING, poll_action: str | None = None) -> bool:
    """Known poll tools: ``command_status`` with any args (even pre-hashed), ``process`` poll/log."""
    return tool == "command_status" or process_action(tool, args, poll_action) is not None


def hash_outcome(
    tool: str, args: Any, outcome: Outcome | None, poll_action: str | None = None
) -> tuple[str | None, str | None]:
    """``(result_hash, unknown_tool_name)`` of an outcome; ``(None, None)`` when it has no hash.

    Precedence: ``error``, then a non-null ``result``, then the gateway's ``result_hash``.
    """
    if outcome is None:
        return None, None
    error = outcome.error
    if error is not None:
        return "error:" + digest(error), unknown_tool_name(error)
    result = outcome.result
    if result is not MISSING and result is not None:
        return hash_result(tool, args, result, poll_action), None
    if outcome.result_hash is not None:
        return outcome.result_hash, outcome.unknown_tool_name
    return None, None


def content_text(content: Any) -> str:
    """The ``text`` of every content part with a string ``type`` and ``text``, joined by newlines, trimmed."""
    if not isinstance(content, list):
        return ""
    parts = [
        part["text"]
        for part in content
        if isinstance(part, dict) and type(part.get("type")) is str and type(part.get("text")) is str
    ]
    if not parts:
        return ""
    return js_trim(parts[0] if len(parts) == 1 else "\n".join(parts))


def hash_result(tool: str, args: Any, result: Any, poll_action: str | None = None) -> str | None:
    """Hash of a successful tool result; None for a loop veto."""
    if not isinstance(result, dict):
        return digest(result)
    raw_details = result.get("details")
    details: dict[str, Any] = raw_details if isinstance(raw_details, dict) else {}
    text = content_text(result.get("content"))
    status = details.get("status", MISSING)
    if status == "blocked" and details.get("deniedReason") == "tool-loop":
        return None
    if tool == "exec":
        if type(status) is str:
            exec_hash = _exec_hash(status, details, text)
            if exec_hash is not None:
                return exec_hash
    elif tool == "process":
        action = process_action(tool, args, poll_action)
        if action is not None:
            return digest(_process_shape(action, status, details, text))
    if is_send_like(tool, args):
        return digest(strip_send_ids(details))
    return _default_hash(details, text)


def _default_hash(details: dict[str, Any], text: str) -> str:
    # digest({"details": details, "text": text}) without building the wrapper object.
    return sha256_hex('{"details":' + canonical(details) + ',"text":' + canonical(text) + "}")


def _number_or_null(value: Any) -> Any:
    return value if type(value) in (int, float) else None


def _string_or_null(value: Any) -> str | None:
    return value if type(value) is str else None


def _exec_hash(status: str, details: dict[str, Any], text: str) -> str | None:
    """The stable part of an exec result; None for statuses that fall through to the later rules."""
    if status == "running":
        tail = details.get("tail")
        return digest({"status": status, "tail": tail if type(tail) is str else ""})
    if status in _EXEC_DONE:
        aggregated = details.get("aggregated")
        output = js_trim(aggregated) if type(aggregated) is str else ""
        return digest(
            {
                "status": status,
                "exitCode": _number_or_null(details.get("exitCode")),
                "timedOut": details.get("timedOut") is True,
                "output": output or text,
            }
        )
    if status in _EXEC_APPROVAL:
        # OpenClaw: reason and host `?? null`, but command and warningText `?? ""`.
        command, warning = details.get("command"), details.get("warningText")
        return digest(
            {
                "status": status,
                "reason": _string_or_null(details.get("reason")),
                "host": _string_or_null(details.get("host")),
                "command": command if type(command) is str else "",
                "warningText": warning if type(warning) is str else "",
            }
        )
    return None


def _process_shape(action: str, status: Any, details: dict[str, Any], text: str) -> dict[str, Any]:
    """``status`` as is (absent stays ``undefined``), other fields ``?? null``."""
    get = details.get
    if action == "poll":
        return {
            "action": action,
            "status": status,
            "exitCode": get("exitCode"),
            "exitSignal": get("exitSignal"),
            "aggregated": get("aggregated"),
            "text": text,
        }
    return {
        "action": action,
        "status": status,
        "totalLines": get("totalLines"),
        "totalChars": get("totalChars"),
        "truncated": get("truncated"),
        "exitCode": get("exitCode"),
        "exitSignal": get("exitSignal"),
        "text": text,
    }
