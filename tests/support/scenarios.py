"""Turns the shared conformance scenarios into the files a user would feed ``loopwatch replay``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
SCENARIOS_PATH = SHARED / "conformance" / "scenarios.json"
SCENARIOS_2026_9_PATH = Path(__file__).resolve().parents[1] / "conformance" / "openclaw-2026.9.json"
GATEWAY = "gw-conformance"


def load_scenarios() -> list[dict[str, Any]]:
    data = json.loads(SCENARIOS_PATH.read_text(encoding="utf-8"))
    scenarios: list[dict[str, Any]] = data["scenarios"]
    return scenarios


def load_2026_9() -> dict[str, Any]:
    """The openclaw-2026.9 profile's scenario file (kept in this repository, same format)."""
    data: dict[str, Any] = json.loads(SCENARIOS_2026_9_PATH.read_text(encoding="utf-8"))
    return data


def config_document(scenario: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    if scenario["config"] is not None:
        doc["tools"] = {"loopDetection": scenario["config"]}
    if scenario["agent_override"] is not None:
        doc["agents"] = {"list": [{"id": "main", "tools": {"loopDetection": scenario["agent_override"]}}]}
    return doc


def wire_events(scenario: dict[str, Any], *, session: str | None = None) -> list[dict[str, Any]]:
    """Scenario events as wire records (schemas/events.py): one session, distinct event and call ids."""
    session_id = session or f"sess-{scenario['name']}"
    out = []
    for i, ev in enumerate(scenario["events"]):
        rec: dict[str, Any] = {
            "type": ev["type"],
            "event_id": f"{session_id}-e{i}",
            "gateway_id": GATEWAY,
            "agent_id": "main",
            "session_id": session_id,
            "run_id": ev.get("run_id"),
            "ts": 1_767_225_600_000 + i,
        }
        if ev["type"] == "tool_call":
            rec["tool"] = ev["tool"]
            rec["call_id"] = f"call-{i}"
            rec["args"] = ev.get("args")
            for key in ("result", "error"):
                if key in ev:
                    rec[key] = ev[key]
        out.append(rec)
    return out


def expected_decisions(scenario: dict[str, Any]) -> list[tuple[int, str, str, int, bool]]:
    return [(e["index"], e["decision"], e["code"], e["count"], e["published"]) for e in scenario["expected"]]


def write_inputs(scenario: dict[str, Any], directory: Path, events: list[dict[str, Any]]) -> tuple[Path, Path]:
    config = directory / f"{scenario['name']}.json5"
    config.write_text(json.dumps(config_document(scenario), indent=2), encoding="utf-8")
    path = directory / f"{scenario['name']}.jsonl"
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return config, path
