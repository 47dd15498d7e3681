// Call signatures and outcome hashes (docs/semantics.md): the JavaScript twin of
// loopwatch's streams/detection/outcome.py, sends.py and unknown_tool.py. Outcome hashing forgets what
// changes on every call without being progress (exec pids and durations, poll session ids, send receipts)
// and returns no hash for the loop detector's own veto. test/vectors.json keeps the two byte-identical.

import { canonical, digest, sha256Hex } from "./canonical.mjs";

const EXEC_DONE = new Set(["completed", "failed"]);
const EXEC_APPROVAL = new Set(["approval-pending", "approval-unavailable"]);
const POLL_ACTIONS = new Set(["poll", "log"]);

export const MESSAGE_SEND_ACTIONS = new Set([
  "send", "broadcast", "reply", "thread-reply", "sendWithEffect", "sendAttachment", "upload-file", "sticker", "poll",
]);
export const PROVIDER_SEND_TOOLS = new Set([
  "telegram", "discord", "slack", "whatsapp", "signal", "imessage", "bluebubbles", "googlechat", "msteams",
  "matrix", "mattermost", "feishu", "line", "zalo", "instagram", "twitch", "irc", "nostr",
]);
export const VOLATILE_SEND_KEYS = new Set([
  "messageId", "message_id", "messageIds", "platformMessageId", "platformMessageIds", "fileId", "file_id",
  "fileKey", "pollId", "poll_id", "receipt", "runId", "idempotencyKey", "ts", "timestamp", "sentAt",
  "deliveredAt", "createdAt",
]);

const MAX_UNKNOWN_TOOL_NAME = 128;

