// Enforcing loopwatch verdicts on the gateway (option `enforce`).
//
// A background kafkajs consumer reads loopwatch.verdicts, keeps the verdicts of this gateway, and turns
// them into in-memory state that the hooks consult synchronously (a hook never waits on Kafka):
//   warning -> a note appended to the next tool result of that run (tool-result middleware);
//   block   -> before_tool_call blocks the same call signature (tool + ":" + args hash) for the rest of the run;
//   abort   -> the run is aborted now (OpenClaw's abortAgentHarnessRun) and every later call of it is blocked.
// Verdicts carry the triggering event_id / call_id but no args hash: the bridge remembers the signature of
// each tool_call it published (bounded) and looks it up. The mapping functions are pure and Kafka-free.

import kafkajs from "kafkajs";

import { kafkaOptions } from "./config.mjs";
import { scopeKey } from "./events.mjs";
import { LogThrottle } from "./throttle.mjs";

const { Kafka, logLevel } = kafkajs;

/** A Map that forgets its oldest insertion beyond `max` entries. */
export class BoundedMap extends Map {
  constructor(max) {
    super();
    this.max = max;
  }

  set(key, value) {
    if (super.has(key)) super.delete(key);
    super.set(key, value);
    if (this.size > this.max) super.delete(super.keys().next().value);
    return this;
  }
}

const DECISIONS = new Set(["warning", "block", "abort"]);

/** The tool a verdict names, for messages. */
const toolOf = (verdict) => (typeof verdict.tool === "string" ? verdict.tool : "tool");

/**
 * What a verdict asks this gateway to do, as plain data:
 * {kind: "note", key, text} | {kind: "block", key, signature, reason} | {kind: "abort", key, sessionId, reason}
 * | {kind: "ignore", reason}.
 * `lookup(eventId, callId)` returns the `{signature}` remembered for a published tool_call, or undefined.
 */
export function mapVerdict(verdict, { gatewayId, lookup }) {
  if (verdict === null || typeof verdict !== "object" || Array.isArray(verdict)) return { kind: "ignore", reason: "not-object" };
  if (verdict.gateway_id !== gatewayId) return { kind: "ignore", reason: "other-gateway" };
  if (!DECISIONS.has(verdict.decision)) return { kind: "ignore", reason: "unknown-decision" };
  const sessionId = typeof verdict.session_id === "string" ? verdict.session_id : "";
  const key = scopeKey(verdict.run_id, sessionId);
  if (!key) return { kind: "ignore", reason: "no-scope" };
  const message = typeof verdict.message === "string" && verdict.message !== "" ? verdict.message : null;
  const tool = toolOf(verdict);
  switch (verdict.decision) {
    case "warning":
      return { kind: "note", key, text: message ?? `WARNING: loopwatch detected a repetitive ${tool} loop.` };
    case "block": {
      const known = lookup?.(verdict.event_id, verdict.call_id);
      if (!known) return { kind: "ignore", reason: "unknown-call" };
      return {
        kind: "block",
        key,
        signature: known.signature,
        reason: message ?? `CRITICAL: loopwatch blocked a repeated ${tool} call.`,
      };
    }
    default:
      return {
        kind: "abort",
        key,
        sessionId,
        reason: message ?? "CRITICAL: loopwatch aborted this run: the tool-call loop persisted after compaction.",
      };
  }
}

/** The verdict-derived state the hooks consult. */
export class Enforcement {
  constructor({ gatewayId, abortRun, logger, maxRuns = 2048, maxSignatures = 256, maxNotes = 8, maxCalls = 8192 }) {
    this.gatewayId = gatewayId;
    this.abortRun = abortRun;
    this.logger = logger;
    this.maxSignatures = maxSignatures;
    this.maxNotes = maxNotes;
    this.blocked = new BoundedMap(maxRuns); // scope key -> Map(signature -> reason)
    this.aborted = new BoundedMap(maxRuns); // scope key -> {reason, sessionId}
    this.notes = new BoundedMap(maxRuns); // scope key -> [text]
    this.calls = new BoundedMap(maxCalls); // "e:"+event_id / "c:"+key+call_id -> {signature}
    this.seen = new BoundedMap(4096); // verdict ids already applied
    this.stats = { verdicts: 0, notes: 0, blocks: 0, aborts: 0, ignored: 0, duplicates: 0, blockedCalls: 0, abortErrors: 0 };
  }

