// The hook handlers: OpenClaw hook events in, event records (schemas/json/event.schema.json) out, enforcement
// decisions back.
import { test } from "node:test";
import assert from "node:assert/strict";

import { createBridge } from "../lib/bridge.mjs";
import { digest } from "../lib/canonical.mjs";
import { Enforcement } from "../lib/enforcer.mjs";
import { hashOutcome } from "../lib/outcome.mjs";
import { hashOutcome2026_9 } from "../lib/outcome2026_9.mjs";
import plugin, { bridgeStats, register, resetForTests } from "../index.mjs";
import { baseConfig, CapturingPublisher, closedPort, silentLogger } from "./helpers.mjs";

const CTX = { agentId: "ops", sessionKey: "agent:ops:main", sessionId: "sess-1", runId: "run-1" };

function setup(overrides = {}, { abortRun } = {}) {
  const cfg = baseConfig(overrides);
  const publisher = new CapturingPublisher();
  const enforcement = cfg.enforce ? new Enforcement({ gatewayId: cfg.gatewayId, abortRun, logger: silentLogger }) : null;
  let t = 1_700_000_000_000;
  const bridge = createBridge({ cfg, publisher, enforcement, logger: silentLogger, now: () => ++t });
  return { cfg, publisher, enforcement, bridge };
}

function call(bridge, { tool = "exec", params = { command: "ls" }, id = "call-1", ctx = CTX, result, error } = {}) {
  const before = bridge.beforeToolCall({ toolName: tool, params, runId: ctx.runId, toolCallId: id }, { ...ctx, toolName: tool, toolCallId: id });
  const event = { toolName: tool, params, runId: ctx.runId, toolCallId: id, durationMs: 3 };
  if (result !== undefined) event.result = result;
  if (error !== undefined) event.error = error;
  bridge.afterToolCall(event, { ...ctx, toolName: tool, toolCallId: id });
  return before;
}

const RESULT = { content: [{ type: "text", text: "file1\nfile2" }], details: { status: "completed", exitCode: 0, aggregated: "file1\nfile2", durationMs: 12 } };

test("hashOnGateway: a call yields a tool_call and a tool_result with hashes only, keyed by scope key", () => {
  const { publisher, bridge } = setup();
  const before = call(bridge, { result: RESULT });
  assert.equal(before, undefined);
  assert.equal(publisher.records.length, 2);
  const [c, r] = publisher.records;
  assert.equal(c.key, "run-1");
  assert.equal(r.key, "run-1");
  assert.deepEqual(Object.keys(c.record).sort(), ["agent_id", "args_hash", "call_id", "event_id", "gateway_id", "run_id", "session_id", "tool", "ts", "type", "version"].sort());
  assert.equal(c.record.type, "tool_call");
  assert.equal(c.record.gateway_id, "gw-test");
  assert.equal(c.record.agent_id, "ops");
  assert.equal(c.record.session_id, "sess-1");
  assert.equal(c.record.run_id, "run-1");
  assert.equal(c.record.call_id, "call-1");
  assert.equal(c.record.tool, "exec");
  assert.equal(c.record.args_hash, digest({ command: "ls" }));
  assert.equal(typeof c.record.ts, "number");
  assert.equal(r.record.type, "tool_result");
  assert.equal(r.record.args_hash, c.record.args_hash);
  assert.equal(r.record.result_hash, hashOutcome("exec", { command: "ls" }, RESULT).resultHash);
  assert.ok(!("result" in r.record) && !("args" in r.record) && !("error" in r.record));
  assert.notEqual(c.record.event_id, r.record.event_id);
  // Event ids hold base36 text (a boot time and pid), so look for the raw values as JSON strings, not as substrings.
  for (const value of [c.value, r.value]) {
    assert.ok(!value.includes("file1") && !value.includes('"ls"') && !value.includes("command"), "no raw data leaves");
  }
});

test("hashed process poll/log calls carry poll_action (loopwatch cannot see the action in a hash)", () => {
  const { publisher, bridge } = setup();
  call(bridge, { tool: "process", params: { action: "poll", sessionId: "p1" }, result: RESULT });
  call(bridge, { id: "c2", tool: "process", params: { action: "log", sessionId: "p1" }, result: RESULT });
  call(bridge, { id: "c3", tool: "process", params: { action: "list" }, result: RESULT });
  call(bridge, { id: "c4", tool: "exec", params: { action: "poll" }, result: RESULT });
  assert.deepEqual(publisher.records.map((r) => r.record.poll_action), ["poll", "poll", "log", "log", undefined, undefined, undefined, undefined]);
  const raw = setup({ hashOnGateway: false });
  call(raw.bridge, { tool: "process", params: { action: "poll" }, result: RESULT });
  assert.ok(raw.publisher.records.every((r) => !("poll_action" in r.record)), "raw args speak for themselves");
});

