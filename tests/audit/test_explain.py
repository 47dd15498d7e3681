"""``replay --topic --run RUN_ID --with-state``: explain a run from the worker's stored state (pure parts + CLI).

The worker is modelled as in ``tests/audit/test_with_state.py`` (``RunProcessor`` over batches, one changelog
version per run and batch); the CLI test reads from lists (a ``RecordSource``) instead of Kafka.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.verdict import verdict_id
from streams.audit import explain, source
from streams.cli import main
from streams.config_file import LoadedConfig, load_openclaw_config
from streams.kafka import reader
from streams.topics import VERDICTS_TOPIC
from tests.support.audit import (
    GENERIC,
    TOPIC,
    ListSource,
    explain_from_lists,
    fired,
    offset_of,
    recorded_fired,
    run_worker,
    setup_runs,
)
from tests.support.scenarios import GATEWAY

RUNS = ("sess-a", "sess-b")


@pytest.mark.parametrize(("start", "batch"), [(17, 7), (23, 7), (30, 7), (9, 100), (3, 1)])
def test_mid_run_explanation_with_state_explains_the_workers_verdicts(tmp_path: Path, start: int, batch: int) -> None:
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=batch)
    assert published[0]["gateway_id"] == GATEWAY
    differs = False
    for run in RUNS:
        result = explain_from_lists(records, changelog, config, start, run)
        assert fired(result.steps) == recorded_fired(published, run, start)
        (begin,) = result.starts
        assert begin.origin == ("first" if start < batch else "stored") and not begin.skipped
        before = [r for r in records if r.key == run.encode() and r.offset < start]
        assert begin.warmed == sum(1 for r in before if r.offset > begin.covered_offset)
        assert result.steps[0].label == f"0@{begin.first_offset}" and begin.first_offset >= start
        first = next(s for s in result.steps if s.counts is not None)
        assert first.counts is not None and first.counts.history == begin.history > 0
        # from empty (without --with-state) the first calls of the range see an empty history
        events, _ = source.decode_records({0: [r for r in records if r.offset >= start]})
        plain = explain.explain_run(events[0], config, run)
        assert [s.event_id for s in plain] == [s.event_id for s in result.steps]
        differs |= fired(plain) != fired(result.steps)
    assert differs


def test_start_is_described_in_text_and_json(tmp_path: Path) -> None:
    config, records = setup_runs(tmp_path)
    _, changelog = run_worker(records, config, batch=7)
    result = explain_from_lists(records, changelog, config, 24, "sess-a")
    (begin,) = result.starts
    assert begin.first_offset == 24 and begin.origin == "stored" and begin.changelog_offset is not None
    text = result.render("sess-a", config)
    lines = text.splitlines()
    assert lines[0].startswith(f"run sess-a: {len(result.steps)} events (config ")
    assert lines[1] == (
        f"start 0@24: from the worker's stored state (changelog offset {begin.changelog_offset}) covering offsets "
        f"<= {begin.covered_offset}; {begin.warmed} earlier events re-applied silently; {begin.history} calls "
        "already in the history; 0 events skipped (already in the stored state)"
    )
    assert lines[2].startswith("    0@24  tool_call") and f"history={begin.history}" in lines[3]
    doc = json.loads(json.dumps(result.to_json("sess-a")))
    assert doc["run"] == "sess-a" and len(doc["events"]) == len(result.steps)
    assert doc["state"] == [{**begin.to_json(), "skipped": []}]
    assert doc["state"][0]["origin"] == "stored" and doc["state"][0]["history"] == begin.history


def test_start_lines_follow_the_heading_even_without_steps() -> None:
    config = LoadedConfig.default()
    assert explain.render_explain([], "r", config) == "run r: no events\n"
    assert explain.render_explain([], "r", config, ["start 0@5: a", "start 1@7: b"]) == (
        "run r: no events\nstart 0@5: a\nstart 1@7: b\n"
    )


def test_compacted_expired_and_empty_starts(tmp_path: Path) -> None:
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=7)
    # compacted, and the topic lost its first record: the oldest surviving state is newer than the range start
    compacted = sorted({r.key: r for r in changelog if r.offset < 8}.values(), key=lambda r: r.offset)
    result = explain_from_lists([r for r in records if r.offset >= 1], compacted, config, 3, "sess-a")
    (begin,) = result.starts
    assert begin.origin == "compacted" and begin.skipped == tuple(
        r.offset for r in records if r.key == b"sess-a" and 3 <= r.offset <= begin.covered_offset
    )
    assert all(offset_of(s) > begin.covered_offset for s in result.steps)
    assert "from a newer stored state of a compacted changelog" in begin.describe()
    assert f"{len(begin.skipped)} events skipped" in begin.describe()
    assert fired(result.steps) == recorded_fired(published, "sess-a", begin.covered_offset + 1)
    # expired after its first stored state: empty, warmed up with the events after that state
    first_a = next(r for r in changelog if r.key == b"sess-a")
    expired = [first_a, reader.TopicRecord(0, first_a.offset + 1, 0, b"sess-a", b"")]
    (begin,) = explain_from_lists(records, expired, config, 20, "sess-a").starts
    assert begin.origin == "expired" and "expired the run (tombstone at changelog offset" in begin.describe()
    # no stored state at all: from empty, nothing re-applied
    result = explain_from_lists(records, [], config, 20, "sess-b")
    assert [(s.origin, s.warmed, s.history) for s in result.starts] == [("empty", 0, 0)]
    assert "from empty: the worker stored no state of the run" in result.render("sess-b", config)


# --- CLI --------------------------------------------------------------------------------------------------


def _verdict_records(published: list[dict[str, Any]]) -> list[reader.TopicRecord]:
    return [reader.TopicRecord(0, i, 0, v["session_id"].encode(), orjson.dumps(v)) for i, v in enumerate(published)]


def test_cli_run_with_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=7)
    verdicts = _verdict_records(published)
    topics = {TOPIC: records, "loopwatch-runs-changelog": changelog, "other-cl": changelog, VERDICTS_TOPIC: verdicts}
    served = ListSource(topics)
    cfg = str(tmp_path / f"{GENERIC['name']}.json5")  # written by setup_runs
    base = ["replay", "--topic", TOPIC, "--bootstrap", "b:1", "--config", cfg, "--from", "24", "--run", "sess-a"]

    assert main([*base, "--with-state"], record_source=served) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("start 0@24: from the worker's stored state (changelog offset")
    # the changelog's check (nothing read: a wrong name fails before the range), range, verdicts (their
    # config_hash), changelog, warm-up
    assert served.reads == ["loopwatch-runs-changelog", TOPIC, VERDICTS_TOPIC, "loopwatch-runs-changelog", TOPIC]
    assert main([*base, "--with-state", "--json", "--state-topic", "other-cl"], record_source=served) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["state"][0]["origin"] == "stored" and doc["state"][0]["first_offset"] == 24
    fired = {
        (verdict_id(GATEWAY, e["event_id"], d["decision"], d["detector"]), d["decision"], d["count"])
        for e in doc["events"]
        for d in e["decisions"]
        if d["published"]
    }
    want = {(v[0], v[2], v[4]) for v in recorded_fired(published, "sess-a", 24)}
    assert fired == want and want

    # without --with-state: unchanged (no start line, no changelog read) and not the worker's verdicts
    served.reads.clear()
    assert main(base, record_source=served) == 0
    plain = capsys.readouterr().out
    assert "start 0@" not in plain and served.reads == [TOPIC]
    assert main([*base, "--json"], record_source=served) == 0
    assert "state" not in json.loads(capsys.readouterr().out)

    # errors: no such state topic (2), no event of the run in range (1, no state read)
    assert main([*base, "--with-state", "--state-topic", "nope"], record_source=served) == 2
    assert capsys.readouterr().err == (
        "loopwatch replay: cannot read the worker's stored state in nope (b:1): no such topic; give an existing "
        "topic with --state-topic\n"
    )
    served.reads.clear()
    assert main([*base[:-1], "nobody", "--with-state"], record_source=served) == 1
    assert "no event of run 'nobody'" in capsys.readouterr().err
    assert served.reads == ["loopwatch-runs-changelog", TOPIC]  # the check, then no state read


def test_cli_run_with_state_under_another_config_than_the_workers_fails_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It explained from states another config cannot rebuild ("from a newer stored state of a compacted
    changelog", every event skipped) and blamed the run id; now, as --compare-verdicts --with-state, the recorded
    verdicts' config_hash tells, and one line says so (exit status 1). A QA pass."""
    config, records = setup_runs(tmp_path)
    published, changelog = run_worker(records, config, batch=7)
    served = ListSource({TOPIC: records, "loopwatch-runs-changelog": changelog, "v": _verdict_records(published)})
    other = tmp_path / "other.json5"
    other.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 4}}}))
    other_hash = load_openclaw_config(other).config_hash
    base = ["replay", "--topic", TOPIC, "--bootstrap", "b:1", "--from", "24", "--run", "sess-a", "--with-state"]
    worker_config = ["--config", str(tmp_path / f"{GENERIC['name']}.json5")]  # written by setup_runs

    assert main([*base, "--config", str(other), "--verdicts-topic", "v"], record_source=served) == 1
    captured = capsys.readouterr()
    in_range = [v for v in published if v["source"]["offset"] >= 24]
    assert captured.out == "" and in_range
    assert captured.err == (
        f"loopwatch replay: cannot explain run 'sess-a' from the worker's stored state: {len(in_range)} of "
        f"{len(in_range)} recorded verdicts were decided with another config (config_hash "
        f"{config.config_hash[:12]} ({len(in_range)})) than this replay ({other_hash[:12]}) (--config {other}): the "
        "stored states were computed with the worker's config: give replay that config file with --config (or "
        "leave out --with-state to explain the run from empty)\n"
    )
    # failed before reading the stored states: the changelog was only checked, before the range
    assert served.reads.count("loopwatch-runs-changelog") == 1 and served.reads[0] == "loopwatch-runs-changelog"
    assert main([*base, "--verdicts-topic", "v"], record_source=served) == 1  # OpenClaw's defaults
    assert "(no --config: OpenClaw's defaults): the stored states were" in capsys.readouterr().err

    # the worker's config: explained; the mismatch is the compare mode's rule (one note there, exit 1)
    assert main([*base, *worker_config, "--verdicts-topic", "v"], record_source=served) == 0
    capsys.readouterr()
    compare = ["--compare-verdicts", "--verdicts-topic", "v", "--config", str(other)]
    assert main([*base[:-3], "--with-state", *compare], record_source=served) == 1
    assert "--with-state cannot use the worker's stored states under another config" in capsys.readouterr().err

    # no verdicts topic: a wrong --verdicts-topic is an error; the default one missing is a note, and it goes on
    assert main([*base, *worker_config, "--verdicts-topic", "vv"], record_source=served) == 2
    assert capsys.readouterr().err.endswith(": no such topic; did you mean v? (check --verdicts-topic)\n")
    assert main([*base, *worker_config], record_source=served) == 0
    assert (
        "loopwatch replay: note: no topic loopwatch.verdicts: whether the stored states were computed with this "
        in (capsys.readouterr().err)
    )


def test_cli_run_whose_events_a_newer_state_covers_does_not_blame_the_run_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every event of the run in range already in a newer stored state: the hint said to check the run id."""
    config, records = setup_runs(tmp_path)
    _, changelog = run_worker(records, config, batch=100)  # one version per run, covering all of its events
    served = ListSource({TOPIC: [r for r in records if r.offset >= 1], "loopwatch-runs-changelog": changelog})
    cfg = str(tmp_path / f"{GENERIC['name']}.json5")
    argv = ["replay", "--topic", TOPIC, "--bootstrap", "b:1", "--config", cfg, "--from", "3", "--run", "sess-a"]
    assert main([*argv, "--with-state"], record_source=served) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("loopwatch replay: no event of run 'sess-a' after its stored state (")
    assert last.endswith(
        ": start the range before the run's stored state (--from), or give replay the worker's config with --config"
    )
    assert "give a run id or scope key" not in last
