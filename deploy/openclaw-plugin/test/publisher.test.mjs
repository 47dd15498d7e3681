// Publishing never blocks or fails a tool call: bounded buffer, background flush, drop + count when full.
import { test } from "node:test";
import assert from "node:assert/strict";

import { resolveConfig } from "../lib/config.mjs";
import { kafkaProducerFactory, Publisher } from "../lib/publisher.mjs";
import { closedPort, FakeProducer, silentLogger } from "./helpers.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(predicate, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await sleep(10);
  }
}

test("broker down: publish returns at once, the buffer is bounded, overflow is dropped and counted", async () => {
  const port = await closedPort();
  const cfg = resolveConfig({ brokers: [`127.0.0.1:${port}`], gatewayId: "gw", maxBuffer: 20 });
  const warnings = [];
  const logger = { ...silentLogger, warn: (m) => warnings.push(m) };
  const publisher = new Publisher({
    topic: cfg.topic,
    maxBuffer: cfg.maxBuffer,
    producerFactory: kafkaProducerFactory(cfg, logger),
    logger,
  });
  const started = process.hrtime.bigint();
  const accepted = [];
  for (let i = 0; i < 50; i++) accepted.push(publisher.publish("run-1", JSON.stringify({ i })));
  const elapsedMs = Number(process.hrtime.bigint() - started) / 1e6;
  assert.ok(elapsedMs < 50, `50 publish() calls took ${elapsedMs} ms`);
  assert.deepEqual(accepted, [...Array(20).fill(true), ...Array(30).fill(false)]);
  assert.equal(publisher.buffered, 20);
  assert.equal(publisher.stats.dropped, 30);
  // The background flush tries, fails, and keeps the buffer (bounded) for a later retry.
  await waitFor(() => publisher.stats.connectErrors + publisher.stats.sendErrors > 0);
  assert.equal(publisher.stats.published, 0);
  assert.equal(publisher.buffered, 20);
  assert.ok(publisher.publish("run-1", "{}") === false && publisher.stats.dropped === 31);
  assert.ok(warnings.some((w) => w.includes("buffer full")), "a drop warning was logged");
  const closing = Date.now();
  await publisher.close(300);
  assert.ok(Date.now() - closing < 5000, "close() is bounded");
  assert.equal(publisher.publish("run-1", "{}"), false, "closed publisher drops");
});

test("records are sent in order, batched, exactly once", async () => {
  const producer = new FakeProducer();
  const publisher = new Publisher({ topic: "t", maxBuffer: 100000, producerFactory: () => producer, maxBatch: 64 });
  for (let i = 0; i < 1000; i++) publisher.publish(`k${i % 7}`, String(i));
  assert.ok(await publisher.flush(5000));
  assert.deepEqual(producer.sent.map((m) => m.value), Array.from({ length: 1000 }, (_, i) => String(i)));
  assert.ok(producer.sent.every((m) => m.topic === "t"));
  assert.equal(producer.sent[8].key, "k1");
  assert.equal(publisher.stats.published, 1000);
  assert.ok(publisher.stats.batches >= 1000 / 64);
  await publisher.close();
});

test("a failed connect or send keeps the batch and retries with backoff, without loss or reordering", async () => {
  const producers = [];
  const factory = () => {
    const p = producers.length === 0 ? new FakeProducer({ connectFailures: 1 })
      : producers.length === 1 ? new FakeProducer({ sendFailures: 1 }) : new FakeProducer();
    producers.push(p);
    return p;
  };
  const publisher = new Publisher({ topic: "t", maxBuffer: 1000, producerFactory: factory });
  for (let i = 0; i < 10; i++) publisher.publish("k", String(i));
  await waitFor(() => publisher.stats.published === 10, 10000);
  const sent = producers.flatMap((p) => p.sent.map((m) => m.value));
  assert.deepEqual(sent, Array.from({ length: 10 }, (_, i) => String(i)));
  assert.equal(publisher.stats.connectErrors, 1);
  assert.equal(publisher.stats.sendErrors, 1);
  assert.ok(producers[0].disconnects >= 1, "a failed producer is disconnected");
  // After recovery new records flow immediately.
  publisher.publish("k", "10");
  await waitFor(() => publisher.stats.published === 11);
  await publisher.close();
});

