"""Pure parts of topic audit replay: per-partition replay, verdict comparison, run explanations (range bounds:
``tests/kafka/test_reader.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.audit import compare, explain, replay, source
from streams.cli import main
from streams.config_file import load_openclaw_config
from streams.decode import KEY_MISMATCH, decode_event, scope_key
from streams.detection import RunState
from streams.kafka import reader
from streams.runner import step, to_verdict
from tests.support.audit import ListSource
from tests.support.faults import core_raises
from tests.support.scenarios import load_scenarios, wire_events, write_inputs

SCENARIOS = {s["name"]: s for s in load_scenarios()}
GENERIC = SCENARIOS["generic_warning_then_block_sticky"]
UNKNOWN = SCENARIOS["unknown_tool_block_at_threshold"]
PINGPONG = SCENARIOS["pingpong_block_at_critical"]


# --- per-partition replay ---------------------------------------------------------------------------------


def _records(events: list[dict[str, Any]], partition: int, *, start: int = 0) -> list[reader.TopicRecord]:
    out = []
    for i, ev in enumerate(events):
        key = (ev["run_id"] or ev["session_id"]).encode()
        out.append(reader.TopicRecord(partition, start + i, 0, key, orjson.dumps(ev)))
    return out


def test_replay_partitions_matches_file_replay_with_sources(tmp_path: Path) -> None:
    config_path, _ = write_inputs(GENERIC, tmp_path, [])
    config = load_openclaw_config(config_path)
    events = wire_events(GENERIC)
    records = {0: _records(events, 0), 1: [reader.TopicRecord(1, 0, 0, b"k", b"{not json")]}
    decoded, bad = source.decode_records(records)
    assert [(b.partition, b.offset, b.reason) for b in bad] == [(1, 0, "not_json")]
    got = replay.replay_partitions(decoded, config, "t.events", include_all=False)
    states: dict[str, RunState] = {}
    want = []
    for i, ev in enumerate(decoded[0]):
        result = step(states.get(scope_key(ev.event)), ev.event, config)
        states[result.scope] = result.state
        want += [
            to_verdict(ev.event, d, config_hash=config.config_hash).verdict_id for d in result.decisions if d.published
        ]
        assert ev.index == i
    assert [v["verdict_id"] for v in got] == want and want
    assert all(v["source"] == {"topic": "t.events", "partition": 0, "offset": v["index"]} for v in got)
    expected = [(e["index"], e["decision"], e["code"]) for e in GENERIC["expected"] if e["published"]]
    assert [(v["index"], v["decision"], v["detector"]) for v in got] == expected


def test_key_mismatch_is_skipped_like_the_worker() -> None:
    ev = wire_events(GENERIC)[0]
    recs = {0: [reader.TopicRecord(0, 0, 0, b"other", orjson.dumps(ev)), reader.TopicRecord(0, 1, 0, None, b"{}")]}
    decoded, bad = source.decode_records(recs)
    assert decoded == {0: []}
    assert bad[0].reason == KEY_MISMATCH
    assert "t[0]@0: invalid event (key_mismatch)" in bad[0].describe("t")


def test_in_range() -> None:
    ranges = {0: (5, 10)}
    v = {"source": {"topic": "t", "partition": 0, "offset": 5}}
    assert compare.in_range(v, "t", ranges)
    assert not compare.in_range({"source": {"topic": "t", "partition": 0, "offset": 10}}, "t", ranges)
    assert not compare.in_range({"source": {"topic": "u", "partition": 0, "offset": 6}}, "t", ranges)
    assert not compare.in_range({"source": {"topic": "t", "partition": 1, "offset": 6}}, "t", ranges)
    assert not compare.in_range({"source": None}, "t", ranges)


# --- comparison -------------------------------------------------------------------------------------------


def _v(vid: str, **over: Any) -> dict[str, Any]:
    base = {
        "verdict_id": vid,
        "decision": "warning",
        "detector": "generic_repeat",
        "count": 10,
        "threshold": 10,
        "message": "WARNING: x",
        "source": {"topic": "t", "partition": 0, "offset": 3},
        "run_id": "r1",
        "published": True,
    }
    return {**base, **over}


def test_compare_equal_with_duplicates() -> None:
    mine = [_v("a"), _v("b", decision="block"), _v("c", published=False)]
    theirs = [_v("a"), _v("b", decision="block"), _v("a"), _v("b", decision="block", config_hash="ignored")]
    result = compare.compare_verdicts(mine, theirs)
    assert result.equal and result.duplicates == 2 and result.replayed == 2 and result.recorded == 2
    assert result.summary().startswith("equal: 2 replayed verdicts, 2 recorded in range (2 duplicates)")


def test_compare_missing_extra_different() -> None:
    mine = [_v("a"), _v("b"), _v("c"), _v("d")]
    theirs = [
        _v("b"),
        _v("c", count=11),
        _v("d"),
        _v("d", source={"topic": "t", "partition": 1, "offset": 3}),
        _v("x", decision="block"),
        _v("x", decision="block"),
    ]
    result = compare.compare_verdicts(mine, theirs)
    assert not result.equal
    kinds = [(d.kind, d.verdict_id, d.fields) for d in result.differences]
    assert kinds == [
        ("missing", "a", ()),
        ("extra", "x", ()),
        ("different", "c", ("count",)),
        ("different", "d", ("source",)),
    ]
    assert result.duplicates == 1
    assert (result.count("missing"), result.count("extra"), result.count("different")) == (1, 1, 2)
    lines = [d.describe() for d in result.differences]
    assert lines[0] == "missing a warning generic_repeat run=r1 source=t[0]@3"
    # A run without a run id is named by its session (what --run takes), not as run=None.
    unnamed = compare.compare_verdicts([_v("s", run_id=None, session_id="gw-1-s1")], []).differences[0]
    assert unnamed.describe() == "missing s warning generic_repeat session=gw-1-s1 source=t[0]@3"
    assert "count: replay 10 != topic 11" in lines[2]
    doc = result.to_json()
    assert doc["missing"] == 1 and doc["different"] == 2 and not doc["equal"]
    assert json.loads(orjson.dumps(doc))["differences"][0]["verdict_id"] == "a"


def test_compare_each_compared_field() -> None:
    for name, value in [
        ("decision", "block"),
        ("detector", "ping_pong"),
        ("threshold", 20),
        ("message", "other"),
        ("count", 3),
    ]:
        result = compare.compare_verdicts([_v("a")], [_v("a", **{name: value})])
        assert [(d.kind, d.fields) for d in result.differences] == [("different", (name,))]
    # fields outside the compared set do not matter
    assert compare.compare_verdicts([_v("a")], [_v("a", event_ts="x", config_hash="y")]).equal


# --- explain ----------------------------------------------------------------------------------------------


def _explain(scenario: dict[str, Any], tmp_path: Path) -> tuple[list[explain.ExplainStep], str, Any]:
    config_path, _ = write_inputs(scenario, tmp_path, [])
    config = load_openclaw_config(config_path)
    events = [source.PositionedEvent(i, decode_event(orjson.dumps(e))) for i, e in enumerate(wire_events(scenario))]
    run = scope_key(events[0].event)
    return explain.explain_run(events, config, run), run, config


def test_explain_generic_counts_and_decisions(tmp_path: Path) -> None:
    steps, run, config = _explain(GENERIC, tmp_path)
    assert len(steps) == len(GENERIC["events"])
    # identical read with identical result: recentCount and noProgressStreak grow by one per call up to 10
    assert [s.counts.recent_count for s in steps[:11] if s.counts] == list(range(11))
    assert steps[0].counts == explain.Counts(0, 0, 0, 0, 0)
    assert steps[5].counts is not None and steps[5].counts.recent_count == 5 and steps[5].counts.no_progress_streak == 5
    fired = [
        (i, d.decision, d.detector, d.count, d.threshold, d.published) for i, s in enumerate(steps) for d in s.decisions
    ]
    expected = [(e["index"], e["decision"], e["code"], e["count"], e["published"]) for e in GENERIC["expected"]]
    assert [(i, dec, det, c, p) for i, dec, det, c, _, p in fired] == expected
    assert fired[0][4] == 10  # warning threshold
    text = explain.render_explain(steps, run, config)
    assert f"run {run}: {len(steps)} events" in text
    assert "-> WARNING generic_repeat: count 10 >= threshold 10, published: WARNING:" in text
    assert "saw: recentCount=10 noProgressStreak=10 pingPong=0 unknownToolStreak=0" in text
    assert "#0  tool_call" in text and "call=call-0" in text


def test_explain_shows_an_event_that_raised_as_not_applied_and_goes_on_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The worker dead-letters an event the core raises on and applies the run's later events without it;
    the explanation shows the same, instead of dying with a traceback."""
    core_raises(monkeypatch, lambda ev: ev.call_id == "call-3", lambda _ev: ValueError("a defect"))
    steps, run, config = _explain(GENERIC, tmp_path)
    assert len(steps) == len(GENERIC["events"])
    failed = [s for s in steps if s.not_applied is not None]
    assert [s.label for s in failed] == ["#3"] and failed[0].not_applied is not None
    assert failed[0].not_applied.startswith("not applied (apply_failed, dead-lettered): ValueError raised")
    assert [s.counts.recent_count for s in steps[:6] if s.counts] == [0, 1, 2, 3, 4]  # call-3 never counted
    text = explain.render_explain(steps, run, config)
    assert "      #3  tool_call        event " in text and ": not applied (apply_failed, dead-lettered)" in text
    assert "not applied (apply_failed)" in capsys.readouterr().err


