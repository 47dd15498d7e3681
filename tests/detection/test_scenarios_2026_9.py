"""The openclaw-2026.9 profile's conformance scenarios (tests/conformance/openclaw-2026.9.json), through the core.

Their expected decisions were computed by the loop-detection functions shipped in openclaw@2026.9.6 (see
tests/conformance/generate-openclaw-2026.9.mjs); here they run through ``profiles.apply``.
"""

from __future__ import annotations

from typing import Any

import pytest

from streams.detection import Decision, RunState
from streams.detection.gen9_config import resolve_loop_config
from streams.detection.profiles import apply
from tests.detection.support import scenario_event
from tests.support.scenarios import load_2026_9

SCENARIOS: list[dict[str, Any]] = load_2026_9()["scenarios"]


def run_scenario(scenario: dict[str, Any]) -> list[tuple[int, Decision]]:
    config, _ = resolve_loop_config(scenario["config"], scenario["agent_override"])
    states: dict[str, RunState] = {}
    out: list[tuple[int, Decision]] = []
    for index, raw in enumerate(scenario["events"]):
        event = scenario_event(index, raw)
        states[event.scope], decisions = apply(states.get(event.scope), event, config)
        out.extend((index, d) for d in decisions)
    return out


def test_meta_names_the_profile_and_the_shipped_version() -> None:
    meta = load_2026_9()["_meta"]
    assert meta["profile"] == "openclaw-2026.9"
    assert "openclaw@2026.9.6" in meta["reference_behaviour"]
    assert len({s["name"] for s in SCENARIOS}) == len(SCENARIOS) >= 20


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    actual = [
        {"index": i, "decision": d.decision, "code": d.detector, "count": d.count, "published": d.published}
        for i, d in run_scenario(scenario)
    ]
    expected = [{k: e[k] for k in ("index", "decision", "code", "count", "published")} for e in scenario["expected"]]
    assert actual == expected


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_messages(scenario: dict[str, Any]) -> None:
    for _, d in run_scenario(scenario):
        assert d.message.startswith("WARNING:" if d.decision == "warning" else "CRITICAL:")
        assert d.tool in d.message
