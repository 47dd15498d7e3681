"""Dead-letter records, metrics registry, CLI helpers (publish, tail) and settings: the pure parts."""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import time

import orjson
import pytest
from prometheus_client.exposition import generate_latest

from schemas import EVENT_TYPES
from streams.cli import build_parser
from streams.cli.publish import prepare
from streams.cli.tail import Escalations, matches, topics_of
from streams.decode import INVALID_REASONS
from streams.kafka.client import scope_key_from_raw
from streams.record_lines import fit, record_line
from streams.worker.deadletter import (
    MAX_KEY_BYTES,
    MAX_RECORD_BYTES,
    DeadLetterPolicy,
    dead_letter_key,
    dead_letter_record,
    rfc3339_ms,
)
from streams.worker.metrics import WorkerMetrics, sample_loop_lag
from streams.worker.processing import InputRecord, plan_batch
from streams.worker.settings import SettingsError, WorkerSettings
from tests.worker.support import event


def test_dead_letter_record_fields() -> None:
    value = dead_letter_record(
        reason="not_json",
        detail="unexpected character at line 1 column 2",
        topic="loopwatch.events",
        partition=2,
        offset=17,
        key=b"run-1",
        original=b"{oops",
        received_at_ms=1_767_225_600_123,
    )
    record = orjson.loads(value)
    assert record == {
        "reason": "not_json",
        "detail": "unexpected character at line 1 column 2",
        "source": {"topic": "loopwatch.events", "partition": 2, "offset": 17},
        "key": base64.b64encode(b"run-1").decode(),
        "original": base64.b64encode(b"{oops").decode(),
        "original_sha256": hashlib.sha256(b"{oops").hexdigest(),
        "received_at": "2026-01-01T00:00:00.123Z",
    }


def _dead(original: bytes, policy: DeadLetterPolicy) -> dict[str, object]:
    value = dead_letter_record(
        reason="schema_invalid",
        detail="args: required",
        topic="t",
        partition=0,
        offset=5,
        key=b"k",
        original=original,
        received_at_ms=0,
        policy=policy,
    )
    record: dict[str, object] = orjson.loads(value)
    return record


def test_dead_letter_digest_only_keeps_no_bytes() -> None:
    original = b'{"type":"tool_call","args":{"password":"hunter2"}}'
    record = _dead(original, DeadLetterPolicy(original="digest"))
    assert record["original"] is None
    assert record["original_sha256"] == hashlib.sha256(original).hexdigest()
    assert record["original_size"] == len(original)
    assert b"hunter2" not in orjson.dumps(record)


def test_dead_letter_original_is_capped_by_policy() -> None:
    original = b"x" * 1000
    record = _dead(original, DeadLetterPolicy(max_original_bytes=100))
    assert base64.b64decode(str(record["original"])) == original[:100]
    assert record["original_truncated"] is True and record["original_size"] == 1000
    assert _dead(original, DeadLetterPolicy(max_original_bytes=1000)).get("original_truncated") is None


def test_plan_batch_applies_the_dead_letter_policy() -> None:
    bad = InputRecord("loopwatch.events", 0, 3, b"k", b"{not json")
    plan = plan_batch([bad], 0, DeadLetterPolicy(original="digest"))
    (dead,) = plan.dead_letters
    record = orjson.loads(dead.value)
    assert record["reason"] == "not_json" and record["original"] is None


def test_dead_letter_policy_settings_are_validated() -> None:
    with pytest.raises(SettingsError):
        WorkerSettings(dead_letter_original="some")  # type: ignore[arg-type]
    with pytest.raises(SettingsError):
        WorkerSettings(dead_letter_max_original=-1)


def test_dead_letter_record_is_cut_to_fit() -> None:
    original = bytes(range(256)) * 8000  # 2 MB
    value = dead_letter_record(
        reason="oversized",
        detail="x" * 5000,
        topic="t",
        partition=0,
        offset=0,
        key=None,
        original=original,
        received_at_ms=0,
        max_bytes=100_000,
    )
    assert len(value) <= 100_000
    record = orjson.loads(value)
    assert record["key"] is None
    assert record["original_truncated"] is True and record["original_size"] == len(original)
    assert original.startswith(base64.b64decode(record["original"]))
    assert len(record["detail"]) == 1000


def test_rfc3339() -> None:
    assert rfc3339_ms(0) == "1970-01-01T00:00:00.000Z"


