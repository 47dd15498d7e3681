// Enforcement mapping: warning -> note, block -> blocked call signature per run, abort -> abort run.
import { test } from "node:test";
import assert from "node:assert/strict";

import { appendNotes, BoundedMap, Enforcement, mapVerdict, startVerdictConsumer } from "../lib/enforcer.mjs";
import { silentLogger } from "./helpers.mjs";

const SIG = "exec:" + "a".repeat(64);

let verdictCounter = 0;

function verdict(overrides = {}) {
  return {
    verdict_id: String(++verdictCounter).padStart(32, "0"),
    decision: "block",
    detector: "generic_repeat",
    count: 20,
    threshold: 20,
    gateway_id: "gw-1",
    agent_id: "main",
    session_id: "sess-1",
    run_id: "run-1",
    tool: "exec",
    call_id: "call-21",
    event_id: "ev-21",
    paired_tool: null,
    message: "CRITICAL: exec called 20 times with identical arguments and identical outcomes.",
    source: { topic: "loopwatch.events", partition: 0, offset: 41 },
    event_ts: 1,
    config_hash: "x",
    version: 1,
    ...overrides,
  };
}

const lookupAll = () => ({ signature: SIG });

test("mapVerdict: each decision maps to its action, keyed by scope key", () => {
  assert.deepEqual(mapVerdict(verdict({ decision: "warning", message: "WARNING: w" }), { gatewayId: "gw-1", lookup: lookupAll }), {
    kind: "note", key: "run-1", text: "WARNING: w",
  });
  assert.deepEqual(mapVerdict(verdict(), { gatewayId: "gw-1", lookup: lookupAll }), {
    kind: "block", key: "run-1", signature: SIG, reason: verdict().message,
  });
  assert.deepEqual(mapVerdict(verdict({ decision: "abort", detector: "compaction_loop_persisted", message: "CRITICAL: a" }), { gatewayId: "gw-1" }), {
    kind: "abort", key: "run-1", sessionId: "sess-1", reason: "CRITICAL: a",
  });
});

test("mapVerdict: scope key is the trimmed run id, else the session id", () => {
  const lookup = lookupAll;
  assert.equal(mapVerdict(verdict({ run_id: " run-9\u3000" }), { gatewayId: "gw-1", lookup }).key, "run-9");
  assert.equal(mapVerdict(verdict({ run_id: null }), { gatewayId: "gw-1", lookup }).key, "sess-1");
  assert.equal(mapVerdict(verdict({ run_id: "  " }), { gatewayId: "gw-1", lookup }).key, "sess-1");
});

test("mapVerdict: other gateways, unknown decisions, unknown calls and garbage are ignored", () => {
  assert.deepEqual(mapVerdict(verdict({ gateway_id: "gw-2" }), { gatewayId: "gw-1", lookup: lookupAll }), { kind: "ignore", reason: "other-gateway" });
  assert.equal(mapVerdict(verdict({ decision: "explode" }), { gatewayId: "gw-1", lookup: lookupAll }).reason, "unknown-decision");
  assert.equal(mapVerdict(verdict(), { gatewayId: "gw-1", lookup: () => undefined }).reason, "unknown-call");
  assert.equal(mapVerdict(null, { gatewayId: "gw-1" }).reason, "not-object");
  assert.equal(mapVerdict([1], { gatewayId: "gw-1" }).reason, "not-object");
  assert.equal(mapVerdict(verdict({ run_id: null, session_id: "" }), { gatewayId: "gw-1", lookup: lookupAll }).reason, "no-scope");
});

test("block: the remembered call signature is blocked for that run only", () => {
  const e = new Enforcement({ gatewayId: "gw-1", logger: silentLogger });
  e.rememberCall("ev-21", "run-1", "call-21", SIG);
  assert.equal(e.check("run-1", SIG), null, "nothing blocked before a verdict");
  assert.equal(e.apply(verdict()).kind, "block");
  assert.deepEqual(e.check("run-1", SIG), { block: true, blockReason: verdict().message });
  assert.equal(e.check("run-1", "exec:" + "b".repeat(64)), null, "other arguments still run");
  assert.equal(e.check("run-2", SIG), null, "other runs are unaffected");
  e.forgetRun("run-1");
  assert.equal(e.check("run-1", SIG), null);
});

