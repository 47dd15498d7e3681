// Real-broker round trip of the plugin without OpenClaw (driven by tests/openclaw/test_plugin_kafka.py).
// Registers the plugin with a stand-in api (enforce on), fires N identical tool calls through the real
// hooks, waits until kafkajs has published all 2N records, prints their event ids, then waits for a block
// verdict (which the Python side produces to the verdict topic) to take effect in before_tool_call.
//   usage: node scripts/kafka-roundtrip.mjs BOOTSTRAP EVENTS_TOPIC VERDICT_TOPIC N
import readline from "node:readline";

import { bridgeStats, register } from "../index.mjs";

const [bootstrap, topic, verdictTopic, nText] = process.argv.slice(2);
const n = Number(nText);
const hooks = new Map();
const say = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
const api = {
  registrationMode: "full",
  pluginConfig: { brokers: [bootstrap], topic, verdictTopic, gatewayId: "gw-it", enforce: true, maxBuffer: 1000, verdictGroupId: "it-verdicts" },
  logger: { info: (m) => say({ log: m }), warn: (m) => say({ log: m }), error: (m) => say({ log: m }), debug() {} },
  on: (name, handler) => hooks.set(name, handler),
  registerAgentToolResultMiddleware: (handler) => hooks.set("middleware", handler),
};
register(api);
await hooks.get("gateway_start")({}, {});

const ctx = { agentId: "main", sessionKey: "agent:main:it", sessionId: "sess-it", runId: "run-it" };
const result = { content: [{ type: "text", text: "same output" }], details: { status: "completed", exitCode: 0, aggregated: "same output" } };
const call = (i) => {
  const params = { command: "ls -la" };
  const id = `call-${i}`;
  const decision = hooks.get("before_tool_call")({ toolName: "exec", params, runId: ctx.runId, toolCallId: id }, { ...ctx, toolName: "exec", toolCallId: id });
  if (!decision?.block) hooks.get("after_tool_call")({ toolName: "exec", params, runId: ctx.runId, toolCallId: id, result, durationMs: 1 }, { ...ctx, toolName: "exec", toolCallId: id });
  return decision;
};

for (let i = 0; i < n; i++) call(i);
const deadline = Date.now() + 30000;
while (bridgeStats().publisher.published < 2 * n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
say({ phase: "published", stats: bridgeStats() });

// Wait for the Python side to say the verdict is on the topic, then poll until it is enforced.
const rl = readline.createInterface({ input: process.stdin });
for await (const line of rl) {
  if (line.trim() === "verdict-sent") break;
}
let blocked = null;
let i = n;
const until = Date.now() + 60000;
while (!blocked && Date.now() < until) {
  blocked = call(i++);
  if (!blocked) await new Promise((r) => setTimeout(r, 200));
}
const other = hooks.get("before_tool_call")({ toolName: "exec", params: { command: "pwd" }, runId: ctx.runId, toolCallId: "other" }, { ...ctx, toolName: "exec", toolCallId: "other" });
say({ phase: "enforced", blocked, other: other ?? null, attempts: i - n, stats: bridgeStats() });
await hooks.get("gateway_stop")({}, {});
say({ phase: "stopped", stats: bridgeStats() });
process.exit(0);
