// Writes tests/conformance/openclaw-2026.9.json: loopwatch's conformance scenarios for the openclaw-2026.9
// profile, with every expected decision computed by the loop-detection functions shipped in an installed
// openclaw@2026.9.x package (detectToolCallLoop, recordToolCall, recordToolCallOutcome, and the config
// resolver), driven the way the embedded runner's batch admission drives them for one-call batches:
// a critical records a veto and, the second time in a run, ends the run; warnings surface once per bucket
// of 10 per run and key. The post-compaction guard is internal to the runner module; its rule (window 3,
// abort when the whole window repeats one (tool, args, result)) is applied here as read in that module.
//
//   npm install --prefix /tmp/oc96 openclaw@2026.9.6 --ignore-scripts
//   node tests/conformance/generate-openclaw-2026.9.mjs /tmp/oc96/node_modules/openclaw > tests/conformance/openclaw-2026.9.json
//
// With a second argument, a JSON file holding an array of scenarios (config, agent_override, events), it prints
// the expected decisions of each instead (tests/openclaw_e2e/test_detector_parity.py, on random runs).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [root, given] = process.argv.slice(2);
if (!root) throw new Error("usage: generate-openclaw-2026.9.mjs <node_modules/openclaw> [scenarios.json]");
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
const dist = join(root, "dist");

async function load(prefix, names) {
  const file = readdirSync(dist).find((f) => f.startsWith(prefix) && f.endsWith(".mjs"));
  const text = readFileSync(join(dist, file), "utf8");
  const exported = /export \{([^}]*)\}/.exec(text)[1];
  const mod = await import(join(dist, file));
  const out = {};
  for (const part of exported.split(",")) {
    const [name, alias] = part.trim().split(/\s+as\s+/);
    if (names.includes(name)) out[name] = mod[alias ?? name];
  }
  return out;
}

const det = await load("tool-loop-detection-", ["detectToolCallLoop", "recordToolCall", "recordToolCallOutcome"]);
const cfgMod = await load("tool-loop-detection-config-", ["resolveToolLoopDetectionConfig"]);
const BUCKET = 10;
const WINDOW = 3;

function run(scenario) {
  const cfg = {};
  if (scenario.config !== null) cfg.tools = { loopDetection: scenario.config };
  if (scenario.agent_override !== null) cfg.agents = { entries: { main: { tools: { loopDetection: scenario.agent_override } } } };
  const loop = cfgMod.resolveToolLoopDetectionConfig({ cfg, agentId: "main" });
  const detecting = loop?.enabled === true;
  const guardOn = loop?.enabled !== false;
  const state = {};
  const buckets = new Map();
  const recovered = new Set();
  const guards = new Map();
  const expected = [];
  scenario.events.forEach((ev, index) => {
    const runId = typeof ev.run_id === "string" && ev.run_id.trim() ? ev.run_id.trim() : undefined;
    const scope = runId ? { runId } : undefined;
    const runKey = runId ?? "";
    if (ev.type === "compaction_retry") {
      if (guardOn) guards.set(runKey, { remaining: WINDOW, seen: [] });
      return;
    }
    const toolCallId = `call-${index}`;
    if (detecting) {
      const r = det.detectToolCallLoop(state, ev.tool, ev.args, loop, scope);
      if (r.stuck && r.level === "critical") {
        expected.push({ index, decision: "block", code: r.detector, count: r.count, surfaced: true, published: true });
        if (recovered.has(runKey)) {
          expected.push({ index, decision: "abort", code: r.detector, count: r.count, surfaced: true, published: true });
        }
        recovered.add(runKey);
        det.recordToolCall(state, ev.tool, ev.args, toolCallId, loop, scope);
        state.toolCallHistory.at(-1).outcomeKind = "tool-loop-veto";
        return;
      }
      if (r.stuck) {
        const key = runId ? `${runId}:${r.warningKey}` : r.warningKey;
        const bucket = Math.floor(r.count / BUCKET);
        const surfaced = bucket > (buckets.get(key) ?? 0);
        if (surfaced) buckets.set(key, bucket);
        expected.push({ index, decision: "warning", code: r.detector, count: r.count, surfaced, published: surfaced });
      }
      det.recordToolCall(state, ev.tool, ev.args, toolCallId, loop, scope);
    }
    if (!("result" in ev) && !("error" in ev)) return;
    const rec = det.recordToolCallOutcome(state, {
      toolName: ev.tool, toolParams: ev.args, toolCallId, runId,
      ...("error" in ev ? { error: new Error(ev.error) } : { result: ev.result }),
    });
    const guard = guards.get(runKey);
    if (!rec?.resultHash || !guard || guard.remaining <= 0) return;
    guard.remaining -= 1;
    guard.seen.push(`${rec.toolName}\0${rec.argsHash}\0${rec.resultHash}`);
    const count = guard.seen.filter((s) => s === guard.seen.at(-1)).length;
    if (count >= WINDOW) {
      expected.push({ index, decision: "abort", code: "compaction_loop_persisted", count, surfaced: true, published: true });
    }
  });
  return expected;
}

