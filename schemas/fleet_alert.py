"""Fleet-alert records on ``loopwatch.fleet-alerts``: one loop signature (or one agent) looping in many runs.

A storm is a broken tool or a bad model rollout, not one confused run, so the record names the signature and
the window, counts distinct runs, and carries a bounded sample of the runs for the on-call engineer.
``alert_id`` depends only on the storm key and the window, so a re-published alert can be de-duplicated.
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from schemas.verdict import DetectorId

CURRENT_FLEET_ALERT_VERSION = 1
#: At most this many gateways, agents and sample runs are listed in one alert.
MAX_LISTED = 20

StormKind = Literal["signature", "agent"]


def fleet_alert_id(key: str, window_start_ms: int) -> str:
    """sha256 over the canonical JSON of the storm key and the window start, 32 hex chars."""
    return hashlib.sha256(orjson.dumps([key, window_start_ms])).hexdigest()[:32]


class SampleRun(BaseModel):
    """One of the runs that made the storm (the first ones seen in the window)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    gateway_id: str
    session_id: str
    run_id: str | None = None
    verdict_id: str
    decision: str


class FleetAlert(BaseModel):
    """One storm: ``distinct_runs`` runs hit the same key within one window."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    alert_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    kind: StormKind = Field(
        description="signature: same (tool, detector, outcome_hash) across runs; agent: same (agent, detector)."
    )
    key: str = Field(description="The storm key as counted (canonical JSON array).")
    detector: DetectorId
    tool: str | None = None
    outcome_hash: str | None = None
    agent_id: str | None = None
    distinct_runs: StrictInt
    threshold: StrictInt
    verdicts: StrictInt = Field(description="Verdicts counted in the window so far (at least once delivery).")
    decisions: dict[str, int] = Field(default_factory=dict)
    window_start: str = Field(description="RFC 3339, UTC")
    window_end: str = Field(description="RFC 3339, UTC (exclusive)")
    window_seconds: float
    gateways: list[str] = Field(default_factory=list, max_length=MAX_LISTED)
    agents: list[str] = Field(default_factory=list, max_length=MAX_LISTED)
    sample_runs: list[SampleRun] = Field(default_factory=list, max_length=MAX_LISTED)
    version: StrictInt = CURRENT_FLEET_ALERT_VERSION
