// Benchmark of the OpenClaw bridge plugin (deploy/openclaw-plugin): event volume and added hook latency.
//
//   deploy/openclaw-plugin/scripts/ensure-deps.sh && node bench/plugin_bench.mjs [--calls N] [--bootstrap host:port]
//
// Prints, for hashOnGateway on and off and three payload sizes:
//   - events per tool call and bytes per event (the record values the plugin publishes);
//   - added latency per hook call in microseconds (p50 / p99 / mean) for before_tool_call and after_tool_call,
//     measured around the real handlers with the real Publisher (its producer is a stub that accepts sends,
//     so the background flush runs between batches exactly as in a gateway, minus the network);
//   - the same with enforce on (the before_tool_call verdict lookup);
//   - with --bootstrap, the end-to-end publish rate through kafkajs to a real broker.
// The last line is one JSON object with every figure, for recording.

import { performance } from "node:perf_hooks";

import { createBridge } from "../deploy/openclaw-plugin/lib/bridge.mjs";
import { resolveConfig } from "../deploy/openclaw-plugin/lib/config.mjs";
import { Enforcement } from "../deploy/openclaw-plugin/lib/enforcer.mjs";
import { kafkaProducerFactory, Publisher } from "../deploy/openclaw-plugin/lib/publisher.mjs";

const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : fallback;
};
const CALLS = Number(opt("--calls", "20000"));
const BOOTSTRAP = opt("--bootstrap", null);
const CHUNK = 200; // calls between yields to the event loop (lets the background flush run)

const text = (t) => [{ type: "text", text: t }];
const lines = (n) => Array.from({ length: n }, (_, i) => `line ${i}: ${"x".repeat(60)}`).join("\n");
const PAYLOADS = {
  small: {
    tool: "exec",
    params: { command: "ls -la /srv/app", workdir: "/srv/app", timeout: 30 },
    result: { content: text("total 8\ndrwxr-xr-x 2 app app 4096 ."), details: { status: "completed", exitCode: 0, aggregated: "total 8\ndrwxr-xr-x 2 app app 4096 .", durationMs: 14, pid: 4242, cwd: "/srv/app" } },
  },
  "4KB result": {
    tool: "read",
    params: { path: "/srv/app/src/main.py", offset: 0, limit: 200 },
    result: { content: text(lines(55)), details: { path: "/srv/app/src/main.py", size: 4000, truncated: false } },
  },
  "64KB result": {
    tool: "exec",
    params: { command: "cat build.log" },
    result: { content: text(lines(880)), details: { status: "completed", exitCode: 0, aggregated: lines(880), durationMs: 80 } },
  },
};