test("errors become error: hashes with the unknown tool name", () => {
  const { publisher, bridge } = setup();
  call(bridge, { tool: "browser_call", params: {}, error: "Unknown tool: browser" });
  const r = publisher.records[1].record;
  assert.equal(r.result_hash, "error:" + digest("Unknown tool: browser"));
  assert.equal(r.unknown_tool_name, "browser");
});

// What OpenClaw 2026.7.35 hands after_tool_call for a failed call (see lib/outcome.mjs hookOutcome): a thrown
// error as its tool adapter's error result, or (calls that never reached a tool) the agent runtime's.
const firstLine = (message) => message.trim().split(/\r?\n/)[0].trim();
const thrownPayload = (message) => ({ result: { content: [{ type: "text", text: message }], details: {} }, error: firstLine(message) });
const adapterPayload = (tool, message) => {
  const details = { status: "error", tool, error: message };
  return { result: { content: [{ type: "text", text: JSON.stringify(details, null, 2) }], details }, error: firstLine(message) };
};
const failedExec = (output, exitCode = 1) => ({
  result: { content: [{ type: "text", text: output }], details: { status: exitCode ? "failed" : "completed", exitCode, aggregated: output, durationMs: 9 } },
  error: exitCode ? output.split("\n")[0] : undefined,
});

for (const hashOnGateway of [true, false]) {
  const mode = hashOnGateway ? "hashed" : "raw";
  const outcomeOf = (r) => (hashOnGateway ? { hash: r.result_hash, unknown: r.unknown_tool_name } : { error: r.error, result: r.result });

  test(`${mode}: a returned failure is a result, not a thrown error (changing output and exit codes are progress)`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    const params = { command: "git status" };
    const payloads = [failedExec("fatal: not a git repository\nattempt 1"), failedExec("fatal: not a git repository\nattempt 2"), failedExec("fatal: not a git repository\nattempt 1", 128)];
    payloads.forEach((p, i) => call(bridge, { id: `c${i}`, params, ...p }));
    const results = publisher.records.filter((r) => r.record.type === "tool_result").map((r) => r.record);
    assert.equal(results.length, 3);
    for (const [i, r] of results.entries()) {
      assert.ok(!("error" in r), "OpenClaw's derived error field is not an outcome");
      if (hashOnGateway) assert.equal(r.result_hash, hashOutcome("exec", params, payloads[i].result).resultHash);
      else assert.deepEqual(r.result, payloads[i].result);
    }
    if (hashOnGateway) assert.equal(new Set(results.map((r) => r.result_hash)).size, 3);
  });

  test(`${mode}: an exec printing an unknown-tool message names no missing tool`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    call(bridge, { params: { command: "echo Unknown tool: grep; exit 1" }, ...failedExec("Unknown tool: grep") });
    const r = publisher.records[1].record;
    assert.ok(!("unknown_tool_name" in r) && !("error" in r), JSON.stringify(outcomeOf(r)));
  });

  test(`${mode}: a thrown error is its whole message, not OpenClaw's first line`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    const message = "Unknown tool: browser.open\n    at plugin (e2e.mjs:1)";
    call(bridge, { tool: "e2e_browser_open", params: { url: "u" }, ...adapterPayload("e2e_browser_open", message) });
    call(bridge, { id: "c2", tool: "read", params: {}, ...thrownPayload(message) });
    assert.deepEqual(publisher.records[3].record.error ?? publisher.records[3].record.result_hash, hashOnGateway ? "error:" + digest(message) : message);
    const r = publisher.records[1].record;
    if (hashOnGateway) {
      assert.equal(r.result_hash, "error:" + digest(message));
      assert.equal(r.unknown_tool_name, "browser.open");
    } else {
      assert.equal(r.error, message);
      assert.ok(!("result" in r));
    }
  });

  test(`${mode}: calls that never reached OpenClaw's tool wrapper are not published (OpenClaw records nothing)`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    // A made-up tool name and an argument-validation failure: answered before the wrapper, so no
    // before_tool_call, but after_tool_call fires.
    const unwrapped = [
      { toolName: "grep_all", params: { q: "x" }, ...thrownPayload("Tool grep_all not found") },
      { toolName: "exec", params: { cmd: 1 }, ...thrownPayload("Validation failed for tool \"exec\":\n  - command: must have required property 'command'") },
    ];
    for (let i = 0; i < 10; i++) {
      call(bridge, { id: `real-${i}`, params: { command: "ls" }, result: RESULT });
      const { toolName, ...rest } = unwrapped[i % 2];
      bridge.afterToolCall({ toolName, runId: "run-1", toolCallId: `bad-${i}`, ...rest }, { ...CTX, toolName, toolCallId: `bad-${i}` });
    }
    assert.deepEqual(new Set(publisher.records.map((r) => r.record.call_id)), new Set(Array.from({ length: 10 }, (_, i) => `real-${i}`)));
    assert.equal(bridge.stats.unrecordedCalls, 10);
    // A before_tool_call gate that crashed: OpenClaw keeps the call pending, without an outcome.
    call(bridge, { id: "gate", params: { command: "ls" }, ...thrownPayload("Tool call blocked because before_tool_call hook failed") });
    assert.deepEqual(publisher.records.at(-1).record.type, "tool_call");
  });

  test(`${mode}: the tool_result carries the arguments that ran (OpenClaw records the outcome against them)`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    bridge.beforeToolCall({ toolName: "process", params: { action: "poll", sessionId: "a" }, runId: "run-1", toolCallId: "p1" }, CTX);
    bridge.afterToolCall({ toolName: "process", params: { action: "poll", sessionId: "b" }, runId: "run-1", toolCallId: "p1", result: RESULT }, CTX);
    const [c, r] = publisher.records.map((x) => x.record);
    if (hashOnGateway) {
      assert.equal(c.args_hash, digest({ action: "poll", sessionId: "a" }));
      assert.equal(r.args_hash, digest({ action: "poll", sessionId: "b" }));
      assert.equal(r.poll_action, "poll");
    } else {
      assert.deepEqual(r.args, { action: "poll", sessionId: "b" });
    }
  });
}

