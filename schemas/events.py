"""Event records on ``loopwatch.events``: the wire contract gateways produce.

The models validate the shape only; they never hash or interpret arguments. Unknown fields are ignored so
that gateways can add fields before loopwatch knows them, but ``type`` must be one loopwatch understands and
``version`` must not be newer than :data:`CURRENT_EVENT_VERSION` (the decoder checks both before these
models run, so it can report precise reasons).

``args`` may be JSON ``null`` and that is a *present* value: use :attr:`has_args`
(backed by ``model_fields_set``), never ``args is None``, to tell "absent" from "null".
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    TypeAdapter,
    WithJsonSchema,
    model_validator,
)

CURRENT_EVENT_VERSION = 1
EVENT_TYPES: tuple[str, ...] = ("tool_call", "tool_result", "compaction_retry", "model_usage")

_HEX64 = r"^[0-9a-f]{64}$"
_RESULT_HASH = r"^(error:)?[0-9a-f]{64}$"
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def ts_to_epoch_ms(ts: str | int | float) -> float:
    """Epoch milliseconds of an event timestamp as sent (RFC 3339 text or epoch ms number).

    Raises ``ValueError`` for text that is not RFC 3339 (with an offset) or a non-finite number.
    """
    if isinstance(ts, str):
        if _RFC3339.fullmatch(ts) is None:
            raise ValueError("ts must be an RFC 3339 date-time with offset or epoch milliseconds")
        text = ts.upper()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        dot = text.find(".")
        if dot != -1:  # fromisoformat keeps at most microseconds; RFC 3339 allows any precision
            end = dot + 1
            while end < len(text) and text[end].isdigit():
                end += 1
            text = text[:dot] + text[dot : min(end, dot + 7)] + text[end:]
        try:
            return datetime.fromisoformat(text).timestamp() * 1000.0
        except ValueError:
            raise ValueError("ts is not a valid calendar date-time") from None
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        raise ValueError("ts must be an RFC 3339 string or epoch milliseconds")
    value = float(ts)
    if not math.isfinite(value):
        raise ValueError("ts must be finite")
    return value


#: Integers below this in magnitude convert to a finite double (what ``ts_to_epoch_ms`` needs of a number).
_FINITE_INT: Final = 2**1000


def _validate_ts(value: object) -> str | int | float:
    # Epoch-millisecond numbers, what the bridge sends, are checked here without a call: runs for every event.
    if type(value) is int:
        if -_FINITE_INT < value < _FINITE_INT:
            return value
    elif type(value) is float and value - value == 0.0:  # false for inf and nan
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError("ts must be an RFC 3339 string or epoch milliseconds")
    ts_to_epoch_ms(value)
    return value


Timestamp = Annotated[
    str | int | float,
    PlainValidator(_validate_ts),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}],
            "description": "RFC 3339 date-time with offset, or epoch milliseconds; kept as sent.",
        }
    ),
]
NonEmptyStr = Annotated[str, Field(min_length=1)]
ArgsHash = Annotated[str, Field(pattern=_HEX64)]
ResultHash = Annotated[str, Field(pattern=_RESULT_HASH)]
FailureHash = Annotated[
    str,
    Field(
        pattern=_HEX64,
        description="With result_hash from a 2026.8+ gateway: the failure identity of a terminal exec failure"
        " (volatile parts masked); read by the openclaw-2026.9 profile only.",
    ),
]
NoProgress = Annotated[
    bool,
    Field(
        description="With result_hash from a 2026.8+ gateway: the outcome is an explicit no-progress outcome"
        " (an unchanged write); read by the openclaw-2026.9 profile only.",
    ),
]

_MODEL_CONFIG = ConfigDict(extra="ignore", frozen=True, strict=True)


def _drop_args_default(schema: dict[str, Any]) -> None:
    """``args`` has a Python default only to detect absence; on the wire it has none."""
    props = schema.get("properties")
    if isinstance(props, dict):
        args = props.get("args")
        if isinstance(args, dict):
            args.pop("default", None)
            args["description"] = "Raw tool arguments (any JSON, null included). Exclusive with args_hash."


def _args_xor_schema(schema: dict[str, Any]) -> None:
    _drop_args_default(schema)
    schema["oneOf"] = [
        {"required": ["args"], "properties": {"args_hash": {"type": "null"}}},
        {
            "required": ["args_hash"],
            "not": {"required": ["args"]},
            "properties": {"args_hash": {"type": "string"}},
        },
    ]


def _tool_result_schema(schema: dict[str, Any]) -> None:
    _args_xor_schema(schema)
    schema["anyOf"] = [
        {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
        for name in ("error", "result", "result_hash")
    ]


class EventBase(BaseModel):
    """Fields common to every event record."""

    model_config = _MODEL_CONFIG

    event_id: NonEmptyStr
    gateway_id: str
    agent_id: str = "main"
    session_id: NonEmptyStr
    run_id: str | None = None
    ts: Timestamp
    version: Annotated[
        int, Field(ge=1, description="Event schema version; loopwatch rejects versions newer than it knows.")
    ] = CURRENT_EVENT_VERSION
    openclaw_version: (
        Annotated[
            str,
            Field(
                min_length=1,
                max_length=64,
                description=(
                    "The emitting gateway's OpenClaw version (e.g. 2026.9.6). It selects the semantics profile that"
                    " judges the event; absent means the worker's configured default profile."
                ),
            ),
        ]
        | None
    ) = None

    def ts_ms(self) -> float:
        """Event time as epoch milliseconds (for latency and TTL only, never for decisions)."""
        return ts_to_epoch_ms(self.ts)

    @property
    def dedup_key(self) -> str:
        """``(gateway_id, event_id)`` joined by NUL: the key the detectors de-duplicate events by."""
        return self.gateway_id + "\x00" + self.event_id


PollAction = Annotated[
    Literal["poll", "log"],
    Field(
        description="With args_hash on a `process` call: its `action` when that is `poll` or `log`, so the "
        "call is recognised as a known poll without raw arguments. Ignored with raw args and on other tools."
    ),
]


class _ToolFields(EventBase):
    tool: NonEmptyStr
    call_id: str | None = None
    args: Any = None
    args_hash: ArgsHash | None = None
    poll_action: PollAction | None = None

    @property
    def has_args(self) -> bool:
        """True when raw ``args`` were sent, even as JSON ``null``."""
        return "args" in self.model_fields_set

    @model_validator(mode="after")
    def _exactly_one_args(self) -> _ToolFields:
        has_args = "args" in self.model_fields_set
        if has_args == (self.args_hash is not None):
            raise ValueError("exactly one of args and args_hash is required")
        return self


class ToolCallEvent(_ToolFields):
    """A tool call, optionally with its outcome inline ("detect, then record the outcome")."""

    model_config = ConfigDict(json_schema_extra=_args_xor_schema)

    type: Literal["tool_call"]
    result: Any = None
    error: str | None = None
    result_hash: ResultHash | None = None
    unknown_tool_name: str | None = None
    failure_hash: FailureHash | None = None
    no_progress: NoProgress | None = None

    @property
    def has_outcome(self) -> bool:
        """Whether an inline outcome is present (``null`` fields mean "no outcome")."""
        return self.error is not None or self.result is not None or self.result_hash is not None


class ToolResultEvent(_ToolFields):
    """The outcome of an earlier call; attaches to that call's pending record."""

    model_config = ConfigDict(json_schema_extra=_tool_result_schema)

    type: Literal["tool_result"]
    result: Any = None
    error: str | None = None
    result_hash: ResultHash | None = None
    unknown_tool_name: str | None = None
    failure_hash: FailureHash | None = None
    no_progress: NoProgress | None = None

    @model_validator(mode="after")
    def _has_outcome(self) -> ToolResultEvent:
        if self.error is None and self.result is None and self.result_hash is None:
            raise ValueError("one of result, error or result_hash must be non-null")
        return self


