"""Real-gateway end-to-end test: OpenClaw (2026.7.35, or the version ``LOOPWATCH_OPENCLAW_VERSION`` names, e.g.
2026.9.6) + the loopwatch bridge plugin + a loopwatch worker, which judges the gateway by the semantics profile
its stamped version selects.

Run with ``make test-openclaw`` (sets ``LOOPWATCH_OPENCLAW_E2E=1`` and runs 2026.7.35 and 2026.9.6 in turn;
otherwise these tests are skipped).
Self-contained and bounded: ``ensure-openclaw.sh`` installs Node 24 and openclaw under ``.tools/`` (once),
then the test starts, on 127.0.0.1 only, a scripted fake model (``fake_model.py``), the embedded broker, a
``loopwatch worker`` and a real ``openclaw gateway run`` with the bridge plugin and a test-only observer
plugin, and drives scenarios through ``openclaw agent``. Every process is stopped by pid (process group).

Phase 1 (comparison): OpenClaw's own ``tools.loopDetection`` is on and the bridge only publishes. For every
tool call, OpenClaw's decisions (``tool.loop`` diagnostic events and the post-compaction guard's abort, as
the observer plugin recorded them) must equal loopwatch's verdicts for that call id: decision, detector and
count, call by call. A per-call table (OpenClaw's and loopwatch's decisions side by side) is printed and kept as
``.artifacts/openclaw-e2e/compare-<mode>.txt`` (``compare-<mode>-<version>.txt`` for other versions), written
before the assertions. On the 2026.9 line a call that ends the run (its second critical, #118647) is also
an ``abort`` by the block's detector on both sides.

Phase 2 (enforcement): OpenClaw's detection is off, the bridge has ``enforce: true``; loopwatch's verdicts
alone must stop the loops: a warning note reaches the model, repeated calls get blocked by the plugin, and
the post-compaction abort ends the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from streams.devbroker import EmbeddedBroker
from tests.openclaw_e2e.install import E2E_MARKS, OPENCLAW_VERSION, PLUGIN_DIR, Tools, ensure_tools
from tests.support.kafka import TopicReader
from tests.support.procs import REPO_ROOT, free_port, python_env, start_process, stop_process, wait_until

pytestmark = E2E_MARKS

HERE = Path(__file__).resolve().parent
OBSERVER_DIR = HERE / "observer-plugin"
PARTITIONS = 4
EVENTS, VERDICTS = "loopwatch.events", "loopwatch.verdicts"
AGENT_TIMEOUT = 240.0
ARTIFACTS = REPO_ROOT / ".artifacts" / "openclaw-e2e"
# The 2026.9 generation (2026.8.0 and later): only `enabled` is configurable, a second critical ends the run.
GEN9 = tuple(int(p) for p in OPENCLAW_VERSION.split(".")[:2]) >= (2026, 8)
LABEL = "" if OPENCLAW_VERSION == "2026.7.35" else f"-{OPENCLAW_VERSION}"  # artifact names of other versions
# Lowered from 10 (same value for OpenClaw and the worker) to keep the unknown_tool scenario short (2026.7).
UNKNOWN_TOOL_THRESHOLD = 3
LOOP_DETECTION: dict[str, Any] = {} if GEN9 else {"unknownToolThreshold": UNKNOWN_TOOL_THRESHOLD}
# 2026.9 defers plugin tools behind its tool search (tool_search/tool_call) unless told to expose them directly.
TOOL_SURFACE: dict[str, Any] = {"toolSearch": False} if GEN9 else {}
# A second agent whose own block (merged over the global one, by both sides) blocks at the 12th identical
# call, so the newer scenarios stay short; warnings stay at 10, the count OpenClaw surfaces. (2026.7 only:
# 2026.9 has no numeric knobs.)
FAST_AGENT = {"id": "fast", "tools": {"loopDetection": {"criticalThreshold": 11}}}
AGENTS: dict[str, Any] = {} if GEN9 else {"list": [{"id": "main", "default": True}, FAST_AGENT]}

GUARD_RUNS = 3  # the guard scenario runs this often per mode (how often its abort outraces after_tool_call)
PARALLEL_RUNS = 3  # `openclaw agent` turns in flight at once (separate sessions)

W, B, A = "warning", "block", "abort"
# (scenario, the (decision, detector) pairs OpenClaw must make in it, pairs it must not make). The comparison
# itself is call by call; these only prove each scenario exercised what it is meant to. Scenarios from
# FAST_SCENARIOS run as the "fast" agent (block at 11).
COMPARED: list[tuple[str, set[tuple[str, str]], set[tuple[str, str]]]] = [
    ("generic_repeat", {(W, "generic_repeat"), (B, "generic_repeat")}, set()),
    ("ping_pong", {(W, "ping_pong"), (B, "ping_pong")}, set()),
    ("poll", {(W, "known_poll_no_progress"), (B, "known_poll_no_progress")}, {(W, "generic_repeat")}),
    ("guard", {("abort", "compaction_loop_persisted")}, set()),
    ("unknown_tool", {(B, "unknown_tool_repeat")}, set()),
    ("quiet", set(), {(W, "generic_repeat"), (B, "generic_repeat")}),
    # Class 1: failures a tool returns are results (OpenClaw's derived `error` is no outcome); thrown errors
    # are hashed whole.
    ("exec_fail_stable", {(W, "generic_repeat"), (B, "generic_repeat")}, set()),
    ("exec_fail_changing", {(W, "generic_repeat")}, {(B, "generic_repeat")}),
    ("thrown_changing", {(W, "generic_repeat")}, {(B, "generic_repeat")}),
    # Class 2: an unknown-tool message in a returned result is no missing tool.
    ("exec_unknown_message", set(), {(B, "unknown_tool_repeat")}),
    # Class 3: real process poll/log calls on background sessions.
    ("poll_quiet", {(W, "known_poll_no_progress"), (B, "known_poll_no_progress")}, {(W, "generic_repeat")}),
    ("log_quiet", {(W, "known_poll_no_progress")}, {(W, "generic_repeat")}),
    ("poll_progress", set(), {(W, "generic_repeat"), (W, "known_poll_no_progress")}),
    ("log_progress", set(), {(W, "generic_repeat"), (W, "known_poll_no_progress")}),
    # Class 4: calls answered before OpenClaw's tool wrapper leave no trace in its loop history.
    ("unwrapped", {(W, "generic_repeat")}, {(W, "ping_pong"), (B, "ping_pong")}),
]
FAST_SCENARIOS = {
    "exec_fail_stable",
    "exec_fail_changing",
    "thrown_changing",
    "exec_unknown_message",
    "poll_quiet",
    "log_quiet",
    "poll_progress",
    "log_progress",
    "unwrapped",
}
# Seeded random scripts (fake_model._mixed): no expectation of their own, every call compared. They run as the
# "fast" agent on the 2026.7 line, so their repeats reach blocks; a 2026.9 gateway may end them.
MIXED = {"mixed_a", "mixed_b", "mixed_c"}
COMPARED += [(name, set(), set()) for name in sorted(MIXED)]
FAST_SCENARIOS |= MIXED
if GEN9:  # built-in thresholds (warning at the 11th call, block at the 21st); the 22nd, a second critical, ends the run
    COMPARED = [
        # One recovery (#118647): the run's second critical blocks and ends it; its count, 21, includes the
        # first block's veto (the veto counts toward no-progress, #127701).
        ("generic_repeat", {(W, "generic_repeat"), (B, "generic_repeat"), (A, "generic_repeat")}, set()),
        ("ping_pong", {(W, "ping_pong"), (B, "ping_pong")}, set()),
        ("poll", {(W, "known_poll_no_progress"), (B, "known_poll_no_progress"), (A, "known_poll_no_progress")}, set()),
        ("unknown_tool_long", {(B, "unknown_tool_repeat")}, set()),
        # Exec failure identity (#118402): drifting times and durations are no progress.
        ("exec_failure", {(W, "generic_repeat"), (B, "generic_repeat"), (A, "generic_repeat")}, set()),
        ("exec_fail_changing", {(W, "generic_repeat")}, {(B, "generic_repeat")}),
        ("argument_churn", {(W, "argument_churn")}, {(B, "generic_repeat")}),
        # The untrusted-content wrapper's random id is no progress (#130210).
        ("untrusted_page", {(W, "generic_repeat"), (B, "generic_repeat"), (A, "generic_repeat")}, set()),
        ("poll_progress", set(), {(W, "generic_repeat"), (W, "known_poll_no_progress")}),
        ("unwrapped", {(W, "generic_repeat")}, {(W, "ping_pong"), (B, "ping_pong")}),
        ("quiet", set(), {(W, "generic_repeat"), (B, "generic_repeat")}),
        *[(name, set(), set()) for name in sorted(MIXED)],
    ]
    FAST_SCENARIOS = set()
# The text of a 2026.9 veto that ends the run (agent-core's terminal tool-loop intervention).
RUN_ENDED = "This run is stopping now."
# Named deviations (README "Detection semantics") a row may show; anything else must agree exactly.
GUARD_RACE = "deviation: guard abort before after_tool_call reached plugins"

Decision = tuple[str, str, int]


@dataclass
class Stack:
    tmp: Path
    tools: Tools
    bootstrap: str
    model_port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _log_text(path: Path) -> str:
    """A log file's text without terminal colour codes."""
    return _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace")) if path.exists() else ""


