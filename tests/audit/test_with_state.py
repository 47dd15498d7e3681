"""``replay --with-state``, the pure parts: which stored state a run starts from, warm-up, skips, equality.

The last tests model the worker exactly (``RunProcessor`` over batches, one changelog version per run and
batch, written after the batch) and check that a replay of a range starting in the middle of runs equals the
worker's verdicts with ``--with-state`` and differs without it.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from streams.audit import changelog as audit_changelog
from streams.audit import replay, source, with_state
from streams.audit.changelog import Base, ChangelogRecord, select_base
from streams.cli import main
from streams.decode import decode_event
from streams.kafka import reader
from streams.runner import Replayer
from streams.topics import changelog_topic
from streams.worker import envelope
from streams.worker.envelope import StoredRun
from tests.support.audit import (
    GENERIC,
    TOPIC,
    comparable,
    run_worker,
    setup_runs,
    stateful_replay,
    stored_state,
    tombstone,
    version,
)
from tests.support.faults import core_raises
from tests.support.scenarios import wire_events, write_inputs
from tests.worker.support import CONFIG, event

# --- selection --------------------------------------------------------------------------------------------


def test_no_stored_state_starts_empty_at_the_range() -> None:
    assert select_base([], 40) == Base(None, 39, "empty")


def test_newest_version_before_the_first_covering_one() -> None:
    records = [version(0, 5, 1), version(3, 12, 2), version(7, 20, 3), version(9, 31, 4)]
    assert select_base(records, 21) == Base(stored_state(3), 20, "stored", 7)
    assert select_base(records, 20) == Base(stored_state(2), 12, "stored", 3)  # version 3 covers offset 20
    assert select_base(records, 13) == Base(stored_state(2), 12, "stored", 3)
    assert select_base(records, 99) == Base(stored_state(4), 31, "stored", 9)  # the worker has not got that far


def test_rewritten_versions_of_redelivered_events() -> None:
    # the worker rewrites the same last_offset after a redelivery; the newest copy is taken
    records = [version(0, 5, 1), version(1, 5, 2), version(2, 9, 3)]
    assert select_base(records, 7) == Base(stored_state(2), 5, "stored", 1)


def test_tombstone_after_a_state_means_expired() -> None:
    records = [version(0, 5, 1), version(2, 8, 2), tombstone(4), version(6, 30, 3)]
    # expired after offset 8: the worker started the run afresh with its next event (9)
    assert select_base(records, 20) == Base(None, 8, "expired", 4)
    assert select_base(records, 9) == Base(None, 8, "expired", 4)
    assert select_base([*records, tombstone(8)], 40) == Base(None, 30, "expired", 8)
    assert select_base(records, 8) == Base(stored_state(1), 5, "stored", 0)  # before the expiry


def test_tombstone_without_an_earlier_state_starts_at_the_range() -> None:
    assert select_base([tombstone(3), version(5, 30, 1)], 20) == Base(None, 19, "expired", 3)
    assert select_base([tombstone(3)], 20) == Base(None, 19, "expired", 3)


def test_compacted_changelog_starts_from_the_oldest_newer_state() -> None:
    assert select_base([version(11, 30, 1)], 20) == Base(stored_state(1), 30, "compacted", 11)
    assert select_base([version(11, 25, 1), version(12, 30, 2)], 20) == Base(stored_state(1), 25, "compacted", 11)


def test_index_changelog_decodes_filters_and_keeps_order() -> None:
    value = envelope.encode(0, 7, 1, stored_state(1))
    other_partition = envelope.encode(3, 9, 1, stored_state(2))
    recs = {
        0: [
            reader.TopicRecord(0, 4, 0, b"r1", b""),  # tombstone (the reader gives b"" for a null value)
            reader.TopicRecord(0, 2, 0, b"r1", value),
            reader.TopicRecord(0, 3, 0, b"r2", value),  # not a run in the range
            reader.TopicRecord(0, 5, 0, b"r1", b"junk"),
            reader.TopicRecord(0, 6, 0, b"r1", other_partition),
            reader.TopicRecord(0, 7, 0, None, value),
        ],
        1: [reader.TopicRecord(1, 0, 0, b"r1", value)],  # another source partition's run r1
    }
    index = audit_changelog.index_changelog(recs, "cl", {(0, "r1")})
    assert index.runs == {
        (0, "r1"): [ChangelogRecord(2, StoredRun(0, 7, 1, stored_state(1))), ChangelogRecord(4, None)]
    }
    assert [n.split(":")[0] for n in index.ignored] == ["cl[0]@5", "cl[0]@6", "cl[0]@7"]


def test_warmup_ranges() -> None:
    bases = {
        (0, "a"): Base(None, 4, "stored"),
        (0, "b"): Base(None, 7, "expired"),
        (0, "c"): Base(None, 9, "empty"),
        (1, "d"): Base(None, 30, "compacted"),
    }
    assert with_state.warmup_ranges(bases, {0: 10, 1: 20}) == {0: (5, 10)}


# --- replay from bases ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("start", "batch"), [(1, 7), (17, 7), (23, 7), (30, 7), (41, 7), (9, 100), (3, 1)])
def test_mid_run_range_with_state_equals_the_worker(tmp_path: Path, start: int, batch: int) -> None:
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=batch)
    want = comparable([v for v in published if v["source"]["offset"] >= start])
    assert want
    result = stateful_replay(records, changelog, config, start)
    assert comparable(result.records) == want
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
    events, _ = source.decode_records({0: [r for r in records if r.offset >= start]})
    plain = replay.replay_partitions(events, config, TOPIC, include_all=False)
    assert comparable(plain) != want


@pytest.mark.parametrize(("start", "end", "batch"), [(0, 20, 100), (5, 21, 100), (15, 20, 21), (3, 40, 100)])
def test_range_ending_inside_the_batch_of_a_first_version(tmp_path: Path, start: int, end: int, batch: int) -> None:
    """``--to`` inside the batch where the runs began: their first stored version covers events after the range.
    Those are read too, the version is rebuilt from empty (``first``), and nothing of the range is skipped;
    without them it looked compacted, every event of the range was skipped and "equal" hid its verdicts."""
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=batch)
    want = comparable([v for v in published if start <= v["source"]["offset"] < end])
    assert want
    result = stateful_replay(records, changelog, config, start, end)
    assert {b.origin for b in result.bases.values()} == {"first"}
    assert not result.skipped
    assert comparable(result.records) == want


def test_what_is_read_after_the_range_is_bounded_by_a_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compacted changelog keeps each run's newest state, far past ``--to`` for every run still active then:
    only a state within one batch (``LOOKBACK``) of the run's first event can be a first version, so only that
    much is read after the range, and the summary names it."""
    config, records = setup_runs(tmp_path)
    _, changelog = run_worker(records, config, batch=100)  # one batch: every first version covers offset 42
    assert stateful_replay(records, changelog, config, 0, 20).ahead == {0: (20, 43)}
    newest = sorted({r.key: r for r in changelog}.values(), key=lambda r: r.offset)
    monkeypatch.setattr(with_state, "LOOKBACK", 5)  # a batch of 5: 42 is out of reach of offsets 20 and 21
    bounded = stateful_replay(records, newest, config, 20, 22)
    assert bounded.ahead == {} and {b.origin for b in bounded.bases.values()} == {"compacted"}
    monkeypatch.setattr(with_state, "LOOKBACK", 10_000)
    result = stateful_replay(records, changelog, config, 0, 20)
    assert "and after the range (0:20..42) to rebuild first states" in result.summary()
    assert result.to_json()["ahead"] == {"0": [20, 43]}


