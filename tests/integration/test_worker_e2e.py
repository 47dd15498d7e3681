"""One real worker process, every conformance scenario at once, bad records and duplicates mixed in.

Each scenario runs under its own agent id with its own ``agents.list`` override in ONE config file, so a
single worker covers all of them. The stream interleaves the scenarios (many runs per batch), puts one bad
record of every kind between valid events of a run, and ends with duplicates of earlier events. What the
worker publishes must equal what ``loopwatch replay`` publishes for the valid events (verdict ids and every
field; ``source`` must point at the triggering record), bad records must reach the dead-letter topic with
their reason and original bytes, and the metrics must agree with all of it.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.detection.canonical import JS_WHITESPACE
from streams.worker.deadletter import MAX_KEY_BYTES
from tests.support.kafka import Record
from tests.support.procs import python_env
from tests.support.scenarios import load_2026_9, load_scenarios, wire_events
from tests.support.worker import (
    Names,
    WorkerProcess,
    assert_changelog_copartitioned,
    assert_matches_replay,
    bootstrap_of,
    clean_states,
    event_positions,
    keyed,
    last_states,
    metric,
    new_names,
    produce,
    read_topic,
    replay_published,
    verdicts_by_id,
    wait_for,
)

pytestmark = pytest.mark.integration

SCENARIOS = load_scenarios()
SCENARIOS_2026_9 = load_2026_9()["scenarios"]


def merged_block(config: Any, override: Any) -> Any:
    """One agent block equivalent to OpenClaw's merge of a global and an agent block."""
    blocks = [b for b in (config, override) if isinstance(b, dict)]
    if not blocks:
        return None
    out: dict[str, Any] = {}
    for block in blocks:
        out.update(block)
    for nested in ("detectors", "postCompactionGuard"):
        parts = [b[nested] for b in blocks if isinstance(b.get(nested), dict)]
        if parts:
            out[nested] = {k: v for part in parts for k, v in part.items()}
    return out


def scoped_run_id(run_id: str | None, prefix: str) -> str | None:
    """Prefix a run id inside its surrounding whitespace, so trimming still maps it to one scope key."""
    if run_id is None:
        return None
    core = run_id.strip(JS_WHITESPACE)
    if not core:
        return run_id
    at = run_id.index(core)
    return run_id[:at] + prefix + run_id[at:]


def scenario_events() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
    """The combined config document and each scenario's events under its own agent id and scope keys."""
    agents = []
    per_scenario = []
    for i, scenario in enumerate(SCENARIOS):
        agent = f"sc{i:02d}"
        entry: dict[str, Any] = {"id": agent}
        block = merged_block(scenario["config"], scenario["agent_override"])
        if block is not None:
            entry["tools"] = {"loopDetection": block}
        agents.append(entry)
        events = wire_events(scenario, session=f"sess-{agent}")
        for ev in events:
            ev["agent_id"] = agent
            ev["event_id"] = f"{agent}-{ev['event_id']}"
            ev["run_id"] = scoped_run_id(ev["run_id"], f"{agent}:")
        per_scenario.append(events)
    for i, scenario in enumerate(SCENARIOS_2026_9):  # judged by the 2026.9 rules: the events say 2026.9.6
        agent = f"v9-{i:02d}"
        entry = {"id": agent}
        block = merged_block(scenario["config"], scenario["agent_override"])
        if block is not None:
            entry["tools"] = {"loopDetection": block}
        agents.append(entry)
        events = wire_events(scenario, session=f"sess-{agent}")
        for ev in events:
            ev.update(agent_id=agent, event_id=f"{agent}-{ev['event_id']}", openclaw_version="2026.9.6")
            ev["run_id"] = scoped_run_id(ev["run_id"], f"{agent}:")
        per_scenario.append(events)
    return {"agents": {"list": agents}}, per_scenario


