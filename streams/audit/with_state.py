"""``loopwatch replay --topic … --with-state``: start each run from the worker's stored state, not from empty.

The evidence is the worker's run-table changelog (``<group>-runs-changelog`` or ``--state-topic``): one stored-run
envelope (:mod:`streams.worker.envelope`: the core state, the source partition and the last source offset
applied) per run and batch, written after the batch's verdicts were confirmed, and a tombstone when the run
expired. The rules that pick each run's starting state (stored / expired / first / compacted / empty) and replay
its expiries inside the range are written once, in docs/auditing.md; :mod:`streams.audit.changelog` applies them
to one run's records (:func:`~streams.audit.changelog.select_base`,
:func:`~streams.audit.changelog.select_expiries`), and :func:`confirm_first_version` checks the *first* case by
rebuilding the stored state from empty.

Everything here is pure except :func:`replay_with_state` and :func:`read_state`, which read the changelog and the
warm-up events through the :class:`~streams.kafka.reader.RecordSource`. ``--run RUN_ID --with-state`` explains one
run from the same base, warm-up and restarts (:mod:`streams.audit.explain`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from streams.audit import source
from streams.audit.changelog import (
    ORIGINS,
    Base,
    ChangelogIndex,
    Restart,
    expiry_notes,
    index_changelog,
    select_base,
    select_expiries,
)
from streams.config_file import LoadedConfig
from streams.decode import scope_key
from streams.detection import RunState
from streams.kafka import reader
from streams.kafka.reader import RecordSource
from streams.runner import Replayer

#: How far before a run's first event in the range its first stored state may reach: a worker batch holds at
#: most this many records (``WorkerSettings.max_batch``), so a run whose first stored state covers that event
#: began at most this many offsets earlier.
LOOKBACK: Final = 10_000


def confirm_first_version(
    candidate: Base, lookback_after: int, run_events: Sequence[source.PositionedEvent], config: LoadedConfig
) -> Base:
    """A ``compacted`` candidate becomes ``first`` (empty, warm-up after ``lookback_after``) when the run's
    events after ``lookback_after`` up to the candidate's ``last_offset`` rebuild its state from empty.

    ``run_events`` are the run's events before and in the range, in offset order.
    """
    if candidate.origin != "compacted" or candidate.state is None:
        return candidate
    replayer = Replayer(config, report=False)  # a check: the audit's own pass reports what it skips
    state: RunState | None = None
    applied = 0
    for pe in run_events:
        if pe.index <= lookback_after:
            continue
        if pe.index > candidate.after:
            break
        state = replayer.apply(pe.event).state
        applied += 1
    if applied and state is not None and state.to_primitive() == candidate.state.to_primitive():
        return replace(candidate, state=None, after=lookback_after, origin="first", usage=None)
    return candidate


def run_offsets(events: Mapping[int, Sequence[source.PositionedEvent]]) -> dict[tuple[int, str], list[int]]:
    """(partition, scope key) -> offsets of the run's events in the range, ascending."""
    out: dict[tuple[int, str], list[int]] = {}
    for partition, items in events.items():
        for pe in items:
            out.setdefault((partition, scope_key(pe.event)), []).append(pe.index)
    return out


def first_offsets(events: Mapping[int, Sequence[source.PositionedEvent]]) -> dict[tuple[int, str], int]:
    """(partition, scope key) -> offset of the run's first event in the range."""
    return {run: offsets[0] for run, offsets in run_offsets(events).items()}


def select_bases(
    events: Mapping[int, Sequence[source.PositionedEvent]], index: ChangelogIndex
) -> dict[tuple[int, str], Base]:
    """Each run's base (:func:`select_base`) with its expiries in the range (:func:`select_expiries`)."""
    out: dict[tuple[int, str], Base] = {}
    for run, offsets in run_offsets(events).items():
        records = index.runs.get(run, [])
        out[run] = replace(select_base(records, offsets[0]), expiries=select_expiries(records, offsets))
    return out


