"""Audit replay from Kafka topics: range parsing, per-partition replay, verdict comparison and run explanations.

Everything except :func:`read_partitions` and :func:`read_verdicts` is pure (no I/O, no clock): the CLI in
:mod:`streams.cli.replay` reads records with aiokafka, then hands them to the pure functions here.

Topic replay follows the worker exactly: records are processed per partition in offset order (a run never spans
partitions), undecodable records and records whose key is not the event's scope key are skipped (the worker
dead-letters both), and each verdict carries ``source = {topic, partition, offset}`` of its triggering record, so
``verdict_id`` and ``source`` equal what the worker publishes. Replay starts from empty state: a range that does
not begin at a run's first event can legitimately disagree with the worker for that run.

Time bounds (``--from``/``--to`` as RFC 3339) are resolved with ``offsets_for_times``, which uses record
timestamps. Producers normally set CreateTime; the embedded broker (Tansu) answers with the broker's write time,
so there a time bound means "written to the broker at or after" (and it reports "no such offset" as offset 0
with timestamp -1, which is handled). ``--from`` is inclusive, ``--to`` exclusive, for offsets and times.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, Final

import orjson

from schemas import Event, ModelUsageEvent, SourceRef
from streams.config_file import LoadedConfig
from streams.decode import InvalidEvent, Rejection, accept, decode_event, scope_key, to_tool_event
from streams.detection import RunState
from streams.detection.detectors import no_progress_streak, ping_pong, unknown_tool_streak
from streams.detection.outcome import args_hash, hash_outcome
from streams.loop_cost import RunUsage, loop_cost_text
from streams.runner import Replayer

COMPARED_FIELDS: Final = ("decision", "detector", "count", "threshold", "message", "source")


class RangeError(ValueError):
    """A ``--from``/``--to`` value that is neither offsets nor an RFC 3339 time."""


# --- range bounds -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """Offsets per partition; ``default`` applies to partitions not listed (None: the natural start/end)."""

    per_partition: Mapping[int, int] = field(default_factory=dict)
    default: int | None = None


@dataclass(frozen=True, slots=True)
class TimeBound:
    """A point in time, epoch milliseconds (resolved with ``offsets_for_times``)."""

    ms: int


Bound = OffsetBound | TimeBound

_PARTS = re.compile(r"^\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_bound(text: str) -> Bound:
    """``123`` (every partition), ``0:100,1:250`` (per partition) or an RFC 3339 time with a UTC offset."""
    value = text.strip()
    if not value:
        raise RangeError("empty range bound")
    if value.isdigit():
        return OffsetBound(default=int(value))
    if "," in value or _PARTS.match(value):
        per: dict[int, int] = {}
        for part in value.split(","):
            m = _PARTS.match(part)
            if m is None:
                raise RangeError(f"bad partition offset {part.strip()!r} (want PARTITION:OFFSET)")
            partition, offset = int(m.group(1)), int(m.group(2))
            if partition in per:
                raise RangeError(f"partition {partition} given twice")
            per[partition] = offset
        return OffsetBound(per_partition=per)
    try:
        when = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        raise RangeError(f"{text!r} is neither offsets (N or P:N,...) nor an RFC 3339 time") from None
    if when.tzinfo is None:
        raise RangeError(f"time {text!r} has no UTC offset (RFC 3339 needs Z or +HH:MM)")
    return TimeBound(int(when.timestamp() * 1000))


def resolve_offsets(bound: OffsetBound | None, natural: Mapping[int, int], ends: Mapping[int, int]) -> dict[int, int]:
    """Offsets per partition: ``bound``'s where given, else ``natural``; always clamped into ``[0, end]``."""
    out: dict[int, int] = {}
    for partition, default in natural.items():
        value = default
        if bound is not None:
            if partition in bound.per_partition:
                value = bound.per_partition[partition]
            elif bound.default is not None:
                value = bound.default
        out[partition] = max(0, min(value, ends[partition]))
    return out