def interleave(lists: list[list[dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    at = [0] * len(lists)
    while any(a < len(lst) for a, lst in zip(at, lists, strict=True)):
        for i, lst in enumerate(lists):
            if at[i] < len(lst):
                yield lst[at[i]]
                at[i] += 1


def bad_records(key: bytes) -> dict[str, tuple[bytes | None, bytes]]:
    """One record per dead-letter reason (all but key_mismatch keyed like the run they sit in)."""
    base = {
        "type": "tool_call",
        "event_id": "bad",
        "gateway_id": "gw-bad",
        "session_id": key.decode(),
        "ts": 1_767_225_600_000,
        "tool": "read",
        "args": {},
    }
    deep: Any = 1
    for _ in range(200):
        deep = [deep]
    return {
        "not_json": (key, b'{"type": "tool_call", "oops'),
        "not_utf8": (key, b'{"type": "tool_call", "tool": "\xc3\x28"}'),
        "not_object": (key, b'["tool_call"]'),
        "unknown_type": (key, orjson.dumps({**base, "type": "tool_exploded"})),
        "future_version": (key, orjson.dumps({**base, "version": 7})),
        "schema_invalid": (key, orjson.dumps({k: v for k, v in base.items() if k != "ts"})),
        "limits_exceeded": (key, orjson.dumps({**base, "args": {"deep": deep}})),
        "oversized": (key, orjson.dumps({**base, "args": {"blob": "x" * (1024 * 1024 + 10)}})),
        # a hostile key of 700 KB: its dead letter carries it cut (an uncut one could not be sent)
        "key_mismatch": (b"not-the-scope-key" * 41_200, orjson.dumps({**base, "event_id": "bad-key"})),
    }


@dataclass
class E2E:
    names: Names
    bootstrap: str
    config: Path
    worker: WorkerProcess
    valid: list[dict[str, Any]]  # every valid event, duplicates included, in publish order
    duplicates: int
    bad: dict[str, tuple[bytes | None, bytes]]
    cli_result: subprocess.CompletedProcess[str]
    events: list[Record]
    verdicts: list[Record]
    dead: list[Record]
    changelog: list[Record]
    metrics: dict[str, float]


@pytest.fixture(scope="module")
def e2e(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[E2E]:
    bootstrap = bootstrap_of(broker)
    workdir = tmp_path_factory.mktemp("worker-e2e")
    names = new_names("e2e")
    document, per_scenario = scenario_events()
    config = workdir / "openclaw.json5"
    config.write_text(json.dumps(document, indent=1), encoding="utf-8")
    worker = WorkerProcess(bootstrap, names, workdir, config=config).start()
    try:
        stream = list(interleave(per_scenario))
        duplicates = stream[5::9]  # same gateway_id + event_id again, at later offsets
        records = keyed(stream)
        # every bad record between two events of one run (a session-scoped scenario run)
        victim = per_scenario[3]
        victim_key = keyed(victim[:1])[0][0]
        assert victim_key is not None
        bad = bad_records(victim_key)
        at = next(i for i, ev in enumerate(stream) if ev is victim[3])
        records[at:at] = list(bad.values())
        records += keyed(duplicates)
        worker.wait_ready()
        produce(bootstrap, names.events, records)
        # the publish command: valid lines sent keyed by scope key, an invalid line refused (exit status 2)
        cli_events = [
            {**ev, "agent_id": "sc03", "event_id": f"cli-{i}", "session_id": "sess-cli", "run_id": None}
            for i, ev in enumerate(victim)
        ]
        path = workdir / "cli.jsonl"
        lines = [orjson.dumps(ev) for ev in cli_events]
        path.write_bytes(b"\n".join([*lines[:2], b"{not json", *lines[2:]]) + b"\n")
        cli_result = subprocess.run(
            [sys.executable, "-m", "streams.cli", "publish", str(path), "--bootstrap", bootstrap,
             "--topic", names.events],
            capture_output=True, text=True, timeout=60, env=python_env(), check=False,
        )  # fmt: skip
        valid = [*stream, *duplicates, *cli_events]
        total = len(records) + len(cli_events)
        want = replay_published(valid, config)

        def done() -> dict[str, float] | None:
            m = worker.metrics()
            processed = metric(m, "loopwatch_events_total") + metric(m, "loopwatch_invalid_events_total")
            return m if processed >= total else None

        wait_for(done, 90, "worker processed every record")
        verdicts = read_topic(bootstrap, names.verdicts, names.partitions)
        got, _ = verdicts_by_id(verdicts)
        assert len(got) == len(want), "verdicts still missing after every record was acknowledged"
        metrics = wait_for(lambda: (m := worker.metrics()).get("loopwatch_active_runs") and m, 10, "sweep")
        yield E2E(
            names=names,
            bootstrap=bootstrap,
            config=config,
            worker=worker,
            valid=valid,
            duplicates=len(duplicates),
            bad=bad,
            cli_result=cli_result,
            events=read_topic(bootstrap, names.events, names.partitions, settle=0.3),
            verdicts=verdicts,
            dead=read_topic(bootstrap, names.dead_letter, names.partitions, settle=0.3),
            changelog=read_topic(bootstrap, names.changelog, names.partitions, settle=0.3),
            metrics=metrics,
        )
    finally:
        worker.stop()


def test_verdicts_equal_replay(e2e: E2E) -> None:
    want = replay_published(e2e.valid, e2e.config)
    got, duplicates = verdicts_by_id(e2e.verdicts)
    assert want and duplicates == 0
    assert_matches_replay(got, want, event_positions(e2e.events), e2e.names.events)
    # and per scenario, the decisions the conformance file expects (index within the scenario's events)
    for i, scenario in enumerate(SCENARIOS):
        agent = f"sc{i:02d}"
        prefix = f"{agent}-sess-{agent}-e"
        mine = sorted(
            (int(v["event_id"][len(prefix) :]), v["decision"], v["detector"], v["count"])
            for v in got.values()
            if v["event_id"].startswith(prefix)
        )
        expected = sorted(
            (e["index"], e["decision"], e["code"], e["count"]) for e in scenario["expected"] if e["published"]
        )
        if scenario["expect_nothing_else"]:
            assert mine == expected, scenario["name"]
        else:
            assert set(expected) <= set(mine), scenario["name"]
    assert {v["profile"] for v in got.values() if v["event_id"].startswith("sc")} == {"openclaw-2026.7"}
    for i, scenario in enumerate(SCENARIOS_2026_9):
        prefix = f"v9-{i:02d}-sess-v9-{i:02d}-e"
        mine_9 = [v for v in got.values() if v["event_id"].startswith(prefix)]
        assert {v["profile"] for v in mine_9} <= {"openclaw-2026.9"}
        got_9 = sorted((int(v["event_id"][len(prefix) :]), v["decision"], v["detector"], v["count"]) for v in mine_9)
        assert got_9 == sorted(
            (e["index"], e["decision"], e["code"], e["count"]) for e in scenario["expected"] if e["published"]
        ), scenario["name"]


def test_duplicates_change_nothing(e2e: E2E) -> None:
    seen: set[tuple[str, str]] = set()
    without = []
    for ev in e2e.valid:
        if (ev["gateway_id"], ev["event_id"]) not in seen:
            seen.add((ev["gateway_id"], ev["event_id"]))
            without.append(ev)
    assert len(without) == len(e2e.valid) - e2e.duplicates
    assert replay_published(without, e2e.config).keys() == verdicts_by_id(e2e.verdicts)[0].keys()
    assert metric(e2e.metrics, "loopwatch_duplicate_events_total") == e2e.duplicates


def test_bad_records_are_dead_lettered(e2e: E2E) -> None:
    by_reason = {}
    for rec in e2e.dead:
        assert rec.value is not None
        record = orjson.loads(rec.value)
        by_reason[record["reason"]] = (rec, record)
    assert set(by_reason) == set(e2e.bad)
    positions = {(r.partition, r.offset): r for r in e2e.events}
    for reason, (key, value) in e2e.bad.items():
        rec, record = by_reason[reason]
        source = positions[(record["source"]["partition"], record["source"]["offset"])]
        assert source.value == value and source.key == key
        assert record["source"]["topic"] == e2e.names.events
        assert key is not None
        assert rec.key == key[:MAX_KEY_BYTES]
        assert base64.b64decode(record["key"]) == key[:MAX_KEY_BYTES]
        assert record.get("key_truncated", False) == (len(key) > MAX_KEY_BYTES)
        original = base64.b64decode(record["original"])
        if reason == "oversized":
            assert record["original_truncated"] and record["original_size"] == len(value)
            assert value.startswith(original)
        else:
            assert original == value
        assert record["detail"] and record["received_at"].endswith("Z")
        assert metric(e2e.metrics, "loopwatch_invalid_events_total", reason=reason) == 1


def test_metrics_agree_with_outputs(e2e: E2E) -> None:
    m = e2e.metrics
    by_type = Counter(ev["type"] for ev in e2e.valid)
    for kind, count in by_type.items():
        assert metric(m, "loopwatch_events_total", type=kind) == count
    got, _ = verdicts_by_id(e2e.verdicts)
    kinds = Counter((v["decision"], v["detector"]) for v in got.values())
    for (decision, detector), count in kinds.items():
        assert metric(m, "loopwatch_verdicts_total", decision=decision, detector=detector) == count
    assert metric(m, "loopwatch_verdicts_total") == len(got)
    assert metric(m, "loopwatch_event_to_verdict_seconds_count") == len(got)
    # every batch's wait before processing is observed once; the records were produced before it began
    batches = metric(m, "loopwatch_batch_events_count")
    assert batches > 0 and metric(m, "loopwatch_batch_wait_seconds_count") == batches
    assert metric(m, "loopwatch_batch_wait_seconds_sum") > 0
    # the loop-lag sampler runs for the worker's whole life, ten samples a second
    assert metric(m, "loopwatch_event_loop_lag_seconds_count") >= 10
    assert metric(m, "loopwatch_invalid_events_total") == len(e2e.bad)
    assert metric(m, "loopwatch_redelivered_events_total") == 0
    runs = {key for key, _ in ((r.key, r) for r in e2e.changelog)}
    assert metric(m, "loopwatch_active_runs") == len(runs)
    assert 0 < metric(m, "loopwatch_state_bytes") / len(runs) < 4096
    assert metric(m, "loopwatch_consumer_lag") == 0
    # no unbounded label values: only closed sets appear as labels
    for series in m:
        assert "run_id" not in series and "session" not in series and "call_id" not in series


def test_changelog_is_copartitioned_and_state_exact(e2e: E2E) -> None:
    assert_changelog_copartitioned(e2e.changelog, e2e.events)
    stored = last_states(e2e.changelog)
    clean = clean_states(e2e.valid, e2e.config)
    assert stored == clean


def test_publish_command(e2e: E2E) -> None:
    result = e2e.cli_result
    assert result.returncode == 2, result.stderr
    assert ":3: invalid event (not_json): " in result.stderr  # FILE:LINE, as replay names a bad line
    sent = len([ev for ev in e2e.valid if ev["event_id"].startswith("cli-")])
    assert result.stdout.strip() == f"sent {sent} events to {e2e.names.events}; refused 1 invalid line"
    cli = [r for r in e2e.events if r.key == b"sess-cli"]
    assert len(cli) == sent and len({r.partition for r in cli}) == 1


def test_tail_command(e2e: E2E) -> None:
    got, _ = verdicts_by_id(e2e.verdicts)
    blocks = sum(1 for v in got.values() if v["decision"] == "block")
    base = [sys.executable, "-m", "streams.cli", "tail", "--bootstrap", e2e.bootstrap, "--topic", e2e.names.verdicts]
    run = subprocess.run(
        [*base, "--from-beginning", "--json", "--max", str(len(got)), "--timeout", "30"],
        capture_output=True, text=True, timeout=60, env=python_env(), check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert {v["verdict_id"] for v in lines} == set(got)
    run = subprocess.run(
        [*base, "--from-beginning", "--decision", "block", "--timeout", "3"],
        capture_output=True, text=True, timeout=60, env=python_env(), check=False,
    )  # fmt: skip
    assert run.returncode == 0
    rows = run.stdout.splitlines()
    assert len(rows) == blocks and all(" BLOCK " in row for row in rows)
    # following from the end shows nothing old
    run = subprocess.run(
        [*base, "--timeout", "2"], capture_output=True, text=True, timeout=60, env=python_env(), check=False
    )
    assert run.returncode == 0 and run.stdout == ""


def test_worker_logged_no_errors(e2e: E2E) -> None:
    e2e.worker.assert_no_errors()
