"""``whatif --topic`` against the embedded broker: the same report as from the same records in a file."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from streams.cli import main
from streams.cli.simulate import publish
from streams.devbroker import EmbeddedBroker
from streams.kafka.admin import create_topics
from streams.simulate import simulate

pytestmark = pytest.mark.integration


def test_topic_and_file_give_the_same_report(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    def records() -> list[tuple[bytes, bytes]]:
        return list(simulate(gateways=3, rate=100, duration=15, seed=8, malformed=0.02))

    events = tmp_path / "events.jsonl"
    events.write_bytes(b"".join(v + b"\n" for _, v in records()))
    current = tmp_path / "current.json5"
    current.write_text("{tools: {loopDetection: {enabled: true}}}")
    candidate = tmp_path / "candidate.json5"
    candidate.write_text("{tools: {loopDetection: {enabled: true, criticalThreshold: 15}}}")
    common = ["whatif", "--config", str(current), "--candidate", str(candidate), "--skip-invalid"]
    common += ["--sweep", "warningThreshold=8..12:2", "--format", "json"]

    assert main([*common, "--events", str(events)]) == 0
    from_file = json.loads(capsysbinary.readouterr().out)
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:
        create_topics(broker.bootstrap, {"loopwatch.events": 3})
        before = datetime.now(UTC) - timedelta(seconds=5)
        count = asyncio.run(publish(iter(records()), broker.bootstrap, "loopwatch.events", 100, False))
        assert count == 1500
        code = main([*common, "--topic", "loopwatch.events", "--bootstrap", broker.bootstrap])
        captured = capsysbinary.readouterr()
        assert code == 0, captured.err.decode()
        from_topic = json.loads(captured.out)
        # a time range (the broker's write times, resolved with offsets_for_times) around every record: the same
        after = datetime.now(UTC) + timedelta(minutes=5)
        bounds = ["--from", before.isoformat(), "--to", after.isoformat()]
        assert main([*common, "--topic", "loopwatch.events", "--bootstrap", broker.bootstrap, *bounds]) == 0
        timed = json.loads(capsysbinary.readouterr().out)
        assert timed["events"]["count"] == from_topic["events"]["count"] and timed["summary"] == from_topic["summary"]
        assert main([*common, "--topic", "loopwatch.events", "--bootstrap", broker.bootstrap, "--from",
                     after.isoformat()]) == 0  # fmt: skip
        assert b"note: no record of loopwatch.events in the range" in capsysbinary.readouterr().err
        assert main([*common, "--topic", "no.such.topic", "--bootstrap", broker.bootstrap]) == 2
        assert b"no such topic" in capsysbinary.readouterr().err
    assert from_topic["events"] == {**from_file["events"], "source": "topic loopwatch.events"}
    assert from_topic["events"]["invalid"] > 0
    for key in ("summary", "totals", "sweep"):
        assert from_topic[key] == from_file[key]
    assert from_topic["changed_runs"] and all(
        change["source"] is not None for run in from_topic["changed_runs"] for change in run["changes"]
    )
    strip = [
        (run["scope"], [(c["current"], c["candidate"]) for c in run["changes"]]) for run in from_topic["changed_runs"]
    ]
    want = [
        (run["scope"], [(c["current"], c["candidate"]) for c in run["changes"]]) for run in from_file["changed_runs"]
    ]
    assert sorted(strip, key=str) == sorted(want, key=str)
