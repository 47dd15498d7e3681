// loopwatch bridge: an OpenClaw plugin that publishes every tool call, tool result and successful compaction
// to loopwatch (Kafka topic loopwatch.events, in the schema of schemas/json/event.schema.json) and, with
// `enforce`, applies loopwatch's verdicts.
//
// register() may run more than once per process (registration modes "full", "discovery", ...; which one's
// hooks dispatch depends on the OpenClaw version), so hooks are registered in every mode except
// cli-metadata / setup-only, and all state (publisher, consumer, bridge) is module-global and created once.

import { createBridge, eventIdFactory } from "./lib/bridge.mjs";
import { ConfigError, resolveConfig } from "./lib/config.mjs";
import { Enforcement, startVerdictConsumer } from "./lib/enforcer.mjs";
import { kafkaProducerFactory, Publisher } from "./lib/publisher.mjs";
import { LogThrottle } from "./lib/throttle.mjs";
import { createUsageReporter } from "./lib/usage.mjs";

export const PLUGIN_ID = "loopwatch-bridge";
const SKIPPED_MODES = new Set(["cli-metadata", "setup-only"]);

// Process-global, not module-global: OpenClaw may import this module more than once (startup and the agent
// runtime loader), and every copy must share one publisher, one consumer and one bridge.
const STATE = (globalThis[Symbol.for("loopwatch-bridge.state")] ??= { runtime: null, disabledReason: null });

/** Aborts an OpenClaw run by session id through the plugin SDK (resolved lazily, inside the gateway). */
async function abortRunViaSdk(sessionId, reason) {
  const sdk = await import("openclaw/plugin-sdk/agent-harness");
  const abort = sdk.abortAgentHarnessRun ?? sdk.abortEmbeddedAgentRun;
  if (typeof abort !== "function") throw new Error("openclaw/plugin-sdk/agent-harness has no abortAgentHarnessRun");
  const error = new Error(reason);
  error.name = "LoopwatchAbort";
  return abort(sessionId, { reason: error });
}

function createRuntime(api) {
  const logger = api.logger;
  const cfg = resolveConfig(api.pluginConfig ?? {}, { hostVersion: api.runtime?.version });
  if (cfg.gatewayIdDefaulted) {
    logger?.warn?.(`loopwatch-bridge: no gatewayId configured; using the host name ${JSON.stringify(cfg.gatewayId)}`);
  }
  // One throttle for every kafkajs client and retry line of this runtime: a broker outage logs each kind of
  // message at most once a minute.
  const throttle = new LogThrottle(logger);
  const publisher = new Publisher({
    topic: cfg.topic,
    maxBuffer: cfg.maxBuffer,
    producerFactory: kafkaProducerFactory(cfg, logger, throttle),
    logger,
    throttle,
    target: cfg.brokers.join(","),
  });
  const enforcement = cfg.enforce ? new Enforcement({ gatewayId: cfg.gatewayId, abortRun: abortRunViaSdk, logger }) : null;
  const bridge = createBridge({ cfg, publisher, enforcement, logger });
  logger?.info?.(
    `loopwatch-bridge: publishing to ${cfg.topic} on ${cfg.brokers.join(",")} as gateway ${cfg.gatewayId}` +
      ` (hashOnGateway=${cfg.hashOnGateway}, enforce=${cfg.enforce}, maxBuffer=${cfg.maxBuffer},` +
      ` openclawVersion=${cfg.openclawVersion ?? "unknown"})`,
  );
  const usage = createUsageReporter({ cfg, publisher, newEventId: eventIdFactory(), logger });
  return { cfg, bridge, publisher, enforcement, usage, consumer: null, logger, throttle };
}

function ensureConsumer() {
  const runtime = STATE.runtime;
  if (runtime?.enforcement && !runtime.consumer) {
    runtime.consumer = startVerdictConsumer({
      cfg: runtime.cfg,
      enforcement: runtime.enforcement,
      logger: runtime.logger,
      throttle: runtime.throttle,
    });
  }
}