// The tool-result middleware's event, as OpenClaw 2026.7.35 passes it (the context has only {runtime}).
const middlewareEvent = (tool, id, args, payload, isError = false) => ({ toolCallId: id, toolName: tool, args, isError, result: payload.result });

for (const hashOnGateway of [true, false]) {
  const mode = hashOnGateway ? "hashed" : "raw";

  test(`${mode}: the middleware publishes the outcome first; after_tool_call then publishes nothing more`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    const params = { command: "echo guard-same" };
    bridge.beforeToolCall({ toolName: "exec", params, runId: "run-1", toolCallId: "g3" }, CTX);
    // The raw result as the tool returned it (after_tool_call would show it sanitised).
    assert.equal(bridge.toolResultMiddleware(middlewareEvent("exec", "g3", params, { result: RESULT }), { runtime: "openclaw" }), undefined);
    assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call", "tool_result"]);
    const r = publisher.records[1].record;
    assert.equal(r.run_id, "run-1");
    assert.equal(r.agent_id, "ops");
    assert.equal(r.session_id, "sess-1");
    if (hashOnGateway) assert.equal(r.result_hash, hashOutcome("exec", params, RESULT).resultHash);
    else assert.deepEqual(r.result, RESULT);
    // The guard abort may keep after_tool_call from ever coming; when it does come, nothing is repeated.
    bridge.afterToolCall({ toolName: "exec", params, runId: "run-1", toolCallId: "g3", result: RESULT }, CTX);
    bridge.toolResultMiddleware(middlewareEvent("exec", "g3", params, { result: RESULT }), { runtime: "openclaw" });
    assert.equal(publisher.records.length, 2);
    assert.equal(bridge.stats.resultsFromMiddleware, 1);
  });

  test(`${mode}: the middleware tells thrown errors from returned failures like after_tool_call`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    const message = "Unknown tool: browser.open\nattempt 2";
    const cases = [
      ["t1", "e2e_browser_open", adapterPayload("e2e_browser_open", message), false, { thrown: message }],
      ["t2", "read", thrownPayload(message), true, { thrown: message }],
      ["t3", "read", thrownPayload(message), false, { result: thrownPayload(message).result }],
      ["t4", "exec", failedExec("Unknown tool: grep"), false, { result: failedExec("Unknown tool: grep").result }],
    ];
    for (const [id, tool, payload, isError] of cases) {
      bridge.beforeToolCall({ toolName: tool, params: {}, runId: "run-1", toolCallId: id }, CTX);
      bridge.toolResultMiddleware(middlewareEvent(tool, id, {}, payload, isError), { runtime: "openclaw" });
    }
    const results = publisher.records.filter((x) => x.record.type === "tool_result").map((x) => x.record);
    cases.forEach(([id, tool, , , want], i) => {
      const r = results[i];
      assert.equal(r.call_id, id);
      if (hashOnGateway) {
        assert.equal(r.result_hash, hashOutcome(tool, {}, want.result, want.thrown).resultHash, id);
      } else if (want.thrown !== undefined) {
        assert.equal(r.error, want.thrown, id);
      } else {
        assert.deepEqual(r.result, want.result, id);
      }
    });
    if (hashOnGateway) assert.deepEqual(results.map((r) => r.unknown_tool_name), ["browser.open", "browser.open", undefined, undefined]);
  });

  test(`${mode}: the middleware leaves calls it cannot place to after_tool_call`, () => {
    const { publisher, bridge } = setup({ hashOnGateway });
    // No before_tool_call (a veto, another plugin's block): no scope for the middleware.
    const veto = { content: [{ type: "text", text: "CRITICAL" }], details: { status: "blocked", deniedReason: "tool-loop" } };
    bridge.toolResultMiddleware(middlewareEvent("exec", "v1", {}, { result: veto }), { runtime: "openclaw" });
    assert.equal(publisher.records.length, 0);
    bridge.afterToolCall({ toolName: "exec", params: {}, runId: "run-1", toolCallId: "v1", result: veto }, CTX);
    assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call"]);
  });
}

