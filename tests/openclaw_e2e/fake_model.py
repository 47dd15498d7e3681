"""A scripted OpenAI-compatible model on 127.0.0.1 for driving a real OpenClaw gateway without internet.

``POST /v1/chat/completions`` (``stream: true``) answers with SSE chunks. The user message of a turn names
a scenario and a unique tag (``SCENARIO <name> <tag>``); each request that offers tools advances that
tag's script by one step: a tool call (``delta.tool_calls`` + ``finish_reason: "tool_calls"``), a one-off
HTTP 400 ``context_length_exceeded`` (which makes OpenClaw compact and retry), or the final text answer.
Requests without tools (compaction summaries) get a plain text answer and do not advance the script.

    python fake_model.py --port 0 --port-file /tmp/port   # prints nothing; writes the bound port
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Step = dict[str, Any]


def _exec(command: str) -> Step:
    return {"tool": "exec", "args": {"command": command}}


BACKGROUND = "$BG"  # in a step's args: the session id of the run's latest background exec
TICKER = "for i in $(seq 1 600); do echo tick $i; sleep 0.1; done"


def _background(command: str) -> Step:
    return {"tool": "exec", "args": {"command": command, "background": True}}


def _process(action: str) -> Step:
    return {"tool": "process", "args": {"action": action, "sessionId": BACKGROUND}}


def _alternate(real: Step, others: list[Step], n: int) -> list[Step]:
    """real, others[0], real, others[1], ... (n steps)."""
    return [real if i % 2 == 0 else others[(i // 2) % len(others)] for i in range(n)]


# What the mixed scripts are made of: repeats, failures returned and thrown, drifting output, a missing tool,
# argument variants failing alike, wrapped pages, and a call OpenClaw answers before its tool wrapper.
_MIXED_STEPS: list[Step] = [
    _exec("echo mixed-a"),
    _exec("echo mixed-b"),
    _exec("echo mixed-c"),
    _exec("echo mixed-fail; exit 3"),
    _exec("echo mixed-drift; date +%s%N"),
    {"tool": "e2e_browser_open", "args": {"url": "https://example.test/mixed"}},
    {"tool": "e2e_flaky", "args": {"step": "mixed"}},
    {"tool": "e2e_fetch", "args": {"url": "https://mirror-0.test/mixed"}},
    {"tool": "e2e_fetch", "args": {"url": "https://mirror-1.test/mixed"}},
    {"tool": "e2e_page", "args": {"url": "https://example.test/mixed"}},
    {"tool": "grep_all", "args": {"q": "mixed"}},
]


def _mixed(seed: int, length: int = 45) -> list[Step]:
    """A seeded random script: runs of one step and alternations of two, cut at ``length`` calls."""
    rng = random.Random(seed)
    steps: list[Step] = []
    while len(steps) < length:
        if rng.random() < 0.5:
            steps += [rng.choice(_MIXED_STEPS)] * rng.randint(2, 22)
        else:
            pair = rng.sample(_MIXED_STEPS, 2)
            steps += [pair[i % 2] for i in range(rng.randint(4, 24))]
    return steps[:length]


def _scripts() -> dict[str, list[Step]]:
    return {
        # Seeded random mixes (no expectation of their own: every call is compared).
        "mixed_a": _mixed(1),
        "mixed_b": _mixed(2),
        "mixed_c": _mixed(3),
        # 24 identical calls with identical results: warning at the 11th, blocks from the 21st (sticky).
        "generic_repeat": [_exec("echo loop-generic") for _ in range(24)],
        # A,B,A,B...: ping-pong warning at the 10th call, block at the 20th, then the sidestep.
        "ping_pong": [_exec("echo ping" if i % 2 == 0 else "echo pong") for i in range(24)],
        # A process poll that never progresses (unknown session: identical outcome every time).
        "poll": [{"tool": "process", "args": {"action": "poll", "sessionId": "no-such-session"}} for _ in range(23)],
        # Distinct calls, an overflow (compaction + retry arms the guard), then 3 identical calls: abort.
        "guard": [
            _exec("echo guard-1"),
            _exec("echo guard-2"),
            _exec("echo guard-3"),
            {"overflow": True},
            _exec("echo guard-same"),
            _exec("echo guard-same"),
            _exec("echo guard-same"),
            _exec("echo guard-after"),
        ],
        # A wrapped tool (the observer plugin's) failing with "Unknown tool: browser.open" every time, with varying
        # arguments (ignored by the detector): with unknownToolThreshold 3 the 4th and 5th calls are blocked.
        "unknown_tool": [{"tool": "e2e_browser_open", "args": {"url": f"https://example.test/{i}"}} for i in range(5)],
        # The scenarios below run as the e2e test's "fast" agent (warning at the 11th call, block at the 12th).
        # An exec that fails the same way every time (a returned result, not a thrown error): like any repeat.
        "exec_fail_stable": [_exec("echo fail-stable; exit 3") for _ in range(13)],
        # A failing exec whose output changes (same first line, which OpenClaw reports as the hook's `error`):
        # progress to OpenClaw's detector, so only warnings, never a block.
        "exec_fail_changing": [_exec("echo fail-changing; date +%s%N; exit 3") for _ in range(13)],
        # An exec printing an unknown-tool message: a returned result, so no unknown_tool_repeat (threshold 3).
        "exec_unknown_message": [_exec("echo 'Unknown tool: browser.open'; exit 1") for _ in range(5)],
        # A wrapped tool throwing a two-line error whose second line changes: the whole message is hashed.
        "thrown_changing": [{"tool": "e2e_flaky", "args": {"step": "build"}} for _ in range(13)],
        # Real process poll / log on a quiet background session: known polls without progress.
        # (Each background session is killed at the end, a distinct call.)
        "poll_quiet": [_background("sleep 120"), *[_process("poll") for _ in range(13)], _process("kill")],
        "log_quiet": [_background("sleep 120"), *[_process("log") for _ in range(11)], _process("kill")],
        # Polls of a session that keeps printing: progress, so OpenClaw stays silent (no generic warnings).
        "poll_progress": [_background(TICKER), *[_process("poll") for _ in range(12)], _process("kill")],
        "log_progress": [_background(TICKER), *[_process("log") for _ in range(12)], _process("kill")],
        # A real call alternating with calls answered before OpenClaw's tool wrapper (a made-up tool name, an
        # argument-validation failure): OpenClaw records only the real calls (generic repeat, no ping-pong).
        "unwrapped": _alternate(
            _exec("echo real-call"),
            [{"tool": "grep_all", "args": {"q": "loop"}}, {"tool": "exec", "args": {"cmd": "echo no-command"}}],
            22,
        ),
        # The 2026.9 scenarios (no numeric tuning there: warning at the 11th call, block at the 21st, and the
        # run's second critical, the 22nd call, ends it).
        # One command failing with output that drifts (time of day, duration): 2026.9's failure identity makes
        # it no progress, so it is blocked at the 21st call and the run ends at the 22nd.
        "exec_failure": [
            _exec('echo "connect failed at $(date +%H:%M:%S) after $(date +%N | cut -c1-3)ms"; exit 3')
            for _ in range(23)
        ],
        # Three argument variants of one tool, each failing with the same error: argument churn (a warning).
        "argument_churn": [
            {"tool": "e2e_fetch", "args": {"url": f"https://mirror-{i % 3}.test/pkg"}} for i in range(13)
        ],
        # The same page behind a fresh untrusted-content wrapper id each time: no progress, blocked at the 21st.
        "untrusted_page": [{"tool": "e2e_page", "args": {"url": "https://example.test/status"}} for _ in range(23)],
        # 2026.9's unknown-tool limit is built in (10): the 11th failing call is blocked; its veto ends the
        # unknown-tool streak, so the 12th runs.
        "unknown_tool_long": [
            {"tool": "e2e_browser_open", "args": {"url": f"https://example.test/{i}"}} for i in range(12)
        ],
        # A quiet run: different calls, no decisions expected.
        "quiet": [_exec(f"echo quiet-{i}") for i in range(6)],
        # Enforcement phase (OpenClaw's detection off): slow enough for verdicts to arrive mid-loop.
        "enforce_generic": [_exec("sleep 0.2; echo loop-enforce") for _ in range(50)],
        "enforce_guard": [
            _exec("echo guard-1"),
            _exec("echo guard-2"),
            _exec("echo guard-3"),
            {"overflow": True},
            _exec("echo guard-same"),
            _exec("echo guard-same"),
            _exec("echo guard-same"),
            *[_exec(f"sleep 0.2; echo guard-after-{i}") for i in range(20)],
        ],
    }


SCENARIO = re.compile(r"SCENARIO ([a-z_]+) ([A-Za-z0-9_-]+)")


class State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: dict[str, int] = {}
        self.scripts = _scripts()
        self.requests = 0
        self.log: list[dict[str, Any]] = []
        self.log_file: Path | None = None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _scenario(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    for message in reversed(messages):
        if message.get("role") == "user":
            match = SCENARIO.search(_text_of(message.get("content")))
            if match:
                return match.group(1), match.group(2)
    for message in reversed(messages):  # e.g. a compacted transcript keeps it elsewhere
        match = SCENARIO.search(_text_of(message.get("content")))
        if match:
            return match.group(1), match.group(2)
    return None


_STILL_RUNNING = re.compile(r"Command still running \(session ([^,\s)]+)")


def _background_session(messages: list[dict[str, Any]]) -> str:
    """The session id OpenClaw's exec reported for the latest background command in this conversation."""
    for message in reversed(messages):
        match = _STILL_RUNNING.search(_text_of(message.get("content")))
        if match:
            return match.group(1)
    return "no-background-session"


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _usage(model: str) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def make_handler(state: State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                models = {"object": "list", "data": [{"id": "fake-loop", "object": "model"}]}
                self._send(200, json.dumps(models).encode())
            else:
                self._send(404, b"{}")

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            model = request.get("model", "fake-loop")
            messages = request.get("messages") or []
            has_tools = bool(request.get("tools"))
            found = _scenario(messages)
            with state.lock:
                state.requests += 1
                step: Step | None = None
                index = -1
                if has_tools and found is not None:
                    name, tag = found
                    script = state.scripts.get(name, [])
                    index = state.steps.get(tag, 0)
                    state.steps[tag] = index + 1
                    step = script[index] if index < len(script) else None
                entry = {
                    "scenario": found,
                    "tools": has_tools,
                    "index": index,
                    "step": step,
                    # loopwatch warning notes the model is being shown (appended to tool results)
                    "loopwatch_notes": json.dumps(messages).count("[loopwatch] WARNING"),
                }
                if index == 0:  # the tools the gateway offered this run (once per run)
                    entry["tool_names"] = sorted(str((t.get("function") or {}).get("name")) for t in request["tools"])
                state.log.append(entry)
                if state.log_file is not None:
                    with state.log_file.open("a", encoding="utf-8") as log:
                        log.write(json.dumps(entry) + "\n")
            if step is not None and BACKGROUND in json.dumps(step.get("args")):
                session = _background_session(messages)
                step = {**step, "args": json.loads(json.dumps(step["args"]).replace(BACKGROUND, session))}
            if step is not None and step.get("overflow"):
                error = {
                    "error": {
                        "message": "This model's maximum context length is 128000 tokens. However, your messages "
                        "resulted in 200000 tokens. Please reduce the length of the messages.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                }
                self._send(400, json.dumps(error).encode())
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            out = [_chunk(model, {"role": "assistant", "content": ""})]
            if step is not None:
                call_id = f"call_{found[1] if found else 'x'}_{index}"
                out.append(
                    _chunk(
                        model,
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": call_id,
                                    "type": "function",
                                    "function": {"name": step["tool"], "arguments": json.dumps(step["args"])},
                                }
                            ]
                        },
                    )
                )
                out.append(_chunk(model, {}, "tool_calls"))
            else:
                text = "Summary: the user ran a scripted scenario." if not has_tools else "Done."
                out.append(_chunk(model, {"content": text}))
                out.append(_chunk(model, {}, "stop"))
            out.append(_usage(model))
            out.append(b"data: [DONE]\n\n")
            self.wfile.write(b"".join(out))
            self.wfile.flush()
            self.close_connection = True

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", type=Path)
    parser.add_argument("--log-file", type=Path, help="append one JSON line per request, as it comes")
    args = parser.parse_args(argv)
    state = State()
    state.log_file = args.log_file
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(state))
    server.daemon_threads = True
    if args.port_file:
        args.port_file.write_text(str(server.server_address[1]))
    server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
