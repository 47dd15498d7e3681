// Rate-limited logging for everything that repeats while Kafka is unreachable: kafkajs' own warnings and the
// plugin's retry lines. One LogThrottle per plugin runtime is shared by every kafkajs client it creates
// (producer, verdict consumer, each consumer retry), so a broker outage costs a few lines a minute, not dozens.

import kafkajs from "kafkajs";

const { logLevel } = kafkajs;

// Numbers, with an optional fractional part / dotted continuation (IPs, versions) and a duration unit.
const NUMBER = /\d+(?:\.\d+)*(?:\s*(?:ms|s|sec|seconds?|m|min|minutes?|h)\b)?/gi;

/** What makes two log lines "the same kind": their text with every number (and duration) blanked out. */
export function messageKind(text) {
  return String(text).replace(NUMBER, "#");
}

export class LogThrottle {
  /**
   * @param {object} [logger]  info / warn / error methods (OpenClaw's plugin logger)
   * @param {object} [opts]
   * @param {number} [opts.everyMs]  a kind of message is logged at most once per this window
   */
  constructor(logger, { everyMs = 60000, now = Date.now, maxKinds = 200 } = {}) {
    this.logger = logger;
    this.everyMs = everyMs;
    this.now = now;
    this.maxKinds = maxKinds;
    this.kinds = new Map(); // kind -> {at: when last logged, held: lines held back since}
  }

  /**
   * Log `text` at `level` ("info" | "warn" | "error") unless a line of the same kind was logged less than
   * `everyMs` ago; then it is only counted, and the next line of that kind that gets through says how many
   * were held back. Returns true when the line was logged.
   */
  log(level, text) {
    const t = this.now();
    const kind = messageKind(text);
    const seen = this.kinds.get(kind);
    if (seen && t - seen.at < this.everyMs) {
      seen.held++;
      return false;
    }
    if (!seen && this.kinds.size >= this.maxKinds) this.kinds.clear();
    this.kinds.set(kind, { at: t, held: 0 });
    const line = seen?.held
      ? `${text} (${seen.held} more like this in the last ${Math.round((t - seen.at) / 1000)}s)`
      : text;
    const logger = this.logger;
    const fn = logger?.[level] ?? logger?.warn;
    fn?.call(logger, line);
    return true;
  }

  warn(text) {
    return this.log("warn", text);
  }

  /** A kafkajs logCreator that passes kafkajs' warnings and errors through this throttle. */
  logCreator() {
    return () => ({ level, log }) => {
      if (level > logLevel.WARN) return;
      const message = String(log?.message ?? "?");
      // Name the broker when kafkajs knows it and the message does not (e.g. "Request ApiVersions(...) timed out").
      const broker = typeof log?.broker === "string" && !message.includes(log.broker) ? ` [broker ${log.broker}]` : "";
      const error = log?.error ? ` (${log.error})` : "";
      this.log(level === logLevel.ERROR ? "error" : "warn", `loopwatch-bridge kafka: ${message}${broker}${error}`);
    };
  }
}