test("raw mode sends args, result and error as they are", () => {
  const { publisher, bridge } = setup({ hashOnGateway: false });
  call(bridge, { result: RESULT });
  call(bridge, { id: "call-2", error: "boom" });
  const [c, r, , e] = publisher.records.map((x) => x.record);
  assert.deepEqual(c.args, { command: "ls" });
  assert.ok(!("args_hash" in c));
  assert.deepEqual(r.result, RESULT);
  assert.equal(e.error, "boom");
});

test("raw mode falls back to hashes for values JSON cannot carry faithfully", () => {
  const { publisher, bridge } = setup({ hashOnGateway: false });
  const params = { text: "lone \ud800", n: NaN };
  const result = { content: [], details: { status: undefined, x: 1 } };
  call(bridge, { params, result });
  call(bridge, { id: "call-2", params: { a: 1 }, result: null });
  const [c, r, c2, r2] = publisher.records.map((x) => x.record);
  assert.equal(c.args_hash, digest(params));
  assert.equal(r.args_hash, digest(params));
  assert.equal(r.result_hash, hashOutcome("exec", params, result).resultHash);
  assert.deepEqual(c2.args, { a: 1 });
  assert.equal(r2.result_hash, digest(null), "a null result is hashed (JSON null would mean 'no outcome')");
  // Faithful arguments stay raw next to an outcome JSON cannot carry (a poll's `exitCode: undefined`).
  const poll = { content: [{ type: "text", text: "(no new output)" }], details: { status: "running", exitCode: undefined } };
  call(bridge, { id: "call-3", tool: "process", params: { action: "poll", sessionId: "s" }, result: poll });
  const r3 = publisher.records[5].record;
  assert.deepEqual(r3.args, { action: "poll", sessionId: "s" });
  assert.equal(r3.result_hash, hashOutcome("process", { action: "poll", sessionId: "s" }, poll).resultHash);
  assert.ok(!("result" in r3) && !("args_hash" in r3));
});

test("raw payloads larger than maxEventBytes fall back to hashes", () => {
  const { publisher, bridge } = setup({ hashOnGateway: false, maxEventBytes: 2000 });
  const big = "x".repeat(5000);
  const result = { content: [{ type: "text", text: big }], details: {} };
  call(bridge, { params: { big }, result });
  const [c, r] = publisher.records;
  assert.ok(c.value.length < 2000 && r.value.length < 2000);
  assert.equal(c.record.args_hash, digest({ big }));
  assert.equal(r.record.result_hash, hashOutcome("exec", { big }, result).resultHash);
});