def _wait_for_log(proc: subprocess.Popen[bytes], path: Path, needle: str, timeout: float, what: str) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited with {proc.returncode}:\n{_log_text(path)[-5000:]}")
        return needle in _log_text(path)

    try:
        wait_until(ready, timeout, 0.25, message=what)
    except TimeoutError:
        raise AssertionError(f"{what} not ready in {timeout}s:\n{_log_text(path)[-5000:]}") from None


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    tools = ensure_tools()
    tmp = tmp_path_factory.mktemp("openclaw-e2e")
    procs: list[subprocess.Popen[bytes]] = []
    with EmbeddedBroker(log_path=tmp / "broker.log") as broker:
        try:
            port_file = tmp / "model.port"
            model = start_process(
                [
                    str(REPO_ROOT / ".venv" / "bin" / "python"),
                    str(HERE / "fake_model.py"),
                    "--port-file",
                    str(port_file),
                    "--log-file",
                    str(tmp / "model-requests.jsonl"),
                ],
                env=python_env(),
                log_path=tmp / "model.log",
            )
            procs.append(model)
            wait_until(lambda: port_file.exists() and port_file.read_text().strip(), 15, message="fake model port")
            worker_config = tmp / "loopwatch.json5"
            loop_detection = {"enabled": True, **LOOP_DETECTION}
            agents = {"agents": AGENTS} if AGENTS else {}
            worker_config.write_text(json.dumps({"tools": {"loopDetection": loop_detection}, **agents}) + "\n")
            (tmp / "worker-data").mkdir()
            worker = start_process(
                [
                    str(REPO_ROOT / ".venv" / "bin" / "loopwatch"),
                    "worker",
                    "--bootstrap",
                    broker.bootstrap,
                    "--partitions",
                    str(PARTITIONS),
                    "--store",
                    "memory",
                    "--metrics-port",
                    "0",
                    "--web-port",
                    str(free_port()),
                    "--data-dir",
                    str(tmp / "worker-data"),
                    "--config",
                    str(worker_config),
                    "--group",
                    f"e2e-{uuid.uuid4().hex[:8]}",
                ],
                env=python_env(),
                log_path=tmp / "worker.log",
                cwd=tmp,
            )
            procs.append(worker)
            _wait_for_log(worker, tmp / "worker.log", "loopwatch worker: ready", 120, "loopwatch worker")
            yield Stack(tmp, tools, broker.bootstrap, int(port_file.read_text()), procs)
        finally:
            for proc in reversed(procs):
                stop_process(proc, 15)


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    env: dict[str, str]
    config: Path
    observer: Path
    log: Path
    gateway_id: str


