"""pydantic v2 models of every loopwatch wire record and of the OpenClaw loop-detection config.

The JSON Schema files in ``schemas/json/`` are generated from these models (``python -m schemas.generate``)
and a test fails when they drift.
"""

from schemas.config import (
    CRITICAL_BEFORE_GLOBAL,
    WARNING_BEFORE_CRITICAL,
    DetectorsConfig,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    schema_errors,
)
from schemas.events import (
    CURRENT_EVENT_VERSION,
    EVENT_ADAPTER,
    EVENT_MODELS,
    EVENT_TYPES,
    CompactionRetryEvent,
    Event,
    EventBase,
    ModelUsageEvent,
    ToolCallEvent,
    ToolResultEvent,
    ts_to_epoch_ms,
)
from schemas.fleet_alert import CURRENT_FLEET_ALERT_VERSION, FleetAlert, SampleRun, StormKind, fleet_alert_id
from schemas.verdict import CURRENT_VERDICT_VERSION, DecisionName, DetectorId, SourceRef, Verdict, verdict_id

__all__ = [
    "CRITICAL_BEFORE_GLOBAL",
    "CURRENT_EVENT_VERSION",
    "CURRENT_FLEET_ALERT_VERSION",
    "CURRENT_VERDICT_VERSION",
    "EVENT_ADAPTER",
    "EVENT_MODELS",
    "EVENT_TYPES",
    "WARNING_BEFORE_CRITICAL",
    "CompactionRetryEvent",
    "DecisionName",
    "DetectorId",
    "DetectorsConfig",
    "Event",
    "EventBase",
    "FleetAlert",
    "LoopDetectionConfig",
    "ModelUsageEvent",
    "PostCompactionGuardConfig",
    "SampleRun",
    "SourceRef",
    "StormKind",
    "ToolCallEvent",
    "ToolResultEvent",
    "Verdict",
    "fleet_alert_id",
    "schema_errors",
    "ts_to_epoch_ms",
    "verdict_id",
]