test("OpenClaw's own loop veto: its tool_call is published from after_tool_call, without a tool_result", () => {
  const { publisher, bridge } = setup();
  const veto = { content: [{ type: "text", text: "CRITICAL" }], details: { status: "blocked", deniedReason: "tool-loop" } };
  // before_tool_call is not called for calls OpenClaw's detector blocked.
  bridge.afterToolCall({ toolName: "exec", params: { command: "ls" }, runId: "run-1", toolCallId: "c9", result: veto }, CTX);
  assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call"]);
  assert.equal(publisher.records[0].record.call_id, "c9");
  assert.equal(publisher.records[0].record.args_hash, digest({ command: "ls" }));
  assert.equal(bridge.stats.vetoedCalls, 1);
  // OpenClaw 2026.7.35 also reports the veto as the call's error: still a veto, not an error outcome.
  bridge.afterToolCall({ toolName: "exec", params: { command: "ls" }, runId: "run-1", toolCallId: "c9b", result: veto, error: "CRITICAL" }, CTX);
  assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call", "tool_call"]);
  assert.equal(bridge.stats.vetoedCalls, 2);
  // Had before_tool_call published it, it is not published twice.
  call(bridge, { id: "c10", result: veto });
  assert.equal(publisher.records.length, 3);
});

test("an absent result publishes no tool_result; a plugin veto is hashed", () => {
  const { publisher, bridge } = setup();
  call(bridge, { id: "c10" });
  assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call"]);
  assert.equal(bridge.stats.skippedNoOutcome, 1);
  // A plugin veto is hashed (repeated identical denials escalate), also when another plugin's
  // before_tool_call blocked first and ours never ran: OpenClaw recorded that call.
  const blocked = { content: [], details: { status: "blocked", deniedReason: "plugin-before-tool-call" } };
  call(bridge, { id: "c11", params: {}, result: blocked });
  bridge.afterToolCall({ toolName: "exec", params: {}, runId: "run-1", toolCallId: "c12", result: blocked }, CTX);
  const records = publisher.records.slice(1).map((r) => r.record);
  assert.deepEqual(records.map((r) => [r.type, r.call_id]), [["tool_call", "c11"], ["tool_result", "c11"], ["tool_call", "c12"], ["tool_result", "c12"]]);
  assert.equal(records[3].result_hash, hashOutcome("exec", {}, blocked).resultHash);
});

test("scope key: trimmed run id, else the session id; agent defaults to main", () => {
  const { publisher, bridge } = setup();
  call(bridge, { ctx: { sessionId: "sess-2", runId: " run-7\u00a0" }, result: RESULT });
  call(bridge, { id: "c2", ctx: { sessionKey: "agent:main:x", runId: "  " }, result: RESULT });
  const [a, , b] = publisher.records;
  assert.equal(a.key, "run-7");
  assert.equal(a.record.run_id, " run-7\u00a0", "run_id is sent as OpenClaw reports it");
  assert.equal(a.record.agent_id, "main");
  assert.equal(b.key, "agent:main:x", "session key stands in for a missing session id");
  assert.equal(b.record.session_id, "agent:main:x");
});

test("calls without any session identity are skipped (OpenClaw does not detect them either)", () => {
  const { publisher, bridge } = setup();
  call(bridge, { ctx: { runId: "r" }, result: RESULT });
  assert.equal(publisher.records.length, 0);
  assert.equal(bridge.stats.skippedNoSession, 2);
});

test("compaction: stamped with the session's current run id from the tool hooks", () => {
  const { publisher, bridge } = setup();
  call(bridge, { result: RESULT });
  bridge.afterCompaction({ messageCount: 4, compactedCount: 10, tokenCount: 100 }, { sessionId: "sess-1", sessionKey: CTX.sessionKey, agentId: "ops" });
  const comp = publisher.records[2];
  assert.equal(comp.key, "run-1");
  assert.deepEqual(
    { type: comp.record.type, run_id: comp.record.run_id, session_id: comp.record.session_id, agent_id: comp.record.agent_id },
    { type: "compaction_retry", run_id: "run-1", session_id: "sess-1", agent_id: "ops" },
  );
});

test("compaction: a rotated session id (previousSessionId) and model_call_started also find the run", () => {
  const { publisher, bridge } = setup();
  bridge.modelCallStarted({ runId: "run-5", callId: "m1", sessionId: "old", provider: "p", model: "m" }, {});
  bridge.afterCompaction({ messageCount: -1, compactedCount: -1, previousSessionId: "old" }, { sessionId: "new" });
  assert.equal(publisher.records.length, 1);
  assert.equal(publisher.records[0].key, "run-5");
  assert.equal(publisher.records[0].record.session_id, "new");
});

test("compaction: the SDK's own auto-compaction (ctx without sessionId) never arms the guard: not published", () => {
  const { publisher, bridge } = setup();
  call(bridge, { result: RESULT });
  bridge.afterCompaction({ messageCount: 12, compactedCount: 1, sessionFile: "/x" }, { sessionKey: CTX.sessionKey });
  assert.equal(publisher.records.length, 2);
  assert.equal(bridge.stats.compactionsIgnored, 1);
});

