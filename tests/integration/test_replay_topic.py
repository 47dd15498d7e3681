"""``loopwatch replay --topic`` against one real worker: same verdicts, and a missing verdict is reported.

A few conformance scenarios (one session each, keyed by scope key) plus one bad record go to a fresh events
topic; one worker publishes verdicts. Topic replay with ``--compare-verdicts`` must agree (exit 0) and its
verdicts must equal the worker's by ``verdict_id``; against a copy of the verdicts topic lacking one record it
must exit 1 and name the missing verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.kafka.admin import create_topics
from tests.support.procs import python_env
from tests.support.scenarios import load_scenarios, wire_events
from tests.support.worker import (
    WorkerProcess,
    bootstrap_of,
    keyed,
    metric,
    new_names,
    produce,
    read_topic,
    verdicts_by_id,
    wait_for,
)

pytestmark = pytest.mark.integration

NAMES = ("generic_warning_then_block_sticky", "pingpong_block_at_critical", "unknown_tool_block_at_threshold")


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", *argv],
        capture_output=True, text=True, timeout=60, env=python_env(), check=False,
    )  # fmt: skip


def test_topic_replay_compares_with_worker_verdicts(broker: Any, tmp_path: Path) -> None:
    bootstrap = bootstrap_of(broker)
    names = new_names("replay-topic")
    scenarios = {s["name"]: s for s in load_scenarios()}
    config = tmp_path / "openclaw.json5"
    config.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True}}}), encoding="utf-8")
    events: list[dict[str, Any]] = []
    for i, name in enumerate(NAMES):
        assert scenarios[name]["config"] == {"enabled": True} and scenarios[name]["agent_override"] is None
        events += wire_events(scenarios[name], session=f"sess-rt{i}")
    records = keyed(events)
    records.insert(3, (records[0][0], b'{"type": "tool_call", "oops'))  # dead-lettered by the worker
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory").start()
    try:
        worker.wait_ready()
        produce(bootstrap, names.events, records)
        wait_for(
            lambda: metric(worker.metrics(), "loopwatch_events_total") >= len(events),
            40,
            "worker processed every event",
        )
        base = ["--topic", names.events, "--bootstrap", bootstrap, "--config", str(config)]

        def published() -> dict[str, dict[str, Any]]:
            return verdicts_by_id(read_topic(bootstrap, names.verdicts, names.partitions, settle=0.3))[0]

        replayed = _cli(*base)
        assert replayed.returncode == 0, replayed.stderr
        assert "invalid event (not_json)" in replayed.stderr
        mine = {v["verdict_id"]: v for v in map(json.loads, replayed.stdout.splitlines())}
        assert mine

        def complete() -> dict[str, dict[str, Any]] | None:
            got = published()
            return got if len(got) >= len(mine) else None

        got: dict[str, dict[str, Any]] = wait_for(complete, 20, "every verdict published")
        assert set(got) == set(mine)
        for vid, verdict in got.items():
            assert {k: v for k, v in mine[vid].items() if k not in ("index", "published")} == verdict

        same = _cli(*base, "--compare-verdicts", "--verdicts-topic", names.verdicts)
        assert same.returncode == 0, same.stdout + same.stderr
        assert same.stdout.startswith(f"equal: {len(mine)} replayed verdicts, {len(mine)} recorded in range")

        # a copy of the verdicts topic without one record
        dropped = sorted(got)[0]
        copy = f"{names.prefix}.verdicts-copy"
        create_topics(bootstrap, {copy: names.partitions})
        produce(bootstrap, copy, [(None, orjson.dumps(v)) for vid, v in sorted(got.items()) if vid != dropped])
        wait_for(lambda: len(read_topic(bootstrap, copy, names.partitions, settle=0.2)) == len(got) - 1, 10, "copy")
        diff = _cli(*base, "--compare-verdicts", "--verdicts-topic", copy)
        assert diff.returncode == 1, diff.stdout + diff.stderr
        lines = diff.stdout.splitlines()
        assert lines[0].startswith("DIFFERENT:") and "1 missing, 0 extra, 0 different" in lines[0]
        assert len(lines) == 2 and lines[1].startswith(f"missing {dropped} ")
        # a prefix of every partition: verdicts past --to are out of range on both sides, still equal
        prefix = _cli(*base, "--to", "20", "--compare-verdicts", "--verdicts-topic", names.verdicts)
        assert prefix.returncode == 0, prefix.stdout + prefix.stderr
        assert all(v["source"]["offset"] < 20 for v in map(json.loads, _cli(*base, "--to", "20").stdout.splitlines()))
        # time bounds (offsets_for_times; broker write time on the embedded broker)
        assert _cli(*base, "--from", "1970-01-01T00:00:00Z").stdout == replayed.stdout
        late = _cli(*base, "--from", "2999-01-01T00:00:00Z", "--compare-verdicts", "--verdicts-topic", names.verdicts)
        assert late.returncode == 0 and late.stdout.startswith("equal: 0 replayed verdicts, 0 recorded")
        # --strict turns the bad record into exit status 2; --run explains one run from the topic
        assert _cli(*base, "--strict").returncode == 2
        explained = _cli(*base, "--run", "sess-rt0")
        assert explained.returncode == 0, explained.stderr
        assert "-> BLOCK generic_repeat: count 20 >= threshold 20" in explained.stdout
        as_json = json.loads(_cli(*base, "--compare-verdicts", "--verdicts-topic", copy, "--json").stdout)
        assert [d["verdict_id"] for d in as_json["differences"]] == [dropped]
        # a partition the topic does not have: one line saying which it has and where to fix it
        nowhere = _cli(*base, "--from", f"{names.partitions + 5}:0")
        assert (nowhere.returncode, nowhere.stdout, nowhere.stderr.count("\n")) == (2, "", 1), nowhere.stderr
        last = names.partitions - 1
        assert f"(it has {names.partitions}, 0..{last}); name partitions of the topic in --from/--to" in nowhere.stderr
    finally:
        worker.stop()