def test_metrics_are_initialised_with_closed_label_sets() -> None:
    metrics = WorkerMetrics(process=False)
    text = generate_latest(metrics.registry).decode()
    for name in EVENT_TYPES:
        assert f'loopwatch_events_total{{type="{name}"}} 0.0' in text
    for reason in (*INVALID_REASONS, "key_mismatch"):
        assert f'loopwatch_invalid_events_total{{reason="{reason}"}} 0.0' in text
    assert 'loopwatch_verdicts_total{decision="abort",detector="compaction_loop_persisted"} 0.0' in text
    for name in (
        "loopwatch_duplicate_events_total",
        "loopwatch_redelivered_events_total",
        "loopwatch_event_to_verdict_seconds_bucket",
        "loopwatch_active_runs",
        "loopwatch_state_bytes",
    ):
        assert name in text
    metrics.count_event("tool_call")
    metrics.count_verdict("block", "generic_repeat")
    metrics.count_invalid("not_json")
    text = generate_latest(metrics.registry).decode()
    assert 'loopwatch_events_total{type="tool_call"} 1.0' in text
    assert 'loopwatch_verdicts_total{decision="block",detector="generic_repeat"} 1.0' in text
    assert 'loopwatch_invalid_events_total{reason="not_json"} 1.0' in text


def test_batch_wait_is_the_oldest_stamped_record() -> None:
    metrics = WorkerMetrics(process=False)
    metrics.observe_batch_wait([None, -1, 2_000, 1_500], 0.001, now=2.25)  # ms stamps: the oldest waited 0.75 s
    metrics.observe_batch_wait([None, -1], 0.001, now=2.25)  # no record has a timestamp: nothing observed
    metrics.observe_batch_wait(iter([3.0]), 1.0, now=2.25)  # a stamp ahead of this clock counts as no wait
    text = generate_latest(metrics.registry).decode()
    assert "loopwatch_batch_wait_seconds_count 2.0" in text
    assert "loopwatch_batch_wait_seconds_sum 0.75" in text
    assert 'loopwatch_batch_wait_seconds_bucket{le="0.5"} 1.0' in text
    assert 'loopwatch_batch_wait_seconds_bucket{le="1.0"} 2.0' in text