test("block: found by call id when the event id is unknown", () => {
  const e = new Enforcement({ gatewayId: "gw-1" });
  e.rememberCall("ev-x", "run-1", "call-21", SIG);
  assert.equal(e.apply(verdict({ event_id: "ev-other" })).kind, "block");
  assert.ok(e.check("run-1", SIG));
  const e2 = new Enforcement({ gatewayId: "gw-1" });
  assert.equal(e2.apply(verdict()).reason, "unknown-call");
  assert.equal(e2.stats.ignored, 1);
});

test("abort: aborts the session now and blocks every later call of the run", async () => {
  const aborted = [];
  const e = new Enforcement({ gatewayId: "gw-1", abortRun: (sid, reason) => aborted.push([sid, reason]) });
  e.apply(verdict({ decision: "abort", detector: "compaction_loop_persisted", message: "CRITICAL: persisted" }));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(aborted, [["sess-1", "CRITICAL: persisted"]]);
  assert.deepEqual(e.check("run-1", "read:" + "c".repeat(64), "sess-1"), { block: true, blockReason: "CRITICAL: persisted" });
  assert.equal(e.check("run-2", "read:" + "c".repeat(64)), null);
});

test("abort: never asks the runtime to abort with an empty session id (that would abort every run)", async () => {
  const calls = [];
  const e = new Enforcement({ gatewayId: "gw-1", abortRun: (sid) => calls.push(sid) });
  e.apply(verdict({ decision: "abort", session_id: "", run_id: "run-3" }));
  e.check("run-3", SIG, "");
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls, []);
});

test("abort: a failing abort function is counted, not thrown", async () => {
  const e = new Enforcement({ gatewayId: "gw-1", logger: silentLogger, abortRun: () => { throw new Error("no sdk"); } });
  e.apply(verdict({ decision: "abort" }));
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(e.stats.abortErrors, 1);
});

test("warning: notes are kept per run, de-duplicated, bounded, and taken once", () => {
  const e = new Enforcement({ gatewayId: "gw-1", maxNotes: 2 });
  e.apply(verdict({ decision: "warning", message: "WARNING: one", verdict_id: "1" }));
  e.apply(verdict({ decision: "warning", message: "WARNING: one", verdict_id: "2" }));
  e.apply(verdict({ decision: "warning", message: "WARNING: two", verdict_id: "3" }));
  e.apply(verdict({ decision: "warning", message: "WARNING: three", verdict_id: "4" }));
  assert.deepEqual(e.takeNotes("run-2"), []);
  assert.deepEqual(e.takeNotes("run-1"), ["WARNING: one", "WARNING: two"]);
  assert.deepEqual(e.takeNotes("run-1"), []);
});

test("a re-delivered verdict (same verdict_id) is applied once", () => {
  const e = new Enforcement({ gatewayId: "gw-1" });
  e.apply(verdict({ decision: "warning", verdict_id: "same", message: "WARNING: x" }));
  assert.equal(e.apply(verdict({ decision: "warning", verdict_id: "same", message: "WARNING: x" })).reason, "duplicate");
  assert.equal(e.stats.duplicates, 1);
  assert.equal(e.stats.verdicts, 1);
});

test("appendNotes adds one text part and keeps the rest of the result", () => {
  const result = { content: [{ type: "text", text: "out" }], details: { status: "completed" } };
  const out = appendNotes(result, ["WARNING: a", "WARNING: b"]);
  assert.deepEqual(out.details, result.details);
  assert.deepEqual(out.content, [{ type: "text", text: "out" }, { type: "text", text: "[loopwatch] WARNING: a\nWARNING: b" }]);
  assert.equal(result.content.length, 1, "input not mutated");
  assert.deepEqual(appendNotes(undefined, ["x"]).content, [{ type: "text", text: "[loopwatch] x" }]);
  assert.equal(appendNotes(result, []), result);
});

test("BoundedMap evicts the oldest insertion", () => {
  const m = new BoundedMap(2);
  m.set("a", 1).set("b", 2).set("a", 3).set("c", 4);
  assert.deepEqual([...m.keys()], ["a", "c"]);
});

