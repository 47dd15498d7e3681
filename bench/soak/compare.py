"""Compare the verdicts the worker published with ``loopwatch replay`` over the same events.

The events file holds every event exactly as it was produced, in produce order. All events of a run share a
key, hence a partition, and one producer sends them in order, so the file order of each run is the order the
worker applied them in. State is per run, so replaying the file (``streams.cli.replay.replay_lines``, the
code behind ``loopwatch replay --events``) gives the decisions the worker must have published.

Replay keeps every run forever; the worker forgets a run after the idle TTL. The two agree as long as no run
gets an event after being idle longer than the TTL, which :func:`run_gaps` checks on the same file (the soak
traffic is designed so that it never happens).
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from streams.config_file import LoadedConfig

#: Verdict fields compared between worker and replay (``source`` is only set by the worker).
COMPARED = (
    "decision",
    "detector",
    "count",
    "threshold",
    "gateway_id",
    "agent_id",
    "session_id",
    "run_id",
    "tool",
    "call_id",
    "event_id",
    "paired_tool",
    "message",
    "event_ts",
    "config_hash",
)


def verdict_key(verdict: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(verdict.get(name) for name in COMPARED)


@dataclass
class Comparison:
    replay_verdicts: int = 0
    published_distinct: int = 0
    published_records: int = 0
    duplicates: int = 0  # same verdict_id published more than once (at-least-once redelivery)
    duplicates_differing: int = 0
    missing: list[str] = field(default_factory=list)  # in replay, never published: lost verdicts
    extra: list[str] = field(default_factory=list)  # published, not in replay
    differing: list[str] = field(default_factory=list)  # same id, different content
    by_decision: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "replay_verdicts": self.replay_verdicts,
            "published_distinct": self.published_distinct,
            "published_records": self.published_records,
            "duplicates": self.duplicates,
            "duplicates_differing": self.duplicates_differing,
            "lost": len(self.missing),
            "extra": len(self.extra),
            "differing": len(self.differing),
            "lost_ids_sample": self.missing[:20],
            "extra_ids_sample": self.extra[:20],
            "differing_ids_sample": self.differing[:20],
            "by_decision": self.by_decision,
        }


def _lines(path: Path) -> Iterator[bytes]:
    from streams.audit.source import lines

    with path.open("rb") as handle:
        yield from lines(handle)


def replay_file(path: Path, config: LoadedConfig) -> dict[str, tuple[Any, ...]]:
    """``verdict_id -> compared fields`` of every published decision replay makes on ``path``."""
    from streams.audit.replay import replay_lines  # the code behind ``loopwatch replay --events``

    out = io.BytesIO()
    code = replay_lines(_lines(path), config, out, include_all=False, skip_invalid=False, name=str(path))
    if code != 0:
        raise RuntimeError(f"replay of {path} failed with status {code}")
    verdicts: dict[str, tuple[Any, ...]] = {}
    for line in out.getvalue().splitlines():
        record = orjson.loads(line)
        verdicts[record["verdict_id"]] = verdict_key(record)
    return verdicts


def compare(published: list[dict[str, Any]], replayed: Mapping[str, tuple[Any, ...]]) -> Comparison:
    result = Comparison(replay_verdicts=len(replayed), published_records=len(published))
    seen: dict[str, tuple[Any, ...]] = {}
    decisions: Counter[str] = Counter()
    for verdict in published:
        vid = verdict["verdict_id"]
        key = verdict_key(verdict)
        if vid in seen:
            result.duplicates += 1
            if seen[vid] != key:
                result.duplicates_differing += 1
            continue
        seen[vid] = key
        decisions[str(verdict.get("decision"))] += 1
    result.published_distinct = len(seen)
    result.by_decision = dict(sorted(decisions.items()))
    result.missing = sorted(set(replayed) - set(seen))
    result.extra = sorted(set(seen) - set(replayed))
    result.differing = sorted(vid for vid in set(seen) & set(replayed) if seen[vid] != replayed[vid])
    return result


def run_gaps(path: Path, ttl_s: float) -> dict[str, Any]:
    """Per run, the largest gap (by the produce-time ``ts``) between consecutive events; runs resumed after
    more than ``ttl_s`` of idleness (where worker and replay could differ) are counted."""
    last: dict[str, int] = {}
    first: dict[str, int] = {}
    largest = 0
    resumed = 0
    events = 0
    for raw in _lines(path):
        if not raw:
            continue
        event = orjson.loads(raw)
        events += 1
        run_id = event.get("run_id")
        key = run_id.strip() if isinstance(run_id, str) and run_id.strip() else event["session_id"]
        ts = int(event["ts"])
        previous = last.get(key)
        if previous is None:
            first[key] = ts
        else:
            gap = ts - previous
            largest = max(largest, gap)
            if gap > ttl_s * 1000:
                resumed += 1
        last[key] = ts
    lifetimes = sorted(last[k] - first[k] for k in last)
    return {
        "events": events,
        "distinct_runs": len(last),
        "largest_gap_s": largest / 1000,
        "resumed_after_ttl": resumed,
        "run_lifetime_p50_s": lifetimes[len(lifetimes) // 2] / 1000 if lifetimes else None,
        "run_lifetime_max_s": lifetimes[-1] / 1000 if lifetimes else None,
    }
