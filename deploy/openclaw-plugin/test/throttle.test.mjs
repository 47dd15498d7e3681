// A broker outage logs each kind of message at most once a minute, across every kafkajs client of the plugin.
import { test } from "node:test";
import assert from "node:assert/strict";

import kafkajs from "kafkajs";

import { bridgeStats, register, resetForTests } from "../index.mjs";
import { Enforcement, startVerdictConsumer } from "../lib/enforcer.mjs";
import { LogThrottle, messageKind } from "../lib/throttle.mjs";
import { closedPort } from "./helpers.mjs";

const { logLevel } = kafkajs;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function capture() {
  const lines = [];
  const logger = {
    info: (m) => lines.push({ level: "info", text: m }),
    warn: (m) => lines.push({ level: "warn", text: m }),
    error: (m) => lines.push({ level: "error", text: m }),
  };
  return { lines, logger };
}

test("messageKind ignores numbers and durations", () => {
  const kinds = ["Restarting the consumer in 694ms", "Restarting the consumer in 848ms", "Restarting the consumer in 1.5 s"].map(messageKind);
  assert.equal(new Set(kinds).size, 1, JSON.stringify(kinds));
  assert.equal(messageKind("connect ECONNREFUSED 10.0.0.7:9092"), messageKind("connect ECONNREFUSED 127.0.0.1:29092"));
  assert.notEqual(messageKind("Restarting the consumer in 5ms"), messageKind("Connection error: 5ms"));
});

test("kafkajs' restart lines from two clients sharing a throttle: one line a minute, then a count of the held back", () => {
  const { lines, logger } = capture();
  let t = 0;
  const throttle = new LogThrottle(logger, { now: () => t });
  const producerLog = throttle.logCreator()(logLevel.WARN);
  const consumerLog = throttle.logCreator()(logLevel.WARN);
  const restart = (ms) => ({ level: logLevel.ERROR, log: { message: `Restarting the consumer in ${ms}ms`, retryTime: ms } });
  for (let i = 0; i < 40; i++) {
    (i % 2 ? producerLog : consumerLog)(restart(600 + i * 7));
    t += 1400; // ~40 a minute
  }
  consumerLog({ level: logLevel.INFO, log: { message: "Starting" } }); // below WARN: never logged
  assert.deepEqual(lines.map((l) => l.level), ["error"]);
  assert.equal(lines[0].text, "loopwatch-bridge kafka: Restarting the consumer in 600ms");
  t = 60000;
  producerLog(restart(912));
  assert.equal(lines.length, 2);
  assert.match(lines[1].text, /^loopwatch-bridge kafka: Restarting the consumer in 912ms \(39 more like this in the last 60s\)$/);
  // another kind of message is not held back by the first
  producerLog({ level: logLevel.ERROR, log: { message: "Request ApiVersions(key: 18, version: 2) timed out", broker: "10.1.2.3:8080" } });
  assert.equal(lines.length, 3);
  assert.equal(lines[2].text, "loopwatch-bridge kafka: Request ApiVersions(key: 18, version: 2) timed out [broker 10.1.2.3:8080]");
});

test("verdict consumer retries: one line naming the brokers, then throttled, on the throttle it was given", async () => {
  const { lines, logger } = capture();
  const throttle = new LogThrottle(logger);
  let attempts = 0;
  const failing = () => ({
    events: { CRASH: "crash" },
    on() {},
    async connect() {
      attempts++;
      throw new Error("Broker not connected");
    },
    async subscribe() {},
    async run() {},
    async disconnect() {},
  });
  const consumer = startVerdictConsumer({
    cfg: { brokers: ["kafka-1:9092", "kafka-2:9092"], verdictTopic: "v" },
    enforcement: new Enforcement({ gatewayId: "g" }),
    logger,
    throttle,
    consumerFactory: failing,
  });
  await sleep(1700); // attempts at 0, 0.5 s, 1.5 s
  await consumer.stop();
  assert.ok(attempts >= 3, `attempts=${attempts}`);
  assert.equal(lines.length, 1, JSON.stringify(lines));
  assert.match(lines[0].text, /^loopwatch-bridge: verdict consumer cannot start on Kafka at kafka-1:9092,kafka-2:9092 \(Broker not connected\); retrying/);
  assert.equal(throttle.kinds.get(messageKind(lines[0].text)).held, attempts - 1);
});

test("broker down at start with enforce: each kind of line once, whichever kafkajs client logs it", async () => {
  const port = await closedPort();
  const { lines, logger } = capture();
  const hooks = {};
  register({
    registrationMode: "full",
    pluginConfig: { brokers: [`127.0.0.1:${port}`], gatewayId: "gw-down", enforce: true },
    logger,
    on: (name, handler) => (hooks[name] ??= handler),
    registerAgentToolResultMiddleware() {},
  });
  hooks.gateway_start(); // the verdict consumer starts (and retries with new kafkajs consumers)
  hooks.before_tool_call({ toolName: "exec", params: { command: "ls" }, runId: "r1", toolCallId: "c1" }, { sessionId: "s1", runId: "r1" });
  await sleep(4000); // three consumer attempts, several producer reconnects
  assert.ok(bridgeStats().publisher.connectErrors >= 2, JSON.stringify(bridgeStats().publisher));
  const problems = lines.filter((l) => l.level !== "info").map((l) => l.text);
  const kinds = problems.map(messageKind);
  assert.equal(new Set(kinds).size, kinds.length, `a kind of message logged twice:\n${problems.join("\n")}`);
  const target = `127.0.0.1:${port}`;
  assert.ok(problems.some((p) => p.startsWith(`loopwatch-bridge: cannot reach Kafka at ${target} (`) && p.endsWith("retrying, 1 event buffered")), problems.join("\n"));
  assert.ok(problems.some((p) => p.startsWith(`loopwatch-bridge: verdict consumer cannot start on Kafka at ${target} (`)), problems.join("\n"));
  await resetForTests();
});
