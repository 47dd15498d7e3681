"""``loopwatch replay --topic --with-state`` against one real worker: a range starting mid-run agrees with it.

Three conformance scenarios (one session each) are interleaved on a one-partition events topic and produced in
small chunks, each processed before the next is sent, so the worker writes several states per run to its
table's changelog (one per batch). A replay of a range that starts in the middle of every run disagrees with
the worker from empty state; with ``--with-state`` it starts each run from the changelog (plus a silent
warm-up of the events between that state and the range) and equals what the worker published for the range.
``--run RUN_ID --with-state`` over such a range explains the run from the same state: the decisions it shows are
the verdicts the worker published, and the output says where the starting state came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from schemas.verdict import verdict_id
from tests.support.procs import python_env
from tests.support.scenarios import GATEWAY, load_scenarios, wire_events
from tests.support.worker import (
    Names,
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
    write_config,
)
from tests.worker.support import event

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


@dataclass(frozen=True)
class Fed:
    """The topics one worker filled: events, changelog (several versions per run) and published verdicts."""

    bootstrap: str
    names: Names
    config: Path
    published: dict[str, dict[str, Any]]

    @property
    def base(self) -> list[str]:
        return ["--topic", self.names.events, "--bootstrap", self.bootstrap, "--config", str(self.config)]


@pytest.fixture(scope="module")
def fed(broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fed]:
    tmp_path = tmp_path_factory.mktemp("replay-state")
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
        worker.assert_no_errors()
    finally:
        worker.stop()
    yield Fed(bootstrap, names, config, published)


def test_mid_run_range_with_state_equals_the_worker(fed: Fed) -> None:
    names, published, base = fed.names, fed.published, fed.base
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

    # a --to inside the first batch, before the first run's second event there: its first state covers that
    # event, after the range, which is read to rebuild the state
    end = len(NAMES)
    want = {vid: v for vid, v in published.items() if v["source"]["offset"] < end}
    cut = _cli(*base, "--to", str(end), *compare, *stateful)
    assert cut.returncode == 0, cut.stdout + cut.stderr
    assert cut.stdout.startswith(f"equal: {len(want)} replayed verdicts, {len(want)} recorded in range"), cut.stdout
    assert "in the batch of their first event" in cut.stderr and "0 events skipped" in cut.stderr, cut.stderr

    # --state-topic names the changelog directly; --json carries the state summary
    as_json = _cli(*base, "--from", "21", *compare, "--json", "--with-state", "--state-topic", names.changelog)
    doc = json.loads(as_json.stdout)
    assert as_json.returncode == 0 and doc["equal"] and doc["state"]["stored"] == 3
    assert _cli(*base, "--with-state", "--state-topic", f"{names.prefix}.nope").returncode == 2


def test_with_state_under_another_config_than_the_workers_fails_and_says_why(fed: Fed, tmp_path: Path) -> None:
    """Another config rebuilds other states, so the worker's stored ones looked newer than the events: their
    runs were left out of the comparison, which then read "equal" with exit 0 (found by a QA pass)."""
    other = tmp_path / "other.json5"
    other.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True, "warningThreshold": 4}}}))
    base = ["--topic", fed.names.events, "--bootstrap", fed.bootstrap, "--config", str(other)]
    compare = ["--compare-verdicts", "--verdicts-topic", fed.names.verdicts]
    stateful = ["--with-state", "--group", fed.names.group]
    for start in ("0", "21"):
        result = _cli(*base, "--from", start, *compare, *stateful)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "recorded verdicts were decided with another config" in result.stderr, result.stderr
        assert "--with-state cannot use the worker's stored states under another config" in result.stderr


def test_run_with_state_under_another_config_than_the_workers_fails_and_says_why(fed: Fed, tmp_path: Path) -> None:
    """``--run --with-state`` under another config explained from states it cannot rebuild ("from a newer stored
    state of a compacted changelog", events skipped) and blamed the run id (a QA pass); now, by the compare mode's
    rule (the recorded verdicts' config_hash), one line names the mismatch, exit status 1."""
    other = tmp_path / "other.json5"
    other.write_text(json.dumps({"tools": {"loopDetection": {"enabled": True, "historySize": 12}}}))
    topic = ["--topic", fed.names.events, "--bootstrap", fed.bootstrap, "--from", "21", "--run", "sess-ws0"]
    stateful = ["--with-state", "--group", fed.names.group, "--verdicts-topic", fed.names.verdicts]
    for config in (["--config", str(other)], []):  # another file, and OpenClaw's defaults
        result = _cli(*topic, *config, *stateful)
        assert (result.returncode, result.stdout) == (1, ""), result.stdout + result.stderr
        [line] = result.stderr.splitlines()
        assert line.startswith("loopwatch replay: cannot explain run 'sess-ws0' from the worker's stored state: ")
        assert "recorded verdicts were decided with another config (config_hash " in line, line
        assert line.endswith(
            ": the stored states were computed with the worker's config: give replay that config file with --config "
            "(or leave out --with-state to explain the run from empty)"
        ), line
    same = _cli(*topic, "--config", str(fed.config), *stateful)
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.splitlines()[1].startswith("start 0@21: from the worker's stored state")


def test_a_topic_of_another_kind_is_one_line_naming_it(fed: Fed) -> None:
    """The verdicts topic replayed as events, the events topic compared as verdicts or read as stored runs: a
    note for every record (a thousand lines), then exit 0 or a made-up difference; now one line, exit 2."""
    names = fed.names
    events, verdicts = names.events, names.verdicts
    bootstrap = ["--bootstrap", fed.bootstrap, "--config", str(fed.config)]
    cases = {
        "events": ["--topic", verdicts],
        "verdicts": ["--topic", events, "--compare-verdicts", "--verdicts-topic", events],
        "stored runs": ["--topic", events, "--with-state", "--state-topic", events],
    }
    where = {
        "events": "events are in the worker's --events-topic (default loopwatch.events)",
        "verdicts": "verdicts are in the worker's --verdicts-topic (default loopwatch.verdicts)",
        "stored runs": "stored runs are in the worker's <group>-runs-changelog (--group, or --state-topic)",
    }
    for kind, argv in cases.items():
        result = _cli(*argv, *bootstrap)
        named = argv[-1]
        assert result.returncode == 2 and result.stdout == "", result.stdout + result.stderr
        [line] = result.stderr.splitlines()  # no note per record before it
        assert line.startswith(f"loopwatch replay: topic {named} holds no {kind}: none of the "), result.stderr
        assert line.endswith(f": {where[kind]}"), line


def test_a_range_past_the_end_says_it_holds_no_record(fed: Fed) -> None:
    """It printed nothing at all and ended with 0, as if the range held events that decided nothing."""
    result = _cli(*fed.base, "--from", "100000")
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    assert f"loopwatch replay: note: no record of {fed.names.events} in the range (partition: [from, to) 0: " in (
        result.stderr
    ), result.stderr
    assert result.stderr.rstrip().endswith("check --from/--to"), result.stderr


def _explained(doc: dict[str, Any]) -> dict[str, tuple[str, str, int, int]]:
    """verdict id -> (decision, detector, count, offset) of every published decision of a ``--run --json``."""
    return {
        verdict_id(GATEWAY, e["event_id"], d["decision"], d["detector"]): (
            d["decision"], d["detector"], d["count"], int(e["label"].split("@")[1])
        )
        for e in doc["events"]
        for d in e["decisions"]
        if d["published"]
    }  # fmt: skip


def test_run_with_state_explains_the_workers_verdicts(fed: Fed) -> None:
    start = 21  # mid-chunk and mid-run for all three runs
    explain = [*fed.base, "--from", str(start), "--json"]
    differs = []
    for i in range(len(NAMES)):
        run = f"sess-ws{i}"
        want = {
            vid: (v["decision"], v["detector"], v["count"], v["source"]["offset"])
            for vid, v in fed.published.items()
            if v["session_id"] == run and v["source"]["offset"] >= start
        }
        assert want, run
        with_state = _cli(*explain, "--run", run, "--with-state", "--group", fed.names.group)
        assert with_state.returncode == 0, with_state.stdout + with_state.stderr
        doc = json.loads(with_state.stdout)
        assert _explained(doc) == want  # the same verdict ids, decisions, counts and triggering offsets
        (state,) = doc["state"]
        assert state["origin"] == "stored" and state["skipped"] == [] and state["first_offset"] >= start
        assert state["history"] > 0 and doc["events"][0]["counts"]["history"] == state["history"]
        plain = _cli(*explain, "--run", run)
        assert plain.returncode == 0, plain.stderr
        plain_doc = json.loads(plain.stdout)
        assert "state" not in plain_doc and plain_doc["events"][0]["counts"]["history"] == 0
        differs.append(_explained(plain_doc) != want)
    assert any(differs)  # from empty, the explanation misses or misplaces the worker's verdicts
    text = _cli(*fed.base, "--from", str(start), "--run", "sess-ws0", "--with-state", "--group", fed.names.group)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith("run sess-ws0: ") and lines[1].startswith(f"start 0@{start}: from the worker's stored")
    assert "calls already in the history" in lines[1]


def test_expiry_inside_the_range_is_replayed(broker: Any, tmp_path: Path) -> None:
    """The worker expires run-x (TTL) inside the range and it comes back: replay restarts it from empty too.

    Low thresholds (warning 3, critical 6): the worker warns again after the restart, where continuing the old
    history would block, so a replay that ignored the expiry would differ (as a plain replay does).
    """
    bootstrap = bootstrap_of(broker)
    names = new_names("replay-expiry", partitions=1)
    config = write_config(tmp_path)
    assert json.loads(config.read_text())["tools"]["loopDetection"]["criticalThreshold"] == 6
    ttl = ["--state-ttl", "1.5", "--sweep-interval", "0.3"]
    worker = WorkerProcess(bootstrap, names, tmp_path, config=config, store="memory", extra=ttl).start()
    # offsets 0-2 and 3-6 (two batches: two versions of run-x), then both runs expire, then run-x at 7-11
    lives = [
        [event(i, "run-x") for i in range(3)],
        [event(i, "run-x") for i in range(3, 5)] + [event(i, "run-y") for i in range(2)],
        [event(i, "run-x") for i in range(5, 10)],
    ]
    try:
        worker.wait_ready()
        sent = 0
        for n, chunk in enumerate(lives):
            if n == 2:
                wait_for(lambda: metric(worker.metrics(), "loopwatch_expired_runs_total") == 2, 20, "both expired")
            produce(bootstrap, names.events, keyed(chunk))
            sent += len(chunk)
            wait_for(lambda n=sent: metric(worker.metrics(), "loopwatch_events_total") >= n, 30, f"{sent} applied")
        published, _ = verdicts_by_id(read_topic(bootstrap, names.verdicts, names.partitions, settle=0.3))
        worker.assert_no_errors()
    finally:
        worker.stop()
    # the verdicts really depend on the reset: after it the worker warned at count 3 again (the 4th call), where
    # continuing the old history (5 calls) would have blocked at the 2nd call
    second = sorted(
        (v["source"]["offset"], v["decision"], v["count"]) for v in published.values() if v["source"]["offset"] >= 7
    )
    assert second and second[0] == (10, "warning", 3) and all(d != "block" for _, d, _ in second), second

    base = ["--topic", names.events, "--bootstrap", bootstrap, "--config", str(config)]
    compare = ["--compare-verdicts", "--verdicts-topic", names.verdicts]
    stateful = ["--with-state", "--group", names.group]
    for start in ("0", "4"):  # 4: mid-run, from run-x's stored state (offsets <= 2) plus a warm-up of offset 3
        plain = _cli(*base, "--from", start, *compare)
        assert plain.returncode == 1 and plain.stdout.startswith("DIFFERENT:"), plain.stdout + plain.stderr
        same = _cli(*base, "--from", start, *compare, *stateful, "--json")
        assert same.returncode == 0, same.stdout + same.stderr
        doc = json.loads(same.stdout)
        assert doc["equal"] and doc["state"]["restarted_after_expiry"] == 1, doc
        assert doc["state"]["expired_without_return"] == 1 and doc["state"]["expiry_unknown"] == 0  # run-y
        assert "expiries in range: 1 restarts from empty replayed, 1 without a later event" in same.stderr
        assert "are missing" not in same.stderr  # every changelog record is there (nothing compacted)

    text = _cli(*base, "--from", "4", "--run", "run-x", *stateful)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "1 restarts from empty after an expiry in range (at offsets 7)" in lines[1]
    at = next(i for i, line in enumerate(lines) if "state expired by the worker (tombstone at changelog offset" in line)
    assert lines[at].strip().endswith("restarting from empty") and lines[at + 1].startswith("     0@7  tool_call")
    assert "history=0" in lines[at + 2]
