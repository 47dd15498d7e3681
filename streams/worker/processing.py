"""Batch processing without Faust: records in, state values, verdicts and dead letters out.

The Faust shell (:mod:`streams.worker.app`) only moves bytes between Kafka, the table and these functions, so
everything that decides *what* is written lives here and is unit-tested with plain dicts. The benchmark's
raw-aiokafka loop uses the same code.

Per batch: decode every record (bad ones become dead letters), group valid events by scope key in offset
order, then per run read the stored envelope once, apply its events through :mod:`streams.runner` (so
streaming output equals ``loopwatch replay``), and write it once.

Idempotence (the broker may redeliver anything after the last committed offset): an event at or below the
envelope's ``last_offset`` in the same partition was applied already and is not applied again. Nothing needs
re-publishing for it: the worker stores a state only once the broker confirmed the verdicts of every event
the state covers (:mod:`streams.worker.app`), so a redelivered event's verdicts were delivered. The envelope
is still written again: a RocksDB store can survive a crash *ahead* of its changelog, and rewriting heals
that. An event whose state was not stored yet is simply applied again, from the same earlier state, and
yields the same verdicts (same ``verdict_id``, same content).
"""

from __future__ import annotations

import logging
import traceback
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import orjson

from schemas import Event, ModelUsageEvent, Verdict
from streams.config_file import LoadedConfig
from streams.decode import Rejection, accept
from streams.detection import RunState
from streams.loop_cost import LoopCost, UsageBook
from streams.runner import StateTooLarge, failure_detail, failure_reason, step
from streams.worker import envelope
from streams.worker.deadletter import DEFAULT_POLICY, DeadLetterPolicy, dead_letter_key, dead_letter_record
from streams.worker.envelope import StoredRun
from streams.worker.settings import DEFAULT_STATE_CACHE_RUNS

log = logging.getLogger(__name__)

#: At most one log line with a traceback per this many seconds for events that raised (:meth:`RunProcessor._failed`).
FAILURE_LOG_SECONDS = 30.0


class InputRecord(NamedTuple):
    """One consumed record, as the shell hands it over (a named tuple: one is built per record)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Publication:
    """A verdict record to send, with what the metrics need."""

    key: bytes
    value: bytes
    decision: str
    detector: str
    event_ts_ms: float | None = None
    cost: LoopCost | None = None
    verdict: Verdict | None = None  # the record's model: the worker re-keys it into storm signals


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A rejected record: its dead-letter value, the original key, and the reason (metric label)."""

    key: bytes | None
    value: bytes
    reason: str


@dataclass(slots=True)
class RunGroup:
    """The valid events of one scope key in a batch, in offset order (indexes into the batch)."""

    key: bytes
    indexes: list[int] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


@dataclass(slots=True)
class BatchPlan:
    groups: dict[bytes, RunGroup]
    dead_letters: list[DeadLetter]


@dataclass(slots=True)
class RunResult:
    """What applying one run's events produced: ``run`` is the new stored run and ``value`` its envelope
    (:meth:`RunProcessor.process` encodes it, :meth:`RunProcessor.apply` leaves that to its caller). None
    means the stored envelope stays as is."""

    value: bytes | None
    partition: int
    publications: list[Publication]
    applied_types: list[str]
    redelivered: int = 0
    duplicates: int = 0
    run: StoredRun | None = None
    #: Events not applied (:func:`streams.runner.failure_reason`).
    dead_letters: list[DeadLetter] = field(default_factory=list)


def plan_batch(
    records: Sequence[InputRecord], received_at_ms: float, policy: DeadLetterPolicy = DEFAULT_POLICY
) -> BatchPlan:
    """Decode and group a batch; every record ends up in exactly one group or one dead letter."""
    groups: dict[bytes, RunGroup] = {}
    dead: list[DeadLetter] = []
    for index, rec in enumerate(records):
        raw = rec.value if rec.value is not None else b""
        event = accept(rec.key, raw)
        if type(event) is Rejection:
            dead.append(_dead(rec, raw, event.reason, event.detail, received_at_ms, policy))
            continue
        key = cast(bytes, rec.key)  # accept() checked that it is the event's scope key
        group = groups.get(key)
        if group is None:
            group = groups[key] = RunGroup(key)
        group.indexes.append(index)
        group.events.append(event)
    return BatchPlan(groups, dead)