def _start_gateway(stack: Stack, name: str, *, loop_detection: bool, enforce: bool, hashed: bool = True) -> Gateway:
    base = stack.tmp / name
    (base / "home").mkdir(parents=True)
    (base / "workspace").mkdir()
    gateway_id = f"gw-{name}"
    observer = base / "observer.jsonl"
    config = {
        "agents": {
            "defaults": {
                "model": {"primary": "fake/fake-loop"},
                "workspace": str(base / "workspace"),
                # safeguard: OpenClaw's runner (not the agent SDK) compacts on overflow, then arms the guard.
                "compaction": {"mode": "safeguard", "keepRecentTokens": 200, "qualityGuard": {"enabled": False}},
            },
            **AGENTS,
        },
        "models": {
            "mode": "replace",
            "providers": {
                "fake": {
                    "baseUrl": f"http://127.0.0.1:{stack.model_port}/v1",
                    "apiKey": "sk-local",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": "fake-loop",
                            "name": "Fake",
                            "reasoning": False,
                            "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                        }
                    ],
                }
            },
        },
        "gateway": {
            "mode": "local",
            "port": free_port(),
            "bind": "loopback",
            "auth": {"mode": "token", "token": uuid.uuid4().hex},
        },
        "browser": {"enabled": False},
        "logging": {"file": str(base / "openclaw.jsonl")},
        "tools": {"loopDetection": {"enabled": loop_detection, **LOOP_DETECTION}, **TOOL_SURFACE},
        "plugins": {
            "load": {"paths": [str(PLUGIN_DIR), str(OBSERVER_DIR)]},
            "entries": {
                "loopwatch-bridge": {
                    "enabled": True,
                    "config": {
                        "brokers": [stack.bootstrap],
                        "gatewayId": gateway_id,
                        "enforce": enforce,
                        "hashOnGateway": hashed,
                    },
                },
                "loopwatch-e2e-observer": {
                    "enabled": True,
                    "hooks": {"allowConversationAccess": True},
                    "config": {"out": str(observer)},
                },
            },
        },
    }
    config_path = base / "openclaw.json"
    config_path.write_text(json.dumps(config, indent=2))
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "OPENCLAW_CONFIG_PATH": str(config_path),
        "PATH": f"{Path(stack.tools.node).parent}:{os.environ.get('PATH', '')}",
        "KAFKAJS_NO_PARTITIONER_WARNING": "1",
        "NO_COLOR": "1",
    }
    log = base / "gateway.log"
    proc = start_process([stack.tools.node, stack.tools.openclaw, "gateway", "run"], env=env, log_path=log, cwd=base)
    stack.procs.append(proc)
    _wait_for_log(proc, log, "[gateway] ready", 180, f"openclaw gateway {name}")
    return Gateway(proc, env, config_path, observer, base / "openclaw.jsonl", gateway_id)