test("compaction: without a known current run nothing is published", () => {
  const { publisher, bridge } = setup();
  bridge.afterCompaction({ messageCount: 1, compactedCount: 1 }, { sessionId: "unknown" });
  assert.equal(publisher.records.length, 0);
  assert.equal(bridge.stats.compactionsWithoutRun, 1);
});

test("a dispatch seen twice (register() ran in two modes) publishes once", () => {
  const { publisher, bridge } = setup();
  const params = { command: "ls" };
  const ev = { toolName: "exec", params, runId: "run-1", toolCallId: "c1" };
  bridge.beforeToolCall(ev, CTX);
  bridge.beforeToolCall({ ...ev }, CTX);
  const done = { ...ev, result: RESULT };
  bridge.afterToolCall(done, CTX);
  bridge.afterToolCall({ ...done }, CTX);
  const comp = { messageCount: 1, compactedCount: 1 };
  bridge.afterCompaction(comp, CTX);
  bridge.afterCompaction({ ...comp }, CTX);
  assert.deepEqual(publisher.records.map((r) => r.record.type), ["tool_call", "tool_result", "compaction_retry"]);
  assert.equal(bridge.stats.duplicateDispatches, 3);
  // Identical arguments in a new call (new params object) are a new call.
  bridge.beforeToolCall({ ...ev, params: { command: "ls" }, toolCallId: "c2" }, CTX);
  assert.equal(publisher.records.length, 4);
});

test("handlers never throw, whatever they are given", () => {
  const { bridge } = setup({ enforce: true });
  const throwingParams = new Proxy({}, { ownKeys() { throw new Error("hostile"); } });
  for (const args of [[undefined, undefined], [null, null], [{}, {}], [{ toolName: 5 }, { sessionId: 7 }], [{ toolName: "x", params: throwingParams }, CTX]]) {
    assert.doesNotThrow(() => bridge.beforeToolCall(...args));
    assert.doesNotThrow(() => bridge.afterToolCall(...args));
    assert.doesNotThrow(() => bridge.afterCompaction(...args));
    assert.doesNotThrow(() => bridge.modelCallStarted(...args));
    assert.doesNotThrow(() => bridge.toolResultMiddleware(...args));
  }
  assert.ok(bridge.stats.hookErrors >= 1);
});

test("enforce: a block verdict blocks the same signature in that run; other args and runs still run", () => {
  const { publisher, bridge, enforcement } = setup({ enforce: true });
  assert.equal(call(bridge, { result: RESULT }), undefined);
  const published = publisher.records[0].record;
  enforcement.apply({
    verdict_id: "v1", decision: "block", detector: "generic_repeat", gateway_id: "gw-test", session_id: "sess-1",
    run_id: "run-1", tool: "exec", call_id: published.call_id, event_id: published.event_id, message: "CRITICAL: stop",
  });
  assert.deepEqual(call(bridge, { id: "c2", result: RESULT }), { block: true, blockReason: "CRITICAL: stop" });
  assert.equal(call(bridge, { id: "c3", params: { command: "pwd" }, result: RESULT }), undefined);
  assert.equal(call(bridge, { id: "c4", ctx: { ...CTX, runId: "run-2" }, result: RESULT }), undefined);
  // The blocked call is still published (loopwatch mirrors OpenClaw: detect, then plugin hooks veto).
  assert.equal(publisher.records.filter((r) => r.record.type === "tool_call").length, 4);
  assert.equal(bridge.stats.blocked, 1);
});

test("enforce: abort aborts the session and blocks every later call of the run", async () => {
  const aborted = [];
  const { bridge, enforcement } = setup({ enforce: true }, { abortRun: (sid) => aborted.push(sid) });
  enforcement.apply({ verdict_id: "v2", decision: "abort", detector: "compaction_loop_persisted", gateway_id: "gw-test", session_id: "sess-1", run_id: "run-1", message: "CRITICAL: aborted" });
  const decision = call(bridge, { tool: "read", params: { path: "/x" }, result: RESULT });
  assert.deepEqual(decision, { block: true, blockReason: "CRITICAL: aborted" });
  await new Promise((r) => setImmediate(r));
  assert.ok(aborted.length >= 1 && aborted.every((s) => s === "sess-1"));
});

