"""Verdict records on ``loopwatch.verdicts``: what the worker publishes for each published decision.

``verdict_id`` is a pure function of the triggering event and the decision, so a verdict re-published after a
crash or rebalance carries the same id and consumers can de-duplicate it.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, field_validator

CURRENT_VERDICT_VERSION = 1

DecisionName = Literal["warning", "block", "abort"]
DetectorId = Literal[
    "generic_repeat",
    "known_poll_no_progress",
    "ping_pong",
    "unknown_tool_repeat",
    "global_circuit_breaker",
    "compaction_loop_persisted",
    "argument_churn",
]
ProfileName = Literal["openclaw-2026.7", "openclaw-2026.9"]


def verdict_id(gateway_id: str, event_id: str, decision: str, detector: str) -> str:
    """Deterministic verdict id: sha256 over the canonical JSON array of the four parts, 32 hex chars.

    A JSON array (not a joined string) keeps the encoding unambiguous whatever the parts contain.
    """
    canonical = orjson.dumps([gateway_id, event_id, decision, detector])
    return hashlib.sha256(canonical).hexdigest()[:32]


class SourceRef(BaseModel):
    """Where the triggering event was read: the Kafka coordinates, all null for a file replay."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    topic: str | None = None
    partition: Annotated[int, Field(ge=0)] | None = None
    offset: Annotated[int, Field(ge=0)] | None = None


class Verdict(BaseModel):
    """One published decision about one event (warning, block or guard abort)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    verdict_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    decision: DecisionName
    detector: DetectorId
    count: StrictInt
    threshold: StrictInt
    gateway_id: str
    agent_id: str
    session_id: str
    run_id: str | None = None
    tool: str | None = None
    call_id: str | None = None
    event_id: str
    paired_tool: str | None = None
    outcome_hash: str | None = Field(
        default=None,
        description=(
            "Hash of the outcome the loop keeps producing (the detector's latest unchanged result hash), null when"
            " no outcome is known yet. The same loop in another run has the same value: fleet storms group by it."
        ),
    )
    message: str
    source: SourceRef = Field(default_factory=SourceRef)
    event_ts: str | StrictInt | StrictFloat | None = Field(
        default=None, description="The triggering event's ts as it was sent (RFC 3339 text or epoch ms)."
    )
    config_hash: str
    profile: ProfileName = Field(
        default="openclaw-2026.7",
        description="The semantics profile (OpenClaw generation) whose rules decided this verdict.",
    )
    version: StrictInt = CURRENT_VERDICT_VERSION
    tokens_in_loop: StrictInt | None = Field(
        default=None,
        description=(
            "Tokens the run's model calls consumed since this loop's first decision (streams.loop_cost); null"
            " when the run reported no model usage."
        ),
    )
    cost_usd_in_loop: StrictFloat | StrictInt | None = Field(
        default=None,
        description="Their cost in US dollars; null unless the gateway priced every one of those model calls.",
    )
    saved_tokens_estimate: StrictInt | None = Field(
        default=None,
        description=(
            "Estimated tokens a block or abort saved: the loop's mean tokens per model call times the calls"
            " avoided (1 per block, criticalThreshold per abort); null for warnings and when usage is unknown."
        ),
    )
    saved_cost_usd_estimate: StrictFloat | StrictInt | None = Field(
        default=None, description="The same estimate in US dollars; null when the cost is unknown."
    )

    @field_validator("source", mode="before")
    @classmethod
    def _no_source(cls, value: object) -> object:
        """A file replay has no Kafka coordinates: ``None`` becomes the all-null reference."""
        return SourceRef() if value is None else value