def _stop_gateway(stack: Stack, gateway: Gateway) -> None:
    stop_process(gateway.proc, 30)
    if gateway.proc in stack.procs:
        stack.procs.remove(gateway.proc)


def _agent(
    stack: Stack, gateway: Gateway, scenario: str, tag: str, agent: str = "main"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            stack.tools.node,
            stack.tools.openclaw,
            "agent",
            "--agent",
            agent,
            "--session-id",
            f"s-{tag}",
            "--json",
            "--message",
            f"SCENARIO {scenario} {tag}",
        ],
        env=gateway.env,
        capture_output=True,
        text=True,
        timeout=AGENT_TIMEOUT,
        check=False,
        cwd=gateway.config.parent,
    )


def _observer_rows(gateway: Gateway) -> list[dict[str, Any]]:
    text = _log_text(gateway.observer)
    return [json.loads(line) for line in text.split("\n") if line.strip()]


_REPEATED = re.compile(r"repeated (\d+) times")


def openclaw_decisions(rows: list[dict[str, Any]]) -> tuple[dict[str, list[Decision]], dict[str, list[str]]]:
    """OpenClaw's decision per tool call id, and the call ids of each session in call order.

    A ``tool.loop`` event is decided before the call's hooks run: it belongs to its session's next ``before``
    record (the call executed: a warning) or next vetoed ``after`` record (a block: before_tool_call never
    ran). A guard abort belongs to the last executed call of the run it ended; on 2026.9 a veto whose text
    says the run is stopping (the second critical) also ends the run: an abort by that block's detector.
    Calls answered before OpenClaw's tool wrapper (no ``before`` record, not vetoed) are listed too: OpenClaw
    decides nothing on them, and neither may loopwatch.
    """
    decisions: dict[str, list[Decision]] = defaultdict(list)
    calls: dict[str, list[str]] = defaultdict(list)
    last_executed: dict[str, str] = {}
    pending: dict[str, list[Decision]] = defaultdict(list)  # per session: turns run concurrently
    seen_events: set[object] = set()
    for row in rows:
        kind = row["kind"]
        if kind == "tool.loop" and row.get("seq") is not None:
            # 2026.9 registers plugins twice and both subscriptions receive each diagnostic event
            if row["seq"] in seen_events:
                continue
            seen_events.add(row["seq"])
        if kind == "tool.loop":
            decision = "block" if row["level"] == "critical" else "warning"
            pending[row["sessionId"]].append((decision, row["detector"], int(row["count"])))
        elif kind in ("before", "after"):
            call_id, session = row["toolCallId"], row["sessionId"]
            vetoed = kind == "after" and (row.get("details") or {}).get("deniedReason") == "tool-loop"
            if call_id not in calls[session]:
                calls[session].append(call_id)
            if kind == "before" or vetoed:
                made = pending.pop(session, [])
                decisions[call_id].extend(made)
                if vetoed and RUN_ENDED in row.get("text", ""):
                    decisions[call_id].extend(("abort", det, n) for d, det, n in made if d == "block")
            if kind == "before":
                last_executed[row["runId"]] = call_id
        elif kind == "agent_end" and row.get("error") and "compaction did not break the loop" in row["error"]:
            match = _REPEATED.search(row["error"])
            decisions[last_executed[row["runId"]]].append(
                ("abort", "compaction_loop_persisted", int(match.group(1)) if match else -1)
            )
    left = {session: d for session, d in pending.items() if d}
    assert not left, f"tool.loop events without a call: {left}"
    return decisions, calls