def test_compacted_changelog_skips_what_the_newer_state_covers(tmp_path: Path) -> None:
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=7)
    compacted = list({r.key: r for r in changelog if r.offset < 4 * 2}.values())  # newest surviving per key
    compacted.sort(key=lambda r: r.offset)
    cut = max(envelope.decode(r.value).last_offset for r in compacted)
    start = 3
    events, _ = source.decode_records({0: [r for r in records if r.offset >= start]})
    index = audit_changelog.index_changelog({0: compacted}, "cl", set(with_state.first_offsets(events)))
    bases = with_state.select_bases(events, index)
    assert {b.origin for b in bases.values()} == {"compacted"}
    result = with_state.replay_from_bases(events, {}, bases, config, TOPIC, include_all=False)
    covered = {(0, o) for o in range(start, len(records)) if o <= bases[(0, _key(records[o]))].after}
    assert result.skipped == covered and len(covered) == cut + 1 - start
    kept = [v for v in published if v["source"]["offset"] >= start and result.replayed_in_range(v)]
    assert comparable(result.records) == comparable(kept)
    assert "0 earlier events" in result.summary() and f"{len(covered)} events skipped" in result.summary()
    assert result.to_json()["compacted"] == 2
    # the whole pipeline: with every earlier event still in the topic, the oldest surviving states are rebuilt
    # from empty, so they count as first versions and nothing is skipped; once the topic lost its first
    # records (retention), they cannot be and the compacted start applies
    full = stateful_replay(records, compacted, config, start)
    assert {b.origin for b in full.bases.values()} == {"first"} and not full.skipped
    assert comparable(full.records) == comparable([v for v in published if v["source"]["offset"] >= start])
    retained = [r for r in records if r.offset >= 1]
    lost = stateful_replay(retained, compacted, config, start)
    assert lost.bases[(0, "sess-a")].origin == "compacted" and lost.skipped


