// Canonical JSON exactly as OpenClaw's stableStringify prints it, and the SHA-256 digests built on it.
//
// Written from the Python core's rules (streams/detection/canonical.py) and checked
// byte for byte against the Python core with test/vectors.json:
// - object keys sorted by UTF-16 code units (Array.prototype.sort's default), recursively;
// - strings JSON-quoted (lone surrogates as \udxxx escapes); non-ASCII stays raw;
// - numbers as Number.prototype.toString prints them; non-finite numbers and bigints as quoted strings;
// - null / undefined as the bare words null / undefined ({a: undefined} differs from {});
// - Error -> {message, name, stack}; Uint8Array -> {type: "Uint8Array", data: <base64>};
// - a reference back to an ancestor -> "[Circular]" (repeated non-cyclic references print in full).

import { createHash } from "node:crypto";

/** JSON.stringify of a string (a lone surrogate is written as its \udxxx escape, as OpenClaw hashes it). */
function quote(text) {
  return JSON.stringify(text);
}

function encode(value, ancestors, norm) {
  if (value === null) return "null";
  switch (typeof value) {
    case "string":
      return quote(norm ? norm(value) : value);
    case "number":
      return Number.isFinite(value) ? String(value) : JSON.stringify(String(value));
    case "boolean":
      return value ? "true" : "false";
    case "undefined":
      return "undefined";
    case "bigint":
      return JSON.stringify(value.toString());
    case "object":
      return encodeObject(value, ancestors, norm);
    default: // function, symbol: not JSON; print their string form
      return quote(String(value));
  }
}

function encodeObject(value, ancestors, norm) {
  if (ancestors.includes(value)) return '"[Circular]"';
  ancestors.push(value);
  try {
    if (Array.isArray(value)) {
      let out = "[";
      for (let i = 0; i < value.length; i++) {
        if (i > 0) out += ",";
        out += encode(value[i], ancestors, norm);
      }
      return out + "]";
    }
    if (value instanceof Uint8Array) {
      return '{"data":' + quote(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64")) + ',"type":"Uint8Array"}';
    }
    if (value instanceof Error) {
      return encodeObject({ message: value.message, name: value.name, stack: value.stack }, ancestors, norm);
    }
    if (norm) {
      // Keys are normalised too and sort by their normalised form, ties by the original key.
      const entries = Object.keys(value).map((key) => [norm(key), key]);
      entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
      return "{" + entries.map(([n, key]) => quote(n) + ":" + encode(value[key], ancestors, norm)).join(",") + "}";
    }
    const keys = Object.keys(value).sort();
    let out = "{";
    for (let i = 0; i < keys.length; i++) {
      if (i > 0) out += ",";
      out += quote(keys[i]) + ":" + encode(value[keys[i]], ancestors);
    }
    return out + "}";
  } finally {
    ancestors.pop();
  }
}

/** The canonical JSON text of a value; `normalize` (optional) rewrites every string and key first. */
export function canonical(value, normalize = undefined) {
  return encode(value, [], normalize);
}

/** Lowercase hex SHA-256 of already canonical text (UTF-8). */
export function sha256Hex(text) {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

/** Lowercase hex SHA-256 of the canonical text of a value: OpenClaw's hash of params and outcomes. */
export function digest(value, normalize = undefined) {
  return sha256Hex(canonical(value, normalize));
}