if (given) {
  const text = JSON.stringify(JSON.parse(readFileSync(given, "utf8")).map(run));
  await new Promise((done) => process.stdout.write(text, done)); // all of it, even into a pipe
  process.exit(0);
}

// ---- scenario definitions -------------------------------------------------------------------------------
const text = (t, details = {}) => ({ content: [{ type: "text", text: t }], details });
const times = (n, f) => Array.from({ length: n }, (_, i) => f(i));
const call = (tool, args, outcome, run_id = "run-1") => ({ type: "tool_call", tool, args, ...outcome, run_id });
const same = (n, tool, args, outcome, run_id) => times(n, () => call(tool, args, outcome, run_id));
const read = { result: text("same output", { ok: true }) };
const hex = (i) => (0x1f2e3d4c5b6a7980n + BigInt(i) * 7919n).toString(16).padStart(16, "0").slice(-16);
const wrapped = (id, body) => `<<<EXTERNAL_UNTRUSTED_CONTENT id="${id}">>>\n${body}\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="${id}">>>`;
const execFail = (output) => ({ result: text(output, { status: "failed", exitCode: 1, durationMs: 1234, pid: 4242, aggregated: output }) });

const scenarios = [
  {
    name: "v9_disabled_by_default",
    config: null, agent_override: null,
    events: same(25, "read", { path: "/same.txt" }, read),
    source: "tool-loop-detection-config (no block: undefined); admission needs enabled === true",
    note: "No block: the rolling detectors are off; the guard is on but never armed.",
  },
  {
    name: "v9_enabled_must_be_true",
    config: { enabled: "yes" }, agent_override: null,
    events: same(25, "read", { path: "/same.txt" }, read),
    source: "admission: ctx.loopDetection?.enabled !== true returns early",
    note: "A truthy non-boolean enables 2026.7 detection but not 2026.9 detection.",
  },
  {
    name: "v9_generic_warn_block_then_run_ends",
    config: { enabled: true }, agent_override: null,
    events: same(23, "read", { path: "/same.txt" }, read),
    source: "detectToolCallLoop generic tiers; batch admission records the veto; agent-core ends the run on a second critical",
    note: "Warning at 10 (published once per bucket of 10), block at 20; the veto is recorded, so the next identical call counts 21 and, being the run's second critical, also ends the run.",
  },
  {
    name: "v9_retired_thresholds_are_ignored",
    config: { enabled: true, warningThreshold: 3, criticalThreshold: 5, globalCircuitBreakerThreshold: 8, historySize: 50 },
    agent_override: null,
    events: same(22, "read", { path: "/same.txt" }, read),
    source: "thresholds are constants (10/20/30) in tool-loop-detection; the keys are retired tuning paths",
    note: "2026.7 would warn at 3 and block at 5; 2026.9 uses the built-in values.",
  },
  {
    name: "v9_agent_entry_disables",
    config: { enabled: true }, agent_override: { enabled: false },
    events: [...same(22, "read", { path: "/same.txt" }, read), { type: "compaction_retry", run_id: "run-1" }, ...same(3, "read", { path: "/same.txt" }, read)],
    source: "resolveToolLoopDetectionConfig: { enabled: agent.enabled ?? global.enabled }",
    note: "agents.entries.main overrides enabled: detection and the post-compaction guard are both off.",
  },
  {
    name: "v9_agent_entry_enables",
    config: null, agent_override: { enabled: true, criticalThreshold: 5 },
    events: same(21, "read", { path: "/same.txt" }, read),
    source: "resolveToolLoopDetectionConfig: no global block -> the agent block as is; thresholds fixed",
  },
  {
    name: "v9_argument_churn_error_variants",
    config: { enabled: true }, agent_override: null,
    events: times(14, (i) => call("read", { path: `/missing-${i % 3}.txt` }, { error: "ENOENT: no such file or directory" })),
    source: "getArgumentChurnNoProgressStreak (#112620): >1 variant with >= 3 calls each, one shared no-progress outcome",
    note: "Three argument variants cycling with one shared error: argument_churn warns once the run of such calls reaches 10.",
  },
  {
    name: "v9_argument_churn_write_unchanged",
    config: { enabled: true }, agent_override: null,
    events: times(16, (i) => call("write", { path: Math.floor(i / 3) % 2 ? "/b.txt" : "/a.txt", content: "x" },
      { result: text(`wrote ${i % 3} bytes`, { changed: false }) })),
    source: "isWriteNoProgressOutcome: write results with changed === false hash as { status: 'unchanged' } and are no-progress",
  },
  {
    name: "v9_write_changed_is_progress",
    config: { enabled: true }, agent_override: null,
    events: times(16, (i) => call("write", { path: Math.floor(i / 3) % 2 ? "/b.txt" : "/a.txt", content: "x" },
      { result: text(`wrote ${i} bytes`, { changed: true }) })),
    source: "only changed === false marks a write as no-progress",
  },
  {
    name: "v9_exec_failure_identity",
    config: { enabled: true }, agent_override: null,
    events: times(23, (i) => call("exec", { command: "curl http://127.0.0.1:9/health" },
      execFail(`2026-11-30T10:00:${String(i).padStart(2, "0")}Z connect failed after ${i + 1}.5s (attempt ${i + 1}, pid ${1000 + i})`))),
    source: "hashExecFailureIdentity (#118402): timestamps, attempt counters, durations and pids masked",
    note: "Every output differs, so 2026.7 only warns; the failure identity is the same, so 2026.9 blocks at 20.",
  },
  {
    name: "v9_exec_failure_new_cause_resets",
    config: { enabled: true }, agent_override: null,
    events: times(24, (i) => call("exec", { command: "make test" },
      execFail(i % 2 ? `connection refused at 10:00:${String(i).padStart(2, "0")}` : `disk full at 10:00:${String(i).padStart(2, "0")}`))),
    source: "other text remains significant: a different failure cause breaks the streak",
  },
  {
    name: "v9_exec_failure_identity_across_commands",
    config: { enabled: true }, agent_override: null,
    events: [
      ...times(20, (i) => call("exec", { command: "deploy --try" }, execFail(`upstream rejected (attempt ${i})`))),
      call("exec", { command: "deploy --force" }, execFail("upstream rejected (attempt 99)")),
      call("exec", { command: "deploy --force" }, execFail("upstream rejected (attempt 100)")),
    ],
    source: "countNoProgressStreak(terminalExecFailuresOnly): the walk spans consecutive exec failures of any arguments",
  },
  {
    name: "v9_veto_counts_toward_breaker",
    config: { enabled: true }, agent_override: null,
    events: same(32, "command_status", { id: "job-1" }, { result: text("running", { state: "running" }) }),
    source: "countNoProgressStreak counts tool-loop-veto records (#127701)",
    note: "Blocked polls stay in the history as vetoes, so the streak grows past 20 and the global breaker takes over at 30.",
  },
  {
    name: "v9_one_recovery_per_run",
    config: { enabled: true }, agent_override: null,
    events: [
      ...same(21, "read", { path: "/a.txt" }, read, "run-1"),
      ...same(21, "read", { path: "/b.txt" }, read, "run-1"),
      ...same(21, "read", { path: "/a.txt" }, read, "run-2"),
    ],
    source: "agent-core toolLoopRecoveryState.criticalToolLoopSeen (#118647); reset for each prompt",
    note: "The first critical of run-1 leaves one recovery reply; a critical on another call later in the same run ends it; run-2 starts with a fresh allowance.",
  },
  {
    name: "v9_untrusted_wrapper_nonce",
    config: { enabled: true }, agent_override: null,
    events: times(22, (i) => call("web_fetch", { url: "https://example.com/status" },
      { result: text(wrapped(hex(i), "Service status: degraded"), { status: 200 }) })),
    source: "digestToolOutcome canonicalises <<<EXTERNAL_UNTRUSTED_CONTENT id=...>>> ids (#130210)",
    note: "Each fetch wraps the same page with a fresh id: 2026.7 sees progress, 2026.9 blocks at 20.",
  },
  {
    name: "v9_untrusted_wrapper_escaped_in_json",
    config: { enabled: true }, agent_override: null,
    events: times(21, (i) => call("web_search", { q: "status" },
      { result: text(JSON.stringify({ body: wrapped(hex(i + 50), "same \"quoted\" body") }), { ok: true }) })),
    source: "the wrapper pattern also matches inside JSON-escaped text when every quote is escaped alike",
  },
  {
    name: "v9_untrusted_wrapper_mismatched_ids_differ",
    config: { enabled: true }, agent_override: null,
    events: times(21, (i) => call("web_fetch", { url: "https://example.com/x" },
      { result: text(`<<<EXTERNAL_UNTRUSTED_CONTENT id="${hex(i)}">>>\nbody\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="${hex(i + 1)}">>>`) })),
    source: "only a pair whose start and end ids are equal is canonicalised",
  },
  {
    name: "v9_unknown_tool_block_is_not_sticky",
    config: { enabled: true }, agent_override: null,
    events: same(13, "browser", { action: "open" }, { error: "Unknown tool: browser_v2" }),
    source: "getUnknownToolRepeatStreak stops at a record without unknownToolName, which a veto record is",
  },
  {
    name: "v9_ping_pong",
    config: { enabled: true }, agent_override: null,
    events: times(22, (i) => (i % 2 ? call("read", { path: "/b" }, { result: text("B") }) : call("read", { path: "/a" }, { result: text("A") }))),
    source: "getPingPongStreak (unchanged rule): warning at 10, block at 20 with no-progress evidence",
  },
  {
    name: "v9_known_poll",
    config: { enabled: true }, agent_override: null,
    events: same(22, "process", { action: "poll", sessionId: "s1" }, { result: text("still running", { status: "running" }) }),
    source: "known poll tiers 10/20; poll outcome shape unchanged",
  },
  {
    name: "v9_guard_window_is_fixed",
    config: { postCompactionGuard: { windowSize: 6 } }, agent_override: null,
    events: [{ type: "compaction_retry", run_id: "run-1" }, ...same(4, "read", { path: "/same.txt" }, read)],
    source: "post-compaction guard DEFAULT_WINDOW_SIZE 3, no config; on unless enabled === false (#128148)",
  },
  {
    name: "v9_guard_off_when_disabled",
    config: { enabled: false }, agent_override: null,
    events: [{ type: "compaction_retry", run_id: "run-1" }, ...same(4, "read", { path: "/same.txt" }, read)],
    source: "createPostCompactionLoopGuard({ enabled: resolved?.enabled !== false })",
  },
];

for (const s of scenarios) {
  s.expected = run(s);
  s.expect_nothing_else = true;
}
const out = {
  _meta: {
    description: "loopwatch conformance scenarios for the openclaw-2026.9 profile, in the format of the 2026.7 scenarios (config = tools.loopDetection, agent_override = agents.entries.main.tools.loopDetection).",
    profile: "openclaw-2026.9",
    reference_behaviour: `openclaw@${version} as shipped (dist/tool-loop-detection-*.mjs, tool-loop-detection-config-*.mjs, agent-core-*.mjs, embedded-agent-*.mjs)`,
    conventions: [
      "As in the 2026.7 scenarios, except: a block leaves a veto record in the run's history; a run's second critical is a block followed by an abort with the same code (the run ends); surfaced and published agree (warnings reach the model once per bucket of 10 per run and key).",
    ],
    generated_by: "tests/conformance/generate-openclaw-2026.9.mjs, calling the installed package's own functions",
  },
  scenarios: scenarios.map(({ name, config, agent_override, events, expected, expect_nothing_else, source, note }) => ({
    name, config, agent_override, events, expected, expect_nothing_else, source, ...(note ? { note } : {}),
  })),
};
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