def _read_topic(bootstrap: str, topic: str, settle: float, minimum: int, timeout: float) -> list[dict[str, Any]]:
    """Every record of ``topic`` once at least ``minimum`` arrived and nothing new came for ``settle`` s."""
    with TopicReader(bootstrap, topic, PARTITIONS) as reader:
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            if reader.poll(0.3):
                quiet_since = time.monotonic()
            elif len(reader.records) >= minimum and time.monotonic() - quiet_since >= settle:
                break
        return [json.loads(record.value or b"null") for record in reader.records]


def loopwatch_decisions(verdicts: list[dict[str, Any]], gateway_id: str) -> dict[str, list[Decision]]:
    decisions: dict[str, list[Decision]] = defaultdict(list)
    seen: set[str] = set()
    for verdict in verdicts:
        if verdict["gateway_id"] != gateway_id or verdict["verdict_id"] in seen:
            continue
        seen.add(verdict["verdict_id"])
        decisions[verdict["call_id"]].append((verdict["decision"], verdict["detector"], verdict["count"]))
    return decisions


@dataclass
class Row:
    scenario: str
    index: int
    tool: str
    call_id: str
    openclaw: list[Decision]
    loopwatch: list[Decision]
    equal: bool
    note: str = ""


def _fmt(decisions: list[Decision]) -> str:
    return ", ".join(f"{d}/{det}/{n}" for d, det, n in decisions) or "-"


