"""loopwatch's decisions against the real OpenClaw's detector, on random runs (run with ``make test-openclaw``).

Hundreds of seeded random runs (a few tools, arguments and outcomes, so that repeats, ping-pongs, unknown
tools and late or missing results happen; random thresholds, history sizes and detector switches) go through
the installed package's own ``detectToolCallLoop``, ``recordToolCall`` and ``recordToolCallOutcome`` under
Node, driven as its before_tool_call hook drives them: a critical finding blocks the call (which then never
runs, so it has no outcome), a warning is published once per bucket of 10 per warning key. The same runs go
through :func:`streams.detection.apply`; every block and warning must agree in kind, detector and count.
Publication agrees where the resolved warningThreshold is OpenClaw's 10: below it loopwatch publishes a
warning per bucket of warningThreshold, OpenClaw never surfaces it (docs/semantics.md, deviation 2). The texts
are loopwatch's own (streams/detection/messages.py). This test runs on the 2026.7 line; the 2026.9 line has
test_detector_parity_2026_9.py.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from streams.detection import Outcome, ToolEvent, apply
from streams.detection.config import resolve_loop_config
from tests.openclaw_e2e.install import E2E_MARKS, LOOP_DETECTION_EXPORTS, OPENCLAW_VERSION, run_on_dist

pytestmark = [
    *E2E_MARKS,
    pytest.mark.skipif(
        tuple(int(p) for p in OPENCLAW_VERSION.split(".")[:2]) >= (2026, 8),
        reason=f"openclaw@{OPENCLAW_VERSION} is of the 2026.9 line (test_detector_parity_2026_9.py)",
    ),
]

# The hook's order for one call, as in OpenClaw 2026.7.35's runBeforeToolCallHook; the warning buckets as its
# shouldEmitLoopWarning keeps them (the function is not exported).
_DRIVER = (
    LOOP_DETECTION_EXPORTS
    + r"""