class CompactionRetryEvent(EventBase):
    """A successful compaction before a retry: arms the post-compaction guard of its scope key."""

    type: Literal["compaction_retry"]


TokenCount = Annotated[int, Field(ge=0, le=2**53)]


class ModelUsageEvent(EventBase):
    """What one model call of the run consumed, as the gateway accounted it. Never shown to the detectors: it
    only prices the loops they find (:mod:`streams.loop_cost`). Older workers dead-letter it as
    ``unknown_type``; every other record is unchanged, so the extension keeps ``version`` 1."""

    type: Literal["model_usage"]
    provider: str | None = None
    model: str | None = None
    input_tokens: TokenCount = 0
    output_tokens: TokenCount = 0
    cache_read_tokens: TokenCount = 0
    cache_write_tokens: TokenCount = 0
    cost_usd: Annotated[
        float | None,
        Field(
            ge=0,
            allow_inf_nan=False,
            description="The call's cost in US dollars as the gateway priced it; null when it has no price.",
        ),
    ] = None

    @property
    def tokens(self) -> int:
        """All tokens of the call: input, output and both cache kinds."""
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


AnyEvent: TypeAlias = ToolCallEvent | ToolResultEvent | CompactionRetryEvent | ModelUsageEvent
Event: TypeAlias = Annotated[AnyEvent, Field(discriminator="type")]
EVENT_ADAPTER: TypeAdapter[AnyEvent] = TypeAdapter(Event)
EVENT_MODELS: dict[
    str, type[ToolCallEvent] | type[ToolResultEvent] | type[CompactionRetryEvent] | type[ModelUsageEvent]
] = {
    "tool_call": ToolCallEvent,
    "tool_result": ToolResultEvent,
    "compaction_retry": CompactionRetryEvent,
    "model_usage": ModelUsageEvent,
}
