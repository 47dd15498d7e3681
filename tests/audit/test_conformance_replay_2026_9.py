"""The openclaw-2026.9 scenarios through ``loopwatch replay --all``, as a mixed fleet would send them.

Events carry the gateway's OpenClaw version (as the bridge stamps it) and the config file uses the 2026.9
layout (``agents.entries``); the worker's profile choice must pick the 2026.9 rules from the version alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from streams.detection import MISSING, digest
from tests.support.scenarios import expected_decisions, load_2026_9, wire_events
from tests.support.vectors import gateway_outcome_2026_9

SCENARIOS: list[dict[str, Any]] = load_2026_9()["scenarios"]


def _inputs(scenario: dict[str, Any], tmp_path: Path, version: str | None) -> tuple[Path, Path]:
    doc: dict[str, Any] = {}
    if scenario["config"] is not None:
        doc["tools"] = {"loopDetection": scenario["config"]}
    if scenario["agent_override"] is not None:
        doc["agents"] = {"entries": {"main": {"tools": {"loopDetection": scenario["agent_override"]}}}}
    config = tmp_path / "openclaw.json5"
    config.write_text(json.dumps(doc), encoding="utf-8")
    events = wire_events(scenario)
    for event in events:
        if version is not None:
            event["openclaw_version"] = version
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return config, path


def _replay(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> list[dict[str, Any]]:
    code = main(["replay", *argv])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err
    return [json.loads(line) for line in captured.out.splitlines()]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_by_version(
    scenario: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = _inputs(scenario, tmp_path, "2026.9.6")
    decisions = _replay(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    got = [(d["index"], d["decision"], d["detector"], d["count"], d["published"]) for d in decisions]
    assert got == expected_decisions(scenario)
    assert all(d["profile"] == "openclaw-2026.9" for d in decisions)


def test_unversioned_events_use_the_configured_default(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    scenario = next(s for s in SCENARIOS if s["name"] == "v9_untrusted_wrapper_nonce")
    config, events = _inputs(scenario, tmp_path, None)
    default = _replay(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    assert {d["profile"] for d in default} == {"openclaw-2026.7"}
    assert all(d["decision"] == "warning" for d in default)  # 2026.7 sees fresh ids as progress
    chosen = _replay(
        capsysbinary, "--events", str(events), "--config", str(config), "--all", "--default-profile", "openclaw-2026.9"
    )
    got = [(d["index"], d["decision"], d["detector"], d["count"], d["published"]) for d in chosen]
    assert got == expected_decisions(scenario)


def test_profiles_file_overrides_the_version(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    scenario = next(s for s in SCENARIOS if s["name"] == "v9_retired_thresholds_are_ignored")
    config, events = _inputs(scenario, tmp_path, "2026.9.6")
    profiles = tmp_path / "profiles.json5"
    profiles.write_text('{gateways: {"gw-conformance": "openclaw-2026.7"}}', encoding="utf-8")
    decisions = _replay(capsysbinary, "--events", str(events), "--config", str(config), "--profiles", str(profiles))
    assert {d["profile"] for d in decisions} == {"openclaw-2026.7"}
    assert decisions[0]["index"] == 3 and decisions[0]["decision"] == "warning"  # 2026.7 honours warningThreshold 3
    assert any(d["decision"] == "block" and d["index"] == 8 for d in decisions)


def test_bad_profiles_file_is_one_line(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    profiles = tmp_path / "profiles.json5"
    profiles.write_text('{default: "openclaw-2027.1"}', encoding="utf-8")
    events = tmp_path / "e.jsonl"
    events.write_text("", encoding="utf-8")
    assert main(["replay", "--events", str(events), "--profiles", str(profiles)]) == 2
    err = capsysbinary.readouterr().err.decode()
    assert err.count("\n") == 1 and "unknown profile 'openclaw-2027.1'" in err


def _prehash_2026_9(event: dict[str, Any]) -> dict[str, Any]:
    """The record a 2026.9 gateway sends with hashOnGateway: hashes, failure_hash and no_progress."""
    if event["type"] != "tool_call":
        return event
    hashed = {k: v for k, v in event.items() if k not in ("args", "result", "error")}
    hashed["args_hash"] = digest(event["args"])
    if "result" in event or "error" in event:
        outcome = gateway_outcome_2026_9(event["tool"], event["args"], event.get("result", MISSING), event.get("error"))
        if outcome["veto"]:
            return hashed
        hashed["result_hash"] = outcome["result_hash"]
        hashed["unknown_tool_name"] = outcome["unknown_tool_name"]
        if outcome["failure_hash"] is not None:
            hashed["failure_hash"] = outcome["failure_hash"]
        if outcome["no_progress"] and not outcome["result_hash"].startswith("error:"):
            hashed["no_progress"] = True
    return hashed


PREHASHABLE = [s for s in SCENARIOS if not any(e.get("tool") == "process" for e in s["events"])]


@pytest.mark.parametrize("scenario", PREHASHABLE, ids=[s["name"] for s in PREHASHABLE])
def test_scenario_gateway_hashed(
    scenario: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = _inputs(scenario, tmp_path, "2026.9.6")
    lines = [_prehash_2026_9(json.loads(line)) for line in events.read_text(encoding="utf-8").splitlines()]
    if "exec_failure" in scenario["name"]:
        assert any("failure_hash" in e for e in lines)
    events.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    decisions = _replay(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    got = [(d["index"], d["decision"], d["detector"], d["count"], d["published"]) for d in decisions]
    assert got == expected_decisions(scenario)
