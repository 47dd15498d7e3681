// Outcome hashing of the OpenClaw 2026.9 generation (loopwatch profile openclaw-2026.9): the JavaScript twin
// of loopwatch's streams/detection/gen9_outcome.py and gen9_wrapper.py, kept byte-identical by
// test/vectors.json ("outcome_2026_9"). On top of the 2026.7 rules (lib/outcome.mjs): every digest ignores
// the random id of external-content wrappers; a terminal exec failure also gets a failure identity with
// volatile parts masked; errors and unchanged writes are no-progress outcomes; the loop veto is an outcome.

import { digest } from "./canonical.mjs";
import {
  contentText, errorMessage, isObject, isSendLike, processAction, processShape, stripSendIds, unknownToolName,
} from "./outcome.mjs";

const WRAPPER = /(<<<EXTERNAL_UNTRUSTED_CONTENT id=(\\*)")([a-f0-9]{16})(\2">>>(?:(?!<<<(?:END_)?EXTERNAL_UNTRUSTED_CONTENT)[\s\S])*<<<END_EXTERNAL_UNTRUSTED_CONTENT id=\2")\3(\2">>>)/g;
const QUOTE_RUN = /(?<!\\)\\*"/g;
const ZERO_ID = "0".repeat(16);
const VOLATILE = [
  /\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:z|[+-]\d{2}:\d{2})?/giu,
  /\d{1,2}:\d{2}:\d{2}(?:\.\d{1,6})?/gu,
  /\b(?:attempt|retry)\b[\s#:=]*\d+/giu,
  /\b\d+(?:\.\d+)?\s?(?:ns|us|ms|seconds?|minutes?|hours?|s)\b/giu,
  /\b(?:pid|ppid)\b[\s#:=]*\d+/giu,
];
// The note 2026.9 appends to a tool result when it surfaces a loop warning; it is not part of the outcome.
const WARNING_NOTE = /^\[System note: Tool-loop warning after \d+ repeated calls\. Change your approach or stop if you are not making progress\.\]$/;

/** Whether an OpenClaw version belongs to the 2026.9 generation (2026.8.0 and later). */
export function isGeneration2026_9(version) {
  const m = typeof version === "string" ? /^\s*v?(\d+)\.(\d+)\.(\d+)/.exec(version) : null;
  if (!m) return false;
  const [major, minor] = [Number(m[1]), Number(m[2])];
  return major > 2026 || (major === 2026 && minor >= 8);
}

/** `text` with the id of every complete, consistently escaped wrapper pair replaced by zeros. */
export function canonicalWrapperIds(text) {
  if (!text.includes("<<<EXTERNAL_UNTRUSTED_CONTENT")) return text;
  return text.replace(WRAPPER, (match, start, escapes, _id, middle, end) => {
    const depth = escapes.length;
    if ((depth & (depth + 1)) !== 0) return match;
    for (const q of middle.matchAll(QUOTE_RUN)) if (q[0].length % (depth + 1) !== 0) return match;
    return start + ZERO_ID + middle + ZERO_ID + end;
  });
}

const outcomeDigest = (value) => digest(value, canonicalWrapperIds);

/** A tool result without the trailing loop-warning notes 2026.9 appended to it (same object if none). */
export function withoutWarningNote(result) {
  if (!isObject(result) || !Array.isArray(result.content)) return result;
  let end = result.content.length;
  while (end > 0) {
    const part = result.content[end - 1];
    if (!(isObject(part) && part.type === "text" && typeof part.text === "string" && WARNING_NOTE.test(part.text))) break;
    end--;
  }
  return end === result.content.length ? result : { ...result, content: result.content.slice(0, end) };
}

function execOutcome(status, details, text) {
  if (status === "running") {
    return { resultHash: outcomeDigest({ status, tail: typeof details.tail === "string" ? details.tail : "" }) };
  }
  if (status === "completed" || status === "failed") {
    const exitCode = typeof details.exitCode === "number" ? details.exitCode : null;
    const timedOut = details.timedOut === true;
    const aggregated = typeof details.aggregated === "string" ? details.aggregated.trim() : "";
    const output = aggregated || text;
    const shape = { status, exitCode, timedOut, output };
    const resultHash = outcomeDigest(shape);
    if (exitCode === null || !Number.isFinite(exitCode) || exitCode === 0 || timedOut || output === "" ||
        output === `(Command exited with code ${exitCode})`) {
      return { resultHash };
    }
    let masked = output;
    for (const pattern of VOLATILE) masked = masked.replace(pattern, "#");
    return { resultHash, failureHash: outcomeDigest({ ...shape, output: masked }) };
  }
  if (status === "approval-pending" || status === "approval-unavailable") {
    const str = (v, fallback) => (typeof v === "string" ? v : fallback);
    return { resultHash: outcomeDigest({
      status,
      reason: str(details.reason, null),
      host: str(details.host, null),
      command: str(details.command, ""),
      warningText: str(details.warningText, ""),
    }) };
  }
  return null;
}

/**
 * The outcome of a finished call as OpenClaw 2026.9 hashes it:
 * `{resultHash, unknownToolName, failureHash, noProgress, veto}` (resultHash null: no hash).
 */
export function hashOutcome2026_9(tool, args, result, error) {
  const out = { resultHash: null, unknownToolName: null, failureHash: null, noProgress: false, veto: false };
  if (error !== undefined && error !== null) {
    const message = errorMessage(error);
    return { ...out, resultHash: "error:" + outcomeDigest(message), unknownToolName: unknownToolName(message), noProgress: true };
  }
  if (result === undefined) return out;
  if (!isObject(result)) return { ...out, resultHash: outcomeDigest(result) };
  const details = isObject(result.details) ? result.details : {};
  const text = contentText(result.content);
  const status = details.status;
  if (status === "blocked" && details.deniedReason === "tool-loop") return { ...out, veto: true };
  if (tool === "exec" && typeof status === "string") {
    const exec = execOutcome(status, details, text);
    if (exec !== null) return { ...out, ...exec };
  }
  if (tool === "write" && details.changed === false) {
    return { ...out, resultHash: outcomeDigest({ status: "unchanged" }), noProgress: true };
  }
  const action = processAction(tool, args);
  if (action !== null) return { ...out, resultHash: outcomeDigest(processShape(action, details, text)) };
  if (isSendLike(tool, args)) return { ...out, resultHash: outcomeDigest(stripSendIds(details)) };
  return { ...out, resultHash: outcomeDigest({ details, text }) };
}
