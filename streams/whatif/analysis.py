"""Run the core over the same events with two configs and say what would change.

Each config runs in its own :class:`streams.runner.Replayer` (the path replay and the worker share), so a
what-if report predicts exactly what the worker would publish under the candidate config.

What is counted follows ``loopwatch replay``: by default the *published* decisions (what reaches
``loopwatch.verdicts``: every block and abort, warnings once per bucket), with ``include_all`` every decision
the detectors made, including warnings that de-duplication holds back.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from schemas import Event
from streams.config_file import LoadedConfig
from streams.decode import scope_key
from streams.detection.types import DecisionKind
from streams.loop_cost import CostTotals, LoopCost, add_up
from streams.runner import Replayer, failure_reason

DECISIONS: Final[tuple[DecisionKind, ...]] = ("warning", "block", "abort")


@dataclass(frozen=True, slots=True)
class IndexedEvent:
    """A decoded event and its 0-based position in the input (the line number a report shows).

    ``source`` is the ``(partition, offset)`` of an event read from a topic.
    """

    index: int
    event: Event
    source: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Who a scope key belongs to (taken from its first event)."""

    scope: str
    run_id: str | None
    session_id: str
    gateway_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class Flag:
    """One counted decision: which event, which run, what was decided."""

    index: int
    ts_ms: float
    scope: str
    agent_id: str
    tool: str
    decision: DecisionKind
    detector: str
    count: int
    published: bool
    source: tuple[int, int] | None = None
    cost: LoopCost | None = None

    @property
    def mark(self) -> Mark:
        return Mark(self.decision, self.detector, self.count, self.published)


@dataclass(frozen=True, slots=True, order=True)
class Mark:
    """The part of a decision that a config can change."""

    decision: DecisionKind
    detector: str
    count: int
    published: bool

    def describe(self, *, show_published: bool) -> str:
        text = f"{self.decision} {self.detector} count {self.count}"
        if show_published and not self.published:
            text += " (unpublished)"
        return text


@dataclass(frozen=True, slots=True)
class Tally:
    """Distinct runs and calls with each decision."""

    runs: Mapping[str, int]
    calls: Mapping[str, int]

    def to_json(self) -> dict[str, dict[str, int]]:
        return {"runs": dict(self.runs), "calls": dict(self.calls)}


def tally(flags: Iterable[Flag]) -> Tally:
    runs: dict[str, set[str]] = {d: set() for d in DECISIONS}
    calls: dict[str, int] = dict.fromkeys(DECISIONS, 0)
    for flag in flags:
        runs[flag.decision].add(flag.scope)
        calls[flag.decision] += 1
    return Tally({d: len(runs[d]) for d in DECISIONS}, calls)


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """Per (detector, agent, tool): what each config decides."""

    detector: str
    agent_id: str
    tool: str
    current: Tally
    candidate: Tally

    @property
    def changed(self) -> bool:
        return self.current != self.candidate


@dataclass(frozen=True, slots=True)
class IndexChange:
    """The decisions on one event under each config, when they differ."""

    index: int
    tool: str
    current: tuple[Mark, ...]
    candidate: tuple[Mark, ...]
    source: tuple[int, int] | None = None

    def describe(self, *, show_published: bool) -> str:
        def side(marks: tuple[Mark, ...]) -> str:
            return " + ".join(m.describe(show_published=show_published) for m in marks) or "none"

        where = f"index {self.index}"
        if self.source is not None:
            where += f" (partition {self.source[0]} offset {self.source[1]})"
        return f"{where} ({self.tool}): {side(self.current)} → {side(self.candidate)}"


@dataclass(frozen=True, slots=True)
class RunChange:
    """A run whose decisions differ between the configs."""

    run: RunInfo
    changes: tuple[IndexChange, ...]
    current: Tally
    candidate: Tally


