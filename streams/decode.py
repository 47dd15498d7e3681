"""Turning raw records into validated events and events into the core's :class:`ToolEvent`.

On the per-event hot path: one orjson parse, two dictionary look-ups to pick the model, one pydantic
validation of a plain dict (no JSON re-parse, no discriminated-union dispatch). The slower checks that tell
*why* a record is bad (UTF-8 decoding) only run after a failure. Failure reasons are a closed set so they
can label the dead-letter topic and the ``loopwatch_invalid_events_total`` metric.

Hostile input (see :mod:`streams.limits`): the size is checked before parsing (``oversized``); nesting depth,
the number of JSON values and the length of identifier fields after it (``limits_exceeded``), so whatever
passes costs the core bounded time and memory. For typical events a byte count proves the shape limits
cannot be exceeded and the walk is skipped. Checks run in this order, the first failure naming the reason:
size, UTF-8 and JSON, top-level object, limits, version, type, schema.

What the parser itself does with hostile JSON, next to JavaScript's ``JSON.parse`` (whose results gateways
hash):

* duplicate object keys: the last one wins (as in ``JSON.parse``), for event fields and inside ``args``;
* integers: exact up to 2**64 - 1 (and down to -2**63); larger ones become doubles (the core hashes every
  integer above 2**53 as a JavaScript double anyway); numbers beyond the double range (``1e999``, a
  400-digit integer) are rejected as ``not_json``: ``JSON.parse`` would make them ``Infinity``, but no
  gateway's ``JSON.stringify`` can produce them (it writes ``null`` for infinities);
* ``NaN``/``Infinity`` literals, lone surrogates (escaped ``\\ud800`` or raw) and invalid UTF-8 are rejected
  (``not_json``/``not_utf8``); nesting beyond 1,024 levels is rejected by orjson as ``not_json``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, cast, final, get_args

import orjson
from pydantic import ValidationError

from schemas.events import (
    CURRENT_EVENT_VERSION,
    EVENT_MODELS,
    EVENT_TYPES,
    Event,
    ModelUsageEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from streams.detection.canonical import JS_WHITESPACE
from streams.detection.types import MISSING, Outcome, ToolEvent
from streams.limits import DEFAULT_LIMITS, DecodeLimits, record_violation

InvalidReason: TypeAlias = Literal[
    "oversized",
    "not_utf8",
    "not_json",
    "not_object",
    "limits_exceeded",
    "unknown_type",
    "future_version",
    "schema_invalid",
]
INVALID_REASONS: Final[tuple[InvalidReason, ...]] = get_args(InvalidReason)
#: Why a valid event's record is still refused: its key is not the event's scope key, so the run's events may be
#: spread over partitions and neither their order nor the run table's partitioning would hold.
KEY_MISMATCH: Final = "key_mismatch"
RejectReason: TypeAlias = Literal[InvalidReason, "key_mismatch"]
#: Every reason a topic record is refused (:func:`accept`): the dead-letter and metric labels.
REJECT_REASONS: Final[tuple[RejectReason, ...]] = (*INVALID_REASONS, KEY_MISMATCH)
DEFAULT_MAX_BYTES: Final = DEFAULT_LIMITS.max_bytes


class InvalidEvent(Exception):
    """A record that is not a valid event. ``detail`` never contains argument or result values."""

    def __init__(self, reason: InvalidReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: InvalidReason = reason
        self.detail = detail


def decode_event(
    raw: bytes | bytearray | memoryview,
    *,
    max_bytes: int | None = None,
    limits: DecodeLimits = DEFAULT_LIMITS,
) -> Event:
    """Decode one Kafka record value. Raises :class:`InvalidEvent`; the size is checked before parsing.

    ``max_bytes``, when given, overrides ``limits.max_bytes``.
    """
    limit = limits.max_bytes if max_bytes is None else max_bytes
    size = len(raw)
    if size > limit:
        raise InvalidEvent("oversized", f"{size} bytes > limit {limit}")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        try:
            bytes(raw).decode("utf-8")
        except UnicodeDecodeError as uexc:
            raise InvalidEvent("not_utf8", f"invalid UTF-8 at byte {uexc.start}") from None
        raise InvalidEvent("not_json", _json_error(exc)) from None
    if size > limits.trivial_size and type(obj) is dict:
        problem = record_violation(obj, raw if type(raw) is not memoryview else raw.tobytes(), limits)
        if problem is not None:
            raise InvalidEvent("limits_exceeded", problem)
    return _validate(obj)


def decode_line(text: str, *, max_bytes: int | None = None, limits: DecodeLimits = DEFAULT_LIMITS) -> Event:
    """Decode one line of a replay file (already text). Same checks and reasons as :func:`decode_event`."""
    limit = limits.max_bytes if max_bytes is None else max_bytes
    if len(text) * 4 > limit:  # only then can the UTF-8 form exceed the limit: measure it
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            raise InvalidEvent("oversized", f"{size} bytes > limit {limit}")
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as uexc:
            raise InvalidEvent("not_utf8", f"unpaired surrogate at character {uexc.start}") from None
        raise InvalidEvent("not_json", _json_error(exc)) from None
    if len(text) > limits.trivial_size and type(obj) is dict:
        problem = record_violation(obj, text, limits)
        if problem is not None:
            raise InvalidEvent("limits_exceeded", problem)
    return _validate(obj)


def _json_error(exc: orjson.JSONDecodeError) -> str:
    # orjson's message names the problem and the position, never a slice of the document.
    return f"{exc.msg} at line {exc.lineno} column {exc.colno}"


#: Each event model's own validator, called without ``model_validate``'s Python wrapper (a microsecond a record).
_VALIDATORS: Final[dict[str, Callable[[object], object]]] = {
    kind: model.__pydantic_validator__.validate_python for kind, model in EVENT_MODELS.items()
}


def _validate(obj: object) -> Event:
    if type(obj) is not dict:
        raise InvalidEvent("not_object", f"top-level JSON value is {_json_kind(obj)}, not an object")
    version = obj.get("version")
    if type(version) is int and version > CURRENT_EVENT_VERSION:
        raise InvalidEvent("future_version", f"version {version} > supported {CURRENT_EVENT_VERSION}")
    kind = obj.get("type")
    validate = _VALIDATORS.get(kind) if type(kind) is str else None
    if validate is None:
        if "type" not in obj:
            detail = "missing 'type'"
        elif type(kind) is str:
            shown = kind if len(kind) <= 40 else kind[:37] + "..."
            detail = f"type {shown!r} is not one of {', '.join(EVENT_TYPES)}"
        else:
            detail = f"'type' is {_json_kind(kind)}, not a string"
        raise InvalidEvent("unknown_type", detail)
    try:
        return cast(Event, validate(obj))
    except ValidationError as exc:
        raise InvalidEvent("schema_invalid", _schema_detail(exc)) from None


def _schema_detail(exc: ValidationError) -> str:
    """``field: problem`` for the first few errors; pydantic inputs are deliberately left out."""
    parts = []
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "(record)"
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {message}")
    if len(errors) > 3:
        parts.append(f"and {len(errors) - 3} more")
    return "; ".join(parts)


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def scope_key(event: Event) -> str:
    """The event's scope key, the partitioning and state key: its trimmed run id when non-blank, else its session id."""
    return scope_key_of(event.run_id, event.session_id)


