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
from streams.detection.outcome import process_action
from tests.support.scenarios import expected_decisions, load_scenarios, wire_events, write_inputs

SCENARIOS = load_scenarios()


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
    """The event as a hashing gateway sends it: digests, the unknown-tool name and a process call's
    poll_action. Sends need nothing more: their receipts are stripped inside the gateway's outcome hash."""
    if event["type"] != "tool_call":
        return event
    hashed = {k: v for k, v in event.items() if k not in ("args", "result", "error")}
    hashed["args_hash"] = digest(event["args"])
    action = process_action(event["tool"], event["args"])
    if action is not None:
        hashed["poll_action"] = action
    outcome = Outcome(result=event.get("result", MISSING), error=event.get("error"))
    if "result" in event or "error" in event:
        result_hash, unknown = hash_outcome(event["tool"], event["args"], outcome)
        hashed["result_hash"] = result_hash
        hashed["unknown_tool_name"] = unknown
    return hashed


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
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