@dataclass(frozen=True, slots=True)
class Timeline:
    """Counted decisions per time bucket (event ``ts``), per detector and config, for the report's chart."""

    start_ms: float
    width_ms: float
    buckets: int
    series: Mapping[str, Mapping[str, tuple[int, ...]]]  # detector -> config name -> counts per bucket


@dataclass(frozen=True, slots=True)
class NotApplied:
    """An event the config cannot apply: the worker would dead-letter it with ``reason`` (``apply_failed``, or
    ``state_too_large`` when the config's ``historySize`` outgrows a stored run; :func:`streams.runner.step`)."""

    index: int
    source: tuple[int, int] | None
    reason: str


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One config's counted decisions over the events, and the events it could not apply."""

    flags: tuple[Flag, ...]
    not_applied: tuple[NotApplied, ...] = ()

    def not_applied_text(self) -> str:
        """``3 events not applied (state_too_large 3; the first at index 17)``, or "" when there are none."""
        if not self.not_applied:
            return ""
        reasons = Counter(n.reason for n in self.not_applied)
        by_reason = ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
        many = len(self.not_applied)
        return (
            f"{many} event{'s' if many != 1 else ''} not applied, as the worker would dead-letter them "
            f"({by_reason}; the first at index {self.not_applied[0].index})"
        )


@dataclass(slots=True)
class Comparison:
    """Everything a what-if report shows except the sweep."""

    events: int
    runs: dict[str, RunInfo]
    include_all: bool
    current: Evaluation
    candidate: Evaluation
    rows: list[SummaryRow]
    totals: tuple[Tally, Tally]
    changed_runs: list[RunChange]
    timeline: Timeline
    costs: tuple[CostTotals, CostTotals] = (CostTotals(), CostTotals())


def run_infos(events: Iterable[IndexedEvent]) -> dict[str, RunInfo]:
    """Every scope key in first-seen order, with the ids of its first event."""
    runs: dict[str, RunInfo] = {}
    for item in events:
        ev = item.event
        key = scope_key(ev)
        if key not in runs:
            runs[key] = RunInfo(key, ev.run_id, ev.session_id, ev.gateway_id, ev.agent_id)
    return runs


def evaluate(events: Iterable[IndexedEvent], config: LoadedConfig, *, include_all: bool = False) -> Evaluation:
    """Apply every event in order with fresh state; keep the decisions that count, and the events not applied
    (the report says how many: one stderr line each would repeat for every config compared or swept)."""
    replayer = Replayer(config, include_all=include_all, report=False)
    flags: list[Flag] = []
    skipped: list[NotApplied] = []
    for item in events:
        event = item.event
        result = replayer.apply(event)
        if result.failure is not None:
            skipped.append(NotApplied(item.index, item.source, failure_reason(result.failure)))
            continue
        if not result.decisions:
            continue
        ts = event.ts_ms()
        for decision, cost in replayer.counted(result):
            flags.append(
                Flag(
                    index=item.index,
                    ts_ms=ts,
                    scope=result.scope,
                    agent_id=event.agent_id,
                    tool=decision.tool,
                    decision=decision.decision,
                    detector=decision.detector,
                    count=decision.count,
                    published=decision.published,
                    source=item.source,
                    cost=cost,
                )
            )
    return Evaluation(tuple(flags), tuple(skipped))


def summarise(current: Evaluation, candidate: Evaluation) -> list[SummaryRow]:
    """One row per (detector, agent, tool) that either config flags, sorted by those keys."""
    groups: dict[tuple[str, str, str], tuple[list[Flag], list[Flag]]] = {}
    for side, evaluation in enumerate((current, candidate)):
        for flag in evaluation.flags:
            groups.setdefault((flag.detector, flag.agent_id, flag.tool), ([], []))[side].append(flag)
    return [
        SummaryRow(detector, agent, tool, tally(cur), tally(cand))
        for (detector, agent, tool), (cur, cand) in sorted(groups.items())
    ]


