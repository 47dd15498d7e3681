// Model usage records (lib/usage.mjs): the conversion both sides check in test/vectors.json, the run lookup
// through model_call_started, and a handler that never disturbs the transcript write.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { createUsageReporter, usageFields } from "../lib/usage.mjs";
import { baseConfig, CapturingPublisher, silentLogger } from "./helpers.mjs";

const vectors = JSON.parse(readFileSync(new URL("./vectors.json", import.meta.url), "utf8"));

function decode(value) {
  // The file tags values JSON cannot hold (see its _meta); usage vectors only need Infinity.
  if (value && typeof value === "object" && !Array.isArray(value)) {
    if (value.$js === "Infinity") return Infinity;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decode(v)]));
  }
  return value;
}

function reporter(cfg = baseConfig()) {
  const publisher = new CapturingPublisher();
  let n = 0;
  const usage = createUsageReporter({
    cfg,
    publisher,
    newEventId: () => `u${++n}`,
    logger: silentLogger,
    now: () => 1767225600000,
  });
  return { usage, publisher };
}

const ASSISTANT = {
  role: "assistant",
  provider: "anthropic",
  model: "claude-sonnet-4-5",
  content: [{ type: "text", text: "secret reply" }],
  usage: { input: 1200, output: 80, cacheRead: 30000, cacheWrite: 0, totalTokens: 31280, cost: { total: 0.0138 } },
};

test("usage fields match the vectors the Python side checks", () => {
  assert.ok(vectors.model_usage.length >= 8);
  for (const v of vectors.model_usage) assert.deepEqual(usageFields(decode(v.usage)), v.fields, v.name);
});

test("an assistant reply's usage is one model_usage record of the run model_call_started named", () => {
  const { usage, publisher } = reporter();
  usage.modelCallStarted({ runId: "run-1", sessionId: "sess-1", sessionKey: "agent:main:k" }, { agentId: "coder" });
  const ret = usage.beforeMessageWrite({ message: ASSISTANT }, { sessionKey: "agent:main:k", agentId: "coder" });
  assert.equal(ret, undefined, "the write goes on unchanged");
  assert.equal(publisher.records.length, 1);
  const { key, record } = publisher.records[0];
  assert.equal(key, "run-1");
  assert.deepEqual(record, {
    type: "model_usage", event_id: "u1", gateway_id: baseConfig().gatewayId, agent_id: "coder",
    session_id: "sess-1", run_id: "run-1", ts: 1767225600000, version: 1,
    provider: "anthropic", model: "claude-sonnet-4-5",
    input_tokens: 1200, output_tokens: 80, cache_read_tokens: 30000, cache_write_tokens: 0, cost_usd: 0.0138,
  });
  assert.ok(!publisher.records[0].value.includes("secret"), "no content leaves the gateway");
  // The same message seen again (the hook registered in two modes): published once.
  usage.beforeMessageWrite({ message: ASSISTANT }, { sessionKey: "agent:main:k" });
  assert.equal(publisher.records.length, 1);
  assert.equal(usage.stats.duplicateDispatches, 1);
});

test("user messages, replies without usage, unknown sessions and garbage publish nothing and never throw", () => {
  const { usage, publisher } = reporter();
  usage.modelCallStarted({ runId: "run-1", sessionId: "sess-1", sessionKey: "k" }, {});
  usage.beforeMessageWrite({ message: { role: "user", content: "hi" } }, { sessionKey: "k" });
  usage.beforeMessageWrite({ message: { role: "assistant", content: [] } }, { sessionKey: "k" });
  usage.beforeMessageWrite({ message: { ...ASSISTANT } }, { sessionKey: "other" });
  for (const bad of [undefined, null, 5, { message: null }, { message: { role: "assistant", usage: 3 } }]) {
    assert.doesNotThrow(() => usage.beforeMessageWrite(bad, undefined));
    assert.doesNotThrow(() => usage.modelCallStarted(bad, undefined));
  }
  assert.equal(publisher.records.length, 0);
  assert.equal(usage.stats.usageWithoutRun, 1);
});

test("usage records name the host's OpenClaw version, as the bridge's tool records do", () => {
  const { usage, publisher } = reporter({ ...baseConfig(), openclawVersion: "2026.9.6" });
  usage.modelCallStarted({ runId: "run-1", sessionId: "sess-1", sessionKey: "k" }, {});
  usage.beforeMessageWrite({ message: ASSISTANT }, { sessionKey: "k" });
  assert.equal(publisher.records.length, 1);
  assert.equal(publisher.records[0].record.openclaw_version, "2026.9.6");
});