  /** Remember the signature of a published tool_call so a later block verdict can name it. */
  rememberCall(eventId, key, callId, signature) {
    const entry = { signature };
    this.calls.set("e:" + eventId, entry);
    if (typeof callId === "string" && callId !== "") this.calls.set("c:" + key + "\u0000" + callId, entry);
  }

  lookup(eventId, callId, key) {
    if (typeof eventId === "string") {
      const hit = this.calls.get("e:" + eventId);
      if (hit) return hit;
    }
    if (typeof callId === "string" && key) return this.calls.get("c:" + key + "\u0000" + callId);
    return undefined;
  }

  /** Apply one verdict record (already parsed). Returns the action taken. */
  apply(verdict) {
    const id = verdict?.verdict_id;
    if (typeof id === "string") {
      if (this.seen.has(id)) {
        this.stats.duplicates++;
        return { kind: "ignore", reason: "duplicate" };
      }
    }
    const key = scopeKey(verdict?.run_id, typeof verdict?.session_id === "string" ? verdict.session_id : "");
    const action = mapVerdict(verdict, {
      gatewayId: this.gatewayId,
      lookup: (eventId, callId) => this.lookup(eventId, callId, key),
    });
    if (action.kind === "ignore") {
      if (action.reason !== "other-gateway") this.stats.ignored++;
      return action;
    }
    if (typeof id === "string") this.seen.set(id, true);
    this.stats.verdicts++;
    switch (action.kind) {
      case "note": {
        const list = this.notes.get(action.key) ?? [];
        if (list.length < this.maxNotes && !list.includes(action.text)) list.push(action.text);
        this.notes.set(action.key, list);
        this.stats.notes++;
        break;
      }
      case "block": {
        // One gateway log line per run's first block: enforcement is visible in the log, not only in the counters.
        if (!this.blocked.has(action.key)) this.#told(`blocking repeated ${toolOf(verdict)} calls of run`, verdict, action.key);
        const sigs = this.blocked.get(action.key) ?? new BoundedMap(this.maxSignatures);
        sigs.set(action.signature, action.reason);
        this.blocked.set(action.key, sigs);
        this.stats.blocks++;
        break;
      }
      case "abort":
        if (!this.aborted.has(action.key)) this.#told("aborting run", verdict, action.key);
        this.aborted.set(action.key, { reason: action.reason, sessionId: action.sessionId });
        this.stats.aborts++;
        this.#abort(action.sessionId, action.reason);
        break;
    }
    return action;
  }

  #told(what, verdict, key) {
    this.logger?.info?.(`loopwatch-bridge: ${what} ${key} (${verdict.detector}, count ${verdict.count})`);
  }

  #abort(sessionId, reason) {
    // Never call the runtime with an empty id: OpenClaw treats that as "abort every run".
    if (typeof sessionId !== "string" || sessionId === "" || typeof this.abortRun !== "function") return;
    Promise.resolve()
      .then(() => this.abortRun(sessionId, reason))
      .catch((err) => {
        this.stats.abortErrors++;
        this.logger?.warn?.(`loopwatch-bridge: aborting session ${sessionId} failed: ${err?.message ?? err}`);
      });
  }

  /** The before_tool_call decision for a call: `{block: true, blockReason}` or null. */
  check(key, signature, sessionId) {
    const aborted = this.aborted.get(key);
    if (aborted) {
      this.stats.blockedCalls++;
      this.#abort(sessionId || aborted.sessionId, aborted.reason);
      return { block: true, blockReason: aborted.reason };
    }
    const reason = this.blocked.get(key)?.get(signature);
    if (reason !== undefined) {
      this.stats.blockedCalls++;
      return { block: true, blockReason: reason };
    }
    return null;
  }

  /** Pending warning notes of a run (removed). */
  takeNotes(key) {
    const list = this.notes.get(key);
    if (!list) return [];
    this.notes.delete(key);
    return list;
  }

  /** Forget everything about a finished run. */
  forgetRun(key) {
    this.blocked.delete(key);
    this.aborted.delete(key);
    this.notes.delete(key);
  }
}

