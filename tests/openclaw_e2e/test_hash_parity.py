"""loopwatch's call and outcome hashes against the real OpenClaw's, call for call (run with ``make test-openclaw``).

The detectors compare hashes: two calls are "the same" when OpenClaw's history records the same ``argsHash``,
two results "the same" when it records the same ``resultHash``. Thousands of seeded random calls (JSON values
with JavaScript's number, key-order and whitespace edges, exec / process / send / write results, errors) go
through the installed package's own ``recordToolCall`` and ``recordToolCallOutcome`` under Node, and what its
history records is compared with

* the core (:func:`streams.detection.args_hash` and the hash_outcome of the version's line), for every call
  the wire can carry raw (no lone surrogates, which the decoder refuses, and no null result, which the schema
  refuses), and
* the bridge plugin's own hashing (``deploy/openclaw-plugin/lib/``), which a gateway uses for every call, the
  others included.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from streams.detection import MISSING, Outcome, args_hash, gen9_outcome, outcome
from tests.openclaw_e2e.install import E2E_MARKS, LOOP_DETECTION_EXPORTS, OPENCLAW_VERSION, PLUGIN_DIR, run_on_dist

pytestmark = E2E_MARKS

GEN9 = tuple(int(p) for p in OPENCLAW_VERSION.split(".")[:2]) >= (2026, 8)

# Finds the dist module that records tool calls, then records each case on a fresh history and prints what it
# holds next to what the plugin computes.
_DRIVER = (
    LOOP_DETECTION_EXPORTS
    + r"""
import { readFileSync } from "node:fs";
import { join } from "node:path";
const [dist, inputsPath] = process.argv.slice(2);
const { plugin, cases } = JSON.parse(readFileSync(inputsPath, "utf8"));
const oc = await loopDetection(dist);
if (!oc?.recordToolCall || !oc?.recordToolCallOutcome) throw new Error("recordToolCall not found in " + dist);
const outcome = await import(join(plugin, "outcome.mjs"));
const outcome9 = await import(join(plugin, "outcome2026_9.mjs"));
const parse = (text) => (text === null ? undefined : JSON.parse(text));
const out = cases.map((c) => {
  const state = {};
  const params = parse(c.params);
  const error = parse(c.error);
  const result = parse(c.result);
  oc.recordToolCall(state, c.tool, params, "call-1", {}, undefined);
  const call = { toolName: c.tool, toolParams: params, toolCallId: "call-1", config: {} };
  if (error !== undefined) call.error = error;
  if (result !== undefined) call.result = result;
  oc.recordToolCallOutcome(state, call);
  const r = state.toolCallHistory.at(-1);
  const hash = c.gen9 ? outcome9.hashOutcome2026_9 : outcome.hashOutcome;
  const p = hash(c.tool, params, result, error);
  const theirs = [r.argsHash, r.resultHash ?? null, r.unknownToolName ?? null];
  const plugins = [c.tool + ":" + outcome.argsDigest(params), p.resultHash, p.unknownToolName];
  if (c.gen9) {
    theirs.push(r.failureIdentityHash ?? null, r.noProgress === true, r.outcomeKind === "tool-loop-veto");
    plugins.push(p.failureHash, p.noProgress, p.veto);
  }
  return { theirs, plugin: plugins };
});
process.stdout.write(JSON.stringify(out));
"""
)

_CHARS = [
    *"abZ0 \t\n\"\\/<", "\u00a0", "\u2028", "\ufeff", "\u0085", "\u00e9", "\uffff", "\U0001f600", "\U00010000",
    "\x00", "\x1f", "\x7f", "\u212a",
]  # fmt: skip
_LONE = ["\ud800", "\udfff", "\ud83d"]
_NUMBERS = [
    "0", "-0", "1", "-1", "1.0", "1.5", "0.1", "1e21", "1e-7", "1E+2", "123456789012345678901234567890",
    "9007199254740993", "5e-324", "1.7976931348623157e308", "-2.5e-10", "100000000000000000000", "12.340",
]  # fmt: skip
_KEYS = ["a", "b", "A", "_", "action", "status", "id", "text", "\U0001f600", "\uffff", "é", "", "10", "2",
         "__proto__", "messageId", "ts"]  # fmt: skip
_TOOLS = ["exec", "process", "command_status", "message", "sessions_send", "read", "web_fetch", "write"]
_STATUSES = ["running", "completed", "failed", "approval-pending", "approval-unavailable", "blocked", "error"]
_DETAIL_KEYS = [
    "exitCode", "exitSignal", "aggregated", "tail", "timedOut", "totalLines", "totalChars", "truncated", "reason",
    "host", "command", "warningText", "deniedReason", "messageId", "pid", "durationMs", "id", "text", "direction",
    "changed",
]  # fmt: skip
_ERRORS = [
    "Unknown tool: grep", "unknown tool 'Foo.Bar'", "Tool write not found", 'tool "x" is not available', "boom",
    "", "   ", "Unknown tool:", "UNKNOWN TOOL: \u212aelvin", "failed after 3 retries in 250ms",
]  # fmt: skip
_WRAPPED = '<<<EXTERNAL_UNTRUSTED_CONTENT id="{0}">>>\nbody {1}\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{0}">>>'


class _Cases:
    """Seeded random cases as JSON texts, so that Node and Python parse the very same input."""

    def __init__(self, seed: int, lone: bool) -> None:
        self.rng = random.Random(seed)
        self.chars = _CHARS + (_LONE if lone else [])

    def text(self, most: int = 6) -> str:
        rng = self.rng
        if rng.random() < 0.05:
            ids = ["".join(rng.choice("0123456789abcdef") for _ in range(16)) for _ in range(2)]
            return _WRAPPED.format(rng.choice(ids), rng.choice(["x", "pid 42", "2026-12-07T01:02:03Z"]))
        return "".join(rng.choice(self.chars) for _ in range(rng.randint(0, most)))

    def number(self) -> str:
        rng = self.rng
        if rng.random() < 0.6:
            return rng.choice(_NUMBERS)
        return repr(rng.uniform(-1e6, 1e6)) if rng.random() < 0.5 else str(rng.randint(-(10**20), 10**20))

    def value(self, depth: int = 0) -> str:
        rng = self.rng
        pick = rng.random()
        if depth > 3 or pick < 0.45:
            return rng.choice(["null", "true", "false", self.number(), json.dumps(self.text(), ensure_ascii=False)])
        if pick < 0.7:
            return "[" + ",".join(self.value(depth + 1) for _ in range(rng.randint(0, 4))) + "]"
        keys = [rng.choice(_KEYS) if rng.random() < 0.8 else self.text(4) for _ in range(rng.randint(0, 5))]
        return "{" + ",".join(json.dumps(k) + ":" + self.value(depth + 1) for k in keys) + "}"

    def params(self, tool: str) -> str | None:
        rng = self.rng
        if rng.random() < 0.05:
            return None  # undefined arguments
        if tool == "process" and rng.random() < 0.7:
            return json.dumps({"action": rng.choice(["poll", "log", "kill", 1]), "sessionId": self.text(3)})
        if tool == "message" and rng.random() < 0.7:
            return json.dumps({"action": rng.choice(["send", "read", "reply", "poll"]), "to": self.text(2)})
        return self.value()

    def result(self) -> str:
        rng = self.rng
        if rng.random() < 0.15:
            return self.value()
        details: dict[str, Any] = {}
        if rng.random() < 0.8:
            details["status"] = rng.choice(_STATUSES)
        for key in _DETAIL_KEYS:
            if rng.random() < 0.2:
                choices = [json.loads(self.number()), self.text(), True, False, None, "tool-loop", 0, 1]
                details[key] = rng.choice(choices)
        body: dict[str, Any] = {}
        if rng.random() < 0.8:
            body["details"] = details if rng.random() < 0.9 else rng.choice([[], "x", None])
        if rng.random() < 0.8:
            body["content"] = [
                {"type": rng.choice(["text", "image", 1]), "text": rng.choice([self.text(8), 5, None])}
                for _ in range(rng.randint(0, 3))
            ]
        return json.dumps(body, ensure_ascii=False)

    def case(self) -> dict[str, Any]:
        rng = self.rng
        tool = rng.choice(_TOOLS)
        error = result = None
        pick = rng.random()
        if pick < 0.25:
            error = json.dumps(rng.choice(_ERRORS) + (self.text(3) if rng.random() < 0.3 else ""))
        elif pick < 0.95:
            result = self.result()
        return {"tool": tool, "params": self.params(tool), "error": error, "result": result, "gen9": GEN9}


def _ours(case: dict[str, Any]) -> list[Any]:
    """What the core records for a case, in the driver's order."""
    args = MISSING if case["params"] is None else json.loads(case["params"])
    if case["error"] is not None:
        given: Outcome | None = Outcome(error=json.loads(case["error"]))
    elif case["result"] is not None:
        given = Outcome(result=json.loads(case["result"]))
    else:
        given = None
    signature = args_hash(case["tool"], args)
    if not GEN9:
        return [signature, *outcome.hash_outcome(case["tool"], args, given)]
    hashed = gen9_outcome.hash_outcome(case["tool"], args, given)
    return [signature, hashed.result, hashed.unknown, hashed.failure, hashed.no_progress, hashed.veto]