class StubProducer {
  constructor() {
    this.records = 0;
  }
  async connect() {}
  async send({ messages }) {
    this.records += messages.length;
  }
  async disconnect() {}
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function summarize(samples) {
  const sorted = Float64Array.from(samples).sort();
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  return { p50: +quantile(sorted, 0.5).toFixed(2), p99: +quantile(sorted, 0.99).toFixed(2), mean: +mean.toFixed(2) };
}

const tick = () => new Promise((r) => setImmediate(r));

class DownProducer extends StubProducer {
  async connect() {
    throw new Error("ECONNREFUSED (bench)");
  }
}

async function measure({ hashOnGateway, enforce = false, down = false, payload }) {
  const cfg = resolveConfig({ gatewayId: "bench-gw", hashOnGateway, enforce, maxBuffer: down ? 1000 : 100000 });
  const producer = down ? new DownProducer() : new StubProducer();
  const publisher = new Publisher({ topic: cfg.topic, maxBuffer: cfg.maxBuffer, producerFactory: () => producer });
  const enforcement = enforce ? new Enforcement({ gatewayId: cfg.gatewayId }) : null;
  const bytes = { tool_call: [], tool_result: [], compaction_retry: [] };
  const sizing = {
    publish(key, value) {
      bytes[JSON.parse(value).type].push(Buffer.byteLength(value) + Buffer.byteLength(key));
      return publisher.publish(key, value);
    },
  };
  const ctx = { agentId: "main", sessionKey: "agent:main:main", sessionId: "0d9c1e7e-5a55-4a43-9d64-3a1c4f2b8e11", runId: "4b3f2a10-8c1d-4e5f-9a7b-6c5d4e3f2a1b" };
  if (enforcement) {
    // A realistic amount of enforcement state: blocks on other signatures of this run.
    for (let i = 0; i < 50; i++) {
      enforcement.rememberCall(`e${i}`, ctx.runId, `c${i}`, `exec:${String(i).padStart(64, "0")}`);
      enforcement.apply({ verdict_id: `v${i}`, decision: "block", gateway_id: cfg.gatewayId, session_id: ctx.sessionId, run_id: ctx.runId, event_id: `e${i}`, message: "CRITICAL" });
    }
  }
  // Sizes come from a separate small pass so that the timed pass does not include JSON.parse.
  const sizer = createBridge({ cfg, publisher: sizing, enforcement });
  for (let i = 0; i < 20; i++) {
    const tctx = { ...ctx, toolName: payload.tool, toolCallId: `s${i}` };
    sizer.beforeToolCall({ toolName: payload.tool, params: { ...payload.params }, runId: ctx.runId, toolCallId: `s${i}` }, tctx);
    sizer.afterToolCall({ toolName: payload.tool, params: { ...payload.params }, runId: ctx.runId, toolCallId: `s${i}`, result: payload.result, durationMs: 1 }, tctx);
  }
  sizer.afterCompaction({ messageCount: 10, compactedCount: 40, tokenCount: 1000 }, { sessionId: ctx.sessionId, sessionKey: ctx.sessionKey, agentId: "main" });

  const bridge = createBridge({ cfg, publisher, enforcement });
  const before = [];
  const after = [];
  const baseline = [];
  const noop = () => undefined;
  const warmup = Math.min(2000, CALLS / 5);
  for (let i = 0; i < CALLS + warmup; i++) {
    const id = `call-${i}`;
    const tctx = { ...ctx, toolName: payload.tool, toolCallId: id };
    const params = { ...payload.params }; // a fresh object per call, as OpenClaw parses each call anew
    const ev1 = { toolName: payload.tool, params, runId: ctx.runId, toolCallId: id };
    const ev2 = { toolName: payload.tool, params, runId: ctx.runId, toolCallId: id, result: payload.result, durationMs: 1 };
    let t0 = performance.now();
    noop(ev1, tctx);
    let t1 = performance.now();
    bridge.beforeToolCall(ev1, tctx);
    let t2 = performance.now();
    bridge.afterToolCall(ev2, tctx);
    let t3 = performance.now();
    if (i >= warmup) {
      baseline.push((t1 - t0) * 1000);
      before.push((t2 - t1) * 1000);
      after.push((t3 - t2) * 1000);
    }
    if (i % CHUNK === CHUNK - 1) await tick();
  }
  if (!down) await publisher.flush(10000);
  const avg = (a) => +(a.reduce((x, y) => x + y, 0) / a.length).toFixed(1);
  return {
    hashOnGateway,
    enforce,
    beforeUs: summarize(before),
    afterUs: summarize(after),
    timerOverheadUs: summarize(baseline),
    bytes: { tool_call: avg(bytes.tool_call), tool_result: avg(bytes.tool_result), compaction_retry: avg(bytes.compaction_retry) },
    published: producer.records,
    dropped: publisher.stats.dropped,
  };
}

async function endToEnd(bootstrap) {
  const cfg = resolveConfig({ brokers: [bootstrap], gatewayId: "bench-gw", maxBuffer: 200000 });
  const publisher = new Publisher({ topic: cfg.topic, maxBuffer: cfg.maxBuffer, producerFactory: kafkaProducerFactory(cfg, console) });
  const bridge = createBridge({ cfg, publisher });
  const payload = PAYLOADS.small;
  const n = CALLS;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const ctx = { sessionId: "s", runId: `run-${i % 64}`, toolName: payload.tool, toolCallId: `c${i}` };
    bridge.beforeToolCall({ toolName: payload.tool, params: { ...payload.params }, runId: ctx.runId, toolCallId: ctx.toolCallId }, ctx);
    bridge.afterToolCall({ toolName: payload.tool, params: { ...payload.params }, runId: ctx.runId, toolCallId: ctx.toolCallId, result: payload.result }, ctx);
    if (i % CHUNK === CHUNK - 1) await tick();
  }
  const drained = await publisher.flush(120000);
  const seconds = (performance.now() - t0) / 1000;
  await publisher.close(1000);
  return { events: 2 * n, seconds: +seconds.toFixed(2), eventsPerSecond: Math.round((2 * n) / seconds), drained, dropped: publisher.stats.dropped };
}

