// Plugin configuration: defaults and validation (openclaw.plugin.json holds the same rules as JSON Schema;
// OpenClaw validates against it, this module validates again so the plugin is safe when loaded elsewhere).

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

const KNOWN = new Set([
  "brokers", "topic", "verdictTopic", "gatewayId", "hashOnGateway", "enforce", "maxBuffer", "clientId",
  "ssl", "sasl", "verdictGroupId", "maxEventBytes", "openclawVersion",
]);
const SASL_MECHANISMS = new Set(["plain", "scram-sha-256", "scram-sha-512"]);

export class ConfigError extends Error {}

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
  for (const key of Object.keys(raw)) {
    if (!KNOWN.has(key)) throw new ConfigError(`unknown config key ${JSON.stringify(key)}`);
  }
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
