// Publishing that never blocks or fails a tool call.
//
// publish() is synchronous: it appends the record to a bounded in-memory FIFO and schedules a background
// flush. When the buffer is full the new record is dropped and counted. The flusher connects lazily,
// sends batches in order (one request in flight, so records of a scope key stay in order), and on any
// failure keeps the batch at the head of the buffer, disconnects, and retries with capped exponential
// backoff. Nothing here ever throws into a hook, and timers are unref'd so they never hold a process open.
// Records still buffered when the publisher closes are lost: they are counted as dropped (and lostAtStop).

import kafkajs from "kafkajs";

import { kafkaOptions } from "./config.mjs";
import { LogThrottle } from "./throttle.mjs";

const { Kafka, Partitioners, logLevel } = kafkajs;

export const MAX_BATCH = 500;
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 10000;

const events = (n) => `${n} event${n === 1 ? "" : "s"}`;

/**
 * The default producer factory: a kafkajs producer configured for ordered, non-creating sends. kafkajs'
 * warnings go through `throttle` (pass the plugin's shared one; a fresh one for `logger` otherwise).
 */
export function kafkaProducerFactory(cfg, logger, throttle = new LogThrottle(logger)) {
  const kafka = new Kafka(kafkaOptions(cfg, { logLevel: logLevel.WARN, logCreator: throttle.logCreator() }));
  return () =>
    kafka.producer({
      createPartitioner: Partitioners.DefaultPartitioner,
      allowAutoTopicCreation: false,
      maxInFlightRequests: 1,
      idempotent: false,
      retry: { retries: 2, initialRetryTime: 200, maxRetryTime: 2000 },
    });
}

export class Publisher {
  /**
   * @param {object} opts
   * @param {string} opts.topic
   * @param {number} opts.maxBuffer  records held while Kafka is slow or down; beyond it records are dropped
   * @param {() => {connect, send, disconnect}} opts.producerFactory
   * @param {object} [opts.logger]
   * @param {LogThrottle} [opts.throttle]  rate-limits the "cannot reach Kafka" lines (the plugin's shared one)
   * @param {string} [opts.target]  the brokers, named in those lines
   */
  constructor({ topic, maxBuffer, producerFactory, logger, throttle, target, now = Date.now, maxBatch = MAX_BATCH }) {
    this.topic = topic;
    this.maxBuffer = maxBuffer;
    this.maxBatch = maxBatch;
    this.producerFactory = producerFactory;
    this.logger = logger;
    this.throttle = throttle ?? new LogThrottle(logger, { now });
    this.target = target;
    this.now = now;
    this.unreachable = false; // the last connect or send failed
    this.buffer = [];
    this.head = 0; // index of the first pending record in `buffer`
    this.producer = null;
    this.connected = false;
    this.flushing = null; // the running flush promise
    this.scheduled = false;
    this.retryTimer = null;
    this.backoffMs = 0;
    this.closed = false;
    this.lastDropLog = -Infinity;
    this.stats = {
      enqueued: 0,
      published: 0,
      dropped: 0,
      lostAtStop: 0, // of `dropped`: still buffered when the publisher closed
      sendErrors: 0,
      connectErrors: 0,
      batches: 0,
      lastError: null,
    };
  }

  /** Records waiting to be sent. */
  get buffered() {
    return this.buffer.length - this.head;
  }

  /** Queue one record; never throws, never waits. Returns false when the record was dropped. */
  publish(key, value) {
    if (this.closed || this.buffered >= this.maxBuffer) {
      this.stats.dropped++;
      this.#warnDropped();
      return false;
    }
    this.buffer.push({ key, value });
    this.stats.enqueued++;
    this.#schedule(0);
    return true;
  }

  snapshot() {
    return { ...this.stats, buffered: this.buffered, connected: this.connected };
  }

