"""``replay --with-state``, the pure parts: which stored state a run starts from, warm-up, skips, equality.

The last tests model the worker exactly (``RunProcessor`` over batches, one changelog version per run and
batch, written after the batch) and check that a replay of a range starting in the middle of runs equals the
worker's verdicts with ``--with-state`` and differs without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams import audit, audit_changelog, audit_state, explain_state
from streams.audit_changelog import Base, ChangelogRecord, select_base
from streams.cli import main
from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection import RunState
from streams.topics import changelog_topic
from streams.worker import envelope
from streams.worker.envelope import StoredRun
from streams.worker.processing import InputRecord, RunProcessor, plan_batch
from tests.support.scenarios import load_scenarios, wire_events, write_inputs

SCENARIOS = {s["name"]: s for s in load_scenarios()}
GENERIC = SCENARIOS["generic_warning_then_block_sticky"]
PINGPONG = SCENARIOS["pingpong_block_at_critical"]
TOPIC = "t.events"


def _state(n: int) -> RunState:
    return RunState(seen=bytes([n]) * 8)


def _v(changelog_offset: int, last_offset: int, n: int, partition: int = 0) -> ChangelogRecord:
    return ChangelogRecord(changelog_offset, StoredRun(partition, last_offset, 0, _state(n)))


def _tomb(changelog_offset: int) -> ChangelogRecord:
    return ChangelogRecord(changelog_offset, None)


# --- selection --------------------------------------------------------------------------------------------


def test_no_stored_state_starts_empty_at_the_range() -> None:
    assert select_base([], 40) == Base(None, 39, "empty")


def test_newest_version_before_the_first_covering_one() -> None:
    records = [_v(0, 5, 1), _v(3, 12, 2), _v(7, 20, 3), _v(9, 31, 4)]
    assert select_base(records, 21) == Base(_state(3), 20, "stored", 7)
    assert select_base(records, 20) == Base(_state(2), 12, "stored", 3)  # version 3 covers offset 20
    assert select_base(records, 13) == Base(_state(2), 12, "stored", 3)
    assert select_base(records, 99) == Base(_state(4), 31, "stored", 9)  # the worker has not got that far


def test_rewritten_versions_of_redelivered_events() -> None:
    # the worker rewrites the same last_offset after a redelivery; the newest copy is taken
    records = [_v(0, 5, 1), _v(1, 5, 2), _v(2, 9, 3)]
    assert select_base(records, 7) == Base(_state(2), 5, "stored", 1)


def test_tombstone_after_a_state_means_expired() -> None:
    records = [_v(0, 5, 1), _v(2, 8, 2), _tomb(4), _v(6, 30, 3)]
    # expired after offset 8: the worker started the run afresh with its next event (9)
    assert select_base(records, 20) == Base(None, 8, "expired", 4)
    assert select_base(records, 9) == Base(None, 8, "expired", 4)
    assert select_base([*records, _tomb(8)], 40) == Base(None, 30, "expired", 8)
    assert select_base(records, 8) == Base(_state(1), 5, "stored", 0)  # before the expiry


def test_tombstone_without_an_earlier_state_starts_at_the_range() -> None:
    assert select_base([_tomb(3), _v(5, 30, 1)], 20) == Base(None, 19, "expired", 3)
    assert select_base([_tomb(3)], 20) == Base(None, 19, "expired", 3)


def test_compacted_changelog_starts_from_the_oldest_newer_state() -> None:
    assert select_base([_v(11, 30, 1)], 20) == Base(_state(1), 30, "compacted", 11)
    assert select_base([_v(11, 25, 1), _v(12, 30, 2)], 20) == Base(_state(1), 25, "compacted", 11)


def test_index_changelog_decodes_filters_and_keeps_order() -> None:
    value = envelope.encode(0, 7, 1, _state(1))
    other_partition = envelope.encode(3, 9, 1, _state(2))
    recs = {
        0: [
            audit.TopicRecord(0, 4, 0, b"r1", b""),  # tombstone (the reader gives b"" for a null value)
            audit.TopicRecord(0, 2, 0, b"r1", value),
            audit.TopicRecord(0, 3, 0, b"r2", value),  # not a run in the range
            audit.TopicRecord(0, 5, 0, b"r1", b"junk"),
            audit.TopicRecord(0, 6, 0, b"r1", other_partition),
            audit.TopicRecord(0, 7, 0, None, value),
        ],
        1: [audit.TopicRecord(1, 0, 0, b"r1", value)],  # another source partition's run r1
    }
    index = audit_changelog.index_changelog(recs, "cl", {(0, "r1")})
    assert index.runs == {(0, "r1"): [ChangelogRecord(2, StoredRun(0, 7, 1, _state(1))), ChangelogRecord(4, None)]}
    assert [n.split(":")[0] for n in index.ignored] == ["cl[0]@5", "cl[0]@6", "cl[0]@7"]


def test_warmup_ranges() -> None:
    bases = {
        (0, "a"): Base(None, 4, "stored"),
        (0, "b"): Base(None, 7, "expired"),
        (0, "c"): Base(None, 9, "empty"),
        (1, "d"): Base(None, 30, "compacted"),
    }
    assert audit_state.warmup_ranges(bases, {0: 10, 1: 20}) == {0: (5, 10)}


# --- replay from bases ------------------------------------------------------------------------------------


def _topic_records(events: list[dict[str, Any]], partition: int = 0) -> list[audit.TopicRecord]:
    out = []
    for i, ev in enumerate(events):
        key = (ev["run_id"] or ev["session_id"]).encode()
        out.append(audit.TopicRecord(partition, i, 0, key, orjson.dumps(ev)))
    return out


def _interleaved() -> list[dict[str, Any]]:
    a = wire_events(GENERIC, session="sess-a")
    b = wire_events(PINGPONG, session="sess-b")
    out: list[dict[str, Any]] = []
    for i in range(max(len(a), len(b))):
        out += a[i : i + 1] + b[i : i + 1]
    return out


def _worker(
    records: list[audit.TopicRecord],
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
    changelog: list[audit.TopicRecord] = []
    inputs = [InputRecord(TOPIC, r.partition, r.offset, r.key, r.value) for r in records]
    for start in range(0, len(inputs), batch):
        chunk = inputs[start : start + batch]
        plan = plan_batch(chunk, 0)
        for group in plan.groups.values():
            result = processor.process(group, chunk, table.get(group.key), 1)
            verdicts += [orjson.loads(p.value) for p in result.publications]
            assert result.value is not None
            table[group.key] = result.value
            changelog.append(audit.TopicRecord(0, len(changelog), 0, group.key, result.value))
        for key in (expire or {}).get(start // batch, ()):
            del table[key]
            processor.forget(key)
            changelog.append(audit.TopicRecord(0, len(changelog), 0, key, b""))  # the reader's null value
    return verdicts, changelog


def _setup(tmp_path: Path) -> tuple[LoadedConfig, list[audit.TopicRecord]]:
    config_path, _ = write_inputs(GENERIC, tmp_path, [])
    assert PINGPONG["config"] == GENERIC["config"]
    return load_openclaw_config(config_path), _topic_records(_interleaved())


def _comparable(verdicts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {v["verdict_id"]: {k: x for k, x in v.items() if k not in ("index", "published")} for v in verdicts}


Events = dict[int, list[audit.PositionedEvent]]


def _plan(
    records: list[audit.TopicRecord], changelog: list[audit.TopicRecord], start: int, run: str | None = None
) -> tuple[audit_state.StatePlan, Events, Events]:
    """What ``replay --with-state --from START [--run RUN]`` reads and plans: (plan, range events, warm-up
    events), without Kafka (the reads served from lists)."""
    events, _ = audit.decode_records({0: [r for r in records if r.offset >= start]})
    if run is not None:
        events = explain_state.run_events(events, run)
    plan = audit_state.plan_state(events, {0: changelog}, "cl", {0: start})
    lo, hi = plan.warmup.get(0, (start, start))
    warm, _ = audit.decode_records({0: [r for r in records if lo <= r.offset < hi]})
    return plan, events, warm


def _stateful(
    records: list[audit.TopicRecord], changelog: list[audit.TopicRecord], config: LoadedConfig, start: int
) -> audit_state.StatefulReplay:
    """What ``replay --with-state --from START`` does, without Kafka (the reads served from lists)."""
    plan, events, warm = _plan(records, changelog, start)
    return audit_state.finish_state(plan, events, warm, config, TOPIC, include_all=False)


@pytest.mark.parametrize(("start", "batch"), [(1, 7), (17, 7), (23, 7), (30, 7), (41, 7), (9, 100), (3, 1)])
def test_mid_run_range_with_state_equals_the_worker(tmp_path: Path, start: int, batch: int) -> None:
    config, records = _setup(tmp_path)
    published, changelog = _worker(records, config, batch=batch)
    want = _comparable([v for v in published if v["source"]["offset"] >= start])
    assert want
    result = _stateful(records, changelog, config, start)
    assert _comparable(result.records) == want
    assert not result.skipped
    origins = {b.origin for b in result.bases.values()}
    assert origins <= {"stored", "first"} and ("first" in origins) == (start < batch)
    # every earlier event of the two runs that no stored state covers was re-applied silently
    assert result.warmed == sum(
        1
        for r in records
        if r.offset < start and (0, _key(r)) in result.bases and r.offset > result.bases[(0, _key(r))].after
    )
    assert result.warmed > 0 or start % batch == 0
    # without the stored state the same range disagrees with the worker
    events, _ = audit.decode_records({0: [r for r in records if r.offset >= start]})
    plain = audit.replay_partitions(events, config, TOPIC, include_all=False)
    assert _comparable(plain) != want


def test_compacted_changelog_skips_what_the_newer_state_covers(tmp_path: Path) -> None:
    config, records = _setup(tmp_path)
    published, changelog = _worker(records, config, batch=7)
    compacted = list({r.key: r for r in changelog if r.offset < 4 * 2}.values())  # newest surviving per key
    compacted.sort(key=lambda r: r.offset)
    cut = max(envelope.decode(r.value).last_offset for r in compacted)
    start = 3
    events, _ = audit.decode_records({0: [r for r in records if r.offset >= start]})
    index = audit_changelog.index_changelog({0: compacted}, "cl", set(audit_state.first_offsets(events)))
    bases = audit_state.select_bases(events, index)
    assert {b.origin for b in bases.values()} == {"compacted"}
    result = audit_state.replay_from_bases(events, {}, bases, config, TOPIC, include_all=False)
    covered = {(0, o) for o in range(start, len(records)) if o <= bases[(0, _key(records[o]))].after}
    assert result.skipped == covered and len(covered) == cut + 1 - start
    kept = [v for v in published if v["source"]["offset"] >= start and result.replayed_in_range(v)]
    assert _comparable(result.records) == _comparable(kept)
    assert "0 earlier events" in result.summary() and f"{len(covered)} events skipped" in result.summary()
    assert result.to_json()["compacted"] == 2
    # the whole pipeline: with every earlier event still in the topic, the oldest surviving states are rebuilt
    # from empty, so they count as first versions and nothing is skipped; once the topic lost its first
    # records (retention), they cannot be and the compacted start applies
    full = _stateful(records, compacted, config, start)
    assert {b.origin for b in full.bases.values()} == {"first"} and not full.skipped
    assert _comparable(full.records) == _comparable([v for v in published if v["source"]["offset"] >= start])
    retained = [r for r in records if r.offset >= 1]
    lost = _stateful(retained, compacted, config, start)
    assert lost.bases[(0, "sess-a")].origin == "compacted" and lost.skipped


def test_expired_run_starts_afresh_after_its_last_state(tmp_path: Path) -> None:
    config, records = _setup(tmp_path)
    _, changelog = _worker(records, config, batch=7)
    # run a expired after the first batch: tombstone after its first version, then the worker began again
    first_a = next(r for r in changelog if r.key == b"sess-a")
    expired = [first_a, audit.TopicRecord(0, first_a.offset, 0, b"sess-a", b"")]
    start = 20
    events, _ = audit.decode_records({0: [r for r in records if r.offset >= start]})
    earlier, _ = audit.decode_records({0: [r for r in records if r.offset < start]})
    index = audit_changelog.index_changelog({0: expired}, "cl", {(0, "sess-a")})
    bases = audit_state.select_bases(events, index)
    last_a = envelope.decode(first_a.value).last_offset
    assert bases[(0, "sess-a")] == Base(None, last_a, "expired", first_a.offset)
    assert bases[(0, "sess-b")].origin == "empty"
    result = audit_state.replay_from_bases(events, earlier, bases, config, TOPIC, include_all=False)
    # run a: the events after its expiry from empty, warmed up to the range, like a worker whose run expired
    only_a = [r for r in records if r.key == b"sess-a" and r.offset > last_a]
    want_events, _ = audit.decode_records({0: only_a})
    want = [v for v in audit.replay_partitions(want_events, config, TOPIC, include_all=False) if v["index"] >= start]
    assert [v for v in result.records if v["session_id"] == "sess-a"] == want
    assert result.warmed == sum(1 for r in only_a if r.offset < start)


def _key(record: audit.TopicRecord) -> str:
    assert record.key is not None
    return record.key.decode()


# --- flags ------------------------------------------------------------------------------------------------


def test_with_state_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = write_inputs(GENERIC, tmp_path, wire_events(GENERIC))
    assert main(["replay", "--events", str(events), "--with-state"]) == 2
    assert "need --topic" in capsys.readouterr().err
    assert changelog_topic("loopwatch") == "loopwatch-runs-changelog"