def _compare(tmp_path: Path, seed: int, count: int, lone: bool) -> tuple[int, int]:
    source = _Cases(seed, lone)
    cases = [source.case() for _ in range(count)]
    answers = run_on_dist(_DRIVER, {"plugin": str(PLUGIN_DIR / "lib"), "cases": cases}, tmp_path)
    plugin_differs = [(c, a) for c, a in zip(cases, answers, strict=True) if a["plugin"] != a["theirs"]]
    assert not plugin_differs, f"{len(plugin_differs)} of {count} differ (plugin): {plugin_differs[:3]}"
    raw = [(c, a) for c, a in zip(cases, answers, strict=True) if not lone and c["result"] != "null"]
    core_differs = [(c, a["theirs"], ours) for c, a in raw if (ours := _ours(c)) != a["theirs"]]
    assert not core_differs, f"{len(core_differs)} of {len(raw)} differ (core): {core_differs[:3]}"
    return len(raw), len({tuple(a["theirs"][1:3]) for a in answers})


def test_calls_and_outcomes_hash_as_openclaw_s_own_history_records_them(tmp_path: Path) -> None:
    checked, distinct = _compare(tmp_path, seed=20261207, count=6000, lone=False)
    assert checked > 5000 and distinct > 3000  # the cases reach the rules, not one hash over and over


def test_lone_surrogates_hash_as_openclaw_s_own(tmp_path: Path) -> None:
    """Strings cut inside a surrogate pair (a truncated output): JSON.stringify writes the half as ``\\udxxx``.
    The plugin hashes them on the gateway (the decoder refuses them raw), so only the plugin is compared."""
    _compare(tmp_path, seed=7, count=2000, lone=True)