#: One state a batch computed, not yet encoded: (key, stored run, partition, the run's last source event).
StateWrite = tuple[bytes, StoredRun, int, Any]


def newest_states(batches: Iterable[tuple[int, Sequence[StateWrite]]]) -> dict[bytes, tuple[StateWrite, int]]:
    """The newest state of each run over ``(processing time, writes)`` of consecutive batches, in order: what
    one store step writes, each with the processing time of the batch that computed it (its ``last_seen_ms``).
    Runs keep the order in which they were first written."""
    newest: dict[bytes, tuple[StateWrite, int]] = {}
    for now_ms, writes in batches:
        for write in writes:
            newest[write[0]] = (write, now_ms)
    return newest


def _dead(
    rec: InputRecord, raw: bytes, reason: str, detail: str, received_at_ms: float, policy: DeadLetterPolicy
) -> DeadLetter:
    value = dead_letter_record(
        reason=reason,
        detail=detail,
        topic=rec.topic,
        partition=rec.partition,
        offset=rec.offset,
        key=rec.key,
        original=raw,
        received_at_ms=received_at_ms,
        policy=policy,
    )
    return DeadLetter(dead_letter_key(rec.key), value, reason)


class RunProcessor:
    """Applies runs' events to their stored envelopes. Holds the config and a small decoded-state cache.

    The cache maps a key to the exact bytes last read or written and their decoded form; it is only used when
    the store returns those same bytes, so recovery, rebalances and TTL deletes can never make it stale.
    ``decodes`` counts the stored states it did not hold (``loopwatch_state_decodes_total``).
    """

    def __init__(
        self,
        config: LoadedConfig,
        *,
        cache_size: int = DEFAULT_STATE_CACHE_RUNS,
        dead_letter_policy: DeadLetterPolicy = DEFAULT_POLICY,
    ) -> None:
        self.config = config
        self.dead_letter_policy = dead_letter_policy
        # Per dead-letter reason, when an event not applied was last logged and how many came since (:meth:`_failed`):
        # runs that outgrew a record must not keep a defect's traceback out of the log.
        self._failures_logged: dict[str, tuple[float, int]] = {}
        self._cache: OrderedDict[bytes, tuple[bytes, StoredRun]] = OrderedDict()
        self._cache_size = cache_size
        self.decodes = 0

    def decode(self, key: bytes, raw: bytes) -> StoredRun | None:
        hit = self._cache.get(key)
        if hit is not None and (hit[0] is raw or hit[0] == raw):
            self._cache.move_to_end(key)
            return hit[1]
        self.decodes += 1
        try:
            stored = envelope.decode(raw)
        except envelope.EnvelopeError as exc:
            log.error("ignoring undecodable stored state of one run (%s); starting it afresh", exc)
            return None
        self._remember(key, raw, stored)
        return stored

    def _remember(self, key: bytes, raw: bytes, stored: StoredRun) -> None:
        if self._cache_size <= 0:
            return
        self._cache[key] = (raw, stored)
        self._cache.move_to_end(key)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def forget(self, key: bytes) -> None:
        self._cache.pop(key, None)

    def process(
        self,
        group: RunGroup,
        records: Sequence[InputRecord],
        stored_value: bytes | None,
        now_ms: int,
    ) -> RunResult:
        """Apply one run's events of this batch to its stored envelope (see the module docstring)."""
        result = self.apply(group, records, stored_value, now_ms)
        if result.run is not None:
            result.value = self.encode(group.key, result.run)
        return result

    def encode(self, key: bytes, run: StoredRun) -> bytes:
        """The envelope of ``run``, remembered as the run's newest bytes (a later read of them decodes nothing)."""
        value = envelope.encode(run.partition, run.last_offset, run.last_seen_ms, run.state, run.usage)
        self._remember(key, value, run)
        return value

    def apply(
        self,
        group: RunGroup,
        records: Sequence[InputRecord],
        stored_value: bytes | StoredRun | None,
        now_ms: int,
    ) -> RunResult:
        """:meth:`process` without the encoding: ``run`` is set, ``value`` is None. The worker encodes only the
        state it stores, so a run that several batches of one store step touched is encoded once. The stored
        state may be given decoded (a state computed but not stored yet)."""
        key = group.key
        partition = records[group.indexes[0]].partition
        stored = self.decode(key, stored_value) if isinstance(stored_value, bytes) else stored_value
        state: RunState | None = None
        last_offset = -1
        if stored is not None:
            state = stored.state
            if stored.partition == partition:  # else the topic was repartitioned: offsets are not comparable
                last_offset = stored.last_offset
        publications: list[Publication] = []
        applied: list[str] = []
        dead: list[DeadLetter] = []
        redelivered = duplicates = 0
        config = self.config
        usage = UsageBook()  # this one run's model usage (streams.loop_cost), kept in the envelope
        scope = key.decode("utf-8")
        if stored is not None and stored.usage is not None:
            usage.runs[scope] = stored.usage
        for index, event in zip(group.indexes, group.events, strict=True):
            rec = records[index]
            offset = rec.offset
            if offset <= last_offset:
                redelivered += 1
                continue
            # the verdicts are built in the step, so one that cannot be built dead-letters its event (not applied)
            result = step(state, event, config, usage, source=(rec.topic, partition, offset))
            last_offset = offset  # a failed event too: its dead letter is confirmed before the state is stored
            if result.failure is not None:
                dead.append(self._failed(rec, result.failure, now_ms))
                state = result.state
                continue
            if state is not None and result.state is state and not isinstance(event, ModelUsageEvent):
                duplicates += 1  # the core returns the very same state for a duplicate event
            state = result.state
            applied.append(event.type)
            if not result.decisions:
                continue
            ts_ms: float | None = event.ts_ms()
            for decision, cost, verdict in result.rendered():
                if verdict is not None:  # a published decision
                    value = orjson.dumps(verdict.model_dump(mode="json"))  # validated: strings and bounded numbers
                    publications.append(
                        Publication(key, value, decision.decision, decision.detector, ts_ms, cost, verdict)
                    )
        run: StoredRun | None = None
        if state is not None:  # always the case: the group is not empty
            run = StoredRun(partition, last_offset, now_ms, state, usage.runs.get(scope))
        return RunResult(None, partition, publications, applied, redelivered, duplicates, run, dead)

    def _failed(self, rec: InputRecord, failure: Exception, now_ms: int) -> DeadLetter:
        """The dead letter of an event not applied (:func:`streams.runner.step`), logged. One that raised is a
        defect to fix: the log names the exception's type and frames, never its message (it may quote the
        event's values, which ``--dead-letter-original digest`` keeps out). One whose run's state outgrew a
        record is the config's (a warning with the sizes). Each reason's line comes at most every
        :data:`FAILURE_LOG_SECONDS`: a flood of such events is counted, not written out one line each."""
        reason = failure_reason(failure)
        now = now_ms / 1000
        logged_at, unlogged = self._failures_logged.get(reason, (float("-inf"), 0))
        if now - logged_at >= FAILURE_LOG_SECONDS:
            more = f" ({unlogged} more since the last such line)" if unlogged else ""
            where = f"{rec.topic}[{rec.partition}]@{rec.offset}: event not applied, dead-lettered ({reason}){more}"
            if isinstance(failure, StateTooLarge):
                log.warning("%s: %s", where, failure_detail(failure))
            else:
                frames = "".join(traceback.format_tb(failure.__traceback__)).rstrip()
                log.error("%s: %s raised at\n%s", where, type(failure).__name__, frames)
            self._failures_logged[reason] = (now, 0)
        else:
            self._failures_logged[reason] = (logged_at, unlogged + 1)
        raw = rec.value if rec.value is not None else b""
        return _dead(rec, raw, reason, failure_detail(failure), now_ms, self.dead_letter_policy)