/** A tool result with `notes` appended as one extra text part (the model sees it). */
export function appendNotes(result, notes) {
  if (!notes.length) return result;
  const text = notes.join("\n");
  const base = result !== null && typeof result === "object" && !Array.isArray(result) ? result : { content: [] };
  const content = Array.isArray(base.content) ? base.content : [];
  return { ...base, content: [...content, { type: "text", text: `[loopwatch] ${text}` }] };
}

/**
 * Consume `cfg.verdictTopic` in the background and apply this gateway's verdicts to `enforcement`.
 * Returns {stop(): Promise}. Failures are retried with backoff; nothing is thrown to the caller. Every retry
 * uses the same kafkajs client, and all warnings (kafkajs' and the retry lines) go through `throttle` (pass
 * the plugin's shared one).
 */
export function startVerdictConsumer({ cfg, enforcement, logger, consumerFactory, throttle = new LogThrottle(logger) }) {
  let stopped = false;
  let consumer = null;
  let timer = null;
  let backoff = 0;
  let kafka = null;
  const brokers = Array.isArray(cfg.brokers) ? cfg.brokers.join(",") : "?";
  const make =
    consumerFactory ??
    (() => {
      kafka ??= new Kafka(kafkaOptions(cfg, { logLevel: logLevel.WARN, logCreator: throttle.logCreator() }));
      return kafka.consumer({
        groupId: cfg.verdictGroupId,
        sessionTimeout: 10000,
        heartbeatInterval: 1000,
        maxWaitTimeInMs: 250, // verdicts must arrive while the loop is still running: poll often
        minBytes: 1,
        allowAutoTopicCreation: false,
        retry: { retries: 5, initialRetryTime: 300, maxRetryTime: 5000 },
      });
    });

  const onMessage = ({ message }) => {
    if (!message?.value) return;
    let verdict;
    try {
      verdict = JSON.parse(message.value.toString("utf8"));
    } catch {
      enforcement.stats.ignored++;
      return;
    }
    enforcement.apply(verdict);
  };

  const retry = () => {
    if (stopped) return;
    backoff = Math.min(30000, backoff ? backoff * 2 : 500);
    timer = setTimeout(start, backoff);
    timer.unref?.();
  };

  async function start() {
    timer = null;
    if (stopped) return;
    const current = make();
    consumer = current;
    try {
      current.on?.(current.events.CRASH, (event) => {
        if (event?.payload?.restart === false && consumer === current && !stopped) {
          throttle.warn(`loopwatch-bridge: verdict consumer crashed (${event.payload.error?.message ?? "?"}); retrying`);
          current.disconnect().catch(() => {});
          consumer = null;
          retry();
        }
      });
      let joined = false;
      current.on?.(current.events.GROUP_JOIN, () => {
        if (joined) return;
        joined = true;
        logger?.info?.(`loopwatch-bridge: verdict consumer joined group ${cfg.verdictGroupId} on ${cfg.verdictTopic}`);
      });
      await current.connect();
      await current.subscribe({ topic: cfg.verdictTopic, fromBeginning: false });
      await current.run({ eachMessage: async (payload) => onMessage(payload) });
      backoff = 0;
    } catch (err) {
      throttle.warn(
        `loopwatch-bridge: verdict consumer cannot start on Kafka at ${brokers} (${err?.message ?? err}); retrying, ` +
          "no verdicts are applied until it runs",
      );
      current.disconnect().catch(() => {});
      if (consumer === current) consumer = null;
      retry();
    }
  }

  start();
  return {
    onMessage,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      const current = consumer;
      consumer = null;
      if (current) await current.disconnect().catch(() => {});
    },
  };
}