// JavaScript `\s` and the `i` flag without `u`: ASCII-only case folding, JS whitespace.
// Straight quotes only, as OpenClaw 2026.7.35's own patterns.
const UNKNOWN_TOOL_PATTERNS = [
  /unknown tool[:\s]+["']?([a-z0-9_.-]+)/i,
  /tool\s+["']?([a-z0-9_.-]+)["']?\s+(?:not found|is not available)/i,
];

/** A JSON object (not null, not an array). */
export function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The call signature `tool:<sha256 of canonical args>`. */
export function callSignature(tool, argsHash) {
  return tool + ":" + argsHash;
}

/** Hex SHA-256 of the canonical arguments (the wire's `args_hash`). */
export function argsDigest(args) {
  return digest(args);
}

/** The lower-cased tool name an "unknown tool" / "tool X not found|is not available" error names, or null. */
export function unknownToolName(message) {
  for (const pattern of UNKNOWN_TOOL_PATTERNS) {
    const match = pattern.exec(message);
    if (match !== null) {
      const name = match[1].toLowerCase();
      // Same bound as the Python core: longer names travel as their digest (equal names still match).
      return name.length <= MAX_UNKNOWN_TOOL_NAME ? name : "sha256:" + sha256Hex(name);
    }
  }
  return null;
}

/** The message OpenClaw hashes for a thrown value. */
export function errorMessage(error) {
  if (error instanceof Error) return error.message || error.name;
  switch (typeof error) {
    case "string":
      return error;
    case "number":
    case "boolean":
    case "bigint":
      return String(error);
    default:
      return canonical(error);
  }
}

/** `poll` or `log` for a `process` call with object args asking for that action, else null. */
export function processAction(tool, args) {
  if (tool !== "process" || !isObject(args)) return null;
  const action = args.action;
  return typeof action === "string" && POLL_ACTIONS.has(action) ? action : null;
}

/** OpenClaw's knownPollTool: the tools whose calls are polls. */
export function isKnownPoll(tool, args) {
  return tool === "command_status" || processAction(tool, args) !== null;
}

/** Whether a call is an outbound send. */
export function isSendLike(tool, args) {
  if (tool === "sessions_send") return true;
  if (tool === "message") {
    const action = isObject(args) ? args.action : undefined;
    return typeof action === "string" && MESSAGE_SEND_ACTIONS.has(action);
  }
  if (PROVIDER_SEND_TOOLS.has(tool) && isObject(args)) {
    return typeof args.to === "string" && args.to !== "";
  }
  return false;
}

function isDeliveryObject(obj) {
  if (typeof obj.id !== "string" || typeof obj.text !== "string") return false;
  return typeof obj.direction === "string" || typeof obj.senderId === "string" ||
    typeof obj.accountId === "string" || isObject(obj.conversation);
}

/** A copy without volatile send keys at any depth (and a message delivery object's own `id`). */
export function stripSendIds(value) {
  if (Array.isArray(value)) return value.map(stripSendIds);
  if (!isObject(value)) return value;
  const dropId = isDeliveryObject(value);
  const out = {};
  for (const key of Object.keys(value)) {
    if (VOLATILE_SEND_KEYS.has(key) || (dropId && key === "id")) continue;
    const item = stripSendIds(value[key]);
    if (key === "__proto__") {
      Object.defineProperty(out, key, { value: item, enumerable: true, writable: true, configurable: true });
    } else {
      out[key] = item;
    }
  }
  return out;
}

/** The text of every content part with a string `type` and `text`, joined by newlines, trimmed. */
export function contentText(content) {
  if (!Array.isArray(content)) return "";
  const parts = [];
  for (const part of content) {
    if (isObject(part) && typeof part.type === "string" && typeof part.text === "string") parts.push(part.text);
  }
  return parts.join("\n").trim();
}

function execHash(status, details, text) {
  if (status === "running") {
    return digest({ status, tail: typeof details.tail === "string" ? details.tail : "" });
  }
  if (EXEC_DONE.has(status)) {
    const aggregated = typeof details.aggregated === "string" ? details.aggregated.trim() : "";
    return digest({
      status,
      exitCode: typeof details.exitCode === "number" ? details.exitCode : null,
      timedOut: details.timedOut === true,
      output: aggregated || text,
    });
  }
  if (EXEC_APPROVAL.has(status)) {
    const str = (v) => (typeof v === "string" ? v : null);
    return digest({
      status,
      reason: str(details.reason),
      host: str(details.host),
      command: typeof details.command === "string" ? details.command : "",
      warningText: typeof details.warningText === "string" ? details.warningText : "",
    });
  }
  return null;
}

export function processShape(action, details, text) {
  // `status` as is (an absent status stays undefined, printed bare), the other fields `?? null`.
  if (action === "poll") {
    return {
      action,
      status: details.status,
      exitCode: details.exitCode ?? null,
      exitSignal: details.exitSignal ?? null,
      aggregated: details.aggregated ?? null,
      text,
    };
  }
  return {
    action,
    status: details.status,
    totalLines: details.totalLines ?? null,
    totalChars: details.totalChars ?? null,
    truncated: details.truncated ?? null,
    exitCode: details.exitCode ?? null,
    exitSignal: details.exitSignal ?? null,
    text,
  };
}

/** Hash of a tool result; null for the loop detector's own veto. */
export function hashResult(tool, args, result) {
  if (!isObject(result)) return digest(result);
  const details = isObject(result.details) ? result.details : {};
  const text = contentText(result.content);
  const status = details.status;
  if (status === "blocked" && details.deniedReason === "tool-loop") return null;
  if (tool === "exec") {
    if (typeof status === "string") {
      const hash = execHash(status, details, text);
      if (hash !== null) return hash;
    }
  } else if (tool === "process") {
    const action = processAction(tool, args);
    if (action !== null) return digest(processShape(action, details, text));
  }
  if (isSendLike(tool, args)) return digest(stripSendIds(details));
  return sha256Hex('{"details":' + canonical(details) + ',"text":' + canonical(text) + "}");
}

// OpenClaw 2026.7.35 answers a call whose before_tool_call gate crashed with this text (thrown inside its tool
// wrapper after the call was recorded as pending, so its loop detector never records an outcome for it).
export const GATE_FAILURE_MESSAGE = "Tool call blocked because before_tool_call hook failed";

function isEmptyObject(value) {
  return isObject(value) && Object.keys(value).length === 0;
}

/**
 * What OpenClaw's loop detector recorded for a finished call, told from its after_tool_call payload:
 * `{thrown: message}` (the tool threw: the detector hashed the thrown message), `{result}` (the tool
 * returned: the detector hashed that result with the normal rules, even when it looks like a failure) or
 * `{}` (nothing to hash).
 *
 * The payload's `error` does not say which: OpenClaw also derives it from a returned result that looks like
 * a failure (non-zero exit code, an error status), as the first line of that result's text, at most 400
 * characters. A thrown error reaches the hook in one of three shapes, each carrying the whole message:
 * OpenClaw's tool adapter catches it outside the loop detector's wrapper and returns
 * `{status: "error", tool, error: message}` as JSON text and details; the agent runtime's own error result
 * has the message as its only text and empty details; the tool-search path has
 * `{details: {status: "error", error: message}}` without content.
 */
export function hookOutcome(tool, result, error) {
  if (error === undefined || error === null) return result === undefined ? {} : { result };
  if (isObject(result)) {
    const thrown = thrownMessage(tool, result);
    return thrown !== null ? { thrown } : { result };
  }
  if (result !== undefined) return { result };
  return { thrown: errorMessage(error) }; // no result at all: the error is all there is
}

function singleText(content) {
  return Array.isArray(content) && content.length === 1 && isObject(content[0]) &&
    content[0].type === "text" && typeof content[0].text === "string" ? content[0].text : null;
}

/** The thrown message a failed call's result carries, or null for a result the tool returned. */
function thrownMessage(tool, result) {
  const details = result.details;
  const text = singleText(result.content);
  if (isEmptyObject(details)) return text;
  if (!isObject(details) || details.status !== "error" || typeof details.error !== "string") return null;
  const keys = Object.keys(details);
  if (keys.length === 3 && details.tool === tool && text !== null) return details.error; // the tool adapter
  if (!("content" in result)) return details.error; // the tool-search path
  return null;
}

/** Whether a result is a plugin's before_tool_call block (OpenClaw records it like any result). */
export function isPluginBlock(result) {
  return isObject(result) && isObject(result.details) &&
    result.details.status === "blocked" && result.details.deniedReason === "plugin-before-tool-call";
}

/** Whether a result is the loop detector's own veto (it never gets a hash). */
export function isLoopVeto(result) {
  return isObject(result) && isObject(result.details) &&
    result.details.status === "blocked" && result.details.deniedReason === "tool-loop";
}

/**
 * The outcome of a finished call as OpenClaw hashes it: `{resultHash, unknownToolName}`.
 * A thrown error (anything but undefined/null) wins; an undefined result has no hash (resultHash null).
 */
export function hashOutcome(tool, args, result, error) {
  if (error !== undefined && error !== null) {
    const message = errorMessage(error);
    return { resultHash: "error:" + digest(message), unknownToolName: unknownToolName(message) };
  }
  if (result === undefined) return { resultHash: null, unknownToolName: null };
  return { resultHash: hashResult(tool, args, result), unknownToolName: null };
}
