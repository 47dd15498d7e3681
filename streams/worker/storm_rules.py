"""Fleet-level loop storms, the pure part: storm keys of a verdict, the per-window tally, when it fires.

A verdict is counted under up to two keys: its *signature* (tool, detector, outcome hash: the same loop in
other runs, e.g. a broken tool) and its *agent* (agent id, detector: e.g. a bad model rollout). A key storms
when at least ``threshold`` distinct runs hit it within one window; it fires once per key and window. Runs are
told apart by (gateway id, scope key), so re-delivered verdicts and further verdicts of one run never count
twice. The Faust shell (:mod:`streams.worker.storms`) owns the windows; nothing here reads a clock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from schemas import Verdict, ts_to_epoch_ms
from schemas.fleet_alert import MAX_LISTED, FleetAlert, SampleRun, StormKind, fleet_alert_id
from streams.decode import scope_key_of

MAX_STORM_THRESHOLD: Final = 10_000
DEFAULT_WINDOW_SECONDS: Final = 300.0
DEFAULT_SIGNATURE_RUNS: Final = 5
DEFAULT_AGENT_RUNS: Final = 20


@dataclass(frozen=True, slots=True)
class StormConfig:
    """Window length and thresholds; a threshold of 0 turns that kind of storm off."""

    window_seconds: float = DEFAULT_WINDOW_SECONDS
    signature_runs: int = DEFAULT_SIGNATURE_RUNS
    agent_runs: int = DEFAULT_AGENT_RUNS

    def __post_init__(self) -> None:
        if not 1.0 <= self.window_seconds <= 7 * 24 * 3600 or self.window_seconds != int(self.window_seconds):
            raise ValueError("storm window must be whole seconds, between 1 second and 7 days")
        for name, runs in (("signature", self.signature_runs), ("agent", self.agent_runs)):
            if not 0 <= runs <= MAX_STORM_THRESHOLD:
                raise ValueError(f"{name} storm threshold must be between 0 (off) and {MAX_STORM_THRESHOLD}")

    @property
    def enabled(self) -> bool:
        return self.signature_runs > 0 or self.agent_runs > 0

    def threshold(self, kind: str) -> int:
        return self.signature_runs if kind == "signature" else self.agent_runs


def storm_key(kind: StormKind, verdict: Verdict) -> str:
    """The canonical key a verdict is counted under (a JSON array, so any text is unambiguous)."""
    if kind == "signature":
        parts: list[Any] = ["signature", verdict.detector, verdict.tool, verdict.outcome_hash]
    else:
        parts = ["agent", verdict.detector, verdict.agent_id]
    return orjson.dumps(parts).decode()


def run_identity(verdict: Verdict) -> str:
    """A short digest of (gateway id, scope key): one run, whatever its verdicts."""
    scope = scope_key_of(verdict.run_id, verdict.session_id)
    return hashlib.sha256(orjson.dumps([verdict.gateway_id, scope])).hexdigest()[:16]


def event_seconds(verdict: Verdict, record_seconds: float, window_seconds: float) -> float:
    """When the verdict's event happened: its ``event_ts`` unless missing or more than a window away from
    when the verdict was written (a gateway clock far off must not open windows in the past or future)."""
    ts = verdict.event_ts
    if ts is None:
        return record_seconds
    try:
        seconds = ts_to_epoch_ms(ts) / 1000.0
    except (TypeError, ValueError, OverflowError):
        return record_seconds
    return seconds if abs(seconds - record_seconds) <= window_seconds else record_seconds


@dataclass(frozen=True, slots=True)
class Signal:
    """One verdict as counted under one storm key: what the counting side needs, nothing more."""

    key: str
    kind: StormKind
    run: str
    ts: float
    decision: str
    gateway_id: str
    agent_id: str
    session_id: str
    run_id: str | None
    verdict_id: str
    detector: str
    tool: str | None
    outcome_hash: str | None

    def to_bytes(self) -> bytes:
        return orjson.dumps({name: getattr(self, name) for name in self.__slots__})

    @classmethod
    def from_bytes(cls, raw: bytes) -> Signal:
        data = orjson.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("storm signal is not an object")
        return cls(**{name: data[name] for name in cls.__slots__})


def signals_of(verdict: Verdict, record_seconds: float, config: StormConfig) -> list[Signal]:
    """The storm signals of one verdict: one per enabled kind."""
    kinds: list[StormKind] = [k for k in ("signature", "agent") if config.threshold(k) > 0]
    if not kinds:
        return []
    run = run_identity(verdict)
    ts = event_seconds(verdict, record_seconds, config.window_seconds)
    return [
        Signal(
            key=storm_key(kind, verdict),
            kind=kind,
            run=run,
            ts=ts,
            decision=verdict.decision,
            gateway_id=verdict.gateway_id,
            agent_id=verdict.agent_id,
            session_id=verdict.session_id,
            run_id=verdict.run_id,
            verdict_id=verdict.verdict_id,
            detector=verdict.detector,
            tool=verdict.tool,
            outcome_hash=verdict.outcome_hash,
        )
        for kind in kinds
    ]


def window_start(ts: float, window_seconds: float) -> float:
    """The start of the tumbling window holding ``ts`` (windows are aligned to the epoch)."""
    return ts - ts % window_seconds


def observe(tally: Mapping[str, Any] | None, signal: Signal, threshold: int) -> tuple[dict[str, Any], bool]:
    """Count ``signal`` into one window's tally; True when this signal makes the key storm.

    The tally is a JSON-ready dict (it is stored in a Faust table). Its run list stops growing once the
    threshold is reached, so a tally is bounded whatever the traffic.
    """
    runs: list[str] = list(tally["runs"]) if tally else []
    decisions: dict[str, int] = dict(tally["decisions"]) if tally else {}
    samples: list[dict[str, Any]] = list(tally["samples"]) if tally else []
    gateways: list[str] = list(tally["gateways"]) if tally else []
    agents: list[str] = list(tally["agents"]) if tally else []
    alerted = bool(tally["alerted"]) if tally else False
    decisions[signal.decision] = decisions.get(signal.decision, 0) + 1
    fired = False
    if not alerted and signal.run not in runs:
        runs.append(signal.run)
        if len(samples) < MAX_LISTED:
            samples.append(
                {
                    "gateway_id": signal.gateway_id,
                    "session_id": signal.session_id,
                    "run_id": signal.run_id,
                    "verdict_id": signal.verdict_id,
                    "decision": signal.decision,
                }
            )
        if len(gateways) < MAX_LISTED and signal.gateway_id not in gateways:
            gateways.append(signal.gateway_id)
        if len(agents) < MAX_LISTED and signal.agent_id not in agents:
            agents.append(signal.agent_id)
        if threshold > 0 and len(runs) >= threshold:
            alerted = fired = True
    return (
        {
            "runs": runs,
            "verdicts": (int(tally["verdicts"]) if tally else 0) + 1,
            "decisions": decisions,
            "samples": samples,
            "gateways": gateways,
            "agents": agents,
            "alerted": alerted,
        },
        fired,
    )


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def alert_of(signal: Signal, tally: Mapping[str, Any], threshold: int, window_seconds: float) -> FleetAlert:
    """The fleet-alert record for a tally that just fired."""
    start = window_start(signal.ts, window_seconds)
    start_ms = round(start * 1000)
    return FleetAlert(
        alert_id=fleet_alert_id(signal.key, start_ms),
        kind=signal.kind,
        key=signal.key,
        detector=signal.detector,
        tool=signal.tool if signal.kind == "signature" else None,
        outcome_hash=signal.outcome_hash if signal.kind == "signature" else None,
        agent_id=signal.agent_id if signal.kind == "agent" else None,
        distinct_runs=len(tally["runs"]),
        threshold=threshold,
        verdicts=int(tally["verdicts"]),
        decisions=dict(tally["decisions"]),
        window_start=_rfc3339(start),
        window_end=_rfc3339(start + window_seconds),
        window_seconds=window_seconds,
        gateways=list(tally["gateways"]),
        agents=list(tally["agents"]),
        sample_runs=[SampleRun(**sample) for sample in tally["samples"]],
    )


__all__ = [
    "DEFAULT_AGENT_RUNS",
    "DEFAULT_SIGNATURE_RUNS",
    "DEFAULT_WINDOW_SECONDS",
    "MAX_STORM_THRESHOLD",
    "Signal",
    "StormConfig",
    "alert_of",
    "event_seconds",
    "observe",
    "run_identity",
    "signals_of",
    "storm_key",
    "window_start",
]