test("the verdict consumer feeds this gateway's verdicts to the enforcement, skipping garbage", async () => {
  const e = new Enforcement({ gatewayId: "gw-1" });
  e.rememberCall("ev-21", "run-1", "call-21", SIG);
  let runArgs = null;
  const fake = {
    events: { CRASH: "crash" },
    on() {},
    async connect() {},
    async subscribe(opts) { this.subscribed = opts; },
    async run(opts) { runArgs = opts; },
    async disconnect() { this.disconnected = true; },
  };
  const consumer = startVerdictConsumer({ cfg: { verdictTopic: "loopwatch.verdicts" }, enforcement: e, logger: silentLogger, consumerFactory: () => fake });
  await new Promise((r) => setTimeout(r, 10));
  assert.deepEqual(fake.subscribed, { topic: "loopwatch.verdicts", fromBeginning: false });
  await runArgs.eachMessage({ message: { value: Buffer.from("not json") } });
  await runArgs.eachMessage({ message: { value: Buffer.from(JSON.stringify(verdict({ gateway_id: "gw-2" }))) } });
  await runArgs.eachMessage({ message: { value: null } });
  assert.equal(e.check("run-1", SIG), null);
  await runArgs.eachMessage({ message: { value: Buffer.from(JSON.stringify(verdict())) } });
  assert.ok(e.check("run-1", SIG));
  await consumer.stop();
  assert.ok(fake.disconnected);
});

test("the verdict consumer retries in the background when Kafka is unreachable", async () => {
  let attempts = 0;
  const failing = () => ({
    events: { CRASH: "crash" },
    on() {},
    async connect() { attempts++; throw new Error("ECONNREFUSED (fake)"); },
    async subscribe() {},
    async run() {},
    async disconnect() {},
  });
  const consumer = startVerdictConsumer({ cfg: { verdictTopic: "v" }, enforcement: new Enforcement({ gatewayId: "g" }), logger: silentLogger, consumerFactory: failing });
  await new Promise((r) => setTimeout(r, 700));
  assert.ok(attempts >= 2, `attempts=${attempts}`);
  await consumer.stop();
  const after = attempts;
  await new Promise((r) => setTimeout(r, 1200));
  assert.equal(attempts, after, "stop() ends the retries");
});

test("2026.9 second critical: its block and its abort (same detector) block the call and end the run", async () => {
  const aborted = [];
  const e = new Enforcement({ gatewayId: "gw-1", abortRun: (sid, reason) => aborted.push([sid, reason]) });
  const second = { detector: "generic_repeat", count: 21, profile: "openclaw-2026.9" };
  e.apply(verdict({ ...second, decision: "block" }));
  e.apply(verdict({ ...second, decision: "abort", message: "CRITICAL: another critical tool loop" }));
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(aborted, [["sess-1", "CRITICAL: another critical tool loop"]]);
  const reason = "CRITICAL: another critical tool loop";
  assert.deepEqual(e.check("run-1", "read:" + "d".repeat(64), "sess-1"), { block: true, blockReason: reason });
});

test("the first block and the abort of a run are one gateway log line each, naming tool, run and detector", () => {
  const lines = [];
  const logger = { ...silentLogger, info: (line) => lines.push(line) };
  const e = new Enforcement({ gatewayId: "gw-1", logger, abortRun: () => {} });
  e.rememberCall("ev-21", "run-1", "call-21", SIG);
  e.rememberCall("ev-22", "run-1", "call-22", SIG);
  e.apply(verdict());
  e.apply(verdict({ event_id: "ev-22", call_id: "call-22", count: 21 })); // the same run: no second line
  e.apply(verdict({ decision: "abort", detector: "compaction_loop_persisted", tool: "read", count: 3 }));
  e.apply(verdict({ decision: "abort", detector: "compaction_loop_persisted", tool: "read", count: 3 }));
  assert.deepEqual(lines, [
    "loopwatch-bridge: blocking repeated exec calls of run run-1 (generic_repeat, count 20)",
    "loopwatch-bridge: aborting run run-1 (compaction_loop_persisted, count 3)",
  ]);
});