def scope_key_of(run_id: str | None, session_id: str) -> str:
    """The run id trimmed with JavaScript whitespace when non-blank, else the session id."""
    if run_id:
        trimmed = run_id.strip(JS_WHITESPACE)
        if trimmed:
            return trimmed
    return session_id


@final
@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a topic record is not taken: the dead-letter reason and a detail without any argument values."""

    reason: RejectReason
    detail: str

    def describe(self, where: str) -> str:
        return f"{where}: invalid event ({self.reason}): {self.detail}"


def accept(key: bytes | None, value: bytes | bytearray | memoryview) -> Event | Rejection:
    """The one acceptance rule for a topic record: a valid event whose record key is its scope key.

    The worker dead-letters exactly what this rejects, and every audit that reads a topic (replay, what-if)
    skips exactly that, so their predictions cannot drift from what the worker applies.
    """
    try:
        event = decode_event(value)
    except InvalidEvent as exc:
        return Rejection(exc.reason, exc.detail)
    if key != scope_key(event).encode("utf-8"):
        detail = "record has no key" if key is None else "record key differs from the event's scope key"
        return Rejection(KEY_MISMATCH, detail + " (run_id, else session_id)")
    return event


def _outcome(event: ToolCallEvent | ToolResultEvent) -> Outcome | None:
    """The one outcome that counts: error, then result, then result_hash."""
    # Positional arguments, in the field order of Outcome and ToolEvent (tests/test_tool_event.py pins it).
    if event.error is not None:
        return Outcome(MISSING, event.error)
    if event.result is not None:
        return Outcome(event.result)
    if event.result_hash is not None:
        if event.failure_hash is None and event.no_progress is None:
            return Outcome(MISSING, None, event.result_hash, event.unknown_tool_name)
        return Outcome(
            MISSING, None, event.result_hash, event.unknown_tool_name, event.failure_hash, event.no_progress is True
        )
    return None


def to_tool_event(event: Event) -> ToolEvent:
    """The core's view of a validated event (no re-validation)."""
    scope = scope_key_of(event.run_id, event.session_id)
    dedup_key = event.gateway_id + "\x00" + event.event_id
    if event.type == "compaction_retry":
        return ToolEvent("compaction_retry", scope, "", None, MISSING, None, None, dedup_key)
    if isinstance(event, ModelUsageEvent):
        raise TypeError("model_usage events never reach the detection core (see streams.runner.step)")
    return ToolEvent(
        event.type,
        scope,
        event.tool,
        event.call_id,
        event.args if "args" in event.model_fields_set else MISSING,
        event.args_hash,
        _outcome(event),
        dedup_key,
        event.poll_action,
    )


__all__ = [
    "DEFAULT_MAX_BYTES",
    "INVALID_REASONS",
    "KEY_MISMATCH",
    "REJECT_REASONS",
    "InvalidEvent",
    "InvalidReason",
    "RejectReason",
    "Rejection",
    "accept",
    "decode_event",
    "decode_line",
    "scope_key",
    "scope_key_of",
    "to_tool_event",
]
