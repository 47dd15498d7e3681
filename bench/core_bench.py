"""Throughput of the pure detection core on a realistic event mix (raw JSON input and pre-hashed input).

Prints events/s for ``apply`` alone, and for ``apply`` plus a msgpack round trip of the state (what a worker
does per event), for each semantics profile (openclaw-2026.7, openclaw-2026.9) side by side with their ratio.
Run from the repository root: ``.venv/bin/python -m bench.core_bench [--events N]``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import msgpack

from streams.detection import LoopConfig, Outcome, RunState, ToolEvent, args_hash, hash_outcome
from streams.detection.profiles import PROFILES, apply


def _text_result(text: str, details: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


class RunScript:
    """Generates the tool calls of one agent run: mostly unique work, with some loops mixed in."""

    def __init__(self, rng: random.Random, run_no: int) -> None:
        self.rng = rng
        self.run = f"run-{run_no:05d}"
        self.n = 0
        self.mode = "unique"
        self.mode_left = 0

    def next_event(self, gateway_event_no: int) -> dict[str, Any]:
        rng = self.rng
        self.n += 1
        if self.mode_left <= 0:
            self.mode = rng.choices(
                [
                    "unique",
                    "exec_poll",
                    "process_poll",
                    "generic_loop",
                    "ping_pong",
                    "send",
                    "compaction",
                    "unknown_tool",
                ],
                weights=[60, 8, 6, 8, 6, 8, 1, 3],
            )[0]
            self.mode_left = 1 if self.mode == "compaction" else rng.randint(3, 25)
        self.mode_left -= 1
        n = self.n
        mode = self.mode
        base = {"event_id": f"e{gateway_event_no}", "gateway_id": "gw-1", "run_id": self.run}
        if mode == "compaction":
            return {**base, "type": "compaction_retry"}
        if mode == "unique":
            tool = rng.choice(["read", "write", "edit", "grep", "web_fetch"])
            args: Any = {
                "path": f"/repo/src/module_{n}_{rng.randint(0, 10**6)}.py",
                "offset": n * 10,
                "limit": 200,
            }
            if tool == "grep":
                args = {"pattern": f"def handler_{n}", "path": "/repo", "glob": "*.py", "ignoreCase": True}
            details = {
                "ok": True,
                "bytes": rng.randint(100, 90000),
                "lines": rng.randint(1, 900),
                "mtime": 1.7e12 + n,
            }
            result = _text_result(f"line {n}\n" * rng.randint(1, 40), details)
        elif mode == "exec_poll":
            tool = "exec"
            args = {"command": "npm test -- --watch=false", "yieldMs": 10000, "workdir": "/repo"}
            result = _text_result(
                f"Command still running (session s-{n}, pid {4000 + n})",
                {
                    "status": "running",
                    "sessionId": f"s-{n}",
                    "pid": 4000 + n,
                    "startedAt": 1.7e12 + n,
                    "cwd": "/repo",
                    "tail": "PASS src/a.test.ts\nRUNS src/b.test.ts",
                    "durationMs": 1000 * n,
                },
            )
        elif mode == "process_poll":
            tool = "process"
            args = {"action": "poll", "sessionId": "s-build"}
            result = _text_result(
                "(no new output)",
                {
                    "status": "running",
                    "aggregated": "building...",
                    "pid": 7000 + n,
                    "durationMs": 37 * n,
                    "sessionId": "s-build",
                },
            )
        elif mode == "generic_loop":
            tool = "read"
            args = {"path": "/repo/README.md"}
            result = _text_result("# Project\nSame content every time.", {"ok": True, "bytes": 34})
        elif mode == "ping_pong":
            tool, args = ("read", {"path": "/repo/a.py"}) if n % 2 else ("edit", {"path": "/repo/a.py", "old": "x"})
            result = _text_result("same", {"ok": n % 2 == 0})
        elif mode == "send":
            tool = "message"
            args = {"action": "send", "to": "telegram:123", "content": "Build is still running"}
            result = _text_result(
                "sent",
                {
                    "ok": True,
                    "channel": "telegram",
                    "messageId": f"m-{n}",
                    "ts": 1.7e12 + n,
                    "receipt": {"platformMessageId": f"p-{n}"},
                },
            )
        else:
            tool = "browser"
            args = {"url": f"https://example.com/{n}"}
            return {
                **base,
                "type": "tool_call",
                "tool": tool,
                "args": args,
                "error": "Tool browser not found",
                "call_id": f"c{gateway_event_no}",
            }
        return {
            **base,
            "type": "tool_call",
            "tool": tool,
            "args": args,
            "result": result,
            "call_id": f"c{gateway_event_no}",
        }


def make_raw_events(total: int, runs: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    scripts = [RunScript(rng, i) for i in range(runs)]
    active = scripts[: max(1, runs // 10)]
    events = []
    next_run = len(active)
    for i in range(total):
        if rng.random() < 0.01 and next_run < runs:  # runs end and new ones start
            active[rng.randrange(len(active))] = scripts[next_run]
            next_run += 1
        events.append(active[rng.randrange(len(active))].next_event(i))
    return events


def to_tool_event(raw: dict[str, Any], prehashed: bool) -> ToolEvent:
    dedup = raw["gateway_id"] + "\x00" + raw["event_id"]
    if raw["type"] == "compaction_retry":
        return ToolEvent(kind="compaction_retry", scope=raw["run_id"], dedup_key=dedup)
    tool, args = raw["tool"], raw["args"]
    outcome = Outcome(error=raw["error"]) if "error" in raw else Outcome(result=raw["result"])
    if prehashed:
        result_hash, unknown = hash_outcome(tool, args, outcome)
        digest_part = args_hash(tool, args)[len(tool) + 1 :]
        return ToolEvent(
            kind="tool_call",
            scope=raw["run_id"],
            tool=tool,
            call_id=raw["call_id"],
            args_hash=digest_part,
            outcome=Outcome(result_hash=result_hash, unknown_tool_name=unknown),
            dedup_key=dedup,
        )
    return ToolEvent(
        kind="tool_call",
        scope=raw["run_id"],
        tool=tool,
        call_id=raw["call_id"],
        args=args,
        outcome=outcome,
        dedup_key=dedup,
    )


def run(events: list[ToolEvent], config: LoopConfig, persist: bool) -> tuple[float, int, int]:
    states: dict[str, Any] = {}
    decisions = 0
    start = time.perf_counter()
    if persist:
        packb, unpackb, from_primitive = msgpack.packb, msgpack.unpackb, RunState.from_primitive
        for ev in events:
            blob = states.get(ev.scope)
            state = from_primitive(unpackb(blob)) if blob is not None else None
            new, ds = apply(state, ev, config)
            states[ev.scope] = packb(new.to_primitive())
            decisions += len(ds)
    else:
        for ev in events:
            new, ds = apply(states.get(ev.scope), ev, config)
            states[ev.scope] = new
            decisions += len(ds)
    return time.perf_counter() - start, decisions, len(states)


def best_of(repeat: int, fn: Callable[[], tuple[float, int, int]]) -> tuple[float, int, int]:
    results = [fn() for _ in range(repeat)]
    return min(results, key=lambda r: r[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    raw = make_raw_events(args.events, args.runs)
    for label, prehashed in (("raw", False), ("pre-hashed", True)):
        events = [to_tool_event(r, prehashed) for r in raw]
        for persist in (False, True):
            rates = []
            for profile in PROFILES:
                config = LoopConfig(enabled=True, profile=profile)
                secs, decisions, scopes = best_of(args.repeat, lambda: run(events, config, persist))  # noqa: B023
                what = "apply + msgpack state round trip" if persist else "apply"
                rates.append(len(events) / secs)
                print(
                    f"{label:>10} {profile:<16} {what:<34} {rates[-1]:>10,.0f} events/s "
                    f"({len(events):,} events, {scopes:,} scopes, {decisions:,} decisions)"
                )
            print(f"{'':>10} {PROFILES[1]} / {PROFILES[0]}: {rates[1] / rates[0]:.2f}x")


if __name__ == "__main__":
    main()