test("while the broker is down the newest records beyond the bound are dropped; buffered ones survive", async () => {
  const producer = new FakeProducer({ connectFailures: 3 });
  const publisher = new Publisher({ topic: "t", maxBuffer: 5, producerFactory: () => producer });
  for (let i = 0; i < 8; i++) publisher.publish("k", String(i));
  assert.equal(publisher.stats.dropped, 3);
  await waitFor(() => publisher.stats.published === 5, 10000);
  assert.deepEqual(producer.sent.map((m) => m.value), ["0", "1", "2", "3", "4"]);
  await publisher.close();
});

test("a slow broker never slows publish()", async () => {
  const producer = new FakeProducer({ delayMs: 200 });
  const publisher = new Publisher({ topic: "t", maxBuffer: 100, producerFactory: () => producer });
  publisher.publish("k", "first");
  await sleep(20); // the first send is now in flight for 200 ms
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < 100; i++) publisher.publish("k", String(i));
  const us = Number(process.hrtime.bigint() - t0) / 1e3;
  assert.ok(us < 20000, `100 publishes during a slow send took ${us} µs`);
  assert.equal(publisher.stats.dropped, 1, "bound 100 counts the queued records, the in-flight one included");
  await publisher.close(3000);
  assert.equal(producer.sent.length, 100);
});

test("records still buffered at close are counted as dropped (lostAtStop), with one warning", async () => {
  const warnings = [];
  const logger = { ...silentLogger, warn: (m) => warnings.push(m) };
  const producer = new FakeProducer({ connectFailures: 1000 });
  const publisher = new Publisher({ topic: "t", maxBuffer: 100, producerFactory: () => producer, logger, target: "k:9092" });
  for (let i = 0; i < 7; i++) publisher.publish("k", String(i));
  await waitFor(() => publisher.stats.connectErrors > 0);
  await publisher.close(300);
  const stats = publisher.snapshot();
  assert.equal(stats.buffered, 0);
  assert.equal(stats.published, 0);
  assert.equal(stats.lostAtStop, 7);
  assert.equal(stats.dropped, 7, "README: events that never reach Kafka are dropped and counted");
  const stopping = warnings.filter((w) => w.includes("not published"));
  assert.deepEqual(stopping, ["loopwatch-bridge: stopping with 7 events not published to Kafka (counted as dropped; last error: connect refused (fake))"]);
  // a clean stop says nothing and loses nothing
  const ok = new Publisher({ topic: "t", maxBuffer: 100, producerFactory: () => new FakeProducer(), logger });
  ok.publish("k", "x");
  await ok.close(1000);
  assert.deepEqual([ok.stats.published, ok.stats.dropped, ok.stats.lostAtStop], [1, 0, 0]);
  assert.equal(warnings.filter((w) => w.includes("not published")).length, 1);
});

test("a send still in flight when close gives up is counted as published, not lost", async () => {
  const producer = new FakeProducer({ delayMs: 400 });
  const publisher = new Publisher({ topic: "t", maxBuffer: 100, producerFactory: () => producer, logger: silentLogger });
  publisher.publish("k", "a");
  publisher.publish("k", "b");
  await publisher.close(100); // the send outlives the flush deadline (the fake ignores disconnect)
  assert.equal(publisher.stats.lostAtStop, 2);
  await sleep(500);
  assert.deepEqual([publisher.stats.published, publisher.stats.dropped, publisher.stats.lostAtStop], [2, 0, 0]);
});

test("Kafka unreachable: one line naming the brokers and the buffered count, throttled across retries", async () => {
  const warnings = [];
  const infos = [];
  const logger = { ...silentLogger, warn: (m) => warnings.push(m), info: (m) => infos.push(m) };
  const producer = new FakeProducer({ connectFailures: 3 });
  const publisher = new Publisher({ topic: "t", maxBuffer: 100, producerFactory: () => producer, logger, target: "k1:9092,k2:9092" });
  for (let i = 0; i < 3; i++) publisher.publish("k", String(i));
  await waitFor(() => publisher.stats.published === 3, 10000);
  assert.equal(publisher.stats.connectErrors, 3);
  assert.deepEqual(warnings, ["loopwatch-bridge: cannot reach Kafka at k1:9092,k2:9092 (connect refused (fake)); retrying, 3 events buffered"]);
  assert.deepEqual(infos, ["loopwatch-bridge: publishing to Kafka again (0 events still buffered)"]);
  await publisher.close();
});
