"""``loopwatch replay --topic … --with-state``: start each run from the worker's stored state, not from empty.

The worker's run table is changelog-backed: topic ``<group>-runs-changelog`` (or ``--state-topic``), key = the
run's scope key, value = a stored-run envelope (:mod:`streams.worker.envelope`: the core state plus the source
partition and the last source offset applied), an empty value = a tombstone (the run expired after its idle
TTL). The worker writes one version per batch *after* the batch's verdicts were confirmed; on the embedded
broker and on uncompacted Kafka every version stays in the changelog, in write order, in the changelog partition
equal to the run's source partition.

For every run with events in the range, with ``F`` its first event in the range (see :func:`select_base`):

* **stored**: the newest version written before the first version covering ``F`` (``last_offset >= F``), when it
  is a state. Its ``last_offset`` is before ``F`` but, since the worker writes once per batch, not necessarily
  ``F - 1``: the run's events between the two (before the range) are read from the events topic and applied
  silently first (*warm-up*: no output), so the replay continues exactly where the worker was;
* **expired**: that record is a tombstone. The worker expired the run and started it afresh with its next event:
  empty state, warm-up from the event after the last state written before the tombstone;
* **first**: the run's oldest version already covers ``F`` because the run began in the same worker batch as
  ``F``: if applying the run's events before ``F`` (at most :data:`LOOKBACK` offsets back) and in the range up
  to that version's ``last_offset`` to an empty state reproduces the stored state exactly, the run starts from
  empty with those earlier events as warm-up (:func:`confirm_first_version`);
* **compacted**: otherwise, when no version before ``F`` survives, only newer ones (a compacted changelog keeps
  the last value): start from the oldest surviving one and *skip* the range's events it already covers
  (``offset <= last_offset``); their recorded verdicts are left out of ``--compare-verdicts`` and the number
  skipped is reported;
* **empty**: no stored version of the run in its partition: start from empty state at ``F``.

Expiry *inside* the range is not replayed (a run idle for the TTL and then active again is continued), as
without ``--with-state``. Everything here is pure except :func:`replay_with_state` and :func:`read_state`, which
read the changelog and the warm-up events through :func:`streams.audit.read_partitions`. ``--run RUN_ID
--with-state`` explains one run from the same base and warm-up (:mod:`streams.explain_state`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from streams import audit
from streams.config_file import LoadedConfig
from streams.decode import scope_key
from streams.detection import RunState
from streams.runner import step
from streams.worker import envelope
from streams.worker.envelope import StoredRun
from streams.worker.settings import DEFAULT_GROUP, TABLE_NAME, env_default

Origin = Literal["stored", "first", "expired", "compacted", "empty"]
ORIGINS: Final[tuple[Origin, ...]] = ("stored", "first", "expired", "compacted", "empty")
#: How far before a run's first event in the range its first stored state may reach: a worker batch holds at
#: most this many records (``WorkerSettings.max_batch``), so a run whose first stored state covers that event
#: began at most this many offsets earlier.
LOOKBACK: Final = 10_000


def changelog_topic(group: str) -> str:
    """The worker's table changelog for consumer group ``group`` (as :class:`WorkerSettings` names it)."""
    return f"{group}-{TABLE_NAME}-changelog"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``--with-state``, ``--group`` and ``--state-topic`` of ``loopwatch replay``."""
    p.add_argument(
        "--with-state",
        action="store_true",
        help="with --topic: start each run (with --run: the explained run) from the worker's stored state (its "
        "table changelog) just before the run's first event in the range, instead of from empty; see README "
        "'Auditors'",
    )
    p.add_argument(
        "--group",
        default=env_default(os.environ, "LOOPWATCH_GROUP", DEFAULT_GROUP),
        help="with --with-state: the worker's consumer group; the changelog is GROUP-runs-changelog "
        "(LOOPWATCH_GROUP, default %(default)s)",
    )
    p.add_argument("--state-topic", metavar="TOPIC", help="with --with-state: read this changelog topic instead")


def state_topic_of(args: argparse.Namespace) -> str:
    """The changelog topic ``--state-topic``/``--group`` name."""
    return str(args.state_topic or changelog_topic(args.group))


# --- selection (pure) -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    """One changelog record of a run, in changelog order. ``value`` None (or empty): a tombstone."""

    offset: int
    value: StoredRun | None


@dataclass(frozen=True, slots=True)
class Base:
    """Where a run's replay starts: ``state`` (None: empty) covering its events at offsets <= ``after``.

    Events of the run after ``after`` and before the range are applied silently first (warm-up); events in the
    range at or below ``after`` are skipped (only when ``origin`` is ``compacted``).
    """

    state: RunState | None
    after: int
    origin: Origin
    changelog_offset: int | None = None


def select_base(records: Sequence[ChangelogRecord], first: int) -> Base:
    """The base of a run whose first event in the range is at ``first`` (see the module docstring).

    ``records`` are the run's changelog records of its source partition in changelog order; states of another
    source partition (a repartitioned topic) must already be left out.
    """
    covering = next((i for i, r in enumerate(records) if r.value is not None and r.value.last_offset >= first), None)
    if covering == 0:
        newer = records[0].value
        assert newer is not None
        return Base(newer.state, newer.last_offset, "compacted", records[0].offset)
    before = records[: len(records) if covering is None else covering]
    if not before:
        return Base(None, first - 1, "empty")
    prev = before[-1]
    if prev.value is not None:
        return Base(prev.value.state, prev.value.last_offset, "stored", prev.offset)
    older = next((r.value for r in reversed(before) if r.value is not None), None)
    # After a tombstone the worker started the run afresh with its first event past the last state it wrote;
    # with no earlier state left (compacted away) that point is unknown: start at the range.
    after = older.last_offset if older is not None and older.last_offset < first else first - 1
    return Base(None, after, "expired", prev.offset)


@dataclass(slots=True)
class ChangelogIndex:
    """Changelog records per (source partition, scope key), and the records that were not stored runs."""

    runs: dict[tuple[int, str], list[ChangelogRecord]] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def index_changelog(
    records_by_partition: Mapping[int, Sequence[audit.TopicRecord]], topic: str, wanted: set[tuple[int, str]]
) -> ChangelogIndex:
    """Decode the changelog records of the wanted (partition, scope key) runs, in changelog order."""
    out = ChangelogIndex()
    for partition in sorted(records_by_partition):
        for rec in sorted(records_by_partition[partition], key=lambda r: r.offset):
            if rec.key is None:
                out.ignored.append(f"{topic}[{partition}]@{rec.offset}: record has no key, ignored")
                continue
            try:
                key = rec.key.decode("utf-8")
            except UnicodeDecodeError:
                out.ignored.append(f"{topic}[{partition}]@{rec.offset}: key is not UTF-8, ignored")
                continue
            if (partition, key) not in wanted:
                continue
            stored: StoredRun | None = None
            if rec.value:
                try:
                    stored = envelope.decode(rec.value)
                except envelope.EnvelopeError as exc:
                    out.ignored.append(f"{topic}[{partition}]@{rec.offset}: {exc}, ignored")
                    continue
                if stored.partition != partition:
                    out.ignored.append(
                        f"{topic}[{partition}]@{rec.offset}: state of source partition {stored.partition}, ignored"
                    )
                    continue
            out.runs.setdefault((partition, key), []).append(ChangelogRecord(rec.offset, stored))
    return out


def confirm_first_version(
    candidate: Base, lookback_after: int, run_events: Sequence[audit.PositionedEvent], config: LoadedConfig
) -> Base:
    """A ``compacted`` candidate becomes ``first`` (empty, warm-up after ``lookback_after``) when the run's
    events after ``lookback_after`` up to the candidate's ``last_offset`` rebuild its state from empty.

    ``run_events`` are the run's events before and in the range, in offset order.
    """
    if candidate.origin != "compacted" or candidate.state is None:
        return candidate
    states: dict[str, RunState] = {}
    state: RunState | None = None
    applied = 0
    for pe in run_events:
        if pe.index <= lookback_after:
            continue
        if pe.index > candidate.after:
            break
        result = step(states.get, pe.event, config)
        state = states[result.scope] = result.state
        applied += 1
    if applied and state is not None and state.to_primitive() == candidate.state.to_primitive():
        return Base(None, lookback_after, "first", candidate.changelog_offset)
    return candidate


def first_offsets(events: Mapping[int, Sequence[audit.PositionedEvent]]) -> dict[tuple[int, str], int]:
    """(partition, scope key) -> offset of the run's first event in the range."""
    out: dict[tuple[int, str], int] = {}
    for partition, items in events.items():
        for pe in items:
            out.setdefault((partition, scope_key(pe.event)), pe.index)
    return out