  #warnDropped() {
    const t = this.now();
    if (t - this.lastDropLog < 60000) return;
    this.lastDropLog = t;
    this.logger?.warn?.(
      `loopwatch-bridge: event buffer full (${this.maxBuffer}); dropping events (dropped so far: ${this.stats.dropped}, ` +
        `last error: ${this.stats.lastError ?? "none"})`,
    );
  }

  #schedule(delayMs) {
    if (this.closed && delayMs > 0) return;
    if (this.scheduled || this.flushing || this.retryTimer) return;
    if (delayMs <= 0) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        this.#startFlush();
      }).unref?.();
    } else {
      this.retryTimer = setTimeout(() => {
        this.retryTimer = null;
        this.#startFlush();
      }, delayMs);
      this.retryTimer.unref?.();
    }
  }

  #startFlush() {
    if (this.flushing || this.buffered === 0) return this.flushing;
    this.flushing = this.#flush()
      .catch((err) => {
        this.stats.lastError = String(err?.message ?? err);
      })
      .finally(() => {
        this.flushing = null;
        if (this.buffered > 0 && !this.retryTimer) this.#schedule(this.backoffMs);
      });
    return this.flushing;
  }

  async #flush() {
    while (this.buffered > 0) {
      if (!this.connected) {
        try {
          this.producer ??= this.producerFactory();
          await this.producer.connect();
          this.connected = true;
        } catch (err) {
          this.stats.connectErrors++;
          this.#failed(err, `cannot reach Kafka${this.target ? ` at ${this.target}` : ""}`);
          return;
        }
      }
      const end = Math.min(this.buffer.length, this.head + this.maxBatch);
      const batch = this.buffer.slice(this.head, end);
      try {
        await this.producer.send({ topic: this.topic, messages: batch, acks: -1 });
      } catch (err) {
        this.stats.sendErrors++;
        this.#failed(err, `publishing to ${this.topic} failed`);
        return;
      }
      if (this.buffer[this.head] !== batch[0]) {
        // close() gave up on the buffer (counted as lost) while this send was in flight: it went out after all.
        this.stats.published += batch.length;
        this.stats.dropped -= batch.length;
        this.stats.lostAtStop -= batch.length;
        return;
      }
      if (this.unreachable) {
        this.unreachable = false;
        this.logger?.info?.(`loopwatch-bridge: publishing to Kafka again (${events(this.buffered - batch.length)} still buffered)`);
      }
      this.head = end;
      if (this.head > 1024 && this.head * 2 > this.buffer.length) {
        this.buffer = this.buffer.slice(this.head);
        this.head = 0;
      } else if (this.head === this.buffer.length) {
        this.buffer = [];
        this.head = 0;
      }
      this.stats.published += batch.length;
      this.stats.batches++;
      this.backoffMs = 0;
    }
  }

  /** A connect or send failed: drop the producer, back off, and say so (throttled: once a minute per kind). */
  #failed(err, what) {
    this.unreachable = true;
    this.stats.lastError = String(err?.message ?? err);
    if (!this.closed) {
      this.throttle.warn(`loopwatch-bridge: ${what} (${this.stats.lastError}); retrying, ${events(this.buffered)} buffered`);
    }
    this.backoffMs = Math.min(BACKOFF_MAX_MS, this.backoffMs ? this.backoffMs * 2 : BACKOFF_MIN_MS);
    const producer = this.producer;
    this.connected = false;
    this.producer = null;
    if (producer) Promise.resolve().then(() => producer.disconnect()).catch(() => {});
  }

  /** Wait until everything buffered now is sent (or `timeoutMs` passes). Resolves to true when drained. */
  async flush(timeoutMs = 5000) {
    const deadline = this.now() + timeoutMs;
    while (this.buffered > 0 && this.now() < deadline) {
      if (this.retryTimer) {
        clearTimeout(this.retryTimer);
        this.retryTimer = null;
      }
      const running = this.#startFlush();
      // Ref'd timers: whoever awaits flush() wants the process to stay up until it settles.
      await Promise.race([running, new Promise((r) => setTimeout(r, 50))]);
      if (this.buffered > 0 && !this.flushing) await new Promise((r) => setTimeout(r, Math.min(200, this.backoffMs || 50)));
    }
    return this.buffered === 0;
  }

  /**
   * Flush for at most `timeoutMs`, then stop and disconnect. Records still buffered then are lost: counted
   * as dropped and lostAtStop, with one warning. Later publish() calls count as dropped.
   */
  async close(timeoutMs = 2000) {
    if (this.closed) return;
    await this.flush(timeoutMs).catch(() => {});
    this.closed = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const lost = this.buffered;
    if (lost > 0) {
      this.buffer = [];
      this.head = 0;
      this.stats.dropped += lost;
      this.stats.lostAtStop += lost;
      this.logger?.warn?.(
        `loopwatch-bridge: stopping with ${events(lost)} not published to Kafka (counted as dropped; last error: ` +
          `${this.stats.lastError ?? "none"})`,
      );
    }
    const producer = this.producer;
    this.producer = null;
    this.connected = false;
    if (producer) await producer.disconnect().catch(() => {});
  }
}
