// Plugin configuration: defaults and validation. This module is the only validator: openclaw.plugin.json's
// configSchema lists the keys (with descriptions and defaults) but constrains nothing, because OpenClaw refuses
// to start the whole gateway when a plugin's config fails that schema. Here a mistake (unknown key, wrong type)
// throws ConfigError, and index.mjs disables just the plugin with one error line.

import { hostname } from "node:os";

export const DEFAULTS = Object.freeze({
  brokers: ["127.0.0.1:9092"],
  topic: "loopwatch.events",
  verdictTopic: "loopwatch.verdicts",
  hashOnGateway: true,
  enforce: false,
  maxBuffer: 10000,
  clientId: "loopwatch-bridge",
  maxEventBytes: 900000,
});

/** Every config key the plugin knows (openclaw.plugin.json lists the same). */
export const CONFIG_KEYS = new Set([
  "brokers", "topic", "verdictTopic", "gatewayId", "hashOnGateway", "enforce", "maxBuffer", "clientId",
  "ssl", "sasl", "verdictGroupId", "maxEventBytes", "openclawVersion",
]);
const SASL_MECHANISMS = new Set(["plain", "scram-sha-256", "scram-sha-512"]);
const SASL_KEYS = new Set(["mechanism", "username", "password"]);

export class ConfigError extends Error {}

/** Edit distance (insertions, deletions, substitutions, adjacent swaps) between two strings. */
function editDistance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The known key `key` was probably meant to be: a typo, or a shortened or extended name (case, "_" and "-"
 * ignored). Null when nothing is close.
 */
export function closestKey(key, known = CONFIG_KEYS) {
  const norm = (k) => k.toLowerCase().replace(/[-_\s]/g, "");
  const a = norm(key);
  let best = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const b = norm(candidate);
    const prefix = Math.min(a.length, b.length) >= 3 && (a.startsWith(b) || b.startsWith(a));
    const distance = prefix ? Math.min(1, editDistance(a, b)) : editDistance(a, b);
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best !== null && bestDistance <= Math.max(1, Math.floor(best.length / 3)) ? best : null;
}

/** Throws a ConfigError naming every key of `raw` not in `known`, each with the closest known key as a hint. */
function rejectUnknownKeys(raw, known, what) {
  const unknown = Object.keys(raw).filter((key) => !known.has(key));
  if (unknown.length === 0) return;
  const named = unknown.map((key) => {
    const hint = closestKey(key, known);
    return hint ? `${JSON.stringify(key)} (did you mean ${JSON.stringify(hint)}?)` : JSON.stringify(key);
  });
  const guessedAll = unknown.every((key) => closestKey(key, known));
  throw new ConfigError(
    `unknown ${what} key${unknown.length > 1 ? "s" : ""} ${named.join(", ")}` +
      (guessedAll ? "" : `; known keys: ${[...known].join(", ")}`),
  );
}

function nonEmptyString(value, name) {
  if (typeof value !== "string" || value.trim() === "") throw new ConfigError(`${name} must be a non-empty string`);
  return value;
}

function positiveInt(value, name) {
  if (!Number.isInteger(value) || value < 1) throw new ConfigError(`${name} must be a positive integer`);
  return value;
}

/** The resolved config (defaults applied); throws ConfigError on invalid input. */
export function resolveConfig(raw = {}, { hostVersion } = {}) {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) throw new ConfigError("config must be an object");
  rejectUnknownKeys(raw, CONFIG_KEYS, "config");
  const cfg = { ...DEFAULTS };
  if (raw.brokers !== undefined) {
    const brokers = typeof raw.brokers === "string" ? raw.brokers.split(",").map((b) => b.trim()).filter(Boolean) : raw.brokers;
    if (!Array.isArray(brokers) || brokers.length === 0) throw new ConfigError("brokers must be a non-empty array of host:port");
    for (const b of brokers) {
      if (typeof b !== "string" || (!/^[^\s:]+:\d+$/.test(b) && !/^\[[0-9a-fA-F:]+\]:\d+$/.test(b))) {
        throw new ConfigError(`broker ${JSON.stringify(b)} is not host:port`);
      }
    }
    cfg.brokers = [...brokers];
  }
  for (const key of ["topic", "verdictTopic", "clientId"]) {
    if (raw[key] !== undefined) cfg[key] = nonEmptyString(raw[key], key);
  }
  cfg.gatewayId = raw.gatewayId !== undefined ? nonEmptyString(raw.gatewayId, "gatewayId") : hostname();
  cfg.gatewayIdDefaulted = raw.gatewayId === undefined;
  // The host's OpenClaw version, stamped on every event so loopwatch judges it by that generation's rules;
  // normally taken from the plugin runtime (index.mjs), configurable for hosts that do not report it.
  const host = typeof hostVersion === "string" && hostVersion.trim() !== "" ? hostVersion.trim() : null;
  cfg.openclawVersion = raw.openclawVersion !== undefined ? nonEmptyString(raw.openclawVersion, "openclawVersion") : host;
  for (const key of ["hashOnGateway", "enforce"]) {
    if (raw[key] !== undefined) {
      if (typeof raw[key] !== "boolean") throw new ConfigError(`${key} must be a boolean`);
      cfg[key] = raw[key];
    }
  }
  for (const key of ["maxBuffer", "maxEventBytes"]) {
    if (raw[key] !== undefined) cfg[key] = positiveInt(raw[key], key);
  }
  cfg.verdictGroupId = raw.verdictGroupId !== undefined
    ? nonEmptyString(raw.verdictGroupId, "verdictGroupId")
    : `${cfg.clientId}-verdicts-${cfg.gatewayId}`;
  if (raw.ssl !== undefined) {
    if (typeof raw.ssl !== "boolean" && (raw.ssl === null || typeof raw.ssl !== "object" || Array.isArray(raw.ssl))) {
      throw new ConfigError("ssl must be a boolean or an object of TLS options");
    }
    cfg.ssl = raw.ssl;
  }
  if (raw.sasl !== undefined) {
    const sasl = raw.sasl;
    if (sasl !== null && typeof sasl === "object" && !Array.isArray(sasl)) rejectUnknownKeys(sasl, SASL_KEYS, "sasl");
    if (sasl === null || typeof sasl !== "object" || !SASL_MECHANISMS.has(sasl.mechanism)) {
      throw new ConfigError("sasl must be {mechanism: plain|scram-sha-256|scram-sha-512, username, password}");
    }
    nonEmptyString(sasl.username, "sasl.username");
    if (typeof sasl.password !== "string") throw new ConfigError("sasl.password must be a string");
    cfg.sasl = { mechanism: sasl.mechanism, username: sasl.username, password: sasl.password };
  }
  return Object.freeze(cfg);
}

/** kafkajs client options for a resolved config. */
export function kafkaOptions(cfg, overrides = {}) {
  const opts = {
    clientId: cfg.clientId,
    brokers: cfg.brokers,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 2, initialRetryTime: 200, maxRetryTime: 2000 },
    ...overrides,
  };
  if (cfg.ssl !== undefined) opts.ssl = cfg.ssl;
  if (cfg.sasl !== undefined) opts.sasl = cfg.sasl;
  return opts;
}