import { readFileSync } from "node:fs";
for (const name of ["log", "info", "warn", "error", "debug"]) console[name] = () => {};
const [dist, inputsPath] = process.argv.slice(2);
const oc = await loopDetection(dist);
if (!oc?.detectToolCallLoop) throw new Error("detectToolCallLoop not found in " + dist);
const BUCKET = 10;
function shouldEmit(state, key, count) {
  const bucket = Math.floor(count / BUCKET);
  if (bucket <= (state.buckets.get(key) ?? 0)) return false;
  state.buckets.set(key, bucket);
  return true;
}
const runs = JSON.parse(readFileSync(inputsPath, "utf8"));
const out = runs.map(({ config, events }) => {
  const state = { buckets: new Map() };
  const scope = { runId: "run-1" };
  const blocked = new Set();
  const decisions = [];
  const outcome = (e) => {
    if (blocked.has(e.call_id)) return;
    const call = { toolName: e.tool, toolParams: e.args, toolCallId: e.call_id, config, runId: "run-1" };
    if (e.error !== undefined) call.error = e.error;
    if (e.result !== undefined) call.result = e.result;
    oc.recordToolCallOutcome(state, call);
  };
  events.forEach((e, index) => {
    if (e.type === "tool_result") return outcome(e);
    const r = oc.detectToolCallLoop(state, e.tool, e.args, config, scope);
    if (r.stuck && r.level === "critical") {
      blocked.add(e.call_id);
      decisions.push([index, "block", r.detector, r.count, true]);
      return;
    }
    if (r.stuck) {
      const key = `run-1:${r.warningKey ?? `${r.detector}:${e.tool}`}`;
      decisions.push([index, "warning", r.detector, r.count, shouldEmit(state, key, r.count)]);
    }
    if (config?.enabled !== false) oc.recordToolCall(state, e.tool, e.args, e.call_id, config, scope);
    if (e.result !== undefined || e.error !== undefined) outcome(e);
  });
  return decisions;
});
process.stdout.write(JSON.stringify(out));
"""
)

_TOOLS = ["read", "exec", "process", "command_status", "web_fetch"]
_ARGS: list[Any] = [
    {"path": "a.txt"}, {"path": "b.txt"}, {"action": "poll", "sessionId": "s1"}, {"action": "log", "sessionId": "s1"},
    {"cmd": "ls", "n": 1.0}, {"n": 1}, [], None, "x",
]  # fmt: skip
_RESULTS: list[Any] = [
    {"content": [{"type": "text", "text": "same"}], "details": {"ok": True}},
    {"content": [{"type": "text", "text": "other"}]},
    {"details": {"status": "running", "tail": "t"}},
    {"details": {"status": "completed", "exitCode": 0, "aggregated": "done"}},
    {"details": {"status": "blocked", "deniedReason": "tool-loop"}},
    "plain",
]
_ERRORS = ["Unknown tool: grep", "Tool write not found", "boom"]


def _config(rng: random.Random) -> dict[str, Any]:
    def threshold() -> Any:
        return rng.choice([1, 2, 3, 4, 5, 6, 8, 0, -1, 2.5, "3", None])

    config: dict[str, Any] = {"enabled": rng.random() < 0.9}
    for key in ("historySize", "warningThreshold", "criticalThreshold", "unknownToolThreshold"):
        if rng.random() < 0.8:
            config[key] = threshold()
    if rng.random() < 0.6:
        config["globalCircuitBreakerThreshold"] = rng.choice([3, 5, 7, 10, 0, None])
    if rng.random() < 0.4:
        names = ("genericRepeat", "knownPollNoProgress", "pingPong")
        config["detectors"] = {name: rng.random() < 0.7 for name in names if rng.random() < 0.7}
    return {k: v for k, v in config.items() if v is not None}


def _run(rng: random.Random) -> dict[str, Any]:
    """One run: bursts of one call, alternations of two, results inline, late, out of order or never."""
    tools = rng.sample(_TOOLS, 3)
    args = rng.sample(range(len(_ARGS)), 3)
    events: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    number = 0

    def random_outcome() -> dict[str, Any]:
        pick = rng.random()
        if pick < 0.15:
            return {"error": rng.choice(_ERRORS)}
        if pick < 0.85:
            return {"result": rng.choice(_RESULTS[:4] if rng.random() < 0.8 else _RESULTS)}
        return {}

    def call(tool: str, arg: int, stuck: dict[str, Any]) -> None:
        """A call whose outcome is mostly the burst's own (no progress), else any."""
        nonlocal number
        number += 1
        event: dict[str, Any] = {"type": "tool_call", "tool": tool, "args": _ARGS[arg], "call_id": f"c{number}"}
        outcome = stuck if rng.random() < 0.7 else random_outcome()
        if outcome and rng.random() < 0.6:
            event.update(outcome)
        elif outcome:
            pending.append(
                {"type": "tool_result", "tool": tool, "args": _ARGS[arg], "call_id": f"c{number}", **outcome}
            )
        events.append(event)
        if pending and rng.random() < 0.5:
            events.append(pending.pop(rng.randrange(len(pending))))

    for _ in range(rng.randint(2, 8)):
        if rng.random() < 0.5:
            tool, arg, stuck = rng.choice(tools), rng.choice(args), random_outcome()
            for _ in range(rng.randint(1, 12)):
                call(tool, arg, stuck)
        else:
            pair = [(rng.choice(tools), rng.choice(args), random_outcome()) for _ in range(2)]
            for i in range(rng.randint(2, 14)):
                call(*pair[i % 2])
    events.extend(pending)
    return {"config": _config(rng), "events": events}


def _ours(run: dict[str, Any]) -> list[list[Any]]:
    """The core's decisions, in the driver's shape; publication only where the two rules are one."""
    config, _ = resolve_loop_config(run["config"], None)
    state = None
    decisions: list[list[Any]] = []
    for index, e in enumerate(run["events"]):
        outcome = None
        if "error" in e:
            outcome = Outcome(error=e["error"])
        elif "result" in e:
            outcome = Outcome(result=e["result"])
        event = ToolEvent(e["type"], "run-1", e["tool"], e["call_id"], e["args"], None, outcome)
        state, made = apply(state, event, config)
        decisions.extend([index, d.decision, d.detector, d.count, d.published] for d in made)
    return decisions


def test_random_runs_decide_as_openclaw_s_own_detector(tmp_path: Path) -> None:
    rng = random.Random(20261207)
    runs = [_run(rng) for _ in range(400)]
    theirs = run_on_dist(_DRIVER, runs, tmp_path)
    differ = []
    for i, (run, their) in enumerate(zip(runs, theirs, strict=True)):
        ours = _ours(run)
        if resolve_loop_config(run["config"], None)[0].warning_threshold != 10:
            ours, their = [d[:4] for d in ours], [d[:4] for d in their]
        if ours != their:
            differ.append((i, run["config"], ours, their))
    assert not differ, f"{len(differ)} of {len(runs)} runs differ from openclaw@{OPENCLAW_VERSION}: {differ[:2]}"
    kinds = {(d[1], d[2]) for their in theirs for d in their}
    assert len(kinds) >= 8, kinds  # blocks and warnings of most detectors, not one kind over and over
    assert sum(len(t) for t in theirs) > 1000
