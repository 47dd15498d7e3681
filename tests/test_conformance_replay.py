"""Every shared conformance scenario, fed to ``loopwatch replay --all`` as a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from streams.detection import MISSING, Outcome, digest, hash_outcome
from tests.support.scenarios import expected_decisions, load_scenarios, wire_events, write_inputs

SCENARIOS = load_scenarios()
# Resolved point 10: without raw args a call cannot be a process poll/log or a message send.
RAW_ONLY_TOOLS = {"process", "message", "telegram", "discord", "slack", "whatsapp", "signal"}


def _replay(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, list[dict[str, Any]]]:
    code = main(["replay", *argv])
    out = capsysbinary.readouterr().out
    return code, [json.loads(line) for line in out.splitlines()]


def _check(scenario: dict[str, Any], decisions: list[dict[str, Any]]) -> None:
    got = [(d["index"], d["decision"], d["detector"], d["count"], d["published"]) for d in decisions]
    want = expected_decisions(scenario)
    if scenario["expect_nothing_else"]:
        assert got == want
    else:
        missing = [w for w in want if w not in got]
        assert not missing, f"missing decisions {missing}; got {got}"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_raw(scenario: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    config, events = write_inputs(scenario, tmp_path, wire_events(scenario))
    code, decisions = _replay(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    assert code == 0
    _check(scenario, decisions)
    assert all(d["run_id"] == scenario["events"][d["index"]].get("run_id") for d in decisions)


def _prehash(event: dict[str, Any]) -> dict[str, Any]:
    if event["type"] != "tool_call":
        return event
    hashed = {k: v for k, v in event.items() if k not in ("args", "result", "error")}
    hashed["args_hash"] = digest(event["args"])
    outcome = Outcome(result=event.get("result", MISSING), error=event.get("error"))
    if "result" in event or "error" in event:
        result_hash, unknown = hash_outcome(event["tool"], event["args"], outcome)
        hashed["result_hash"] = result_hash
        hashed["unknown_tool_name"] = unknown
    return hashed


PREHASHABLE = [s for s in SCENARIOS if not any(e.get("tool") in RAW_ONLY_TOOLS for e in s["events"])]


@pytest.mark.parametrize("scenario", PREHASHABLE, ids=[s["name"] for s in PREHASHABLE])
def test_scenario_prehashed(
    scenario: dict[str, Any], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    events = [_prehash(e) for e in wire_events(scenario)]
    config, path = write_inputs(scenario, tmp_path, events)
    code, decisions = _replay(capsysbinary, "--events", str(path), "--config", str(config), "--all")
    assert code == 0
    _check(scenario, decisions)


def test_console_script_replays_published_only(tmp_path: Path) -> None:
    scenario = next(s for s in SCENARIOS if s["name"] == "generic_warning_then_block_sticky")
    config, events = write_inputs(scenario, tmp_path, wire_events(scenario))
    exe = Path(sys.executable).with_name("loopwatch")
    proc = subprocess.run(
        [str(exe), "replay", "--events", str(events), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert rows and all(r["published"] for r in rows)
    want = [w for w in expected_decisions(scenario) if w[4]]
    assert [(r["index"], r["decision"], r["detector"], r["count"], True) for r in rows] == want