def test_loop_lag_is_how_long_the_loop_was_held() -> None:
    lags: list[float] = []

    async def scenario() -> None:
        sampler = asyncio.ensure_future(sample_loop_lag(lags.append, interval=0.01))
        await asyncio.sleep(0.05)
        time.sleep(0.15)  # the loop is held: the sampler's timer fires at least 0.14 s late
        await asyncio.sleep(0.05)
        sampler.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert len(lags) >= 3 and min(lags) >= 0
    assert max(lags) >= 0.14
    assert sorted(lags)[len(lags) // 2] < 0.1  # the other samples saw the loop free


def test_two_metric_sets_do_not_collide() -> None:
    WorkerMetrics(process=False)
    WorkerMetrics(process=False)


def test_publish_validates_and_keys_by_scope_key(capsys: pytest.CaptureFixture[str]) -> None:
    good = orjson.dumps(event(0, "run-a"))
    no_run = orjson.dumps({**event(1, "x"), "run_id": "  "})
    lines = iter([(1, good), (2, b"{bad"), (3, no_run)])
    records, refused = prepare(lines, raw=False)
    assert records == [(b"run-a", good), (b"sess-x", no_run)]
    assert refused == 1
    assert "<events>:2: invalid event (not_json)" in capsys.readouterr().err


def test_publish_raw_sends_everything() -> None:
    bad = orjson.dumps({**event(0, "r"), "type": "nope"})
    records, refused = prepare(iter([(1, b"\xff\xfe"), (2, bad), (3, b"[1]")]), raw=True)
    assert records == [(None, b"\xff\xfe"), (b"r", bad), (None, b"[1]")]
    assert refused == 0


def test_scope_key_from_raw() -> None:
    assert scope_key_from_raw(b'{"session_id": "s", "run_id": " r "}') == b"r"
    assert scope_key_from_raw(b'{"session_id": "s", "run_id": null}') == b"s"
    assert scope_key_from_raw(b'{"session_id": 3}') is None
    assert scope_key_from_raw(b"nope") is None


def verdict(**extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "verdict_id": "0" * 32,
        "decision": "block",
        "detector": "generic_repeat",
        "count": 20,
        "threshold": 20,
        "gateway_id": "gw-1",
        "agent_id": "main",
        "session_id": "s",
        "run_id": "r",
        "tool": "read",
        "event_id": "e1",
        "message": "CRITICAL: read has been called\\n20 times",
        "event_ts": "2026-01-01T00:00:00Z",
    }
    base.update(extra)
    return base


def test_tail_verdict_line_is_one_line_with_count_and_threshold() -> None:
    line = record_line(verdict(message="CRITICAL: a\nb", paired_tool="write"))
    assert "\n" not in line
    assert line.startswith("2026-01-01T00:00:00Z BLOCK   generic_repeat 20 (threshold 20) gw=gw-1 agent=main run=r")
    assert "tool=read<->write" in line and line.endswith("| CRITICAL: a b")


def test_tail_shows_epoch_milliseconds_as_utc_time() -> None:
    line = record_line(verdict(event_ts=1_767_225_600_250))
    assert line.startswith("2026-01-01T00:00:00.250Z BLOCK")


def test_tail_shows_fleet_alerts_on_one_line() -> None:
    alert = {
        "alert_id": "a" * 32, "kind": "signature", "detector": "generic_repeat", "tool": "exec",
        "outcome_hash": "f" * 64, "distinct_runs": 5, "threshold": 5, "verdicts": 9, "gateways": ["gw-1", "gw-2"],
        "window_start": "2026-11-29T23:15:00.000Z", "window_seconds": 300.0,
    }  # fmt: skip
    line = record_line(alert)
    assert line == (
        "2026-11-29T23:15:00.000Z STORM   signature generic_repeat tool=exec outcome=ffffffffffff "
        "5 runs (threshold 5) verdicts=9 gateways=gw-1,gw-2 window=300s alert=aaaaaaaaaaaa"
    )
    agent = record_line({**alert, "kind": "agent", "agent_id": "main", "tool": None})
    assert "agent=main" in agent and "tool=" not in agent


def test_tail_shows_dead_letters_and_events_by_record_type() -> None:
    from streams.worker.deadletter import dead_letter_record

    dead = orjson.loads(
        dead_letter_record(
            reason="not_json", detail="unexpected end of data", topic="loopwatch.events", partition=3, offset=17,
            key=b"run-1", original=b'{"type": "tool_', received_at_ms=1_767_225_600_000,
        )
    )  # fmt: skip
    assert record_line(dead) == (
        "2026-01-01T00:00:00.000Z DEAD    not_json loopwatch.events[3]@17 key=run-1 15 bytes "
        f"sha256={dead['original_sha256'][:12]} | unexpected end of data"
    )
    event = {"type": "tool_call", "event_id": "e1", "gateway_id": "gw-1", "agent_id": "main", "session_id": "s",
             "run_id": None, "ts": 1_767_225_600_000, "tool": "read", "call_id": "c1", "args": {"path": "/x"},
             "result": "secret text"}  # fmt: skip
    line = record_line(event)
    assert line == (
        "2026-01-01T00:00:00.000Z EVENT   tool_call gw=gw-1 agent=main session=s tool=read call=c1 "
        "outcome=result event=e1"
    )
    assert "secret" not in line and "/x" not in line  # arguments and results are never shown
    assert record_line({"hello": 1}) == "- OTHER   a JSON object with keys hello"
    usage = {"type": "model_usage", "event_id": "u1", "gateway_id": "gw-1", "agent_id": "main", "session_id": "s",
             "run_id": "r", "ts": 1_767_225_600_000, "provider": "openai", "model": "gpt-x", "input_tokens": 900,
             "output_tokens": 80, "cache_read_tokens": 20, "cache_write_tokens": 0, "cost_usd": 0.0123}  # fmt: skip
    assert record_line(usage) == (  # was an OTHER line: every event type is an event
        "2026-01-01T00:00:00.000Z EVENT   model_usage gw=gw-1 agent=main run=r model=openai/gpt-x tokens=1000 "
        "cost=$0.0123 event=u1"
    )


def test_tail_escalations_show_each_decision_level_of_a_run_once() -> None:
    first = Escalations(limit=2)
    shown = [first.first(verdict(decision=d)) for d in ("warning", "warning", "block", "warning", "block")]
    assert shown == [True, False, True, False, False]
    assert first.first(verdict(run_id="other", decision="warning"))  # another run
    assert first.first({"alert_id": "x"})  # not a verdict: always shown
    assert fit("x" * 130, 120) == "x" * 119 + "…" and fit("short", 120) == "short" and fit("y" * 200, 0) == "y" * 200


def test_tail_follows_one_or_several_topics() -> None:
    assert topics_of(argparse.Namespace(topic=None)) == ["loopwatch.verdicts"]
    assert topics_of(argparse.Namespace(topic="t")) == ["t"]
    assert topics_of(argparse.Namespace(topic=["a", "b", "a"])) == ["a", "b"]
    parsed = build_parser().parse_args(["tail", "--topic", "x", "--topic", "loopwatch.fleet-alerts"])
    assert topics_of(parsed) == ["x", "loopwatch.fleet-alerts"]


def test_tail_filters() -> None:
    args = argparse.Namespace(gateway="gw-1", agent=None, decision="block")
    assert matches(verdict(), args)
    assert not matches(verdict(decision="warning"), args)
    assert not matches(verdict(gateway_id="gw-2"), args)


def test_worker_flags_take_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPWATCH_BOOTSTRAP", "kafka:9092")
    monkeypatch.setenv("LOOPWATCH_PARTITIONS", "6")
    monkeypatch.setenv("LOOPWATCH_STORE", "memory")
    monkeypatch.setenv("LOOPWATCH_STATE_TTL", "120")
    monkeypatch.setenv("LOOPWATCH_GROUP", "lw-test")
    monkeypatch.setenv("LOOPWATCH_METRICS_PORT", "9999")
    args = build_parser().parse_args(["worker"])
    from streams.cli.worker import settings_from_args

    settings = settings_from_args(args)
    assert (settings.bootstrap, settings.partitions, settings.store) == ("kafka:9092", 6, "memory")
    assert (settings.state_ttl, settings.group, settings.metrics_port) == (120.0, "lw-test", 9999)
    assert settings.changelog_topic == "lw-test-runs-changelog"
    assert settings.effective_sweep_interval == 10.0
    assert settings.group_instance_id is None
    args = build_parser().parse_args(["worker", "--partitions", "3", "--state-ttl", "2"])
    settings = settings_from_args(args)
    assert settings.partitions == 3 and settings.effective_sweep_interval == 0.5
    monkeypatch.setenv("LOOPWATCH_GROUP_INSTANCE_ID", "loopwatch-1")
    settings = settings_from_args(build_parser().parse_args(["worker"]))
    assert settings.group_instance_id == "loopwatch-1"
    assert (
        settings_from_args(build_parser().parse_args(["worker", "--group-instance-id", "x"])).group_instance_id == "x"
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"partitions": 0},
        {"store": "redis"},
        {"state_ttl": -1},
        {"max_batch": 0},
        {"metrics_port": 70000},
        {"embedded": True, "group_instance_id": "pod-0"},  # Tansu rebalances static groups without end
    ],
)
def test_bad_settings(kwargs: dict[str, object]) -> None:
    with pytest.raises(SettingsError):
        WorkerSettings(**kwargs)  # type: ignore[arg-type]