def diff_runs(
    current: Evaluation, candidate: Evaluation, runs: Mapping[str, RunInfo], *, show_published: bool
) -> list[RunChange]:
    """Runs whose decisions differ, with each differing event; ordered by the first change.

    ``published`` is compared only when unpublished decisions are counted too (``show_published``): a
    warning that moves to another bucket is a change then, and invisible otherwise.
    """
    per_run: dict[str, tuple[list[Flag], list[Flag]]] = {}
    for side, evaluation in enumerate((current, candidate)):
        for flag in evaluation.flags:
            per_run.setdefault(flag.scope, ([], []))[side].append(flag)
    changed: list[RunChange] = []
    for scope, (cur, cand) in per_run.items():
        by_index: dict[int, tuple[list[Flag], list[Flag]]] = {}
        for side, flags in enumerate((cur, cand)):
            for flag in flags:
                by_index.setdefault(flag.index, ([], []))[side].append(flag)
        changes: list[IndexChange] = []
        for index in sorted(by_index):
            before, after = by_index[index]
            a = tuple(_key(f, show_published) for f in before)
            b = tuple(_key(f, show_published) for f in after)
            if a != b:
                first = (before or after)[0]
                changes.append(IndexChange(index, first.tool, a, b, first.source))
        if changes:
            changed.append(RunChange(runs[scope], tuple(changes), tally(cur), tally(cand)))
    changed.sort(key=lambda rc: (rc.changes[0].index, rc.run.scope))
    return changed


def _key(flag: Flag, show_published: bool) -> Mark:
    return flag.mark if show_published else Mark(flag.decision, flag.detector, flag.count, True)


#: Time buckets of the report's timeline unless the caller asks for another number (whatif --buckets).
TIMELINE_BUCKETS: Final = 40


def timeline(
    events: Sequence[IndexedEvent], evaluations: Mapping[str, Evaluation], *, buckets: int = TIMELINE_BUCKETS
) -> Timeline:
    """Bucket counted decisions by event time; the span is that of all events, not only flagged ones."""
    if events:
        times = [item.event.ts_ms() for item in events]
        start, end = min(times), max(times)
    else:
        start = end = 0.0
    width = max(1.0, math.ceil((end - start + 1) / buckets))
    n = max(1, min(buckets, math.ceil((end - start + 1) / width)))
    detectors = sorted({f.detector for ev in evaluations.values() for f in ev.flags})
    series: dict[str, dict[str, tuple[int, ...]]] = {}
    for detector in detectors:
        per_config: dict[str, tuple[int, ...]] = {}
        for name, evaluation in evaluations.items():
            counts = [0] * n
            for flag in evaluation.flags:
                if flag.detector == detector:
                    counts[min(n - 1, max(0, int((flag.ts_ms - start) // width)))] += 1
            per_config[name] = tuple(counts)
        series[detector] = per_config
    return Timeline(start, width, n, series)


def compare(
    events: Sequence[IndexedEvent],
    current: LoadedConfig,
    candidate: LoadedConfig,
    *,
    include_all: bool = False,
    buckets: int = TIMELINE_BUCKETS,
) -> Comparison:
    """The full current-versus-candidate comparison over ``events`` (already decoded, in input order)."""
    cur = evaluate(events, current, include_all=include_all)
    cand = evaluate(events, candidate, include_all=include_all)
    runs = run_infos(events)
    return Comparison(
        events=len(events),
        runs=runs,
        include_all=include_all,
        current=cur,
        candidate=cand,
        rows=summarise(cur, cand),
        totals=(tally(cur.flags), tally(cand.flags)),
        changed_runs=diff_runs(cur, cand, runs, show_published=include_all),
        timeline=timeline(events, {"current": cur, "candidate": cand}, buckets=buckets),
        costs=(add_up(f.cost for f in cur.flags), add_up(f.cost for f in cand.flags)),
    )
