"""The 56 behavioural scenarios of the shared conformance file, run through ``apply``."""

from __future__ import annotations

from typing import Any

import pytest

from streams.detection import Decision, RunState, apply
from tests.detection.support import load_scenarios, resolve, scenario_event

SCENARIOS: list[dict[str, Any]] = load_scenarios()["scenarios"]
CHECKED = ("index", "decision", "code", "count", "published")


def run_scenario(scenario: dict[str, Any]) -> list[tuple[int, Decision]]:
    config = resolve(scenario["config"], scenario["agent_override"])
    states: dict[str, RunState] = {}
    out: list[tuple[int, Decision]] = []
    for index, raw in enumerate(scenario["events"]):
        event = scenario_event(index, raw)
        states[event.scope], decisions = apply(states.get(event.scope), event, config)
        out.extend((index, d) for d in decisions)
    return out


def test_all_scenarios_present() -> None:
    assert len(SCENARIOS) == 56
    assert len({s["name"] for s in SCENARIOS}) == 56


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    got = run_scenario(scenario)
    actual = [
        {"index": i, "decision": d.decision, "code": d.detector, "count": d.count, "published": d.published}
        for i, d in got
    ]
    expected = [{k: e[k] for k in CHECKED} for e in scenario["expected"]]
    if scenario["expect_nothing_else"]:
        assert actual == expected
    else:
        for item in expected:
            assert item in actual


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_openclaw_surfacing(scenario: dict[str, Any]) -> None:
    """OpenClaw's own call-site de-dup (fixed buckets of 10, keys per run) agrees with ``surfaced``.

    This checks that warning keys group warnings the way OpenClaw's keys do.
    """
    last_bucket: dict[tuple[str | None, str], int] = {}
    got = run_scenario(scenario)
    run_ids = [raw.get("run_id") for raw in scenario["events"]]
    surfaced = []
    for index, d in got:
        if d.decision != "warning":
            continue
        key = (run_ids[index], d.warning_key)
        bucket = d.count // 10
        surfaced.append(bucket > last_bucket.get(key, 0))
        if surfaced[-1]:
            last_bucket[key] = bucket
    expected = [e["surfaced"] for e in scenario["expected"] if e["decision"] == "warning"]
    assert surfaced == expected


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_decision_fields(scenario: dict[str, Any]) -> None:
    for _, d in run_scenario(scenario):
        assert d.message.startswith("CRITICAL:" if d.decision in ("block", "abort") else "WARNING:")
        assert d.tool in d.message and str(d.count) in d.message
        assert d.threshold > 0
        if d.decision == "block" or d.decision == "abort":
            assert d.published
            assert d.count >= d.threshold
        assert d.call_id is not None and d.call_id.startswith("call-")