test("enforce: a warning verdict becomes a note on the run's next tool result, once", () => {
  const { bridge, enforcement } = setup({ enforce: true });
  call(bridge, { result: RESULT });
  enforcement.apply({ verdict_id: "v3", decision: "warning", detector: "generic_repeat", gateway_id: "gw-test", session_id: "sess-1", run_id: "run-1", message: "WARNING: looping" });
  const mwCtx = { runtime: "openclaw", sessionId: "sess-1", runId: "run-1" };
  assert.equal(bridge.toolResultMiddleware({ toolCallId: "x", toolName: "exec", args: {}, result: RESULT }, { ...mwCtx, runId: "run-2" }), undefined);
  const out = bridge.toolResultMiddleware({ toolCallId: "x", toolName: "exec", args: {}, result: RESULT }, mwCtx);
  assert.equal(out.result.content.at(-1).text, "[loopwatch] WARNING: looping");
  assert.equal(bridge.toolResultMiddleware({ toolCallId: "y", toolName: "exec", args: {}, result: RESULT }, mwCtx), undefined);
  // On OpenClaw 2026.7.35 the middleware context is only {runtime}: the tool call id finds the run.
  enforcement.apply({ verdict_id: "v5", decision: "warning", detector: "generic_repeat", gateway_id: "gw-test", session_id: "sess-1", run_id: "run-1", message: "WARNING: by call id" });
  const byId = bridge.toolResultMiddleware({ toolCallId: "call-1", toolName: "exec", args: {}, result: RESULT }, { runtime: "openclaw" });
  assert.equal(byId.result.content.at(-1).text, "[loopwatch] WARNING: by call id");
  // Without a known call id, the context's session (and its current run) is used.
  enforcement.apply({ verdict_id: "v4", decision: "warning", detector: "generic_repeat", gateway_id: "gw-test", session_id: "sess-1", run_id: "run-1", message: "WARNING: again" });
  assert.ok(bridge.toolResultMiddleware({ result: RESULT }, { runtime: "openclaw", sessionKey: CTX.sessionKey, sessionId: "sess-1" }));
});

test("without enforce nothing is ever blocked and the middleware changes no result", () => {
  const { bridge } = setup();
  assert.equal(call(bridge, { result: RESULT }), undefined);
  assert.equal(bridge.toolResultMiddleware({ result: RESULT }, { sessionId: "sess-1", runId: "run-1" }), undefined);
});

test("register(): hooks in every mode but cli-metadata/setup-only, one module-global runtime", async () => {
  const port = await closedPort();
  const registrations = [];
  const makeApi = (mode) => ({
    registrationMode: mode,
    pluginConfig: { brokers: [`127.0.0.1:${port}`], gatewayId: "gw-reg", enforce: true, maxBuffer: 5 },
    runtime: { version: "2026.9.6" }, // the host's version reaches the (frozen) config: the bridge stays enabled
    logger: silentLogger,
    on: (name, handler, opts) => registrations.push({ mode, name, handler, opts }),
    registerAgentToolResultMiddleware: (handler, opts) => registrations.push({ mode, name: "middleware", handler, opts }),
  });
  assert.equal(plugin.id, "loopwatch-bridge");
  assert.equal(typeof plugin.register, "function");
  register(makeApi("cli-metadata"));
  register(makeApi("setup-only"));
  assert.equal(registrations.length, 0);
  register(makeApi("full"));
  register(makeApi("discovery"));
  const names = (mode) => registrations.filter((r) => r.mode === mode).map((r) => r.name).sort();
  const expected = [
    "after_compaction", "after_tool_call", "before_message_write", "before_tool_call", "gateway_start", "gateway_stop",
    "middleware", "model_call_started", "model_call_started",
  ];
  assert.deepEqual(names("full"), expected);
  assert.deepEqual(names("discovery"), expected);
  assert.deepEqual(registrations.find((r) => r.name === "middleware").opts, { runtimes: ["openclaw"] });
  // Both registrations' hooks fire for one dispatch: published once; the broker is down: nothing fails.
  const before = registrations.filter((r) => r.name === "before_tool_call");
  const ev = { toolName: "exec", params: { command: "ls" }, runId: "r1", toolCallId: "c1" };
  const started = process.hrtime.bigint();
  for (const r of before) assert.equal(r.handler(ev, { sessionId: "s1", runId: "r1" }), undefined);
  assert.ok(Number(process.hrtime.bigint() - started) / 1e6 < 250, "hooks never wait on Kafka (a connect attempt takes seconds)");
  const stats = bridgeStats();
  assert.equal(stats.bridge.toolCalls, 1);
  assert.equal(stats.bridge.duplicateDispatches, 1);
  assert.equal(stats.publisher.enqueued, 1);
  await resetForTests();
  assert.equal(bridgeStats(), null);
});