const results = [];
console.log(`loopwatch bridge plugin benchmark: ${CALLS} tool calls per case, node ${process.version}`);
console.log("events per tool call: 2 (tool_call + tool_result); +1 compaction_retry per successful compaction\n");
console.log("case                      mode    bytes/event (call, result, compaction)   before_tool_call µs p50/p99/mean   after_tool_call µs p50/p99/mean");
for (const [name, payload] of Object.entries(PAYLOADS)) {
  for (const hashOnGateway of [true, false]) {
    const r = await measure({ hashOnGateway, payload });
    results.push({ case: name, ...r });
    const mode = hashOnGateway ? "hash" : "raw";
    const b = r.bytes;
    console.log(
      `${name.padEnd(25)} ${mode.padEnd(7)} ${`${b.tool_call}, ${b.tool_result}, ${b.compaction_retry}`.padEnd(40)} ` +
        `${`${r.beforeUs.p50} / ${r.beforeUs.p99} / ${r.beforeUs.mean}`.padEnd(34)} ${r.afterUs.p50} / ${r.afterUs.p99} / ${r.afterUs.mean}`,
    );
  }
}
const enforced = await measure({ hashOnGateway: true, enforce: true, payload: PAYLOADS.small });
results.push({ case: "small+enforce", ...enforced });
console.log(
  `${"small + enforce".padEnd(25)} ${"hash".padEnd(7)} ${`${enforced.bytes.tool_call}, ${enforced.bytes.tool_result}, ${enforced.bytes.compaction_retry}`.padEnd(40)} ` +
    `${`${enforced.beforeUs.p50} / ${enforced.beforeUs.p99} / ${enforced.beforeUs.mean}`.padEnd(34)} ${enforced.afterUs.p50} / ${enforced.afterUs.p99} / ${enforced.afterUs.mean}`,
);
const down = await measure({ hashOnGateway: true, down: true, payload: PAYLOADS.small });
results.push({ case: "small+broker-down", ...down });
console.log(
  `${"small, broker down".padEnd(25)} ${"hash".padEnd(7)} ${"(buffer full: dropped " + down.dropped + ")"}`.padEnd(74) +
    ` ${`${down.beforeUs.p50} / ${down.beforeUs.p99} / ${down.beforeUs.mean}`.padEnd(34)} ${down.afterUs.p50} / ${down.afterUs.p99} / ${down.afterUs.mean}`,
);
console.log(`(timer overhead, an empty function between two performance.now(): p50 ${results[0].timerOverheadUs.p50} µs)`);
let e2e = null;
if (BOOTSTRAP) {
  e2e = await endToEnd(BOOTSTRAP);
  console.log(`\nend to end through kafkajs to ${BOOTSTRAP}: ${e2e.events} events in ${e2e.seconds} s = ${e2e.eventsPerSecond} events/s (dropped ${e2e.dropped})`);
}
console.log(JSON.stringify({ calls: CALLS, node: process.version, results, endToEnd: e2e }));
process.exit(0);