def test_explain_unknown_tool_and_ping_pong(tmp_path: Path) -> None:
    steps, _, _ = _explain(UNKNOWN, tmp_path)
    blocked = next(s for s in steps if s.decisions)
    assert blocked.counts is not None and blocked.counts.unknown_tool_streak == 10
    assert blocked.decisions[0].detector == "unknown_tool_repeat" and blocked.decisions[0].decision == "block"
    steps, _, _ = _explain(PINGPONG, tmp_path)
    first = next(s for s in steps if s.decisions)
    assert first.counts is not None and first.counts.ping_pong == first.decisions[0].count == 10


def test_explain_cli_on_file_and_unknown_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = write_inputs(GENERIC, tmp_path, wire_events(GENERIC))
    run = f"sess-{GENERIC['name']}"
    assert main(["replay", "--events", str(events), "--config", str(config), "--run", run]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run {run}: {len(GENERIC['events'])} events") and "BLOCK generic_repeat" in out
    assert main(["replay", "--events", str(events), "--config", str(config), "--run", run, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["events"]) == len(GENERIC["events"]) and doc["events"][0]["counts"]["recent_count"] == 0
    assert main(["replay", "--events", str(events), "--run", "nope"]) == 1
    assert "no event of run 'nope'" in capsys.readouterr().err


def test_topic_flags_need_topic_and_a_range_is_checked_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, events = write_inputs(GENERIC, tmp_path, wire_events(GENERIC))
    assert main(["replay", "--events", str(events), "--compare-verdicts"]) == 2
    assert "need --topic" in capsys.readouterr().err
    assert main(["replay", "--topic", "t", "--bootstrap", "127.0.0.1:1", "--from", "x:y"]) == 2
    assert "--from/--to" in capsys.readouterr().err


def test_compare_verdicts_read_error_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "hunter2-not-for-logs"
    for name, value in {
        "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "SASL_MECHANISM": "SCRAM-SHA-256",
        "SASL_USERNAME": "auditor",
        "SASL_PASSWORD": secret,
    }.items():
        monkeypatch.setenv(f"LOOPWATCH_KAFKA_{name}", value)
    records = _records(wire_events(GENERIC), 0)

    served = ListSource(
        {"t.events": records}, {"loopwatch.verdicts": RuntimeError(f"authentication failed for auditor:{secret}")}
    )
    assert (
        main(["replay", "--topic", "t.events", "--bootstrap", "b:1", "--compare-verdicts"], record_source=served) == 3
    )
    err = capsys.readouterr().err
    assert "loopwatch replay: cannot read topic loopwatch.verdicts (b:1): authentication failed" in err
    assert secret not in err
