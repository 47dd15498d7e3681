// Drives the bridge's hook handlers through a representative session and prints what it would publish, one
// JSON line per record: {"mode": "hash"|"raw", "key": <record key>, "value": <record value text>}.
// tests/openclaw/test_plugin_events.py decodes every value with loopwatch's own decoder (streams/decode.py) and
// checks that gateway-side hashes equal what loopwatch computes from the raw records.
import { createBridge } from "../lib/bridge.mjs";
import { resolveConfig } from "../lib/config.mjs";

const text = (t) => [{ type: "text", text: t }];
const CALLS = [
  { tool: "exec", params: { command: "ls -la" }, result: { content: text("a\nb"), details: { status: "completed", exitCode: 0, aggregated: "a\nb", durationMs: 5, pid: 10 } } },
  { tool: "exec", params: { command: "sleep 9", background: true }, result: { content: text("running"), details: { status: "running", tail: "", pid: 11, sessionId: "p1" } } },
  { tool: "process", params: { action: "poll", sessionId: "p1" }, result: { content: text("still running"), details: { status: "running", aggregated: "", pid: 11 } } },
  { tool: "process", params: { action: "log", sessionId: "p1" }, result: { content: text("l1"), details: { totalLines: 1, totalChars: 2, truncated: false } } },
  { tool: "command_status", params: { id: "c" }, result: { content: text("ok"), details: { status: "done" } } },
  { tool: "read", params: { path: "/tmp/\u00e9\u{1f600}.txt" }, result: { content: text("contenu \u00e9 \u2028"), details: { size: 9 } } },
  { tool: "read", params: { path: "/nope" }, error: "ENOENT: no such file or directory" },
  { tool: "browser_call", params: {}, error: "Unknown tool: browser" },
  { tool: "sessions_send", params: { sessionKey: "k", message: "hi" }, result: { content: text("sent m1"), details: { ok: true, messageId: "m1", ts: 5 } } },
  { tool: "message", params: { action: "send", to: "u:1", text: "yo" }, result: { content: text("ok"), details: { delivery: { id: "d1", text: "yo", direction: "outbound" } } } },
  { tool: "telegram", params: { to: "123", text: "x" }, result: { content: text("ok"), details: { messageId: 9, chatId: 123 } } },
  { tool: "exec", params: { command: "rm -rf /" }, result: { content: text("blocked"), details: { status: "blocked", deniedReason: "plugin-before-tool-call", reason: "policy" } } },
  { tool: "web_fetch", params: { url: "https://x", big: 1e21, neg: -0, tiny: 5e-324 }, result: "plain string result" },
  { tool: "weird", params: { n: NaN, u: undefined, lone: "a\ud800" }, result: { content: [], details: { status: undefined, nested: [1, { b: 2, a: 1 }] } } },
  { tool: "nullresult", params: null, result: null },
  { tool: "exec", params: { command: "ls -la" }, result: { content: text("CRITICAL: loop"), details: { status: "blocked", deniedReason: "tool-loop" } } },
  // As OpenClaw 2026.7.35 delivers failures: a thrown error as the runtime's error result (+ its first line),
  // a returned failure with the error OpenClaw derived from it, and a made-up tool name (no before_tool_call).
  { tool: "read", params: { path: "/x" }, result: { content: text("EACCES: denied\n    at open"), details: {} }, error: "EACCES: denied" },
  { tool: "web_fetch", params: { url: "https://y" }, result: { content: text('{\n  "status": "error",\n  "tool": "web_fetch",\n  "error": "Unknown tool: fetcher\\nretry later"\n}'), details: { status: "error", tool: "web_fetch", error: "Unknown tool: fetcher\nretry later" } }, error: "Unknown tool: fetcher" },
  { tool: "exec", params: { command: "false" }, result: { content: text("fatal: no\nmore"), details: { status: "failed", exitCode: 1, aggregated: "fatal: no\nmore" } }, error: "fatal: no" },
  { tool: "grep_all", params: { q: 1 }, result: { content: text("Tool grep_all not found"), details: {} }, error: "Tool grep_all not found", unwrapped: true },
];

const CTX = [
  { agentId: "main", sessionKey: "agent:main:main", sessionId: "sess-a", runId: "run-a" },
  { agentId: "Ops", sessionKey: "agent:ops:x", sessionId: "sess-b", runId: "  run-b\u3000" },
  { sessionKey: "agent:main:y", sessionId: "sess-c" },
];

for (const mode of ["hash", "raw"]) {
  const cfg = resolveConfig({ gatewayId: "gw-sample", hashOnGateway: mode === "hash" });
  const lines = [];
  const publisher = { publish: (key, value) => lines.push({ mode, key, value }) };
  let n = 0;
  let t = 1_750_000_000_000;
  const bridge = createBridge({ cfg, publisher, now: () => ++t, newEventId: () => `${mode}-${++n}` });
  for (const ctx of CTX) {
    bridge.modelCallStarted({ runId: ctx.runId ?? "", callId: "m", sessionId: ctx.sessionId, provider: "fake", model: "fake" }, ctx);
    CALLS.forEach((c, i) => {
      const id = `call-${i}`;
      const tctx = { ...ctx, toolName: c.tool, toolCallId: id };
      if (!c.unwrapped) bridge.beforeToolCall({ toolName: c.tool, params: c.params, runId: ctx.runId, toolCallId: id }, tctx);
      const after = { toolName: c.tool, params: c.params, runId: ctx.runId, toolCallId: id, durationMs: 1 };
      if ("result" in c) after.result = c.result;
      if ("error" in c) after.error = c.error;
      bridge.afterToolCall(after, tctx);
    });
    bridge.afterCompaction({ messageCount: 3, compactedCount: 7, tokenCount: 100 }, { sessionId: ctx.sessionId, sessionKey: ctx.sessionKey, agentId: ctx.agentId });
  }
  for (const line of lines) process.stdout.write(JSON.stringify(line) + "\n");
}