async function stop(timeoutMs = 2000) {
  const current = STATE.runtime;
  if (!current) return;
  STATE.runtime = null; // a later register() (gateway restart in-process) starts a fresh runtime
  const consumer = current.consumer;
  current.consumer = null;
  await Promise.all([current.publisher.close(timeoutMs), consumer?.stop()]).catch(() => {});
  current.logger?.info?.(`loopwatch-bridge: stopped; ${JSON.stringify(snapshot(current))}`);
}

/** Counters of the running bridge (for tests and diagnostics). */
export function bridgeStats() {
  return STATE.runtime ? snapshot(STATE.runtime) : null;
}

function snapshot(runtime) {
  return {
    bridge: { ...runtime.bridge.stats },
    publisher: runtime.publisher.snapshot(),
    enforcement: runtime.enforcement ? { ...runtime.enforcement.stats } : null,
    usage: { ...runtime.usage.stats },
  };
}

function on(api, hook, handler, opts) {
  try {
    api.on(hook, handler, opts);
    return true;
  } catch (err) {
    api.logger?.warn?.(`loopwatch-bridge: cannot register ${hook}: ${err?.message ?? err}`);
    return false;
  }
}

export function register(api) {
  if (SKIPPED_MODES.has(api.registrationMode)) return;
  if (STATE.disabledReason) return;
  if (!STATE.runtime) {
    try {
      STATE.runtime = createRuntime(api);
    } catch (err) {
      const invalid = err instanceof ConfigError;
      STATE.disabledReason = invalid ? `invalid config: ${err.message}` : String(err?.stack ?? err);
      // One line; the gateway itself keeps running (openclaw.plugin.json's schema accepts any config on purpose).
      api.logger?.error?.(
        `loopwatch-bridge disabled: ${STATE.disabledReason}` +
          (invalid ? `; the gateway runs without it: fix plugins.entries.${PLUGIN_ID}.config and restart` : ""),
      );
      return;
    }
  }
  const runtime = STATE.runtime;
  // Handlers look the runtime up at call time: every registration (and module copy) uses the live one.
  const live = () => STATE.runtime?.bridge;
  // Publishing happens in the handlers without awaiting anything; the consumer (enforce) starts with the
  // gateway, or lazily with the first tool call when the host has no gateway_start.
  on(api, "before_tool_call", (event, ctx) => {
    ensureConsumer();
    return live()?.beforeToolCall(event, ctx);
  }, { priority: 1000 });
  on(api, "after_tool_call", (event, ctx) => live()?.afterToolCall(event, ctx));
  on(api, "after_compaction", (event, ctx) => live()?.afterCompaction(event, ctx));
  on(api, "model_call_started", (event, ctx) => live()?.modelCallStarted(event, ctx));
  // Model usage per model call (lib/usage.mjs): the run from model_call_started, the numbers from the reply's
  // transcript write.
  on(api, "model_call_started", (event, ctx) => STATE.runtime?.usage.modelCallStarted(event, ctx));
  on(api, "before_message_write", (event, ctx) => STATE.runtime?.usage.beforeMessageWrite(event, ctx));
  on(api, "gateway_start", () => ensureConsumer());
  on(api, "gateway_stop", () => stop());
  // The tool-result middleware sees each outcome first (see createBridge's publishFromMiddleware) and, with
  // enforce, appends warning notes.
  const notes = runtime.cfg.enforce ? "; warning notes are disabled" : "";
  if (typeof api.registerAgentToolResultMiddleware === "function") {
    try {
      api.registerAgentToolResultMiddleware((event, ctx) => live()?.toolResultMiddleware(event, ctx), { runtimes: ["openclaw"] });
    } catch (err) {
      api.logger?.warn?.(`loopwatch-bridge: tool-result middleware refused (${err?.message ?? err}): outcomes from after_tool_call only${notes}`);
    }
  } else {
    api.logger?.warn?.(`loopwatch-bridge: this OpenClaw has no tool-result middleware: outcomes from after_tool_call only${notes}`);
  }
}

/** Test hook: stop and forget the process-global runtime. */
export async function resetForTests() {
  await stop(100);
  STATE.disabledReason = null;
}

export default {
  id: PLUGIN_ID,
  name: "loopwatch bridge",
  description: "Publishes tool calls to loopwatch (Kafka) and optionally enforces its loop verdicts.",
  register,
};