def test_commands_are_registered() -> None:
    parser = build_parser()
    for argv in (["worker"], ["publish", "f.jsonl"], ["tail", "--json", "--max", "3"]):
        assert callable(parser.parse_args(argv).func)


def test_a_redelivered_bad_record_is_dead_lettered_with_the_same_identity() -> None:
    """Identity = source topic/partition/offset + sha256 of the original (and the key, reason, detail): what a
    consumer of the dead-letter topic de-duplicates on after a crash or rebalance re-delivered the record."""
    from streams.simulate import simulate

    bad = [rec for rec in simulate(gateways=5, rate=1000.0, duration=0.4, seed=3, malformed=0.3) if not _valid(rec)]
    assert len(bad) > 20
    other = InputRecord("loopwatch.events", 2, 0, b"run-1", b"{}")
    for offset, (key, value) in enumerate(bad, start=100):
        rec = InputRecord("loopwatch.events", 2, offset, key, value)
        first = plan_batch([rec], 1_000).dead_letters
        again = plan_batch([other, rec], 99_000).dead_letters[-1:]  # later, in another batch
        assert len(first) == len(again) == 1
        a, b = (orjson.loads(d.value) for d in (first[0], again[0]))
        assert a.pop("received_at") != b.pop("received_at")
        assert a == b and first[0].key == again[0].key == key
        assert a["source"] == {"topic": "loopwatch.events", "partition": 2, "offset": offset}
        assert a["original_sha256"] == hashlib.sha256(value).hexdigest()


def _valid(rec: tuple[bytes, bytes]) -> bool:
    return not plan_batch([InputRecord("t", 0, 0, *rec)], 0).dead_letters


def test_dead_letter_with_a_huge_key_still_fits() -> None:
    """A hostile key of several hundred KB: without the cut its base64 alone passed the record limit and the
    record key the producer's request limit, so the dead letter could not be sent and the partition stopped."""
    key = b"k" * 700_000
    original = b"y" * 600_000
    value = dead_letter_record(
        reason="key_mismatch", detail="d", topic="t", partition=0, offset=0, key=key, original=original,
        received_at_ms=0,
    )  # fmt: skip
    assert len(value) <= MAX_RECORD_BYTES
    record = orjson.loads(value)
    assert base64.b64decode(record["key"]) == key[:MAX_KEY_BYTES]
    assert record["key_truncated"] is True and record["key_size"] == len(key)
    assert record["key_sha256"] == hashlib.sha256(key).hexdigest()
    assert dead_letter_key(key) == key[:MAX_KEY_BYTES] and dead_letter_key(b"run-1") == b"run-1"
    assert dead_letter_key(None) is None
    short = orjson.loads(
        dead_letter_record(
            reason="x", detail="d", topic="t", partition=0, offset=0, key=b"run-1", original=b"", received_at_ms=0
        )
    )
    assert "key_truncated" not in short and base64.b64decode(short["key"]) == b"run-1"
