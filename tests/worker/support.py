"""Events and configs for the worker's unit tests (pure parts, no Kafka)."""

from __future__ import annotations

import random
from typing import Any

import orjson

from schemas import Verdict, verdict_id
from streams.config_file import LoadedConfig
from streams.worker.processing import InputRecord

#: Low thresholds, so short streams produce warnings, blocks and guard aborts.
CONFIG = LoadedConfig.from_document(
    {
        "tools": {
            "loopDetection": {
                "enabled": True,
                "warningThreshold": 2,
                "criticalThreshold": 4,
                "globalCircuitBreakerThreshold": 8,
                "historySize": 12,
            }
        }
    }
)
TOPIC = "loopwatch.events"


def event(i: int, run: str, *, tool: str = "read", args: Any = None, text: str = "same") -> dict[str, Any]:
    return {
        "type": "tool_call",
        "event_id": f"{run}-e{i}",
        "gateway_id": "gw",
        "session_id": f"sess-{run}",
        "run_id": run,
        "ts": 1_767_225_600_000 + i,
        "tool": tool,
        "call_id": f"{run}-c{i}",
        "args": {"path": "/same"} if args is None else args,
        "result": {"content": [{"type": "text", "text": text}]},
    }


def long_id_calls(n: int, run: str) -> list[dict[str, Any]]:
    """Calls with distinct tool names and call ids at the 1,024-character limit, in 4-byte characters, and no
    outcome: each keeps about 8 KB in its run's state while it is in the window."""
    wide = "\U0001d4e7"
    evs = []
    for i in range(n):
        ev = event(i, run, tool=f"t{i}".ljust(1024, wide))
        ev["call_id"] = f"c{i}".ljust(1024, wide)
        del ev["result"]
        evs.append(ev)
    return evs


def mixed_events(n: int, runs: int, seed: int) -> list[dict[str, Any]]:
    """Looping and progressing runs interleaved, with compactions and the odd duplicate."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        run = f"run-{rng.randrange(runs)}"
        roll = rng.random()
        if roll < 0.05 and out:
            out.append(dict(rng.choice(out)))  # a duplicate (same gateway_id + event_id) at a later offset
            continue
        if roll < 0.08:
            out.append(
                {
                    "type": "compaction_retry",
                    "event_id": f"{run}-k{i}",
                    "gateway_id": "gw",
                    "session_id": f"sess-{run}",
                    "run_id": run,
                    "ts": 1_767_225_600_000 + i,
                }
            )
            continue
        looping = int(run.rsplit("-", 1)[1]) % 2 == 0
        if looping:
            out.append(event(i, run))
        else:
            out.append(event(i, run, args={"path": f"/p{rng.randrange(100)}"}, text=f"t{rng.randrange(1000)}"))
    return out


def records(events: list[dict[str, Any]], *, partition: int = 0, start: int = 0) -> list[InputRecord]:
    """Wire records of ``events`` in one partition, keyed by scope key (run id)."""
    return [
        InputRecord(TOPIC, partition, start + i, ev["run_id"].encode(), orjson.dumps(ev)) for i, ev in enumerate(events)
    ]


#: A fixed wall time (seconds) for the storm tests.
NOW = 1_790_000_000.0


def verdict(run: str = "run-1", gateway: str = "gw-1", **fields: Any) -> Verdict:
    """A generic_repeat warning of ``run`` at ``NOW``; ``fields`` override any of its fields."""
    base: dict[str, Any] = {
        "verdict_id": verdict_id(gateway, f"{run}-e", "warning", "generic_repeat"),
        "decision": "warning",
        "detector": "generic_repeat",
        "count": 10,
        "threshold": 10,
        "gateway_id": gateway,
        "agent_id": "main",
        "session_id": f"sess-{run}",
        "run_id": run,
        "tool": "exec",
        "call_id": "c1",
        "event_id": f"{run}-e",
        "message": "WARNING: ...",
        "outcome_hash": "a" * 64,
        "event_ts": int(NOW * 1000),
        "config_hash": "h",
    }
    base.update(fields)
    return Verdict(**base)