def comparison_table(mode: str, rows: list[Row]) -> str:
    """One line per tool call: scenario, call index, tool, call id, both sides' decisions, equal?"""
    head = ("scenario", "#", "tool", "call id", "openclaw", "loopwatch", "equal", "note")
    cells = [head] + [
        (
            r.scenario,
            str(r.index),
            r.tool,
            r.call_id,
            _fmt(r.openclaw),
            _fmt(r.loopwatch),
            "yes" if r.equal else "NO",
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c[i].ljust(widths[i]) for i in range(len(head))).rstrip() for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    title = f"[{mode}] OpenClaw vs loopwatch, call by call: {table_totals(rows)}"
    return "\n".join([title, *lines]) + "\n"


def table_totals(rows: list[Row]) -> str:
    named = sum(1 for r in rows if r.equal and r.note.startswith("deviation"))
    agreeing = sum(1 for r in rows if r.equal and not r.note.startswith("deviation"))
    decided = sum(1 for r in rows if r.openclaw or r.loopwatch)
    return (
        f"{len(rows)} calls ({decided} with decisions), {agreeing} agreeing, {named} named deviations, "
        f"{len(rows) - agreeing - named} differ"
    )


def _sessions(mode: str) -> dict[tuple[str, int], str]:
    """(scenario, repetition) -> session tag of each comparison run of this mode."""
    out: dict[tuple[str, int], str] = {}
    for scenario, _, _ in COMPARED:
        for rep in range(GUARD_RUNS if scenario == "guard" else 1):
            out[scenario, rep] = f"c{mode[0]}-{scenario.replace('_', '-')}" + (f"-{rep}" if rep else "")
    return out


@pytest.mark.parametrize("hashed", [True, False], ids=["hashOnGateway", "raw"])
def test_loopwatch_verdicts_equal_openclaw_decisions_call_by_call(stack: Stack, hashed: bool) -> None:
    mode = "hash" if hashed else "raw"
    gateway = _start_gateway(stack, f"compare-{mode}", loop_detection=True, enforce=False, hashed=hashed)
    sessions = _sessions(mode)
    runs: dict[tuple[str, int], subprocess.CompletedProcess[str]] = {}
    try:
        pool = ThreadPoolExecutor(PARALLEL_RUNS)
        try:
            futures = {
                key: pool.submit(_agent, stack, gateway, key[0], tag, "fast" if key[0] in FAST_SCENARIOS else "main")
                for key, tag in sessions.items()
            }
            runs = {key: future.result() for key, future in futures.items()}
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # on failure: no new turns, the running ones end
    finally:
        _stop_gateway(stack, gateway)  # also flushes the plugin's buffer (gateway_stop)

    rows = _observer_rows(gateway)
    openclaw, calls = openclaw_decisions(rows)
    results_seen = {r["toolCallId"] for r in rows if r["kind"] == "after"}
    middleware_seen = {r["toolCallId"] for r in rows if r["kind"] == "middleware"}
    events = _read_topic(stack.bootstrap, EVENTS, 2.0, 1, 60)
    mine = [e for e in events if e["gateway_id"] == gateway.gateway_id]
    expected_verdicts = sum(len(v) for v in openclaw.values())
    verdicts = _read_topic(stack.bootstrap, VERDICTS, 5.0, expected_verdicts, 120)
    (stack.tmp / f"compare-{mode}-events.json").write_text(json.dumps(mine, indent=1))
    (stack.tmp / f"compare-{mode}-verdicts.json").write_text(json.dumps(verdicts, indent=1))
    loopwatch = loopwatch_decisions(verdicts, gateway.gateway_id)

    tool_of = {r["toolCallId"]: r["toolName"] for r in rows if r["kind"] in ("before", "after")}
    table: list[Row] = []
    guard_races: list[str] = []
    for (scenario, _), tag in sessions.items():
        for index, call_id in enumerate(calls[f"s-{tag}"], 1):
            theirs = loopwatch.get(call_id, [])
            ours = openclaw.get(call_id, [])
            note = ""
            if scenario == "guard" and call_id not in results_seen and not theirs and ours:
                # OpenClaw aborts the attempt while recording this call's outcome; its after_tool_call then
                # races the abort and may never reach plugins, so loopwatch cannot see the third result.
                ours = [d for d in ours if d[0] != "abort"]
                note = GUARD_RACE
                guard_races.append(call_id)
            table.append(
                Row(
                    scenario,
                    index,
                    tool_of.get(call_id, "?"),
                    call_id,
                    openclaw.get(call_id, []),
                    theirs,
                    ours == theirs,
                    note,
                )
            )
    all_ids = {call_id for ids in calls.values() for call_id in ids}
    stray = {call_id: d for call_id, d in loopwatch.items() if call_id not in all_ids}
    table += [Row("(no such call)", 0, "?", call_id, [], d, False) for call_id, d in stray.items()]
    text = comparison_table(f"openclaw@{OPENCLAW_VERSION} {mode}" if GEN9 else mode, table)
    # The call each guard abort ended on, and whether its after_tool_call lost the race with the abort.
    guard_abort = ("abort", "compaction_loop_persisted")
    tripping = [call_id for call_id, ds in openclaw.items() if any(d[:2] == guard_abort for d in ds)]
    raced = [call_id for call_id in tripping if call_id not in results_seen]
    text += (
        f"guard aborts: {len(tripping)}; after_tool_call lost the race in {len(raced)} "
        f"(the tool-result middleware saw {sum(1 for c in raced if c in middleware_seen)} of those, "
        f"loopwatch aborted on {sum(1 for c in raced if any(d[0] == 'abort' for d in loopwatch.get(c, [])))})\n"
    )
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / f"compare-{mode}{LABEL}.txt").write_text(text, encoding="utf-8")
    print(text)

    # Runs a 2026.9 gateway ends at their second critical (it fails them, and writes its own stop message).
    ended_runs = {scenario for scenario, must, _ in COMPARED if any(d == A for d, _ in must)}
    if GEN9:
        ended_runs |= MIXED  # whether a mixed run reaches a second critical is the script's chance
    for (scenario, rep), done in runs.items():
        if scenario == "guard":
            assert "PostCompactionLoopPersistedError" in done.stdout + done.stderr, (rep, done)
        elif scenario not in ended_runs:
            assert done.returncode == 0, f"{scenario}: {done.stderr[-3000:]}"

    compactions = [e for e in mine if e["type"] == "compaction_retry"]
    guard_runs = GUARD_RUNS if ("guard", 0) in sessions else 0
    assert len(compactions) == guard_runs and all(c["run_id"] for c in compactions), compactions
    assert all(e.get("openclaw_version") == OPENCLAW_VERSION for e in mine), "every event names the host version"
    tool_events = [e for e in mine if e["type"] in ("tool_call", "tool_result")]
    # Every model reply's usage (deploy/openclaw-plugin/lib/usage.mjs), stamped with a run that has tool calls.
    usage = [e for e in mine if e["type"] == "model_usage"]
    assert usage, "no model_usage events: the bridge saw no assistant reply's usage"
    assert {e["run_id"] for e in usage} >= {e["run_id"] for e in tool_events if e["type"] == "tool_call"}
    # Every reply the fake model answered reports its usage exactly (fake_model._usage: 50 in, 5 out); only the
    # guard's context-overflow replies and 2026.9's stop message of a run it ended, which OpenClaw writes itself,
    # carry none.
    answered, empty = (50, 5, 0), (0, 0, 0)
    own_replies = {f"s-{tag}" for (scenario, _), tag in sessions.items() if scenario in ended_runs | {"guard"}}
    seen = [((e["input_tokens"], e["output_tokens"], e["cache_read_tokens"]), e["session_id"]) for e in usage]
    assert all(tokens == answered or (tokens == empty and sid in own_replies) for tokens, sid in seen), seen[:5]
    assert sum(tokens == answered for tokens, _ in seen) > len(seen) // 2, seen[:5]
    if hashed:
        assert all("args_hash" in e and "args" not in e and "result" not in e for e in tool_events)
        polls = [e for e in tool_events if e["tool"] == "process" and e.get("poll_action") in ("poll", "log")]
        assert polls, "hashed process polls carry poll_action"
    else:
        assert all("args" in e for e in tool_events)
    published_calls = {e["call_id"] for e in tool_events}
    unwrapped = [c for c in calls[f"s-{sessions['unwrapped', 0]}"] if tool_of.get(c) == "grep_all"]
    assert unwrapped and not published_calls & set(unwrapped), "calls OpenClaw never recorded are not published"

    for (scenario, _), tag in sessions.items():
        must, forbidden = next((m, f) for name, m, f in COMPARED if name == scenario)
        ids = calls[f"s-{tag}"]
        assert ids, f"{scenario}: no tool calls observed"
        made = {(d, det) for call_id in ids for d, det, _ in openclaw.get(call_id, [])}
        assert must <= made, f"{scenario}: OpenClaw made {made}, the scenario needs {must}"
        assert not made & forbidden, f"{scenario}: OpenClaw made {made & forbidden}, the scenario rules them out"
        if not must and scenario not in MIXED:
            assert not made, f"{scenario}: OpenClaw decided {made} in a quiet run"
    mixed = {
        (d, det)
        for (s, _), tag in sessions.items()
        if s in MIXED
        for c in calls[f"s-{tag}"]
        for d, det, _ in openclaw.get(c, [])
    }
    assert len(mixed) >= 3, f"the mixed scripts reached only {mixed}"
    if GEN9:  # the run-ending critical counts the first block's veto: 20 identical outcomes + 1 veto
        ended = [d for c in calls[f"s-{sessions['generic_repeat', 0]}"] for d in openclaw.get(c, []) if d[0] == A]
        assert ended == [(A, "generic_repeat", 21)], ended
    mismatches = [(r.scenario, r.call_id, r.openclaw, r.loopwatch) for r in table if not r.equal and r.index]
    report = "\n".join(f"  {s} {c}: openclaw={o} loopwatch={lw}" for s, c, o, lw in mismatches)
    assert not mismatches and not stray, f"decisions differ:\n{report}\nverdicts for unknown calls: {stray}"
    print(f"[{mode}] {table_totals(table)}")


