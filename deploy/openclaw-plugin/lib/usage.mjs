// Model usage per model call, as `model_usage` records (an extension of schemas/json/event.schema.json), so loopwatch can say what a
// loop costs.
//
// Where OpenClaw 2026.7.35 exposes it to a plugin: every assistant reply is written to the session transcript
// with the provider's token counts and OpenClaw's priced cost (`message.usage`: input, output, cacheRead,
// cacheWrite, cost.total), and `before_message_write` sees that write, once per model call. (The
// `model.usage` / `model.call.completed` diagnostic events carry usage too, but reach only OpenClaw's own
// diagnostics plugins; `llm_output` is once per attempt and needs conversation access.) The bridge reads the
// numbers only: no content leaves the gateway, and the handler never blocks or rewrites the message.
//
// That hook's context has the session key but no run id: `model_call_started`, which fires before each model
// call with run id, session id and session key, tells which run the reply belongs to. State is bounded.

import { BoundedMap } from "./enforcer.mjs";
import { EVENT_VERSION, hostVersion, scopeKey } from "./events.mjs";

function count(value) {
  return Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

function text(value) {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * The usage fields of a `model_usage` record from an OpenClaw assistant message's `usage` (test/vectors.json
 * `model_usage` holds the cases both sides check). A cost of 0 is "no price" unless the provider billed it:
 * OpenClaw writes 0 for models without a price, and loopwatch must not call those calls free.
 */
export function usageFields(usage) {
  const cost = usage?.cost;
  const total = cost?.total;
  const priced = typeof total === "number" && Number.isFinite(total) && total >= 0 && (total > 0 || cost?.totalOrigin === "provider-billed");
  return {
    input_tokens: count(usage?.input),
    output_tokens: count(usage?.output),
    cache_read_tokens: count(usage?.cacheRead),
    cache_write_tokens: count(usage?.cacheWrite),
    cost_usd: priced ? total : null,
  };
}

/**
 * @param {object} opts
 * @param {object} opts.cfg  resolved config (lib/config.mjs): gatewayId
 * @param {{publish(key: string, value: string): boolean}} opts.publisher
 * @param {() => string} opts.newEventId  the bridge's event-id source (ids stay unique per gateway)
 */
export function createUsageReporter({ cfg, publisher, newEventId, logger = null, now = Date.now }) {
  const runs = new BoundedMap(8192); // session key -> {runId, sessionId, agentId} of its latest model call
  const published = new WeakSet(); // messages already reported: both registrations' handlers see one write
  const stats = { modelUsage: 0, usageWithoutRun: 0, duplicateDispatches: 0, usageErrors: 0 };
  let lastErrorLog = -Infinity;

  const openclawVersion = hostVersion(cfg);

  function failed(hook, err) {
    stats.usageErrors++;
    const t = now();
    if (t - lastErrorLog < 60000) return;
    lastErrorLog = t;
    logger?.warn?.(`loopwatch-bridge: ${hook} usage handler error (usage not published): ${err?.stack ?? err}`);
  }

  function modelCallStarted(event, ctx) {
    try {
      const sessionKey = text(event?.sessionKey) ?? text(ctx?.sessionKey);
      const runId = text(event?.runId) ?? text(ctx?.runId);
      const sessionId = text(event?.sessionId) ?? text(ctx?.sessionId) ?? sessionKey;
      if (sessionKey && (runId || sessionId)) runs.set(sessionKey, { runId, sessionId, agentId: text(ctx?.agentId) });
    } catch (err) {
      failed("model_call_started", err);
    }
  }

  /** Synchronous, returns nothing: the transcript write goes on unchanged. */
  function beforeMessageWrite(event, ctx) {
    try {
      const message = event?.message;
      if (message?.role !== "assistant" || typeof message.usage !== "object" || message.usage === null) return;
      if (published.has(message)) {
        stats.duplicateDispatches++;
        return;
      }
      const sessionKey = text(ctx?.sessionKey) ?? text(event?.sessionKey);
      const run = sessionKey ? runs.get(sessionKey) : undefined;
      if (!run) {
        stats.usageWithoutRun++;
        return;
      }
      const record = {
        type: "model_usage",
        event_id: newEventId(),
        gateway_id: cfg.gatewayId,
        agent_id: text(ctx?.agentId) ?? text(event?.agentId) ?? run.agentId ?? "main",
        session_id: run.sessionId,
        run_id: run.runId ?? null,
        ts: now(),
        version: EVENT_VERSION,
        ...(openclawVersion ? { openclaw_version: openclawVersion } : {}),
        provider: text(message.provider) ?? null,
        model: text(message.model) ?? null,
        ...usageFields(message.usage),
      };
      published.add(message);
      if (publisher.publish(scopeKey(run.runId, run.sessionId), JSON.stringify(record))) stats.modelUsage++;
    } catch (err) {
      failed("before_message_write", err);
    }
  }

  return { modelCallStarted, beforeMessageWrite, stats };
}
