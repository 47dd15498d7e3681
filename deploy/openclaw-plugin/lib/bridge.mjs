// The hook handlers: OpenClaw hook events in, loopwatch.events records out (schemas/json/event.schema.json) (and enforcement decisions back).
//
// Every handler is synchronous, catches everything, and only appends to the publisher's in-memory buffer,
// so a tool call is never delayed or failed by loopwatch. State is bounded.

import { randomBytes } from "node:crypto";

import { appendNotes, BoundedMap } from "./enforcer.mjs";
import { EVENT_VERSION, hostVersion, isJsonFaithful, scopeKey } from "./events.mjs";
import {
  argsDigest, callSignature, GATE_FAILURE_MESSAGE, hashOutcome, hookOutcome, isLoopVeto, isObject, isPluginBlock,
  processAction,
} from "./outcome.mjs";
import { hashOutcome2026_9, isGeneration2026_9, withoutWarningNote } from "./outcome2026_9.mjs";

/** Event ids unique per gateway: a random boot id (new on every process start) and a counter. */
export function eventIdFactory() {
  const boot = Date.now().toString(36) + "-" + process.pid.toString(36) + "-" + randomBytes(4).toString("hex");
  let counter = 0;
  return () => boot + "-" + (++counter).toString(36);
}

const OPEN = 1;
const RESULT_SENT = 2;

