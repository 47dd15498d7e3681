"""The OpenClaw ``tools.loopDetection`` block as its strict (zod ``.strict()``) schema describes it.

These models document the block (JSON Schema) and list what the schema would reject. loopwatch never rejects
a config for its values: the runtime resolution in :mod:`streams.detection.config` applies
fallbacks and clamping and turns every such problem into a warning. The defaults and the ordering messages
are that module's (OpenClaw's defaults), so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, StrictBool, ValidationError, WithJsonSchema

from streams.detection.config import (
    CRITICAL_BEFORE_GLOBAL,
    GUARD_DEFAULT_WINDOW,
    NUMERIC_DEFAULTS,
    WARNING_BEFORE_CRITICAL,
    is_positive_integer,
)

__all__ = [
    "CRITICAL_BEFORE_GLOBAL",
    "WARNING_BEFORE_CRITICAL",
    "DetectorsConfig",
    "LoopDetectionConfig",
    "PostCompactionGuardConfig",
    "is_positive_integer",
    "positive_int_or_none",
    "schema_errors",
]


def positive_int_or_none(value: object) -> int | None:
    """The value as an ``int`` when :func:`is_positive_integer` holds, else ``None``."""
    return int(value) if is_positive_integer(value) else None  # type: ignore[call-overload]


def _positive_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("expected a number")
    if not is_positive_integer(value):
        raise ValueError("expected an integer greater than 0")
    return int(value)


PositiveInt = Annotated[
    int,
    PlainValidator(_positive_int),
    WithJsonSchema({"type": "integer", "exclusiveMinimum": 0}),
]

_STRICT = ConfigDict(extra="forbid", frozen=True, field_title_generator=lambda name, _info: name)


class DetectorsConfig(BaseModel):
    """Per-detector switches (the global breaker and unknown-tool detector have none)."""

    model_config = _STRICT

    genericRepeat: StrictBool = True
    knownPollNoProgress: StrictBool = True
    pingPong: StrictBool = True


class PostCompactionGuardConfig(BaseModel):
    """The post-compaction guard; it is switched off only by tools.loopDetection.enabled = false."""

    model_config = _STRICT

    windowSize: PositiveInt = GUARD_DEFAULT_WINDOW


class LoopDetectionConfig(BaseModel):
    """``tools.loopDetection`` (also ``agents.list[].tools.loopDetection``), validated block by block.

    Ordering rules, checked only when both fields are set in the same block (not expressible in JSON
    Schema): warningThreshold < criticalThreshold < globalCircuitBreakerThreshold. loopwatch never rejects
    a block: invalid values fall back to the defaults and misordered thresholds are clamped, with warnings.
    """

    model_config = _STRICT

    enabled: StrictBool = False
    historySize: PositiveInt = NUMERIC_DEFAULTS["historySize"]
    warningThreshold: Annotated[PositiveInt, Field(description="Must be lower than criticalThreshold.")] = (
        NUMERIC_DEFAULTS["warningThreshold"]
    )
    unknownToolThreshold: PositiveInt = NUMERIC_DEFAULTS["unknownToolThreshold"]
    criticalThreshold: Annotated[
        PositiveInt, Field(description="Must be lower than globalCircuitBreakerThreshold.")
    ] = NUMERIC_DEFAULTS["criticalThreshold"]
    globalCircuitBreakerThreshold: PositiveInt = NUMERIC_DEFAULTS["globalCircuitBreakerThreshold"]
    detectors: DetectorsConfig = Field(default_factory=DetectorsConfig)
    postCompactionGuard: PostCompactionGuardConfig = Field(default_factory=PostCompactionGuardConfig)


def schema_errors(block: object) -> list[tuple[str, str]]:
    """What OpenClaw's strict schema would reject in one block, as ``(relative path, message)`` pairs.

    The relative path is dotted (``detectors.pingPong``); the empty string means the block itself. The
    ordering rules only apply when both fields are present *and* valid in this block.
    """
    if not isinstance(block, dict):
        return [("", "expected an object")]
    errors: list[tuple[str, str]] = []
    try:
        LoopDetectionConfig.model_validate(block)
    except ValidationError as exc:
        for err in exc.errors(include_url=False, include_input=False):
            path = ".".join(str(part) for part in err["loc"])
            errors.append((path, err["msg"]))
    warning = positive_int_or_none(block.get("warningThreshold"))
    critical = positive_int_or_none(block.get("criticalThreshold"))
    global_ = positive_int_or_none(block.get("globalCircuitBreakerThreshold"))
    if warning is not None and critical is not None and warning >= critical:
        errors.append(("criticalThreshold", WARNING_BEFORE_CRITICAL))
    if critical is not None and global_ is not None and critical >= global_:
        errors.append(("globalCircuitBreakerThreshold", CRITICAL_BEFORE_GLOBAL))
    return errors