def unknown_partitions(bound: Bound | None, partitions: Iterable[int]) -> list[int]:
    if not isinstance(bound, OffsetBound):
        return []
    known = set(partitions)
    return sorted(p for p in bound.per_partition if p not in known)


# --- replay -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicRecord:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A topic record :func:`streams.decode.accept` refused (the worker dead-lettered it)."""

    partition: int
    offset: int
    rejection: Rejection

    @property
    def reason(self) -> str:
        return self.rejection.reason

    def describe(self, topic: str) -> str:
        return self.rejection.describe(f"{topic}[{self.partition}]@{self.offset}")


@dataclass(frozen=True, slots=True)
class PositionedEvent:
    """A decoded event with where it came from: ``index`` (line or offset) and, for topics, the partition."""

    index: int
    event: Event
    partition: int | None = None

    @property
    def label(self) -> str:
        return f"{self.partition}@{self.index}" if self.partition is not None else f"#{self.index}"

    def source(self, topic: str) -> SourceRef | None:
        """The verdict ``source`` of a topic event (None for a file line)."""
        if self.partition is None:
            return None
        return SourceRef(topic=topic, partition=self.partition, offset=self.index)


def decode_records(
    records_by_partition: Mapping[int, Sequence[TopicRecord]],
) -> tuple[dict[int, list[PositionedEvent]], list[BadRecord]]:
    """Decode each partition's records (in offset order); bad and key-mismatched records are set aside."""
    events: dict[int, list[PositionedEvent]] = {}
    bad: list[BadRecord] = []
    for partition in sorted(records_by_partition):
        out = events[partition] = []
        for rec in sorted(records_by_partition[partition], key=lambda r: r.offset):
            event = accept(rec.key, rec.value)
            if type(event) is Rejection:
                bad.append(BadRecord(partition, rec.offset, event))
                continue
            out.append(PositionedEvent(rec.offset, event, partition))
    return events, bad


def replay_partitions(
    events: Mapping[int, Sequence[PositionedEvent]], config: LoadedConfig, topic: str, *, include_all: bool
) -> list[dict[str, Any]]:
    """Run the core per partition in offset order; one record per decision, like file replay plus ``source``.

    ``index`` is the triggering record's offset; ``published`` says whether the worker publishes it.
    """
    out: list[dict[str, Any]] = []
    for partition in sorted(events):
        replayer = Replayer(config, include_all=include_all)
        for pe in events[partition]:
            out.extend(replayer.records(pe.event, pe.index, pe.source(topic)))
    return out


# --- comparison -------------------------------------------------------------------------------------------


def in_range(verdict: Mapping[str, Any], topic: str, ranges: Mapping[int, tuple[int, int]]) -> bool:
    """Whether a recorded verdict's source lies in the replayed ``[start, end)`` offsets of ``topic``."""
    source = verdict.get("source")
    if not isinstance(source, dict) or source.get("topic") != topic:
        return False
    partition, offset = source.get("partition"), source.get("offset")
    if not isinstance(partition, int) or not isinstance(offset, int) or partition not in ranges:
        return False
    start, end = ranges[partition]
    return start <= offset < end


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # missing | extra | different
    verdict_id: str
    replayed: Mapping[str, Any] | None
    recorded: Mapping[str, Any] | None
    fields: tuple[str, ...] = ()

    def describe(self) -> str:
        v = self.replayed if self.replayed is not None else self.recorded
        assert v is not None
        where = _where(v.get("source"))
        head = f"{self.kind} {self.verdict_id} {v.get('decision')} {v.get('detector')} run={v.get('run_id')} {where}"
        if self.kind != "different" or self.replayed is None or self.recorded is None:
            return head
        changes = ", ".join(
            f"{name}: replay {_short(self.replayed.get(name))} != topic {_short(self.recorded.get(name))}"
            for name in self.fields
        )
        return f"{head}: {changes}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "verdict_id": self.verdict_id,
            "fields": list(self.fields),
            "replayed": self.replayed,
            "recorded": self.recorded,
        }


