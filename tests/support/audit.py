"""Audit test helpers without Kafka: the worker's batch code as a changelog writer, reads served from lists.

Shared by the ``replay --with-state`` and explanation tests (``tests/audit``): two interleaved conformance
runs on one partition, what the worker publishes and stores for them batch by batch, and the plan, replay and
explanation the CLI computes from those records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from schemas.verdict import verdict_id
from streams.audit import explain, source, with_state
from streams.audit.changelog import ChangelogRecord
from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection import RunState
from streams.kafka import reader
from streams.worker.envelope import StoredRun
from streams.worker.processing import InputRecord, RunProcessor, plan_batch
from tests.support.scenarios import GATEWAY, load_scenarios, wire_events, write_inputs

SCENARIOS = {s["name"]: s for s in load_scenarios()}
GENERIC = SCENARIOS["generic_warning_then_block_sticky"]
PINGPONG = SCENARIOS["pingpong_block_at_critical"]
TOPIC = "t.events"


def stored_state(n: int) -> RunState:
    """A distinct opaque state per ``n`` (for changelog selection tests)."""
    return RunState(seen=bytes([n]) * 8)


def version(changelog_offset: int, last_offset: int, n: int, partition: int = 0) -> ChangelogRecord:
    """A stored version of a run at ``changelog_offset`` covering source offsets up to ``last_offset``."""
    return ChangelogRecord(changelog_offset, StoredRun(partition, last_offset, 0, stored_state(n)))


def tombstone(changelog_offset: int) -> ChangelogRecord:
    """The worker expired the run."""
    return ChangelogRecord(changelog_offset, None)


def topic_records(events: list[dict[str, Any]], partition: int = 0) -> list[reader.TopicRecord]:
    out = []
    for i, ev in enumerate(events):
        key = (ev["run_id"] or ev["session_id"]).encode()
        out.append(reader.TopicRecord(partition, i, 0, key, orjson.dumps(ev)))
    return out


def interleaved() -> list[dict[str, Any]]:
    a = wire_events(GENERIC, session="sess-a")
    b = wire_events(PINGPONG, session="sess-b")
    out: list[dict[str, Any]] = []
    for i in range(max(len(a), len(b))):
        out += a[i : i + 1] + b[i : i + 1]
    return out


def run_worker(
    records: list[reader.TopicRecord],
    config: LoadedConfig,
    batch: int,
    expire: Mapping[int, Sequence[bytes]] | None = None,
) -> tuple[list[Any], list[Any]]:
    """What the worker publishes and writes to the changelog, batch by batch (one version per run and batch).

    ``expire``: batch number -> keys the TTL sweep expires after that batch (state deleted, tombstone written),
    so the run's next event is applied to an empty state, as ``streams.worker.app`` does.
    """
    processor = RunProcessor(config)
    table: dict[bytes, bytes] = {}
    verdicts: list[dict[str, Any]] = []
    changelog: list[reader.TopicRecord] = []
    inputs = [InputRecord(TOPIC, r.partition, r.offset, r.key, r.value) for r in records]
    for start in range(0, len(inputs), batch):
        chunk = inputs[start : start + batch]
        plan = plan_batch(chunk, 0)
        for group in plan.groups.values():
            result = processor.process(group, chunk, table.get(group.key), 1)
            verdicts += [orjson.loads(p.value) for p in result.publications]
            assert result.value is not None
            table[group.key] = result.value
            changelog.append(reader.TopicRecord(0, len(changelog), 0, group.key, result.value))
        for key in (expire or {}).get(start // batch, ()):
            del table[key]
            processor.forget(key)
            changelog.append(reader.TopicRecord(0, len(changelog), 0, key, b""))  # the reader's null value
    return verdicts, changelog


def setup_runs(tmp_path: Path) -> tuple[LoadedConfig, list[reader.TopicRecord]]:
    config_path, _ = write_inputs(GENERIC, tmp_path, [])
    assert PINGPONG["config"] == GENERIC["config"]
    return load_openclaw_config(config_path), topic_records(interleaved())


def comparable(verdicts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {v["verdict_id"]: {k: x for k, x in v.items() if k not in ("index", "published")} for v in verdicts}


Events = dict[int, list[source.PositionedEvent]]


def plan_reads(
    records: list[reader.TopicRecord],
    changelog: list[reader.TopicRecord],
    start: int,
    run: str | None = None,
    end: int | None = None,
) -> tuple[with_state.StatePlan, Events, Events]:
    """What ``replay --with-state --from START [--to END] [--run RUN]`` reads and plans: (plan, range events,
    warm-up events), through :func:`~streams.audit.with_state.read_state` with the reads served from lists."""
    served = ListSource({TOPIC: records, "cl": changelog})
    to = None if end is None else reader.OffsetBound(default=end)
    read = asyncio.run(served.read(TOPIC, reader.OffsetBound(default=start), to))
    events, _ = source.decode_records(read.records)
    if run is not None:
        events = explain.run_events(events, run)
    plan, warm = asyncio.run(with_state.read_state(served, "cl", TOPIC, read, events))
    return plan, events, warm


def stateful_replay(
    records: list[reader.TopicRecord],
    changelog: list[reader.TopicRecord],
    config: LoadedConfig,
    start: int,
    end: int | None = None,
) -> with_state.StatefulReplay:
    """What ``replay --with-state --from START [--to END]`` does, without Kafka (the reads served from lists)."""
    plan, events, warm = plan_reads(records, changelog, start, end=end)
    return with_state.finish_state(plan, events, warm, config, TOPIC, include_all=False)


def explain_from_lists(
    records: list[reader.TopicRecord], changelog: list[reader.TopicRecord], config: LoadedConfig, start: int, run: str
) -> explain.StatefulExplanation:
    """What ``replay --from START --run RUN --with-state`` computes, the reads served from lists."""
    plan, mine, warm = plan_reads(records, changelog, start, run)
    return explain.explain_from_state(plan, mine, warm, config, run)


def fired(steps: list[explain.ExplainStep]) -> set[tuple[Any, ...]]:
    """(verdict id, offset, decision, detector, count) of every published decision of an explanation."""
    return {
        (verdict_id(GATEWAY, s.event_id, d.decision, d.detector), offset_of(s), d.decision, d.detector, d.count)
        for s in steps
        for d in s.decisions
        if d.published
    }


def offset_of(step: explain.ExplainStep) -> int:
    return int(step.label.split("@")[1])


def recorded_fired(verdicts: list[dict[str, Any]], run: str, start: int) -> set[tuple[Any, ...]]:
    return {
        (v["verdict_id"], v["source"]["offset"], v["decision"], v["detector"], v["count"])
        for v in verdicts
        if v["session_id"] == run and v["source"]["offset"] >= start
    }


class ListSource:
    """A :class:`~streams.kafka.reader.RecordSource` serving each topic (one partition) from a list.

    ``reads`` lists the topics read, in order; a topic in ``failures`` raises that error when read.
    """

    def __init__(
        self, topics: Mapping[str, Sequence[reader.TopicRecord]], failures: Mapping[str, Exception] | None = None
    ) -> None:
        self.topics = topics
        self.failures = failures or {}
        self.reads: list[str] = []

    def check(self) -> None:
        """Lists are always there."""

    async def read(
        self, topic: str, start: reader.Bound | None = None, end: reader.Bound | None = None
    ) -> reader.TopicRead:
        self.reads.append(topic)
        if topic in self.failures:
            raise self.failures[topic]
        if topic not in self.topics:
            raise reader.NoSuchTopic(topic, list(self.topics))
        records = self.topics[topic]
        ends = {0: max((r.offset + 1 for r in records), default=0)}  # a compacted list has holes
        assert not isinstance(start, reader.TimeBound) and not isinstance(end, reader.TimeBound)
        lo = reader.resolve_offsets(start, {0: 0}, ends)[0]
        hi = max(lo, reader.resolve_offsets(end, ends, ends)[0])
        return reader.TopicRead({0: [r for r in records if lo <= r.offset < hi]}, {0: (lo, hi)}, ends)
