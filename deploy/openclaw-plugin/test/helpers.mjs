// Shared fakes for the plugin tests.
import { createServer } from "node:net";

/** A 127.0.0.1 port nothing listens on (bound, then released). */
export async function closedPort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A publisher that records what the bridge queues. */
export class CapturingPublisher {
  constructor() {
    this.records = [];
  }
  publish(key, value) {
    this.records.push({ key, value, record: JSON.parse(value) });
    return true;
  }
}

/** A producer double: `failures` sends (or connects) fail before it starts succeeding. */
export class FakeProducer {
  constructor({ connectFailures = 0, sendFailures = 0, delayMs = 0 } = {}) {
    this.connectFailures = connectFailures;
    this.sendFailures = sendFailures;
    this.delayMs = delayMs;
    this.sent = [];
    this.connects = 0;
    this.disconnects = 0;
  }
  async connect() {
    this.connects++;
    if (this.connectFailures > 0) {
      this.connectFailures--;
      throw new Error("connect refused (fake)");
    }
  }
  async send({ topic, messages }) {
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.sendFailures > 0) {
      this.sendFailures--;
      throw new Error("send failed (fake)");
    }
    for (const m of messages) this.sent.push({ topic, ...m });
  }
  async disconnect() {
    this.disconnects++;
  }
}

export const silentLogger = { info() {}, warn() {}, error() {}, debug() {} };

export function baseConfig(overrides = {}) {
  return {
    brokers: ["127.0.0.1:9"],
    topic: "loopwatch.events",
    verdictTopic: "loopwatch.verdicts",
    gatewayId: "gw-test",
    hashOnGateway: true,
    enforce: false,
    maxBuffer: 10000,
    clientId: "loopwatch-bridge-test",
    maxEventBytes: 900000,
    verdictGroupId: "g",
    ...overrides,
  };
}
