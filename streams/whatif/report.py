"""A what-if report: the comparison and/or the sweep, plus where the inputs came from; and its JSON form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from streams.config_file import LoadedConfig
from streams.detection.types import PROFILE_2026_9
from streams.whatif.analysis import (
    TIMELINE_BUCKETS,
    Comparison,
    Evaluation,
    IndexedEvent,
    Mark,
    Tally,
    compare,
    run_infos,
)
from streams.whatif.sweep import SweepResult, SweepSpec, run_sweep

REPORT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ConfigInfo:
    label: str  # file name or "(OpenClaw defaults)"
    config_hash: str
    resolved: dict[str, dict[str, object]]
    profiles: str  # how the semantics profile is chosen (e.g. every event as openclaw-2026.9)

    @classmethod
    def of(cls, config: LoadedConfig) -> ConfigInfo:
        only = config.choice.only
        resolved = config.gen9.resolved() if only == PROFILE_2026_9 else config.resolved()
        return cls(config.path or "(OpenClaw defaults)", config.config_hash, resolved, config.choice.describe())


@dataclass(frozen=True, slots=True)
class Report:
    source: str
    events: int
    invalid: int
    runs: int
    include_all: bool
    current: ConfigInfo
    candidate: ConfigInfo | None
    comparison: Comparison | None
    sweep: SweepResult | None


def build_report(
    events: Sequence[IndexedEvent],
    current: LoadedConfig,
    candidate: LoadedConfig | None,
    *,
    sweep: SweepSpec | None = None,
    include_all: bool = False,
    source: str = "<events>",
    invalid: int = 0,
    buckets: int = TIMELINE_BUCKETS,
) -> Report:
    """Compare (when there is a candidate) and sweep (when asked) over the same decoded events."""
    comparison = (
        compare(events, current, candidate, include_all=include_all, buckets=buckets) if candidate is not None else None
    )
    swept = run_sweep(events, current, sweep, include_all=include_all) if sweep is not None else None
    runs = len(comparison.runs) if comparison is not None else len(run_infos(events))
    return Report(
        source=source,
        events=len(events),
        invalid=invalid,
        runs=runs,
        include_all=include_all,
        current=ConfigInfo.of(current),
        candidate=ConfigInfo.of(candidate) if candidate is not None else None,
        comparison=comparison,
        sweep=swept,
    )


def _marks(marks: Sequence[Mark]) -> list[dict[str, Any]]:
    return [{"decision": m.decision, "detector": m.detector, "count": m.count, "published": m.published} for m in marks]


def _config(info: ConfigInfo | None) -> dict[str, Any] | None:
    if info is None:
        return None
    return {"path": info.label, "config_hash": info.config_hash, "profiles": info.profiles, "resolved": info.resolved}


def _not_applied(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Every event the config cannot apply (what the worker would dead-letter), in input order."""
    return [
        {
            "index": n.index,
            "source": {"partition": n.source[0], "offset": n.source[1]} if n.source else None,
            "reason": n.reason,
        }
        for n in evaluation.not_applied
    ]


def _pair(current: Tally, candidate: Tally) -> dict[str, Any]:
    return {"current": current.to_json(), "candidate": candidate.to_json()}


def to_json(report: Report) -> dict[str, Any]:
    """The report as plain JSON data (``--format json``); every changed run and change is included."""
    out: dict[str, Any] = {
        "version": REPORT_VERSION,
        "events": {
            "source": report.source,
            "count": report.events,
            "invalid": report.invalid,
            "runs": report.runs,
        },
        "counting": "all" if report.include_all else "published",
        "current": _config(report.current),
        "candidate": _config(report.candidate),
        "summary": [],
        "totals": None,
        "changed_runs": [],
        "timeline": None,
        "sweep": None,
    }
    comparison = report.comparison
    if comparison is not None:
        show = comparison.include_all
        out["summary"] = [
            {"detector": r.detector, "agent_id": r.agent_id, "tool": r.tool, **_pair(r.current, r.candidate)}
            for r in comparison.rows
        ]
        out["totals"] = _pair(*comparison.totals)
        out["loop_cost"] = {"current": comparison.costs[0].to_json(), "candidate": comparison.costs[1].to_json()}
        out["not_applied"] = {
            "current": _not_applied(comparison.current),
            "candidate": _not_applied(comparison.candidate),
        }
        out["changed_runs"] = [
            {
                "scope": rc.run.scope,
                "run_id": rc.run.run_id,
                "session_id": rc.run.session_id,
                "gateway_id": rc.run.gateway_id,
                "agent_id": rc.run.agent_id,
                **_pair(rc.current, rc.candidate),
                "changes": [
                    {
                        "index": ch.index,
                        "source": ({"partition": ch.source[0], "offset": ch.source[1]} if ch.source else None),
                        "tool": ch.tool,
                        "current": _marks(ch.current),
                        "candidate": _marks(ch.candidate),
                        "text": ch.describe(show_published=show),
                    }
                    for ch in rc.changes
                ],
            }
            for rc in comparison.changed_runs
        ]
        tl = comparison.timeline
        out["timeline"] = {
            "start_ms": tl.start_ms,
            "bucket_ms": tl.width_ms,
            "buckets": tl.buckets,
            "series": {d: {name: list(v) for name, v in s.items()} for d, s in tl.series.items()},
        }
    if report.sweep is not None:
        out["sweep"] = {
            "key": report.sweep.key,
            "current_value": report.sweep.current_value,
            "points": [
                {"value": p.value, "resolved": p.resolved, **p.tally.to_json(), "not_applied": p.not_applied}
                for p in report.sweep.points
            ],
        }
    return out