test("register(): an invalid config disables the plugin with an error instead of throwing", async () => {
  const errors = [];
  const api = { registrationMode: "full", pluginConfig: { brokers: [], bogus: 1 }, logger: { ...silentLogger, error: (m) => errors.push(m) }, on: () => assert.fail("no hooks") };
  assert.doesNotThrow(() => register(api));
  assert.match(errors[0], /invalid config/);
  await resetForTests();
});

test("register(): a typo key disables only the plugin, with one error line naming the key it resembles", async () => {
  const lines = [];
  const logger = { info: (m) => lines.push(["info", m]), warn: (m) => lines.push(["warn", m]), error: (m) => lines.push(["error", m]) };
  const api = { registrationMode: "full", pluginConfig: { gatewayId: "gw", enfroce: true }, logger, on: () => assert.fail("no hooks") };
  assert.doesNotThrow(() => register(api));
  assert.doesNotThrow(() => register({ ...api, registrationMode: "discovery" }));
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.equal(lines[0][0], "error");
  assert.match(lines[0][1], /^loopwatch-bridge disabled: invalid config: unknown config key "enfroce" \(did you mean "enforce"\?\); /);
  assert.match(lines[0][1], /plugins\.entries\.loopwatch-bridge\.config/);
  assert.equal(bridgeStats(), null);
  await resetForTests();
});

test("every record carries the host's OpenClaw version when it is known (openclaw_version)", () => {
  const { publisher, bridge } = setup({ openclawVersion: "2026.9.6" });
  call(bridge, { result: RESULT });
  bridge.afterCompaction({}, { sessionId: "sess-1", sessionKey: "agent:ops:main", agentId: "ops" });
  assert.ok(publisher.records.length >= 2);
  for (const { record } of publisher.records) assert.equal(record.openclaw_version, "2026.9.6");
  const plain = setup();
  call(plain.bridge, { result: RESULT });
  for (const { record } of plain.publisher.records) assert.ok(!("openclaw_version" in record));
});

test("on a 2026.9 host: 2026.9 outcome hashes, failure_hash / no_progress, and the warning note is not the outcome", () => {
  const { publisher, bridge } = setup({ openclawVersion: "2026.9.6" });
  const failed = (text) => ({ content: [{ type: "text", text }], details: { status: "failed", exitCode: 1, aggregated: text } });
  call(bridge, { id: "c1", result: failed("boom at 10:00:01 (attempt 1)") });
  call(bridge, { id: "c2", tool: "write", params: { path: "/a" }, result: { content: [{ type: "text", text: "same" }], details: { changed: false } } });
  const note = { type: "text", text: "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop if you are not making progress.]" };
  const plain = { content: [{ type: "text", text: "x" }], details: { ok: true } };
  call(bridge, { id: "c3", tool: "read", params: { p: 1 }, result: { ...plain, content: [...plain.content, note] } });
  const results = publisher.records.filter((r) => r.record.type === "tool_result").map((r) => r.record);
  assert.equal(results[0].failure_hash, hashOutcome2026_9("exec", { command: "ls" }, failed("boom at 10:00:01 (attempt 1)")).failureHash);
  assert.match(results[0].failure_hash, /^[0-9a-f]{64}$/);
  assert.equal(results[1].no_progress, true);
  assert.equal(results[2].result_hash, hashOutcome2026_9("read", { p: 1 }, plain).resultHash);
  // the same calls on a 2026.7 host: the 2026.7 hashes, no extra fields
  const old = setup({ openclawVersion: "2026.7.35" });
  call(old.bridge, { id: "c1", result: failed("boom at 10:00:01 (attempt 1)") });
  const r = old.publisher.records.find((x) => x.record.type === "tool_result").record;
  assert.ok(!("failure_hash" in r) && !("no_progress" in r));
  assert.equal(r.result_hash, hashOutcome("exec", { command: "ls" }, failed("boom at 10:00:01 (attempt 1)")).resultHash);
  // raw mode on 2026.9: the published result has no note either
  const raw = setup({ openclawVersion: "2026.9.6", hashOnGateway: false });
  call(raw.bridge, { id: "c3", tool: "read", params: { p: 1 }, result: { ...plain, content: [...plain.content, note] } });
  assert.deepEqual(raw.publisher.records.find((x) => x.record.type === "tool_result").record.result, plain);
});