def _where(source: Any) -> str:
    if isinstance(source, dict):
        return f"source={source.get('topic')}[{source.get('partition')}]@{source.get('offset')}"
    return "source=none"


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class Comparison:
    replayed: int
    recorded: int  # distinct verdict ids recorded in range
    duplicates: int  # recorded copies beyond the first with identical compared content
    differences: list[Difference]

    @property
    def equal(self) -> bool:
        return not self.differences

    def count(self, kind: str) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def summary(self) -> str:
        verdict = "equal" if self.equal else "DIFFERENT"
        return (
            f"{verdict}: {self.replayed} replayed verdicts, {self.recorded} recorded in range "
            f"({self.duplicates} duplicates); {self.count('missing')} missing, {self.count('extra')} extra, "
            f"{self.count('different')} different"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "replayed": self.replayed,
            "recorded": self.recorded,
            "duplicates": self.duplicates,
            "missing": self.count("missing"),
            "extra": self.count("extra"),
            "different": self.count("different"),
            "differences": [d.to_json() for d in self.differences],
        }


def _content(verdict: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(orjson.dumps(verdict.get(name), option=orjson.OPT_SORT_KEYS) for name in COMPARED_FIELDS)


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(name for name, x, y in zip(COMPARED_FIELDS, _content(a), _content(b), strict=True) if x != y)


def compare_verdicts(replayed: Iterable[Mapping[str, Any]], recorded: Iterable[Mapping[str, Any]]) -> Comparison:
    """Missing (replay only), extra (topic only) and different (same id, other content) verdicts.

    Only published replay verdicts count. Recorded copies of one id with identical content are duplicates
    (at-least-once delivery), not differences; copies that disagree with the replay each count as different.
    """
    mine: dict[str, Mapping[str, Any]] = {}
    for v in replayed:
        if v.get("published", True):
            mine.setdefault(str(v["verdict_id"]), v)
    theirs: dict[str, list[Mapping[str, Any]]] = {}
    for v in recorded:
        theirs.setdefault(str(v.get("verdict_id")), []).append(v)
    differences: list[Difference] = []
    duplicates = 0
    for vid, want in mine.items():
        copies = theirs.get(vid)
        if not copies:
            differences.append(Difference("missing", vid, want, None))
            continue
        seen: set[tuple[Any, ...]] = set()
        for got in copies:
            content = _content(got)
            if content in seen:
                duplicates += 1
                continue
            seen.add(content)
            changed = _changed(want, got)
            if changed:
                differences.append(Difference("different", vid, want, got, changed))
    for vid, copies in theirs.items():
        if vid in mine:
            continue
        differences.append(Difference("extra", vid, None, copies[0]))
        duplicates += len(copies) - len({_content(c) for c in copies})
    order = {"missing": 0, "extra": 1, "different": 2}
    differences.sort(key=lambda d: (order[d.kind], _sort_source(d), d.verdict_id))
    return Comparison(len(mine), len(theirs), duplicates, differences)


def _sort_source(d: Difference) -> tuple[int, int]:
    v = d.replayed if d.replayed is not None else d.recorded
    source = v.get("source") if v is not None else None
    if isinstance(source, dict):
        p, o = source.get("partition"), source.get("offset")
        return (p if isinstance(p, int) else -1, o if isinstance(o, int) else -1)
    return (-1, -1)


# --- explain ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Counts:
    """What the detectors see for a tool_call, on the history before the call (as the core computes it)."""

    recent_count: int
    no_progress_streak: int
    ping_pong: int
    unknown_tool_streak: int
    history: int


@dataclass(frozen=True, slots=True)
class ExplainedDecision:
    decision: str
    detector: str
    count: int
    threshold: int
    published: bool
    message: str
    tokens_in_loop: int | None = None
    cost_usd_in_loop: float | None = None
    saved_tokens_estimate: int | None = None
    saved_cost_usd_estimate: float | None = None


@dataclass(frozen=True, slots=True)
class ExplainStep:
    label: str
    type: str
    event_id: str
    tool: str
    call_id: str | None
    args_hash: str | None
    result_hash: str | None
    counts: Counts | None
    decisions: list[ExplainedDecision]
    detection_enabled: bool
    restart: str | None = None  # why the scope's state was emptied right before this event (worker expiry)
    usage: dict[str, Any] | None = None  # a model_usage event: its tokens and cost


def run_matches(event: Event, run: str) -> bool:
    return event.run_id == run or scope_key(event) == run


def explain_run(
    events: Iterable[PositionedEvent],
    config: LoadedConfig,
    run: str,
    start: Mapping[str, RunState | None] | None = None,
    restarts: Mapping[int, str] | None = None,
    usage: Mapping[str, RunUsage] | None = None,
) -> list[ExplainStep]:
    """Every event of ``run`` (by run id or scope key) in order, with detector counts and decisions.

    Counts are computed with the core's own detector functions on the scope's history before the event is
    applied; the state then advances through the same :class:`streams.runner.Replayer` as replay.
    ``start`` holds the scopes' states before the first event (default: empty; see :mod:`streams.audit.explain`);
    ``restarts`` maps an event's index to why its scope's state is emptied right before it; ``usage`` holds the
    scopes' model usage stored with ``start``.
    """
    replayer = Replayer(config, start)
    replayer.usage.runs.update(usage or {})
    steps: list[ExplainStep] = []
    for pe in events:
        event = pe.event
        if not run_matches(event, run):
            continue
        restart = restarts.get(pe.index) if restarts is not None else None
        if restart is not None:
            replayer.restart(scope_key(event))
        if isinstance(event, ModelUsageEvent):
            replayer.apply(event)
            steps.append(_usage_step(pe.label, event, restart))
            continue
        tool_event = to_tool_event(event)
        before = replayer.state(tool_event.scope)
        loop = config.for_event(event.gateway_id, event.agent_id, event.openclaw_version)
        sig: str | None = None
        result_hash: str | None = None
        counts: Counts | None = None
        if tool_event.kind != "compaction_retry":
            sig = args_hash(tool_event.tool, tool_event.args, tool_event.args_hash)
            if tool_event.outcome is not None:
                result_hash = hash_outcome(
                    tool_event.tool, tool_event.args, tool_event.outcome, tool_event.poll_action
                )[0]
        if tool_event.kind == "tool_call" and sig is not None:
            history = before.history if before is not None else ()
            pp = ping_pong(history, sig)
            counts = Counts(
                recent_count=[r.sig for r in history].count(sig),
                no_progress_streak=no_progress_streak(history, sig)[0],
                ping_pong=pp.length if pp is not None else 0,
                unknown_tool_streak=unknown_tool_streak(history, tool_event.tool)[0],
                history=len(history),
            )
        result = replayer.apply(event)
        steps.append(
            ExplainStep(
                label=pe.label,
                type=event.type,
                event_id=event.event_id,
                tool=tool_event.tool,
                call_id=tool_event.call_id,
                args_hash=sig.split(":", 1)[1] if sig is not None and ":" in sig else sig,
                result_hash=result_hash,
                counts=counts,
                decisions=[
                    ExplainedDecision(
                        d.decision,
                        d.detector,
                        d.count,
                        d.threshold,
                        d.published,
                        d.message,
                        **(cost.verdict_fields() if cost is not None else {}),
                    )
                    for d, cost in result.priced()
                ],
                detection_enabled=loop.enabled,
                restart=restart,
            )
        )
    return steps


def _usage_step(label: str, event: ModelUsageEvent, restart: str | None) -> ExplainStep:
    figures = {"model": event.model, "tokens": event.tokens, "cost_usd": event.cost_usd}
    return ExplainStep(label, event.type, event.event_id, "", None, None, None, None, [], True, restart, figures)


def _h(value: str | None) -> str:
    return value[:12] if value else "-"


def render_explain(steps: Sequence[ExplainStep], run: str, config: LoadedConfig, start: Sequence[str] = ()) -> str:
    """The text explanation: a heading, the ``start`` lines (where the run's state came from), then each step."""
    if not steps:
        return "\n".join([f"run {run}: no events", *start]) + "\n"
    lines = [f"run {run}: {len(steps)} events (config {config.config_hash[:12]})", *start]
    for s in steps:
        if s.restart is not None:
            lines.append(f"{'':>10}{s.restart}")
        if s.usage is not None:
            cost = s.usage["cost_usd"]
            priced = f"${cost:.4f}" if cost is not None else "unpriced"
            lines.append(
                f"{s.label:>8}  {s.type:<16} {s.usage['model'] or '-':<18} {s.usage['tokens']} tokens, {priced}"
            )
            continue
        head = f"{s.label:>8}  {s.type:<16} {s.tool or '-':<18} call={s.call_id or '-'}"
        head += f" args={_h(s.args_hash)} result={_h(s.result_hash)}"
        lines.append(head)
        if s.counts is not None:
            c = s.counts
            state = "" if s.detection_enabled else " (detection disabled for this agent)"
            lines.append(
                f"{'':>10}saw: recentCount={c.recent_count} noProgressStreak={c.no_progress_streak} "
                f"pingPong={c.ping_pong} unknownToolStreak={c.unknown_tool_streak} history={c.history}{state}"
            )
        for d in s.decisions:
            shown = "published" if d.published else "not published (same warning bucket)"
            lines.append(
                f"{'':>10}-> {d.decision.upper()} {d.detector}: count {d.count} >= threshold {d.threshold}, "
                f"{shown}: {d.message}"
            )
            if d.tokens_in_loop is not None:
                figures = (d.tokens_in_loop, d.cost_usd_in_loop, d.saved_tokens_estimate, d.saved_cost_usd_estimate)
                lines.append(f"{'':>13}{loop_cost_text(*figures)}")
    return "\n".join(lines) + "\n"


def explain_json(steps: Sequence[ExplainStep]) -> list[dict[str, Any]]:
    from dataclasses import asdict

    return [asdict(s) for s in steps]


# --- Kafka I/O (thin) -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicRead:
    records: dict[int, list[TopicRecord]]
    ranges: dict[int, tuple[int, int]]  # partition -> [start, end)


async def _time_offsets(consumer: Any, tps: Sequence[Any], ms: int, ends: Mapping[Any, int]) -> dict[int, int]:
    """First offset with timestamp >= ``ms`` per partition (its end offset when there is none).

    Kafka answers "none" as offset -1 (aiokafka: None); the embedded broker answers offset 0 with timestamp -1
    instead, so an answer without a timestamp counts as none as well.
    """
    answer = await consumer.offsets_for_times({tp: ms for tp in tps})
    out: dict[int, int] = {}
    for tp in tps:
        found = answer.get(tp)
        if found is None or found.offset < 0 or found.timestamp < 0:
            out[tp.partition] = ends.get(tp, 0)
        else:
            out[tp.partition] = min(found.offset, ends.get(tp, 0))
    return out


async def read_partitions(
    bootstrap: str,
    topic: str,
    start: Bound | None = None,
    end: Bound | None = None,
    *,
    timeout: float = 30.0,
    security: Any = None,
) -> TopicRead:
    """Records of ``topic`` in ``[start, end)`` per partition; end offsets come from kafka_compat (taken now).

    ``security`` is a :class:`streams.kafka.security.KafkaSecurity` (TLS/SASL); None means PLAINTEXT.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from streams.kafka.client import started
    from streams.kafka.compat import end_offsets

    auth: dict[str, Any] = security.aiokafka_kwargs() if security is not None else {}
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest", **auth
    )
    async with started(consumer, timeout):
        await asyncio.wait_for(consumer.topics(), timeout)
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise RuntimeError("no such topic")
        for bound in (start, end):
            missing = unknown_partitions(bound, partitions)
            if missing:
                raise RuntimeError(f"topic has no partition {missing[0]} (it has {len(partitions)})")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        ends_tp = await end_offsets(bootstrap, [(topic, tp.partition) for tp in tps], timeout=timeout, **auth)
        ends = {tp.partition: ends_tp.get(tp, 0) for tp in tps}
        begins_tp = await asyncio.wait_for(consumer.beginning_offsets(tps), timeout)
        begins = {tp.partition: int(begins_tp.get(tp, 0)) for tp in tps}
        if isinstance(start, TimeBound):
            starts = await _time_offsets(consumer, tps, start.ms, ends_tp)
        else:
            starts = resolve_offsets(start, begins, ends)
        if isinstance(end, TimeBound):
            stops = await _time_offsets(consumer, tps, end.ms, ends_tp)
        else:
            stops = resolve_offsets(end, ends, ends)
        ranges = {p: (max(starts[p], begins[p]), max(stops[p], starts[p], begins[p])) for p in ends}
        records: dict[int, list[TopicRecord]] = {p: [] for p in ends}
        wanted = [tp for tp in tps if ranges[tp.partition][0] < ranges[tp.partition][1]]
        consumer.assign(tps)
        for tp in wanted:
            consumer.seek(tp, ranges[tp.partition][0])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = [tp for tp in wanted if await consumer.position(tp) < ranges[tp.partition][1]]
            if not remaining:
                break
            if loop.time() > deadline:
                raise TimeoutError(f"no progress reading {len(remaining)} partition(s) of {topic}")
            batches = await consumer.getmany(*remaining, timeout_ms=500)
            for tp, messages in batches.items():
                if messages:
                    deadline = loop.time() + timeout
                lo, hi = ranges[tp.partition]
                for m in messages:
                    if lo <= m.offset < hi:
                        records[tp.partition].append(
                            TopicRecord(tp.partition, m.offset, m.timestamp, m.key, m.value or b"")
                        )
    return TopicRead(records, ranges)


def verdict_values(read: TopicRead, topic: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Decoded verdict objects of a verdicts topic read, and a note for every undecodable record."""
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for partition in sorted(read.records):
        for rec in read.records[partition]:
            try:
                value = orjson.loads(rec.value)
            except orjson.JSONDecodeError:
                value = None
            if not isinstance(value, dict) or not isinstance(value.get("verdict_id"), str):
                notes.append(f"{topic}[{partition}]@{rec.offset}: not a verdict record, ignored")
                continue
            out.append(value)
    return out, notes


# --- file replay ------------------------------------------------------------------------------------------


def replay_lines(
    lines: Iterator[bytes],
    config: LoadedConfig,
    out: IO[bytes],
    *,
    include_all: bool,
    skip_invalid: bool,
    name: str = "<events>",
) -> int:
    """Apply every line in order; write one JSON object per decision.

    Without ``skip_invalid`` the first bad line stops the replay (later lines are still checked so that every
    bad line is reported) and the exit status is 2: an audit must not silently diverge from the input.
    """
    replayer = Replayer(config, include_all=include_all)
    bad = 0
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            event = decode_event(raw)
        except InvalidEvent as exc:
            bad += 1
            print(f"{name}:{index + 1}: invalid event ({exc.reason}): {exc.detail}", file=sys.stderr)
            continue
        if bad and not skip_invalid:
            continue
        for record in replayer.records(event, index):
            out.write(orjson.dumps(record) + b"\n")
    out.flush()
    if bad and not skip_invalid:
        return 2
    return 0
