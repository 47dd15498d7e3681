"""Batch processing without Kafka: grouping, dead letters, replay equality, redelivery, duplicates.

The last tests model the worker's delivery protocol (pipelined batches; verdicts confirmed before states are
stored; partial delivery at a crash; lagging commits; a RocksDB store that may be ahead of its changelog) and
check the delivery promise (docs/delivery.md) against ``loopwatch replay``: every verdict published at least once,
duplicates identical, state exact.
"""

from __future__ import annotations

import base64
import io
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

import streams.runner
from streams.audit.replay import replay_lines
from streams.config_file import LoadedConfig
from streams.decode import INVALID_REASONS, KEY_MISMATCH, decode_event
from streams.limits import MAX_STATE_BYTES
from streams.runner import STATE_TOO_LARGE, Replayer
from streams.worker import envelope
from streams.worker.envelope import StoredRun
from streams.worker.processing import (
    InputRecord,
    Publication,
    RunProcessor,
    StateWrite,
    newest_states,
    plan_batch,
)
from tests.support.faults import core_raises
from tests.worker.support import CONFIG, TOPIC, event, long_id_calls, mixed_events, records

NOW = 1_800_000_000_000


def replay(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{verdict_id: verdict}`` of ``loopwatch replay`` (published decisions only), plus the line index."""
    out = io.BytesIO()
    lines: Iterator[bytes] = (orjson.dumps(ev) for ev in events)
    assert replay_lines(lines, CONFIG, out, include_all=False, skip_invalid=False) == 0
    result = {}
    for line in out.getvalue().splitlines():
        row = orjson.loads(line)
        result[row["verdict_id"]] = row
    return result


def run_batches(
    processor: RunProcessor, recs: list[InputRecord], store: dict[bytes, bytes], sizes: list[int]
) -> list[Publication]:
    """Process ``recs`` in batches of the given sizes (no pipelining), like a healthy worker."""
    pubs: list[Publication] = []
    at = 0
    for size in sizes:
        batch = recs[at : at + size]
        at += size
        plan = plan_batch(batch, NOW)
        assert not plan.dead_letters
        for group in plan.groups.values():
            result = processor.process(group, batch, store.get(group.key), NOW)
            if result.value is not None:
                store[group.key] = result.value
            pubs.extend(result.publications)
    assert at == len(recs)
    return pubs


def comparable(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in verdict.items() if k not in ("source", "index", "published")}


# --- plan_batch ---------------------------------------------------------------------------------------------


def test_groups_by_scope_key_in_offset_order() -> None:
    evs = [event(0, "a"), event(1, "b"), event(2, "a"), event(3, "a")]
    recs = records(evs)
    plan = plan_batch(recs, NOW)
    assert list(plan.groups) == [b"a", b"b"]
    assert plan.groups[b"a"].indexes == [0, 2, 3]
    assert [e.event_id for e in plan.groups[b"a"].events] == ["a-e0", "a-e2", "a-e3"]
    assert plan.dead_letters == []


BAD_VALUES = {
    "not_json": b"{not json",
    "not_utf8": b'{"type": "tool_call", "tool": "\xff\xfe"}',
    "not_object": b"[1, 2]",
    "unknown_type": orjson.dumps({**event(0, "a"), "type": "tool_exploded"}),
    "future_version": orjson.dumps({**event(0, "a"), "version": 99}),
    "schema_invalid": orjson.dumps({k: v for k, v in event(0, "a").items() if k != "session_id"}),
    "oversized": orjson.dumps({**event(0, "a"), "args": {"blob": "x" * (1024 * 1024)}}),
}


@pytest.mark.parametrize("reason", sorted(BAD_VALUES))
def test_bad_records_become_dead_letters(reason: str) -> None:
    good = records([event(0, "a"), event(2, "a")])
    bad = InputRecord(TOPIC, 3, 41, b"a", BAD_VALUES[reason])
    plan = plan_batch([good[0], bad, good[1]], NOW)
    assert [d.reason for d in plan.dead_letters] == [reason]
    assert reason in INVALID_REASONS
    dead = plan.dead_letters[0]
    assert dead.key == b"a"
    record = orjson.loads(dead.value)
    assert record["reason"] == reason
    assert record["source"] == {"topic": TOPIC, "partition": 3, "offset": 41}
    assert base64.b64decode(record["key"]) == b"a"
    original = base64.b64decode(record["original"])
    if reason == "oversized":
        assert record["original_truncated"] is True
        assert record["original_size"] == len(BAD_VALUES[reason])
        assert BAD_VALUES[reason].startswith(original) and len(dead.value) < 1_000_000
    else:
        assert original == BAD_VALUES[reason]
        assert "original_truncated" not in record
    assert record["received_at"].endswith("Z")
    assert plan.groups[b"a"].indexes == [0, 2]  # the valid events around it are kept


def test_null_value_is_dead_lettered() -> None:
    plan = plan_batch([InputRecord(TOPIC, 0, 0, b"a", None)], NOW)
    assert [d.reason for d in plan.dead_letters] == ["not_json"]
    assert orjson.loads(plan.dead_letters[0].value)["original"] == ""


@pytest.mark.parametrize("key", [None, b"other-run", b"sess-a"])
def test_record_key_must_be_the_scope_key(key: bytes | None) -> None:
    plan = plan_batch([InputRecord(TOPIC, 0, 0, key, orjson.dumps(event(0, "a")))], NOW)
    assert [d.reason for d in plan.dead_letters] == [KEY_MISMATCH]
    assert not plan.groups
    record = orjson.loads(plan.dead_letters[0].value)
    assert record["key"] == (None if key is None else base64.b64encode(key).decode())


def test_session_is_the_scope_key_without_run_id() -> None:
    ev = {**event(0, "a"), "run_id": None}
    plan = plan_batch([InputRecord(TOPIC, 0, 0, b"sess-a", orjson.dumps(ev))], NOW)
    assert list(plan.groups) == [b"sess-a"]


# --- applying runs ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [[1] * 60, [7] * 8 + [4], [60], [13, 1, 29, 17]])
def test_batched_output_equals_replay(sizes: list[int]) -> None:
    evs = mixed_events(60, runs=5, seed=3)
    pubs = run_batches(RunProcessor(CONFIG), records(evs), {}, sizes)
    want = replay(evs)
    got = {orjson.loads(p.value)["verdict_id"]: orjson.loads(p.value) for p in pubs}
    assert len(pubs) == len(got) == len(want) > 0
    for vid, verdict in got.items():
        assert comparable(verdict) == comparable(want[vid])
        assert verdict["source"] == {"topic": TOPIC, "partition": 0, "offset": want[vid]["index"]}
    assert {(p.decision, p.detector) for p in pubs} == {(v["decision"], v["detector"]) for v in got.values()}


def test_state_is_one_envelope_per_run_with_the_last_offset() -> None:
    evs = [event(i, "a") for i in range(5)]
    store: dict[bytes, bytes] = {}
    run_batches(RunProcessor(CONFIG), records(evs, partition=2, start=100), store, [3, 2])
    stored = envelope.decode(store[b"a"])
    assert (stored.partition, stored.last_offset, stored.last_seen_ms) == (2, 104, NOW)
    assert len(store[b"a"]) < 4096


def test_redelivered_events_are_not_applied_again() -> None:
    evs = [event(i, "a") for i in range(6)]
    recs = records(evs)
    store: dict[bytes, bytes] = {}
    assert run_batches(RunProcessor(CONFIG), recs, store, [6])
    before = envelope.decode(store[b"a"])
    # the whole batch again (a crash after the state was stored, before the commit)
    plan = plan_batch(recs, NOW + 5)
    result = RunProcessor(CONFIG).process(plan.groups[b"a"], recs, store[b"a"], NOW + 5)
    assert result.redelivered == 6 and result.applied_types == [] and result.publications == []
    # rewritten anyway: a store ahead of its changelog is healed
    assert result.value is not None
    after = envelope.decode(result.value)
    assert after.state == before.state and after.last_offset == before.last_offset == 5
    assert after.last_seen_ms == NOW + 5


def test_a_partly_redelivered_batch_applies_only_the_new_events() -> None:
    evs = [event(i, "a") for i in range(8)]
    recs = records(evs)
    store: dict[bytes, bytes] = {}
    first = run_batches(RunProcessor(CONFIG), recs[:5], store, [5])
    plan = plan_batch(recs[3:], NOW)
    result = RunProcessor(CONFIG).process(plan.groups[b"a"], recs[3:], store[b"a"], NOW)
    assert result.redelivered == 2 and len(result.applied_types) == 3
    clean: dict[bytes, bytes] = {}
    everything = run_batches(RunProcessor(CONFIG), recs, clean, [8])
    assert [p.value for p in first + result.publications] == [p.value for p in everything]
    assert result.value is not None
    assert envelope.decode(result.value).state == envelope.decode(clean[b"a"]).state


def test_duplicate_events_change_nothing() -> None:
    evs = [event(i, "a") for i in range(5)]
    with_dups = [*evs[:3], evs[1], evs[2], *evs[3:], evs[0]]
    store_a: dict[bytes, bytes] = {}
    store_b: dict[bytes, bytes] = {}
    pubs_a = run_batches(RunProcessor(CONFIG), records(evs), store_a, [5])
    processor = RunProcessor(CONFIG)
    plan = plan_batch(records(with_dups), NOW)
    result = processor.process(plan.groups[b"a"], records(with_dups), None, NOW)
    assert result.duplicates == 3
    assert [orjson.loads(p.value)["verdict_id"] for p in result.publications] == [
        orjson.loads(p.value)["verdict_id"] for p in pubs_a
    ]
    assert result.value is not None
    store_b[b"a"] = result.value
    assert envelope.decode(store_b[b"a"]).state == envelope.decode(store_a[b"a"]).state


def test_a_new_partition_starts_a_new_offset_sequence() -> None:
    processor = RunProcessor(CONFIG)
    store: dict[bytes, bytes] = {}
    run_batches(processor, records([event(i, "a") for i in range(3)], partition=1, start=50), store, [3])
    moved = records([event(i, "a") for i in range(3, 5)], partition=4, start=0)
    plan = plan_batch(moved, NOW)
    result = processor.process(plan.groups[b"a"], moved, store[b"a"], NOW)
    assert result.redelivered == 0 and len(result.applied_types) == 2


def _raise_on(monkeypatch: pytest.MonkeyPatch, event_id: str) -> None:
    """Make the detection core raise, with a message quoting the event's arguments, when it applies ``event_id``."""
    core_raises(monkeypatch, lambda ev: ev.dedup_key.endswith("\x00" + event_id), lambda ev: KeyError(ev.args))


def _usage(i: int, run: str) -> dict[str, Any]:
    """A model_usage event of ``run`` (its calls' loops get priced, so a failed verdict must not charge them)."""
    return {"type": "model_usage", "event_id": f"{run}-u{i}", "gateway_id": "gw", "session_id": f"sess-{run}",
            "run_id": run, "ts": 1_767_225_600_000 + i, "provider": "openai", "model": "gpt-x", "input_tokens": 900,
            "output_tokens": 80, "cache_read_tokens": 0, "cache_write_tokens": 0, "cost_usd": 0.01}  # fmt: skip


def _verdict_raises(monkeypatch: pytest.MonkeyPatch, when: Any) -> None:
    """Make building a verdict raise (a defect) for the decisions ``when(event, decision)`` picks."""
    real = streams.runner.to_verdict

    def to_verdict(ev: Any, decision: Any, **kwargs: Any) -> Any:
        if when(ev, decision):
            raise TypeError("a verdict field the core got wrong")
        return real(ev, decision, **kwargs)

    monkeypatch.setattr(streams.runner, "to_verdict", to_verdict)


def _without_source(pubs: list[Publication]) -> list[dict[str, Any]]:
    return [{k: v for k, v in orjson.loads(p.value).items() if k != "source"} for p in pubs]


def test_an_event_whose_verdict_cannot_be_built_is_dead_lettered_with_its_run_and_usage_untouched(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Building a verdict is part of applying its event: one that raises (a defect) dead-letters the event as
    the core raising would, instead of stopping the partition, and leaves neither the state nor the priced usage
    advanced (a usage event after every call: a loop charged at the failed event would price later verdicts
    differently); replay skips the same event, so the verdicts still equal."""
    evs = [_usage(0, "a")]
    for i in range(1, 18):
        evs += [event(i, "a"), _usage(100 + i, "a")]
    recs = records(evs, partition=2, start=10)
    clean = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    publishing = [orjson.loads(p.value)["event_id"] for p in clean.publications]
    assert len(publishing) >= 2 and clean.dead_letters == []
    broken = publishing[0]  # the first event with a published verdict
    _verdict_raises(monkeypatch, lambda ev, _decision: ev.event_id == broken)
    result = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    assert [(d.reason, orjson.loads(d.value)["source"]["offset"]) for d in result.dead_letters] == [
        ("apply_failed", 10 + [e["event_id"] for e in evs].index(broken))
    ]
    assert orjson.loads(result.dead_letters[0].value)["detail"].startswith("TypeError raised while applying")
    without = [ev for ev in evs if ev["event_id"] != broken]
    alone = RunProcessor(CONFIG).process(plan_batch(records(without), NOW).groups[b"a"], records(without), None, NOW)
    assert result.value is not None and alone.value is not None
    stored, expected = envelope.decode(result.value), envelope.decode(alone.value)
    assert stored.state == expected.state and stored.usage == expected.usage and stored.usage is not None
    verdicts = _without_source(result.publications)
    assert verdicts == _without_source(alone.publications)  # their loop costs too
    assert any(v["tokens_in_loop"] for v in verdicts)
    assert {v["verdict_id"] for v in verdicts} == set(replay(evs))
    assert f"'{broken}' of gateway 'gw': not applied (apply_failed): TypeError" in capsys.readouterr().err


def test_only_the_published_verdicts_decide_whether_an_event_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker builds the verdicts it publishes; an audit counting every decision (``--all``) must skip the
    same events as the worker, so the verdict of a decision the worker does not publish cannot fail an event."""
    evs = [event(i, "a") for i in range(12)]
    decoded = [decode_event(orjson.dumps(ev)) for ev in evs]
    every = Replayer(CONFIG, include_all=True)
    held_back = [e.event_id for e in decoded for d in every.apply(e).decisions if not d.published]
    assert held_back, "the scenario must hold a decision back"
    _verdict_raises(monkeypatch, lambda _ev, decision: not decision.published)
    recs = records(evs)
    result = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    assert result.dead_letters == [] and len(result.applied_types) == len(evs)
    for include_all in (False, True):
        replayer = Replayer(CONFIG, include_all=include_all)
        assert [replayer.apply(e).failure for e in decoded] == [None] * len(evs)


def test_an_event_that_raises_is_dead_lettered_and_its_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    evs = [event(i, "a", args={"path": "/secret"}) for i in range(6)]
    recs = records(evs, partition=3, start=40)
    _raise_on(monkeypatch, "a-e2")
    result = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    assert [d.reason for d in result.dead_letters] == ["apply_failed"]
    dead = result.dead_letters[0]
    record = orjson.loads(dead.value)
    assert dead.key == b"a" and record["source"] == {"topic": TOPIC, "partition": 3, "offset": 42}
    assert base64.b64decode(record["original"]) == recs[2].value
    assert record["detail"].startswith("KeyError raised while applying") and "secret" not in record["detail"]
    assert len(result.applied_types) == 5  # the run went on without it
    without = [ev for ev in evs if ev["event_id"] != "a-e2"]
    alone = RunProcessor(CONFIG).process(plan_batch(records(without), NOW).groups[b"a"], records(without), None, NOW)
    assert result.value is not None and alone.value is not None
    assert envelope.decode(result.value).state == envelope.decode(alone.value).state
    assert envelope.decode(result.value).last_offset == 45
    # replay skips exactly that event and says so, so its verdicts are the worker's
    want = replay(evs)
    assert {orjson.loads(p.value)["verdict_id"] for p in result.publications} == set(want)
    assert "'a-e2' of gateway 'gw': not applied (apply_failed): KeyError" in capsys.readouterr().err
    # redelivered after its state was stored: not applied again, so not dead-lettered again
    again = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, result.value, NOW)
    assert again.dead_letters == [] and again.redelivered == 6


def test_an_event_that_would_outgrow_a_record_is_dead_lettered_and_the_run_keeps_a_storable_state(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A state that cannot be stored would stop the partition at its store step on every worker: the events
    that would take the run past MAX_STATE_BYTES are not applied, as replay does not apply them."""
    config = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True, "historySize": 200}}})
    evs = long_id_calls(130, "a")
    recs = records(evs, partition=1)
    result = RunProcessor(config).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    reasons = {d.reason for d in result.dead_letters}
    assert reasons == {STATE_TOO_LARGE} and 0 < len(result.dead_letters) < 30
    detail = orjson.loads(result.dead_letters[0].value)["detail"]
    assert detail.startswith("the run's state would take ") and "lower historySize" in detail
    assert len(result.applied_types) == 130 - len(result.dead_letters)
    assert result.value is not None and MAX_STATE_BYTES - 10_000 < len(result.value) < 1_000_000
    assert envelope.decode(result.value).last_offset == 129
    replayer = Replayer(config)
    skipped = [at for at, ev in enumerate(evs) if replayer.apply(decode_event(orjson.dumps(ev))).failure is not None]
    assert skipped == [orjson.loads(d.value)["source"]["offset"] for d in result.dead_letters]
    assert replayer.state("a") == envelope.decode(result.value).state
    assert (
        f"'a-e{skipped[0]}' of gateway 'gw': not applied (state_too_large): the run's state" in capsys.readouterr().err
    )


def test_events_that_raise_are_logged_with_where_not_with_their_values_and_not_one_traceback_each(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _raise_on(monkeypatch, "a-e0")
    processor = RunProcessor(CONFIG)
    for at, ms in enumerate((0, 1_000, 2_000, 31_000)):
        recs = records([event(0, "a", args={"path": "/secret"})], start=at)
        processor.process(plan_batch(recs, NOW + ms).groups[b"a"], recs, None, NOW + ms)
    lines = [r.getMessage() for r in caplog.records if r.name == "streams.worker.processing"]
    assert len(lines) == 2 and all("/secret" not in line for line in lines)
    assert lines[0].startswith(
        "loopwatch.events[0]@0: event not applied, dead-lettered (apply_failed): KeyError raised at\n"
    )
    assert "in apply" in lines[0]  # the frame that raised
    assert lines[1].startswith("loopwatch.events[0]@3: event not applied, dead-lettered (apply_failed) (2 more since")


def test_a_first_event_that_raises_leaves_an_empty_run_in_the_worker_and_in_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _raise_on(monkeypatch, "a-e0")
    recs = records([event(0, "a")])
    result = RunProcessor(CONFIG).process(plan_batch(recs, NOW).groups[b"a"], recs, None, NOW)
    replayer = Replayer(CONFIG)
    assert replayer.apply(decode_event(recs[0].value or b"")).failure is not None
    assert result.value is not None
    assert envelope.decode(result.value).state == replayer.state("a")


def test_apply_then_encode_is_process_and_takes_a_decoded_state() -> None:
    evs = [event(i, "a") for i in range(4)]
    first, second = records(evs[:2]), records(evs[2:], start=2)
    stored = RunProcessor(CONFIG).process(plan_batch(first, NOW).groups[b"a"], first, None, NOW).value
    assert stored is not None
    group = plan_batch(second, NOW + 1).groups[b"a"]
    want = RunProcessor(CONFIG).process(group, second, stored, NOW + 1)
    applied = RunProcessor(CONFIG).apply(group, second, stored, NOW + 1)
    from_decoded = RunProcessor(CONFIG).apply(group, second, envelope.decode(stored), NOW + 1)
    assert applied.value is None and applied.run is not None and from_decoded.run is not None
    assert RunProcessor(CONFIG).encode(b"a", applied.run) == want.value
    assert RunProcessor(CONFIG).encode(b"a", from_decoded.run) == want.value
    assert [p.value for p in applied.publications] == [p.value for p in want.publications]
    assert [p.value for p in from_decoded.publications] == [p.value for p in want.publications]


def test_undecodable_stored_state_starts_afresh() -> None:
    recs = records([event(0, "a")])
    plan = plan_batch(recs, NOW)
    result = RunProcessor(CONFIG).process(plan.groups[b"a"], recs, b"\x93garbage", NOW)
    assert result.applied_types == ["tool_call"]


def test_cache_is_only_used_for_identical_bytes() -> None:
    processor = RunProcessor(CONFIG, cache_size=2)
    evs = [event(i, "a") for i in range(3)]
    store: dict[bytes, bytes] = {}
    run_batches(processor, records(evs), store, [3])
    stale = store[b"a"]
    run_batches(processor, records([event(i, "a") for i in range(3, 6)], start=3), store, [3])
    # The store goes back to an older value (say, recovery from another replica): the cache must not win.
    recs = records([event(i, "a") for i in range(6, 7)], start=6)
    plan = plan_batch(recs, NOW)
    result = processor.process(plan.groups[b"a"], recs, stale, NOW)
    assert result.value is not None
    assert envelope.decode(result.value).last_offset == 6
    fresh = RunProcessor(CONFIG).process(plan.groups[b"a"], recs, stale, NOW)
    assert fresh.value == result.value


def test_decodes_count_the_stored_states_the_cache_did_not_hold() -> None:
    """Three runs through a cache of two, one event each per batch: each batch reads all three stored states,
    and the least recently used one is always the run the cache just dropped."""
    processor = RunProcessor(CONFIG, cache_size=2)
    store: dict[bytes, bytes] = {}
    keys = ["a", "b", "c"]
    run_batches(processor, records([event(0, k) for k in keys]), store, [3])
    assert processor.decodes == 0  # new runs: nothing stored to decode, and written states are remembered
    for n in range(1, 4):
        run_batches(processor, records([event(n, k) for k in keys], start=3 * n), store, [3])
    assert processor.decodes == 9
    roomy = RunProcessor(CONFIG, cache_size=3)
    store = {}
    for n in range(4):
        run_batches(roomy, records([event(n, k) for k in keys], start=3 * n), store, [3])
    assert roomy.decodes == 0
    none = RunProcessor(CONFIG, cache_size=0)
    for n in range(4, 6):
        run_batches(none, records([event(n, k) for k in keys], start=3 * n), store, [3])
    assert none.decodes == 6


# --- the delivery protocol under crashes ----------------------------------------------------------------------


@dataclass
class Flight:
    """A processed batch: its verdicts sent, its states computed (not encoded) and not stored yet."""

    verdicts: list[bytes]
    writes: list[StateWrite]
    end: int  # next offset after this batch
    confirmed: bool = False  # its verdicts confirmed by the broker


@dataclass
class Step:
    """A store step: the newest state of each run over its batches, written locally, changelog sent."""

    writes: list[tuple[bytes, bytes]]
    end: int  # next offset after its last batch


@dataclass
class Cluster:
    """What survives a crash: the changelog (per key, in order), the verdicts topic and the commit."""

    changelog: dict[bytes, bytes] = field(default_factory=dict)
    verdicts: list[bytes] = field(default_factory=list)
    committed: int = 0


def run_incarnation(
    rng: random.Random,
    recs: list[InputRecord],
    cluster: Cluster,
    local: dict[bytes, bytes],
    *,
    crash_after: int | None,
) -> None:
    """One worker life, as streams.worker.app runs it: pipelined batches from the committed offset, a
    pending overlay of computed (unencoded) states, verdicts confirmed in order, store steps that write the
    newest state of each run over 1-4 confirmed batches once, then changelog confirmed -> acknowledged. Maybe
    a crash, with partial delivery of whatever was unconfirmed."""
    processor = RunProcessor(CONFIG, cache_size=rng.choice([0, 3, 100]))
    position = cluster.committed
    flights: list[Flight] = []
    steps: list[Step] = []
    pending: dict[bytes, StoredRun] = {}
    acked = cluster.committed
    processed = 0

    def advance() -> None:
        nonlocal acked
        actions = []
        unconfirmed = next((f for f in flights if not f.confirmed), None)
        if unconfirmed is not None:
            actions.append("confirm")
        if flights and flights[0].confirmed:
            actions.append("store")
        if steps:
            actions.append("ack")
        action = rng.choice(actions)
        if action == "confirm":
            assert unconfirmed is not None
            cluster.verdicts.extend(unconfirmed.verdicts)
            unconfirmed.confirmed = True
        elif action == "store":
            ready = 0
            while ready < len(flights) and flights[ready].confirmed:
                ready += 1
            taken = flights[: rng.randint(1, min(4, ready))]
            del flights[: len(taken)]
            writes = []
            for (key, run, _, _), _ in newest_states((NOW, flight.writes) for flight in taken).values():
                value = processor.encode(key, run)
                local[key] = value
                if pending.get(key) is run:
                    del pending[key]
                writes.append((key, value))
            steps.append(Step(writes, taken[-1].end))
        else:
            step = steps.pop(0)
            cluster.changelog.update(step.writes)
            acked = step.end

    while position < len(recs):
        if crash_after is not None and processed >= crash_after:
            break
        batch = recs[position : position + rng.randint(1, 9)]
        plan = plan_batch(batch, NOW)
        flight = Flight([], [], batch[-1].offset + 1)
        for group in plan.groups.values():
            stored: StoredRun | bytes | None = pending.get(group.key, local.get(group.key))
            result = processor.apply(group, batch, stored, NOW)
            assert result.run is not None and result.value is None
            pending[group.key] = result.run
            flight.writes.append((group.key, result.run, result.partition, None))
            flight.verdicts.extend(p.value for p in result.publications)
        flights.append(flight)
        position = flight.end
        processed += len(batch)
        while (flights or steps) and (len(flights) > 3 or rng.random() < 0.6):
            advance()
        if rng.random() < 0.3:
            cluster.committed = acked  # Faust commits acknowledged offsets now and then
    if crash_after is None:
        while flights or steps:
            advance()
        cluster.committed = acked
        return
    # Crash. Unconfirmed verdicts may or may not have reached the broker; of the steps' changelog records
    # (one partition, sent in order) a prefix arrived. Unstored batches never stored anything.
    for flight in flights:
        if not flight.confirmed:
            cluster.verdicts.extend(v for v in flight.verdicts if rng.random() < 0.5)
    sent = [write for step in steps for write in step.writes]
    cluster.changelog.update(sent[: rng.randint(0, len(sent))])


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("store", ["memory", "rocksdb"])
def test_crashes_never_lose_or_change_a_verdict(seed: int, store: str) -> None:
    rng = random.Random(seed)
    evs = mixed_events(rng.randint(30, 120), runs=rng.randint(1, 6), seed=seed)
    recs = records(evs)
    cluster = Cluster()
    local: dict[bytes, bytes] = {}
    for _ in range(rng.randint(1, 5)):
        if store == "memory":
            local = dict(cluster.changelog)  # recovered from the changelog
        # rocksdb: the local store survives the crash, possibly ahead of the changelog
        run_incarnation(rng, recs, cluster, local, crash_after=rng.randint(0, len(recs)))
    if store == "memory":
        local = dict(cluster.changelog)
    run_incarnation(rng, recs, cluster, local, crash_after=None)

    want = replay(evs)
    got: dict[str, bytes] = {}
    for value in cluster.verdicts:
        vid = orjson.loads(value)["verdict_id"]
        assert got.setdefault(vid, value) == value, "a re-published verdict differs"
    assert set(got) == set(want)
    for vid, value in got.items():
        assert comparable(orjson.loads(value)) == comparable(want[vid])
    # the final state of every run equals a crash-free run's, in the changelog and in the local store
    clean: dict[bytes, bytes] = {}
    run_batches(RunProcessor(CONFIG), recs, clean, [len(recs)])
    for key, value in clean.items():
        assert envelope.decode(cluster.changelog[key]).state == envelope.decode(value).state
        assert envelope.decode(local[key]).state == envelope.decode(value).state


def test_a_store_step_writes_each_run_once_with_its_newest_state() -> None:
    first = [(b"a", b"a1", 0, "e1"), (b"b", b"b1", 1, "e2")]
    second = [(b"c", b"c2", 2, "e3"), (b"a", b"a2", 0, "e4")]
    newest = newest_states([(100, first), (200, second)])
    assert list(newest) == [b"a", b"b", b"c"]
    assert newest[b"a"] == ((b"a", b"a2", 0, "e4"), 200)  # the later batch's state and processing time
    assert newest[b"b"] == ((b"b", b"b1", 1, "e2"), 100)
    assert newest_states([]) == {}


def test_runs_that_outgrew_a_record_do_not_keep_a_defect_out_of_the_log(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each reason has its own 30 s window: a run dead-lettering every event as state_too_large must not turn
    the traceback of an apply_failed (which the runbook asks to report) into a count."""
    config = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True, "historySize": 200}}})
    processor = RunProcessor(config)
    big = records(long_id_calls(130, "a"), partition=1)
    assert processor.process(plan_batch(big, NOW).groups[b"a"], big, None, NOW).dead_letters
    core_raises(monkeypatch, lambda ev: ev.scope == "b", lambda _ev: RuntimeError("a defect"))
    other = records([event(0, "b")], partition=1, start=200)
    assert processor.process(plan_batch(other, NOW).groups[b"b"], other, None, NOW + 1).dead_letters
    lines = [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert [line.split(": event")[0] for line in lines] == ["loopwatch.events[1]@120", "loopwatch.events[1]@200"]
    assert "(apply_failed): RuntimeError raised at" in lines[1] and "more since" not in lines[1]