function str(value) {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/**
 * @param {object} opts
 * @param {object} opts.cfg          resolved config (lib/config.mjs)
 * @param {{publish(key: string, value: string): boolean}} opts.publisher
 * @param {import("./enforcer.mjs").Enforcement} [opts.enforcement]  required when cfg.enforce
 */
export function createBridge({ cfg, publisher, enforcement = null, logger = null, now = Date.now, newEventId = eventIdFactory() }) {
  const gatewayId = cfg.gatewayId;
  const hashOnGateway = cfg.hashOnGateway;
  const enforce = cfg.enforce && enforcement !== null;
  const maxEventBytes = cfg.maxEventBytes;
  const openclawVersion = hostVersion(cfg);
  // A 2026.8+ host hashes outcomes the 2026.9 way (and loopwatch judges its events by that profile).
  const generation9 = isGeneration2026_9(openclawVersion);
  const hashFor = generation9 ? hashOutcome2026_9 : hashOutcome;
  // 2026.9 appends its loop-warning note to the result the hooks see; OpenClaw hashed the result without it.
  const hookResult = (result) => (generation9 ? withoutWarningNote(result) : result);
  // "k:"+sessionKey / "s:"+sessionId -> the session's latest run id. Never cleared at agent_end: that hook
  // fires per attempt, and a compaction retry continues the same run after it (observed on 2026.7.35).
  const currentRun = new BoundedMap(8192);
  // scope key + NUL + call id of each tool_call published from before_tool_call -> OPEN, or RESULT_SENT once the
  // tool-result middleware published its tool_result (after_tool_call then has nothing left to do).
  const openCalls = new BoundedMap(8192);
  const seenBefore = new WeakMap(); // params object -> {identity, result}: one publish per dispatch even if
  const seenAfter = new WeakMap(); //   register() ran twice and both registrations' hooks fire (identity =
  //                                     scope key + call id, so a reused params object in another call counts)
  const seenCompactions = new BoundedMap(256);
  // tool call id -> {key, ctx, sessionId, runId} of a published tool_call: the middleware has no run id.
  const callScope = new BoundedMap(8192);
  const stats = {
    toolCalls: 0,
    toolResults: 0,
    compactions: 0,
    skippedNoSession: 0,
    skippedNoOutcome: 0,
    vetoedCalls: 0,
    compactionsWithoutRun: 0,
    compactionsIgnored: 0,
    duplicateDispatches: 0,
    unrecordedCalls: 0,
    resultsFromMiddleware: 0,
    oversized: 0,
    hookErrors: 0,
    blocked: 0,
    notesAppended: 0,
    middlewareCalls: 0,
  };
  let lastErrorLog = -Infinity;

  function hookError(hook, err) {
    stats.hookErrors++;
    const t = now();
    if (t - lastErrorLog < 60000) return;
    lastErrorLog = t;
    logger?.warn?.(`loopwatch-bridge: ${hook} handler error (event not published): ${err?.stack ?? err}`);
  }

  function sessionIdOf(ctx) {
    return str(ctx?.sessionId) ?? str(ctx?.sessionKey);
  }

  function noteRun(sessionKey, sessionId, runId) {
    if (!str(runId)) return;
    if (str(sessionKey)) currentRun.set("k:" + sessionKey, runId);
    if (str(sessionId)) currentRun.set("s:" + sessionId, runId);
  }

  function runFor(sessionKey, ...sessionIds) {
    if (str(sessionKey)) {
      const run = currentRun.get("k:" + sessionKey);
      if (run) return run;
    }
    for (const id of sessionIds) {
      if (!str(id)) continue;
      const run = currentRun.get("s:" + id);
      if (run) return run;
    }
    return undefined;
  }

  function common(type, ctx, sessionId, runId) {
    return {
      type,
      event_id: newEventId(),
      gateway_id: gatewayId,
      agent_id: str(ctx?.agentId) ?? "main",
      session_id: sessionId,
      run_id: runId ?? null,
      ts: now(),
      version: EVENT_VERSION,
      ...(openclawVersion ? { openclaw_version: openclawVersion } : {}),
    };
  }

  /** Serialise and queue; raw payloads too large for a record fall back to their hashes. */
  function emit(key, record, rehash) {
    let value = JSON.stringify(record);
    if (value.length * 3 > maxEventBytes && Buffer.byteLength(value, "utf8") > maxEventBytes) {
      if (rehash) {
        rehash(record);
        value = JSON.stringify(record);
      }
      if (Buffer.byteLength(value, "utf8") > maxEventBytes) {
        stats.oversized++;
        return false;
      }
    }
    return publisher.publish(key, value);
  }

  /**
   * Put `args_hash` (instead of raw args) on a record. A `process` poll/log call also gets `poll_action`:
   * without raw args loopwatch cannot tell a known poll from any other call, and the
   * action alone reveals nothing about the arguments.
   */
  function hashArgs(record, tool, params, argsHash) {
    record.args_hash = argsHash || argsDigest(params);
    const action = processAction(tool, params);
    if (action !== null) record.poll_action = action;
  }

  /** Publish the tool_call record of a call. */
  function publishCall(event, ctx, params, callId, sessionId, runId, key, tool) {
    const argsHash = hashOnGateway || enforce ? argsDigest(params) : null;
    const record = common("tool_call", ctx, sessionId, runId);
    record.tool = tool;
    record.call_id = callId;
    if (hashOnGateway || !isJsonFaithful(params)) hashArgs(record, tool, params, argsHash);
    else record.args = params;
    const rehash = (r) => {
      delete r.args;
      hashArgs(r, tool, params, argsHash);
    };
    emit(key, record, rehash);
    stats.toolCalls++;
    if (callId !== null) callScope.set(callId, { key, ctx, sessionId, runId });
    return { record, argsHash };
  }

  function beforeToolCall(event, ctx) {
    try {
      const params = event?.params;
      const callId = str(event?.toolCallId) ?? str(ctx?.toolCallId) ?? null;
      const sessionId = sessionIdOf(ctx);
      const tool = str(event?.toolName) ?? str(ctx?.toolName);
      if (!sessionId || !tool) {
        stats.skippedNoSession++;
        return undefined;
      }
      const runId = str(event?.runId) ?? str(ctx?.runId) ?? null;
      const key = scopeKey(runId, sessionId);
      // One dispatch reaches every registration's handler with the same params object.
      const dupKey = params !== null && typeof params === "object" ? params : null;
      const identity = key + "\u0000" + callId;
      if (dupKey) {
        const prev = seenBefore.get(dupKey);
        if (prev && prev.identity === identity) {
          stats.duplicateDispatches++;
          return prev.result;
        }
      }
      noteRun(ctx?.sessionKey, ctx?.sessionId, runId);
      const { record, argsHash } = publishCall(event, ctx, params, callId, sessionId, runId, key, tool);
      if (callId !== null) openCalls.set(identity, OPEN);
      let result;
      if (enforce) {
        const signature = callSignature(tool, argsHash);
        enforcement.rememberCall(record.event_id, key, callId, signature);
        const decision = enforcement.check(key, signature, str(ctx?.sessionId));
        if (decision) {
          stats.blocked++;
          result = decision;
        }
      }
      if (dupKey) seenBefore.set(dupKey, { identity, result });
      return result;
    } catch (err) {
      hookError("before_tool_call", err);
      return undefined;
    }
  }

  function afterToolCall(event, ctx) {
    try {
      const params = event?.params;
      const callId = str(event?.toolCallId) ?? str(ctx?.toolCallId) ?? null;
      const sessionId = sessionIdOf(ctx);
      const tool = str(event?.toolName) ?? str(ctx?.toolName);
      if (!sessionId || !tool) {
        stats.skippedNoSession++;
        return;
      }
      const runId = str(event?.runId) ?? str(ctx?.runId) ?? null;
      const key = scopeKey(runId, sessionId);
      const dupKey = params !== null && typeof params === "object" ? params : null;
      if (dupKey) {
        if (seenAfter.get(dupKey) === key + "\u0000" + callId) {
          stats.duplicateDispatches++;
          return;
        }
        seenAfter.set(dupKey, key + "\u0000" + callId);
      }
      // Whether this call's before_tool_call ran (and published its tool_call).
      const identity = key + "\u0000" + callId;
      const state = callId !== null ? openCalls.get(identity) : undefined;
      const published = state !== undefined;
      if (published) openCalls.delete(identity);
      if (state === RESULT_SENT) return; // the tool-result middleware already published the outcome
      const result = hookResult(event?.result);
      if (isLoopVeto(result)) {
        // OpenClaw's own detector vetoed this call, so before_tool_call never ran for it: publish its
        // tool_call now (loopwatch then decides on it like OpenClaw did, and records nothing). A veto
        // has no outcome hash, so there is no tool_result.
        if (!published) publishCall(event, ctx, params, callId, sessionId, runId, key, tool);
        stats.vetoedCalls++;
        return;
      }
      if (!published && callId !== null) {
        if (!isPluginBlock(result)) {
          // No before_tool_call: the call never reached OpenClaw's tool wrapper (a tool name the model made
          // up, arguments that failed validation, a failed argument preparation). OpenClaw's loop detector
          // records nothing for such a call, so loopwatch must not either.
          stats.unrecordedCalls++;
          return;
        }
        // Another plugin's before_tool_call blocked first, so ours never ran; OpenClaw recorded the call
        // and hashes the block like any result.
        publishCall(event, ctx, params, callId, sessionId, runId, key, tool);
      }
      publishResult(ctx, params, callId, sessionId, runId, key, tool, hookOutcome(tool, result, event?.error));
    } catch (err) {
      hookError("after_tool_call", err);
    }
  }

  /**
   * The tool_result of a finished call: the outcome OpenClaw's loop detector hashed (see hookOutcome),
   * against the arguments it recorded that outcome with (after_tool_call's params, the ones that ran).
   * Raw mode sends the arguments and the thrown message or the result itself; an outcome JSON cannot carry
   * faithfully goes as its hash, and arguments JSON cannot carry make the whole record hashed (the core
   * never hashes a raw result without its arguments).
   * Returns whether a record was published.
   */
  function publishResult(ctx, params, callId, sessionId, runId, key, tool, outcome) {
    if (outcome.thrown === GATE_FAILURE_MESSAGE) {
      stats.unrecordedCalls++; // thrown by OpenClaw's wrapper before the tool ran: the record stays pending
      return false;
    }
    if (outcome.thrown === undefined && outcome.result === undefined) {
      stats.skippedNoOutcome++; // an absent result has no outcome hash: nothing to record
      return false;
    }
    const record = common("tool_result", ctx, sessionId, runId);
    record.tool = tool;
    record.call_id = callId;
    const thrown = outcome.thrown !== undefined;
    const hashOutcomeOnto = (r) => {
      const hashed = hashFor(tool, params, outcome.result, thrown ? outcome.thrown : undefined);
      r.result_hash = hashed.resultHash;
      if (hashed.unknownToolName !== null) r.unknown_tool_name = hashed.unknownToolName;
      // 2026.9 only: the failure identity and the no-progress mark its detector counts.
      if (hashed.failureHash) r.failure_hash = hashed.failureHash;
      if (hashed.noProgress && !String(hashed.resultHash).startsWith("error:")) r.no_progress = true;
    };
    const hashes = (r) => {
      delete r.args;
      delete r.result;
      delete r.error;
      hashArgs(r, tool, params, null);
      hashOutcomeOnto(r);
    };
    if (hashOnGateway || !isJsonFaithful(params)) {
      hashes(record); // without raw arguments the core could not hash a raw result (polls, sends)
    } else {
      record.args = params;
      if (thrown && isJsonFaithful(outcome.thrown)) record.error = outcome.thrown;
      else if (!thrown && outcome.result !== null && isJsonFaithful(outcome.result)) record.result = outcome.result;
      else hashOutcomeOnto(record);
    }
    emit(key, record, hashes);
    stats.toolResults++;
    return true;
  }

  function afterCompaction(event, ctx) {
    try {
      // OpenClaw arms its post-compaction guard only where the runner itself compacts before a retry; those
      // sites (and manual compaction) pass the session id. The agent SDK's own threshold auto-compaction
      // fires after_compaction with only {sessionKey} and never arms the guard: it is not a compaction_retry.
      if (!str(ctx?.sessionId)) {
        stats.compactionsIgnored++;
        return;
      }
      const sessionKey = str(ctx?.sessionKey);
      const previous = str(event?.previousSessionId);
      const runId = runFor(sessionKey, ctx?.sessionId, previous);
      const dup = `${sessionKey}|${ctx?.sessionId}|${previous}|${event?.sessionFile}|${event?.tokenCount}|${event?.compactedCount}`;
      const t = now();
      const last = seenCompactions.get(dup);
      if (last !== undefined && t - last < 2000) {
        stats.duplicateDispatches++;
        return;
      }
      seenCompactions.set(dup, t);
      const sessionId = sessionIdOf(ctx) ?? previous;
      if (!runId || !sessionId) {
        stats.compactionsWithoutRun++;
        return;
      }
      noteRun(sessionKey, ctx?.sessionId, runId); // a rotated session id keeps pointing at the run
      emit(scopeKey(runId, sessionId), common("compaction_retry", ctx, sessionId, runId));
      stats.compactions++;
    } catch (err) {
      hookError("after_compaction", err);
    }
  }

  function modelCallStarted(event, ctx) {
    try {
      noteRun(event?.sessionKey ?? ctx?.sessionKey, event?.sessionId ?? ctx?.sessionId, event?.runId ?? ctx?.runId);
    } catch (err) {
      hookError("model_call_started", err);
    }
  }

  /**
   * Publish a call's tool_result from the tool-result middleware, which OpenClaw runs as soon as the tool
   * returned: before after_tool_call, which can lose the race with a post-compaction guard abort, and on the
   * result as the tool returned it (after_tool_call shows it redacted and truncated). Only for calls whose
   * tool_call went out from before_tool_call; everything else is left to after_tool_call.
   */
  function publishFromMiddleware(event) {
    const callId = str(event?.toolCallId);
    const call = callId !== undefined ? callScope.get(callId) : undefined;
    if (call === undefined) return;
    const identity = call.key + "\u0000" + callId;
    if (openCalls.get(identity) !== OPEN) return;
    const tool = str(event?.toolName);
    const result = hookResult(event?.result);
    if (!tool || isLoopVeto(result)) return;
    openCalls.set(identity, RESULT_SENT);
    // The agent runtime's isError, or an error status: as after_tool_call's `error`, only a hint (see hookOutcome).
    const failed = event?.isError === true || (isObject(result?.details) && result.details.status === "error");
    const outcome = hookOutcome(tool, result, failed ? true : undefined);
    if (publishResult(call.ctx, event?.args, callId, call.sessionId, call.runId, call.key, tool, outcome)) {
      stats.resultsFromMiddleware++;
    }
  }

  function toolResultMiddleware(event, ctx) {
    try {
      stats.middlewareCalls++;
      publishFromMiddleware(event);
      if (!enforce) return undefined;
      // The middleware context carries only {runtime} on OpenClaw 2026.7.35: find the run by tool call id.
      const callId = str(event?.toolCallId);
      let key = callId !== undefined ? callScope.get(callId)?.key : undefined;
      if (key === undefined) {
        const sessionId = sessionIdOf(ctx);
        const runId = str(ctx?.runId) ?? runFor(ctx?.sessionKey, ctx?.sessionId);
        if (!sessionId && !runId) return undefined;
        key = scopeKey(runId, sessionId ?? "");
      }
      const notes = enforcement.takeNotes(key);
      if (!notes.length) return undefined;
      stats.notesAppended += notes.length;
      return { result: appendNotes(event?.result, notes) };
    } catch (err) {
      hookError("tool_result_middleware", err);
      return undefined;
    }
  }

  return {
    beforeToolCall,
    afterToolCall,
    afterCompaction,
    modelCallStarted,
    toolResultMiddleware,
    stats,
  };
}