def warmup_ranges(bases: Mapping[tuple[int, str], Base], starts: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Per partition, the ``[from, to)`` offsets before the range whose events some run's base does not cover."""
    out: dict[int, tuple[int, int]] = {}
    for (partition, _), base in bases.items():
        start = starts.get(partition, 0)
        if base.after + 1 < start:
            lo = out.get(partition, (start, start))[0]
            out[partition] = (min(lo, base.after + 1), start)
    return out


# --- replay (pure) ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class StatefulReplay:
    records: list[dict[str, Any]]
    bases: dict[tuple[int, str], Base]
    skipped: set[tuple[int, int]]  # (partition, offset) of range events a compacted changelog's state covers
    warmed: int = 0  # events before the range applied silently
    restarted: int = 0  # range events applied to an empty state: the worker had expired their run just before
    warmup: dict[int, tuple[int, int]] = field(default_factory=dict)
    ahead: dict[int, tuple[int, int]] = field(default_factory=dict)  # read after the range for first versions
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {origin: 0 for origin in ORIGINS}
        for base in self.bases.values():
            out[base.origin] += 1
        return out

    def expiries(self) -> dict[str, int]:
        """In-range expiries: restarts replayed, tombstones without a later event, unknown restart points."""
        return {
            "restarted_after_expiry": self.restarted,
            "expired_without_return": sum(len(b.expiries.idle) for b in self.bases.values()),
            "expiry_unknown": sum(len(b.expiries.unknowable()) for b in self.bases.values()),
        }

    def summary(self) -> str:
        c = self.counts()
        e = self.expiries()
        spans = _spans(self.warmup) or "none"
        after = f" and after the range ({_spans(self.ahead)}) to rebuild first states" if self.ahead else ""
        return (
            f"with-state: {len(self.bases)} runs: {c['stored']} from a stored state, {c['first']} begun in the "
            f"batch of their first event in range (from empty), {c['expired']} expired "
            f"(empty), {c['compacted']} from a newer state of a compacted changelog, {c['empty']} without "
            f"state (empty); {self.warmed} earlier events re-applied silently (read from offsets {spans}{after}); "
            f"{len(self.skipped)} events skipped (already in a newer stored state); expiries in range: "
            f"{e['restarted_after_expiry']} restarts from empty replayed, {e['expired_without_return']} without a "
            f"later event, {e['expiry_unknown']} with an unknown restart point"
            + (" (each named in a note above)" if e["expiry_unknown"] else "")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "runs": len(self.bases),
            "warmed": self.warmed,
            "skipped": len(self.skipped),
            **self.expiries(),
            "warmup": {str(p): list(r) for p, r in sorted(self.warmup.items())},
            "ahead": {str(p): list(r) for p, r in sorted(self.ahead.items())},
        }

    def replayed_in_range(self, verdict: Mapping[str, Any]) -> bool:
        """False for a recorded verdict of a skipped event (not replayed, so not compared)."""
        where = verdict.get("source")
        if not isinstance(where, dict):
            return True
        return (where.get("partition"), where.get("offset")) not in self.skipped


def _spans(spans: Mapping[int, tuple[int, int]]) -> str:
    """``P:first..last`` of each ``[from, to)`` span."""
    return ", ".join(f"{p}:{lo}..{hi - 1}" for p, (lo, hi) in sorted(spans.items()))


def replay_from_bases(
    events: Mapping[int, Sequence[source.PositionedEvent]],
    warmup: Mapping[int, Sequence[source.PositionedEvent]],
    bases: Mapping[tuple[int, str], Base],
    config: LoadedConfig,
    topic: str,
    *,
    include_all: bool,
) -> StatefulReplay:
    """Like :func:`streams.audit.replay_partitions`, each run starting from its base.

    ``warmup`` holds the events before the range (offset order per partition); only those of runs in the
    range past their base's ``after`` are applied, without output.
    """
    out = StatefulReplay([], dict(bases), set())
    for partition in sorted(events):
        start = start_partition(partition, warmup, bases, config, include_all=include_all)
        out.warmed += sum(start.warmed.values())
        for pe in events[partition]:
            if start.covers(pe):
                out.skipped.add((partition, pe.index))
                continue
            if start.restart(pe) is not None:
                out.restarted += 1
            out.records.extend(start.replayer.records(pe.event, pe.index, pe.source(topic)))
    return out


@dataclass(slots=True)
class PartitionStart:
    """One partition's run states at the start of the range: each run's base plus its warm-up."""

    replayer: Replayer  # the runs' states
    after: dict[str, int]  # scope key -> the last offset its state covers
    warmed: dict[str, int] = field(default_factory=dict)  # scope key -> earlier events applied silently
    restarts: dict[int, Restart] = field(default_factory=dict)  # range offset -> the expiry restarting its run

    def covers(self, pe: source.PositionedEvent) -> bool:
        """Whether a range event is already in its run's state (skipped: a compacted changelog's newer state)."""
        return pe.index <= self.after.get(scope_key(pe.event), -1)

    def restart(self, pe: source.PositionedEvent) -> Restart | None:
        """The expiry after which the worker applied ``pe`` to an empty state, if any; its run's state is then
        emptied here too (call right before applying ``pe``)."""
        found = self.restarts.get(pe.index)
        if found is not None:
            self.replayer.restart(scope_key(pe.event))
        return found


def start_partition(
    partition: int,
    warmup: Mapping[int, Sequence[source.PositionedEvent]],
    bases: Mapping[tuple[int, str], Base],
    config: LoadedConfig,
    *,
    include_all: bool = False,
) -> PartitionStart:
    """The bases of ``partition``'s runs, advanced silently through their ``warmup`` events past ``after``."""
    start = PartitionStart(Replayer(config, include_all=include_all), {})
    for (p, key), base in bases.items():
        if p == partition:
            start.replayer.states[key] = base.state
            if base.usage is not None:
                start.replayer.usage.runs[key] = base.usage
            start.after[key] = base.after
            start.restarts.update((r.offset, r) for r in base.expiries.restarts)
    for pe in warmup.get(partition, ()):
        key = scope_key(pe.event)
        if key not in start.after or pe.index <= start.after[key]:
            continue
        start.replayer.apply(pe.event)
        start.after[key] = pe.index
        start.warmed[key] = start.warmed.get(key, 0) + 1
    return start


@dataclass(slots=True)
class StatePlan:
    """The bases chosen from the changelog alone, and which earlier events (``warmup`` spans) are needed.

    ``ahead`` spans the events after the range that a compacted candidate's state covers: the worker's batch
    went on past ``--to``, and :func:`confirm_first_version` needs them to rebuild that state from empty.
    ``ahead_events`` holds them once read (:func:`read_state`)."""

    bases: dict[tuple[int, str], Base]
    lookback: dict[tuple[int, str], int]  # compacted candidates -> warm-up start for confirm_first_version
    warmup: dict[int, tuple[int, int]]
    notes: list[str]
    required: dict[int, tuple[int, int]] = field(default_factory=dict)  # warm-up the stored bases need
    ahead: dict[int, tuple[int, int]] = field(default_factory=dict)
    ahead_events: dict[int, list[source.PositionedEvent]] = field(default_factory=dict)


def plan_state(
    events: Mapping[int, Sequence[source.PositionedEvent]],
    changelog: Mapping[int, Sequence[reader.TopicRecord]],
    state_topic: str,
    starts: Mapping[int, int],
    ends: Mapping[int, int] | None = None,
) -> StatePlan:
    """Bases from the changelog records, plus the ``[from, to)`` spans to read: before the range for warm-up,
    and after its ``ends`` (per partition, exclusive) where a compacted candidate's state reaches past them."""
    firsts = first_offsets(events)
    index = index_changelog(changelog, state_topic, set(firsts))
    bases = select_bases(events, index)
    lookback = {run: max(-1, firsts[run] - LOOKBACK - 1) for run, b in bases.items() if b.origin == "compacted"}
    spans = warmup_ranges({**bases, **{run: Base(None, after, "first") for run, after in lookback.items()}}, starts)
    ahead: dict[int, tuple[int, int]] = {}
    for run in lookback:
        partition, end, after = run[0], (ends or {}).get(run[0]), bases[run].after
        # a first version covers at most one batch past the run's first event: a newer one is no first version
        if end is not None and end <= after < firsts[run] + LOOKBACK:
            ahead[partition] = (end, max(after + 1, ahead.get(partition, (end, end))[1]))
    notes = [*index.ignored, *index.gaps]
    for run, base in sorted(bases.items()):
        notes += expiry_notes(run, base, state_topic)
    return StatePlan(bases, lookback, spans, notes, warmup_ranges(bases, starts), ahead)


def finish_state(
    plan: StatePlan,
    events: Mapping[int, Sequence[source.PositionedEvent]],
    warm: Mapping[int, Sequence[source.PositionedEvent]],
    config: LoadedConfig,
    topic: str,
    *,
    include_all: bool,
) -> StatefulReplay:
    """Confirm first versions against the warm-up events (``plan.warmup`` spans), then replay from the bases."""
    bases = confirm_bases(plan, events, warm, config)
    result = replay_from_bases(events, warm, bases, config, topic, include_all=include_all)
    result.warmup = dict(plan.warmup)
    result.ahead = dict(plan.ahead)
    result.notes = list(plan.notes)
    return result


def confirm_bases(
    plan: StatePlan,
    events: Mapping[int, Sequence[source.PositionedEvent]],
    warm: Mapping[int, Sequence[source.PositionedEvent]],
    config: LoadedConfig,
) -> dict[tuple[int, str], Base]:
    """``plan.bases`` with every compacted candidate checked by :func:`confirm_first_version`."""
    bases = dict(plan.bases)
    by_run: dict[tuple[int, str], list[source.PositionedEvent]] = {run: [] for run in plan.lookback}
    for partition in {p for p, _ in plan.lookback}:
        for pe in (*warm.get(partition, ()), *events[partition], *plan.ahead_events.get(partition, ())):
            run_events = by_run.get((partition, scope_key(pe.event)))
            if run_events is not None:
                run_events.append(pe)
    for run, after in plan.lookback.items():
        bases[run] = confirm_first_version(bases[run], after, by_run[run], config)
    return bases


# --- Kafka I/O (thin) -------------------------------------------------------------------------------------


async def replay_with_state(
    records: RecordSource,
    state_topic: str,
    topic: str,
    read: reader.TopicRead,
    events: Mapping[int, Sequence[source.PositionedEvent]],
    config: LoadedConfig,
    *,
    include_all: bool,
) -> StatefulReplay:
    """Read the changelog, plan, read the warm-up events, finish (see :func:`plan_state`, :func:`finish_state`)."""
    plan, warm = await read_state(records, state_topic, topic, read, events)
    return finish_state(plan, events, warm, config, topic, include_all=include_all)


async def read_state(
    records: RecordSource,
    state_topic: str,
    topic: str,
    read: reader.TopicRead,
    events: Mapping[int, Sequence[source.PositionedEvent]],
) -> tuple[StatePlan, dict[int, list[source.PositionedEvent]]]:
    """The plan for ``events``' runs (from the changelog) and the warm-up events it needs, per partition."""
    try:
        changelog = await records.read(state_topic)
    except reader.NoSuchTopic:
        raise  # the caller names the topic and the flag naming it
    except RuntimeError as exc:
        raise RuntimeError(f"cannot read state topic {state_topic}: {exc}") from None
    starts = {p: lo for p, (lo, _) in read.ranges.items()}
    plan = plan_state(events, changelog.records, state_topic, starts, {p: hi for p, (_, hi) in read.ranges.items()})
    warm: dict[int, list[source.PositionedEvent]] = {}
    if plan.warmup:
        earlier = await _read_spans(records, topic, plan.warmup)
        for p, (lo, _) in sorted(plan.required.items()):
            got = earlier.ranges.get(p, (lo, lo))[0]
            if got > lo:
                plan.notes.append(f"{topic}[{p}]: events {lo}..{got - 1} are gone (retention); replay may differ")
        warm, _ = source.decode_records(earlier.records)  # bad records: the worker dead-lettered them too
    if plan.ahead:
        plan.ahead_events, _ = source.decode_records((await _read_spans(records, topic, plan.ahead)).records)
    return plan, warm


async def _read_spans(records: RecordSource, topic: str, spans: Mapping[int, tuple[int, int]]) -> reader.TopicRead:
    """``topic``'s records in each partition's ``[from, to)`` span; nothing of the partitions not listed."""
    start = reader.OffsetBound(per_partition={p: lo for p, (lo, _) in spans.items()})
    end = reader.OffsetBound(per_partition={p: hi for p, (_, hi) in spans.items()}, default=0)
    return await records.read(topic, start, end)


__all__ = [
    "LOOKBACK",
    "PartitionStart",
    "StatePlan",
    "StatefulReplay",
    "confirm_bases",
    "confirm_first_version",
    "finish_state",
    "first_offsets",
    "plan_state",
    "read_state",
    "replay_from_bases",
    "replay_with_state",
    "run_offsets",
    "select_bases",
    "start_partition",
    "warmup_ranges",
]
