"""``loopwatch replay --topic --with-state`` against one real worker: a range starting mid-run agrees with it.

Three conformance scenarios (one session each) are interleaved on a one-partition events topic and produced in
small chunks, each processed before the next is sent, so the worker writes several states per run to its
table's changelog (one per batch). A replay of a range that starts in the middle of every run disagrees with
the worker from empty state; with ``--with-state`` it starts each run from the changelog (plus a silent
warm-up of the events between that state and the range) and equals what the worker published for the range.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import python_env
from tests.support.scenarios import load_scenarios, wire_events
from tests.worker.harness import (
    WorkerProcess,
    bootstrap_of,
    chunks,
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
CHUNK = 4


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", *argv],
        capture_output=True, text=True, timeout=60, env=python_env(), check=False,
    )  # fmt: skip


def _interleaved() -> list[dict[str, Any]]:
    scenarios = {s["name"]: s for s in load_scenarios()}
    runs = []
    for i, name in enumerate(NAMES):
        assert scenarios[name]["config"] == {"enabled": True} and scenarios[name]["agent_override"] is None
        runs.append(wire_events(scenarios[name], session=f"sess-ws{i}"))
    out: list[dict[str, Any]] = []
    for i in range(max(map(len, runs))):
        out += [run[i] for run in runs if i < len(run)]
    return out


def _strip(verdict: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in verdict.items() if k not in ("index", "published")}


def test_mid_run_range_with_state_equals_the_worker(broker: Any, tmp_path: Path) -> None:
    bootstrap = bootstrap_of(broker)
    names = new_names("replay-state", partitions=1)
    config = tmp_path / "openclaw.json5"
    config.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True}}}), encoding="utf-8")
    events = _interleaved()
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory").start()
    try:
        worker.wait_ready()
        sent = 0
        for chunk in chunks(keyed(events), CHUNK):  # one batch (one changelog version per run) per chunk
            produce(bootstrap, names.events, chunk)
            sent += len(chunk)
            wait_for(lambda n=sent: metric(worker.metrics(), "loopwatch_events_total") >= n, 30, f"{sent} applied")
        changelog = read_topic(bootstrap, names.changelog, names.partitions, settle=0.3)
        assert len(changelog) >= len(events) // CHUNK  # several versions per run
        published, _ = verdicts_by_id(read_topic(bootstrap, names.verdicts, names.partitions, settle=0.3))
        base = ["--topic", names.events, "--bootstrap", bootstrap, "--config", str(config)]
        compare = ["--compare-verdicts", "--verdicts-topic", names.verdicts]
        stateful = ["--with-state", "--group", names.group]

        # the whole topic: equal, with and without state (every run starts at its first event)
        assert _cli(*base, *compare).returncode == 0
        whole = _cli(*base, *compare, *stateful)
        assert whole.returncode == 0, whole.stdout + whole.stderr
        assert "3 begun in the batch of their first event" in whole.stderr

        for start in (21, 2):  # 21: mid-chunk, mid-run for all three runs; 2: within every run's first batch
            want = {vid: v for vid, v in published.items() if v["source"]["offset"] >= start}
            assert want
            plain = _cli(*base, "--from", str(start), *compare)
            assert plain.returncode == 1, plain.stdout + plain.stderr  # from empty state: not the worker's
            assert plain.stdout.startswith("DIFFERENT:")
            same = _cli(*base, "--from", str(start), *compare, *stateful)
            assert same.returncode == 0, same.stdout + same.stderr
            assert same.stdout.startswith(f"equal: {len(want)} replayed verdicts, {len(want)} recorded in range")
            listed = _cli(*base, "--from", str(start), *stateful)
            assert listed.returncode == 0, listed.stderr
            mine = [json.loads(line) for line in listed.stdout.splitlines()]
            assert {v["verdict_id"]: _strip(v) for v in mine} == want
            # how the worker batched the first chunk decides which runs' first state already covers offset 2
            origin = "3 runs: 3 from a stored state" if start == 21 else "in the batch of their first event"
            assert origin in listed.stderr and "0 events skipped" in listed.stderr, listed.stderr

        # --state-topic names the changelog directly; --json carries the state summary
        as_json = _cli(*base, "--from", "21", *compare, "--json", "--with-state", "--state-topic", names.changelog)
        doc = json.loads(as_json.stdout)
        assert as_json.returncode == 0 and doc["equal"] and doc["state"]["stored"] == 3
        assert _cli(*base, "--with-state", "--state-topic", f"{names.prefix}.nope").returncode == 2
        worker.assert_no_errors()
    finally:
        worker.stop()