def test_enforcement_stops_loops_with_loopwatch_verdicts_alone(stack: Stack) -> None:
    gateway = _start_gateway(stack, "enforce", loop_detection=False, enforce=True)
    runs: dict[str, subprocess.CompletedProcess[str]] = {}
    try:
        # The verdict consumer must have joined its group (Tansu holds a JoinGroup for half a session).
        _wait_for_log(gateway.proc, gateway.log, "verdict consumer joined group", 90, "verdict consumer")
        # (2026.9: no guard scenario, as in the comparison; the second critical's abort ends the generic run.)
        for scenario in ("enforce_generic",) if GEN9 else ("enforce_generic", "enforce_guard"):
            runs[scenario] = _agent(stack, gateway, scenario, scenario.replace("_", "-"))
    finally:
        _stop_gateway(stack, gateway)
    rows = _observer_rows(gateway)
    assert not [r for r in rows if r["kind"] == "tool.loop"], "OpenClaw's own detection is off in this phase"

    # block: loopwatch blocks the 21st identical call; the verdict arrives while the loop goes on, and from
    # then on the plugin vetoes every identical call of the run with loopwatch's message. (On 2026.9 the 22nd
    # call is the run's second critical: its abort may end the run before any later call reaches the plugin.)
    generic = [r for r in rows if r["kind"] == "after" and r["sessionId"] == "s-enforce-generic"]
    blocked = [r for r in generic if (r.get("details") or {}).get("deniedReason") == "plugin-before-tool-call"]
    assert blocked or GEN9, f"no call was blocked by the plugin: {[r.get('details') for r in generic]}"
    assert all("CRITICAL" in (r.get("details") or {}).get("reason", "") for r in blocked), blocked[0]
    first = generic.index(blocked[0]) if blocked else len(generic)
    assert first >= 20, f"call {first} blocked before loopwatch's block at the 21st identical call"
    assert generic[first:] == blocked, "a block is sticky for the rest of the run"
    print(f"enforce: first plugin block at call {first} (loopwatch decided at call 20); {len(blocked)} blocked")

    # warning: loopwatch's warning (11th identical call) reached the model, appended to a tool result, and
    # is kept in the session transcript.
    requests = [json.loads(line) for line in _log_text(stack.tmp / "model-requests.jsonl").split("\n") if line.strip()]
    shown = [r for r in requests if r["scenario"] and r["scenario"][1] == "enforce-generic" and r["loopwatch_notes"]]
    assert shown, "the model never saw a [loopwatch] WARNING note"
    home = gateway.config.parent / "home"
    if GEN9:  # 2026.9 keeps transcripts in the agent's SQLite store (this gateway ran only this session)
        stores = list(home.rglob("openclaw-agent.sqlite*"))
        assert any(b"[loopwatch] WARNING" in store.read_bytes() for store in stores), stores
    else:
        transcripts = list(home.rglob("s-enforce-generic.jsonl"))
        assert transcripts and "[loopwatch] WARNING" in transcripts[0].read_text(encoding="utf-8")
    print(f"enforce: the model first saw the warning note in its request #{shown[0]['index']} of the loop")
    if GEN9:
        # abort: the run's second critical (the 22nd identical call) is loopwatch's abort; the run ends.
        ended = [r for r in rows if r["kind"] == "agent_end" and r["sessionId"] == "s-enforce-generic"]
        assert len(generic) >= 22, f"the run ended after {len(generic)} calls, before loopwatch's abort"
        assert len(generic) < 50 and ended, f"the run went on after loopwatch's abort ({len(generic)} calls)"
        assert ended[-1]["success"] is False, ended[-1]
        print(f"enforce: the generic run ended after {len(generic)} of 50 calls; agent_end={ended[-1]}")
        return

    # abort: loopwatch's post-compaction abort (3rd identical call after the compaction) ends the run.
    guard = [r for r in rows if r["kind"] == "after" and r["sessionId"] == "s-enforce-guard"]
    ran_after = [
        r for r in guard if "guard-after" in r.get("text", "") and r.get("details", {}).get("status") != "blocked"
    ]
    assert len(ran_after) < 20, f"the run went on after loopwatch's abort ({len(ran_after)} more calls ran)"
    ended = [r for r in rows if r["kind"] == "agent_end" and r["sessionId"] == "s-enforce-guard"]
    print(
        f"enforce: guard run stopped after {len(ran_after)} of 20 later calls; agent_end={ended[-1] if ended else None}"
    )