def test_expired_run_starts_afresh_after_its_last_state(tmp_path: Path) -> None:
    config, records = setup_runs(tmp_path)
    _, changelog = run_worker(records, config, batch=7)
    # run a expired after the first batch: tombstone after its first version, then the worker began again
    first_a = next(r for r in changelog if r.key == b"sess-a")
    expired = [first_a, reader.TopicRecord(0, first_a.offset, 0, b"sess-a", b"")]
    start = 20
    events, _ = source.decode_records({0: [r for r in records if r.offset >= start]})
    earlier, _ = source.decode_records({0: [r for r in records if r.offset < start]})
    index = audit_changelog.index_changelog({0: expired}, "cl", {(0, "sess-a")})
    bases = with_state.select_bases(events, index)
    last_a = envelope.decode(first_a.value).last_offset
    assert bases[(0, "sess-a")] == Base(None, last_a, "expired", first_a.offset)
    assert bases[(0, "sess-b")].origin == "empty"
    result = with_state.replay_from_bases(events, earlier, bases, config, TOPIC, include_all=False)
    # run a: the events after its expiry from empty, warmed up to the range, like a worker whose run expired
    only_a = [r for r in records if r.key == b"sess-a" and r.offset > last_a]
    want_events, _ = source.decode_records({0: only_a})
    want = [v for v in replay.replay_partitions(want_events, config, TOPIC, include_all=False) if v["index"] >= start]
    assert [v for v in result.records if v["session_id"] == "sess-a"] == want
    assert result.warmed == sum(1 for r in only_a if r.offset < start)


def _key(record: reader.TopicRecord) -> str:
    assert record.key is not None
    return record.key.decode()


# --- flags ------------------------------------------------------------------------------------------------


def test_with_state_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = write_inputs(GENERIC, tmp_path, wire_events(GENERIC))
    assert main(["replay", "--events", str(events), "--with-state"]) == 2
    assert "need --topic" in capsys.readouterr().err
    assert changelog_topic("loopwatch") == "loopwatch-runs-changelog"


def test_the_check_of_a_compacted_start_does_not_report_events_not_applied(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Checking whether a compacted candidate is the run's first version replays the run's events once more;
    an event not applied is reported by the audit's own pass only, not a second time by the check."""
    core_raises(monkeypatch, lambda ev: ev.call_id == "a-c1", lambda _ev: RuntimeError("a defect"))
    events = [source.PositionedEvent(i, decode_event(orjson.dumps(event(i, "a")))) for i in range(3)]
    state = Replayer(CONFIG, report=False)
    for pe in events:
        state.apply(pe.event)
    candidate = Base(state.state("a"), 2, "compacted", 7)
    confirmed = with_state.confirm_first_version(candidate, -1, events, CONFIG)
    assert confirmed.origin == "first" and confirmed.state is None  # it rebuilt the state from empty
    assert capsys.readouterr().err == ""