def select_bases(
    events: Mapping[int, Sequence[audit.PositionedEvent]], index: ChangelogIndex
) -> dict[tuple[int, str], Base]:
    return {run: select_base(index.runs.get(run, []), first) for run, first in first_offsets(events).items()}


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
    warmup: dict[int, tuple[int, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {origin: 0 for origin in ORIGINS}
        for base in self.bases.values():
            out[base.origin] += 1
        return out

    def summary(self) -> str:
        c = self.counts()
        spans = ", ".join(f"{p}:{lo}..{hi - 1}" for p, (lo, hi) in sorted(self.warmup.items())) or "none"
        return (
            f"with-state: {len(self.bases)} runs: {c['stored']} from a stored state, {c['first']} begun in the "
            f"batch of their first event in range (from empty), {c['expired']} expired "
            f"(empty), {c['compacted']} from a newer state of a compacted changelog, {c['empty']} without "
            f"state (empty); {self.warmed} earlier events re-applied silently (offsets {spans}); "
            f"{len(self.skipped)} events skipped (already in a newer stored state)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **self.counts(),
            "runs": len(self.bases),
            "warmed": self.warmed,
            "skipped": len(self.skipped),
            "warmup": {str(p): list(r) for p, r in sorted(self.warmup.items())},
        }

    def replayed_in_range(self, verdict: Mapping[str, Any]) -> bool:
        """False for a recorded verdict of a skipped event (not replayed, so not compared)."""
        source = verdict.get("source")
        if not isinstance(source, dict):
            return True
        return (source.get("partition"), source.get("offset")) not in self.skipped


def replay_from_bases(
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    warmup: Mapping[int, Sequence[audit.PositionedEvent]],
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
        start = start_partition(partition, warmup, bases, config)
        out.warmed += sum(start.warmed.values())
        for pe in events[partition]:
            if start.covers(pe):
                out.skipped.add((partition, pe.index))
                continue
            out.records.extend(
                audit.apply_positioned(start.states, pe, config, topic, partition, include_all=include_all)
            )
    return out


@dataclass(slots=True)
class PartitionStart:
    """One partition's run states at the start of the range: each run's base plus its warm-up."""

    states: dict[str, RunState | None]
    after: dict[str, int]  # scope key -> the last offset its state covers
    warmed: dict[str, int] = field(default_factory=dict)  # scope key -> earlier events applied silently

    def covers(self, pe: audit.PositionedEvent) -> bool:
        """Whether a range event is already in its run's state (skipped: a compacted changelog's newer state)."""
        return pe.index <= self.after.get(scope_key(pe.event), -1)


def start_partition(
    partition: int,
    warmup: Mapping[int, Sequence[audit.PositionedEvent]],
    bases: Mapping[tuple[int, str], Base],
    config: LoadedConfig,
) -> PartitionStart:
    """The bases of ``partition``'s runs, advanced silently through their ``warmup`` events past ``after``."""
    start = PartitionStart({}, {})
    for (p, key), base in bases.items():
        if p == partition:
            start.states[key] = base.state
            start.after[key] = base.after
    for pe in warmup.get(partition, ()):
        key = scope_key(pe.event)
        if key not in start.after or pe.index <= start.after[key]:
            continue
        result = step(start.states.get, pe.event, config)
        start.states[result.scope] = result.state
        start.after[key] = pe.index
        start.warmed[key] = start.warmed.get(key, 0) + 1
    return start


@dataclass(slots=True)
class StatePlan:
    """The bases chosen from the changelog alone, and which earlier events (``warmup`` spans) are needed."""

    bases: dict[tuple[int, str], Base]
    lookback: dict[tuple[int, str], int]  # compacted candidates -> warm-up start for confirm_first_version
    warmup: dict[int, tuple[int, int]]
    notes: list[str]
    required: dict[int, tuple[int, int]] = field(default_factory=dict)  # warm-up the stored bases need


def plan_state(
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    changelog: Mapping[int, Sequence[audit.TopicRecord]],
    state_topic: str,
    starts: Mapping[int, int],
) -> StatePlan:
    """Bases from the changelog records, plus the ``[from, to)`` spans before the range to read for warm-up."""
    firsts = first_offsets(events)
    index = index_changelog(changelog, state_topic, set(firsts))
    bases = select_bases(events, index)
    lookback = {run: max(-1, firsts[run] - LOOKBACK - 1) for run, b in bases.items() if b.origin == "compacted"}
    spans = warmup_ranges({**bases, **{run: Base(None, after, "first") for run, after in lookback.items()}}, starts)
    return StatePlan(bases, lookback, spans, list(index.ignored), warmup_ranges(bases, starts))


def finish_state(
    plan: StatePlan,
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    warm: Mapping[int, Sequence[audit.PositionedEvent]],
    config: LoadedConfig,
    topic: str,
    *,
    include_all: bool,
) -> StatefulReplay:
    """Confirm first versions against the warm-up events (``plan.warmup`` spans), then replay from the bases."""
    bases = confirm_bases(plan, events, warm, config)
    result = replay_from_bases(events, warm, bases, config, topic, include_all=include_all)
    result.warmup = dict(plan.warmup)
    result.notes = list(plan.notes)
    return result


def confirm_bases(
    plan: StatePlan,
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    warm: Mapping[int, Sequence[audit.PositionedEvent]],
    config: LoadedConfig,
) -> dict[tuple[int, str], Base]:
    """``plan.bases`` with every compacted candidate checked by :func:`confirm_first_version`."""
    bases = dict(plan.bases)
    by_run: dict[tuple[int, str], list[audit.PositionedEvent]] = {run: [] for run in plan.lookback}
    for partition in {p for p, _ in plan.lookback}:
        for pe in (*warm.get(partition, ()), *events[partition]):
            run_events = by_run.get((partition, scope_key(pe.event)))
            if run_events is not None:
                run_events.append(pe)
    for run, after in plan.lookback.items():
        bases[run] = confirm_first_version(bases[run], after, by_run[run], config)
    return bases


# --- Kafka I/O (thin) -------------------------------------------------------------------------------------


async def replay_with_state(
    bootstrap: str,
    state_topic: str,
    topic: str,
    read: audit.TopicRead,
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    config: LoadedConfig,
    *,
    include_all: bool,
    **read_options: Any,
) -> StatefulReplay:
    """Read the changelog, plan, read the warm-up events, finish (see :func:`plan_state`, :func:`finish_state`).

    ``read_options`` go to every :func:`streams.audit.read_partitions` call (connection settings).
    """
    plan, warm = await read_state(bootstrap, state_topic, topic, read, events, **read_options)
    return finish_state(plan, events, warm, config, topic, include_all=include_all)


async def read_state(
    bootstrap: str,
    state_topic: str,
    topic: str,
    read: audit.TopicRead,
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    **read_options: Any,
) -> tuple[StatePlan, dict[int, list[audit.PositionedEvent]]]:
    """The plan for ``events``' runs (from the changelog) and the warm-up events it needs, per partition."""
    try:
        changelog = await audit.read_partitions(bootstrap, state_topic, **read_options)
    except RuntimeError as exc:
        raise RuntimeError(f"cannot read state topic {state_topic}: {exc}") from None
    plan = plan_state(events, changelog.records, state_topic, {p: lo for p, (lo, _) in read.ranges.items()})
    warm: dict[int, list[audit.PositionedEvent]] = {}
    if plan.warmup:
        spans = plan.warmup
        start = audit.OffsetBound(per_partition={p: lo for p, (lo, _) in spans.items()})
        end = audit.OffsetBound(per_partition={p: hi for p, (_, hi) in spans.items()}, default=0)
        earlier = await audit.read_partitions(bootstrap, topic, start, end, **read_options)
        for p, (lo, _) in sorted(plan.required.items()):
            got = earlier.ranges.get(p, (lo, lo))[0]
            if got > lo:
                plan.notes.append(f"{topic}[{p}]: events {lo}..{got - 1} are gone (retention); replay may differ")
        warm, _ = audit.decode_records(earlier.records)  # bad records: the worker dead-lettered them too
    return plan, warm
