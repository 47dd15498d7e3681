// Event records for loopwatch.events (the contract: schemas/json/event.schema.json): builders for the three types.
//
// With hashOnGateway the records carry args_hash / result_hash (+ unknown_tool_name) so raw arguments and
// results never leave the gateway. Without it they carry raw args / result / error, except for values JSON
// cannot carry faithfully (undefined, non-finite numbers, lone surrogates, typed arrays, cycles, ...), which
// fall back to the hashes so that loopwatch still sees exactly what OpenClaw hashed.

export const EVENT_VERSION = 1;

/** The host's OpenClaw version as every record carries it (`openclaw_version`, at most 64 characters), or null. */
export function hostVersion(cfg) {
  return typeof cfg.openclawVersion === "string" ? cfg.openclawVersion.slice(0, 64) : null;
}

/** The scope key (docs/gateways.md): the trimmed run id when non-blank, else the session id. */
export function scopeKey(runId, sessionId) {
  if (typeof runId === "string" && runId !== "") {
    const trimmed = runId.trim();
    if (trimmed !== "") return trimmed;
  }
  return sessionId;
}

const HAS_LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Whether JSON.stringify(value) parses back (in Python or JS) to a value with the same canonical form:
 * only null, booleans, finite numbers, strings without lone surrogates, arrays and plain objects.
 */
export function isJsonFaithful(value, depth = 0) {
  if (depth > 200) return false;
  if (value === null) return true;
  switch (typeof value) {
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value);
    case "string":
      return !HAS_LONE_SURROGATE.test(value);
    case "object": {
      if (Array.isArray(value)) {
        for (let i = 0; i < value.length; i++) if (!isJsonFaithful(value[i], depth + 1)) return false;
        return true;
      }
      const proto = Object.getPrototypeOf(value);
      if (proto !== Object.prototype && proto !== null) return false;
      if (typeof value.toJSON === "function") return false;
      for (const key of Object.keys(value)) {
        if (HAS_LONE_SURROGATE.test(key) || !isJsonFaithful(value[key], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false; // undefined, bigint, function, symbol
  }
}
