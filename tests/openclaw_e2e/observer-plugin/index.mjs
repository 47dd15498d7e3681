// Test-only OpenClaw plugin: writes OpenClaw's own loop decisions (tool.loop diagnostic events) and the
// tool/compaction/run hooks it sees, in order, as JSON lines to `config.out`. The e2e test attributes each
// tool.loop event to the call it was decided for (the next before_tool_call, or the next vetoed
// after_tool_call for a block). It also owns `e2e_browser_open`, a wrapped tool that always fails with
// "Unknown tool: browser.open" -- the error OpenClaw's unknown-tool detector counts (unknown_tool_repeat) --
// and `e2e_flaky`, which always throws a two-line error whose second line changes; `e2e_fetch` always throws
// one error whatever its arguments, `e2e_page` returns one text in a fresh external-content wrapper each time.
import { appendFileSync } from "node:fs";
import { randomBytes } from "node:crypto";

let out = null;
let subscribed = false;
const seen = new WeakSet();
const write = (obj) => {
  if (out) appendFileSync(out, JSON.stringify({ t: Date.now(), ...obj }) + "\n");
};

export default {
  id: "loopwatch-e2e-observer",
  name: "loopwatch e2e observer",
  register(api) {
    if (api.registrationMode === "cli-metadata" || api.registrationMode === "setup-only") return;
    out ??= api.pluginConfig?.out ?? null;
    write({ kind: "register", mode: api.registrationMode });
    api.registerTool({
      name: "e2e_browser_open",
      label: "Open URL (e2e)",
      description: "Test-only: open a URL in the browser. Always fails: the browser tool is missing.",
      parameters: { type: "object", properties: { url: { type: "string" } }, additionalProperties: false },
      async execute() {
        throw new Error("Unknown tool: browser.open");
      },
    });
    let flaky = 0;
    api.registerTool({
      name: "e2e_flaky",
      label: "Flaky step (e2e)",
      description: "Test-only: run a build step. Always throws a two-line error whose second line changes.",
      parameters: { type: "object", properties: { step: { type: "string" } }, additionalProperties: false },
      async execute() {
        throw new Error(`step failed: build broke\nattempt ${++flaky} at ${Date.now()}`);
      },
    });
    api.registerTool({
      name: "e2e_fetch",
      label: "Fetch package (e2e)",
      description: "Test-only: download a package from a mirror. Always fails the same way, whatever the mirror.",
      parameters: { type: "object", properties: { url: { type: "string" } }, additionalProperties: false },
      async execute() {
        throw new Error("fetch failed: upstream unavailable (HTTP 503)");
      },
    });
    api.registerTool({
      name: "e2e_page",
      label: "Read page (e2e)",
      description: "Test-only: read a web page. Always the same text, inside a fresh untrusted-content wrapper.",
      parameters: { type: "object", properties: { url: { type: "string" } }, additionalProperties: false },
      async execute() {
        const id = randomBytes(8).toString("hex");
        const text = `<<<EXTERNAL_UNTRUSTED_CONTENT id="${id}">>>\nSource: Web Fetch\n---\nStatus: still deploying.\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="${id}">>>`;
        return { content: [{ type: "text", text }], details: { status: 200 } };
      },
    });
    // The tool-result middleware runs inside the agent loop right after the tool returned (before
    // after_tool_call): the test records whether it still sees the call that tripped the guard.
    if (typeof api.registerAgentToolResultMiddleware === "function") {
      api.registerAgentToolResultMiddleware((e) => {
        write({ kind: "middleware", toolName: e?.toolName, toolCallId: e?.toolCallId, isError: e?.isError ?? null });
        return undefined;
      }, { runtimes: ["openclaw"] });
    }
    if (!subscribed) {
      subscribed = true;
      import("openclaw/plugin-sdk/diagnostic-runtime")
        .then((sdk) => {
          sdk.onDiagnosticEvent((event) => {
            if (event?.type === "tool.loop") write({ kind: "tool.loop", ...event, trace: undefined });
          });
          write({ kind: "subscribed" });
        })
        .catch((err) => write({ kind: "subscribe-failed", error: String(err) }));
    }
    const once = (name, fn) => api.on(name, (event, ctx) => {
      if (event && typeof event === "object") {
        if (seen.has(event)) return undefined;
        seen.add(event);
      }
      return fn(event ?? {}, ctx ?? {});
    });
    once("before_tool_call", (e, c) => write({ kind: "before", mode: api.registrationMode, toolName: e.toolName, toolCallId: e.toolCallId, runId: e.runId ?? c.runId, sessionId: c.sessionId, sessionKey: c.sessionKey, params: e.params }));
    once("after_tool_call", (e, c) => write({
      kind: "after", mode: api.registrationMode, toolName: e.toolName, toolCallId: e.toolCallId, runId: e.runId ?? c.runId, sessionId: c.sessionId,
      error: e.error ?? null, details: e.result?.details ?? null, text: (e.result?.content ?? []).map((p) => p?.text ?? "").join("\n").slice(0, 400),
    }));
    once("after_compaction", (e, c) => write({ kind: "after_compaction", event: e, sessionId: c.sessionId, sessionKey: c.sessionKey, runId: c.runId ?? null }));
    once("agent_end", (e, c) => write({ kind: "agent_end", runId: e.runId ?? c.runId, success: e.success, error: e.error ?? null, sessionId: c.sessionId }));
  },
};
