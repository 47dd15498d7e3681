"""The pure storm logic: keys, run identity, event time, the window tally and exactly when it fires."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.fleet_alert import MAX_LISTED, FleetAlert
from streams.worker.storm_rules import (
    StormConfig,
    alert_of,
    event_seconds,
    observe,
    run_identity,
    signals_of,
    storm_key,
    window_start,
)
from tests.worker.support import NOW, verdict


def feed(runs: list[str], threshold: int) -> tuple[dict[str, Any], list[int]]:
    """Count one signature signal per run name; returns the final tally and the indexes that fired."""
    config = StormConfig(signature_runs=threshold, agent_runs=0)
    tally: dict[str, Any] = {}
    fired: list[int] = []
    for index, run in enumerate(runs):
        (signal,) = signals_of(verdict(run), NOW, config)
        tally, fire = observe(tally, signal, threshold)
        if fire:
            fired.append(index)
    return tally, fired


# --- firing ----------------------------------------------------------------------------------------


def test_fires_on_the_nth_distinct_run_and_not_before() -> None:
    _, fired = feed(["a", "b"], 3)
    assert fired == []
    _, fired = feed(["a", "b", "c"], 3)
    assert fired == [2]


def test_more_verdicts_of_the_same_runs_never_fire() -> None:
    _, fired = feed(["a", "b", "a", "b", "a", "b", "a"], 3)
    assert fired == []


def test_fires_once_per_window_however_many_runs_follow() -> None:
    tally, fired = feed([f"r{i}" for i in range(50)], 5)
    assert fired == [4]
    assert len(tally["runs"]) == 5  # bounded after firing
    assert tally["verdicts"] == 50


@settings(max_examples=200, deadline=None, derandomize=True)
@given(runs=st.lists(st.sampled_from([f"r{i}" for i in range(8)]), max_size=40), threshold=st.integers(1, 9))
def test_fires_exactly_when_distinct_runs_reach_the_threshold(runs: list[str], threshold: int) -> None:
    _, fired = feed(runs, threshold)
    seen: list[str] = []
    expected: list[int] = []
    for index, run in enumerate(runs):
        if run not in seen:
            seen.append(run)
            if len(seen) == threshold:
                expected.append(index)
    assert fired == expected


@settings(max_examples=100, deadline=None, derandomize=True)
@given(runs=st.lists(st.text(min_size=1, max_size=6), max_size=60), threshold=st.integers(1, 100))
def test_a_tally_stays_bounded(runs: list[str], threshold: int) -> None:
    tally, _ = feed(runs, threshold)
    assert len(tally.get("runs", [])) <= threshold
    for name in ("samples", "gateways", "agents"):
        assert len(tally.get(name, [])) <= MAX_LISTED


def test_a_redelivered_verdict_does_not_count_its_run_twice() -> None:
    config = StormConfig(signature_runs=2, agent_runs=0)
    (once,) = signals_of(verdict("a"), NOW, config)
    tally, fired = observe(None, once, 2)
    tally, fired_again = observe(tally, once, 2)
    assert not fired and not fired_again and tally["runs"] == [once.run]


def test_runs_are_told_apart_by_gateway_and_scope_key() -> None:
    assert run_identity(verdict("r", "gw-1")) != run_identity(verdict("r", "gw-2"))
    assert run_identity(verdict(" r ")) == run_identity(verdict("r"))  # the scope key trims run ids
    no_run = verdict("x", run_id=None, session_id="s")
    assert run_identity(no_run) == run_identity(verdict("y", run_id="  ", session_id="s"))


# --- keys and signals ------------------------------------------------------------------------------


def test_the_signature_key_ignores_runs_and_the_agent_key_ignores_the_loop() -> None:
    a, b = verdict("a"), verdict("b", "gw-9", tool="exec")
    assert storm_key("signature", a) == storm_key("signature", b)
    assert storm_key("signature", a) != storm_key("signature", verdict("a", outcome_hash="b" * 64))
    assert storm_key("signature", a) != storm_key("signature", verdict("a", detector="ping_pong"))
    assert storm_key("agent", a) == storm_key("agent", verdict("c", tool="read", outcome_hash=None))
    assert storm_key("agent", a) != storm_key("agent", verdict("a", agent_id="other"))


def test_keys_are_unambiguous_for_any_text() -> None:
    x = verdict("a", tool='ex","ec', outcome_hash=None)
    y = verdict("a", tool="ex", outcome_hash='ec"')
    assert storm_key("signature", x) != storm_key("signature", y)


def test_thresholds_of_zero_turn_a_kind_off() -> None:
    assert [s.kind for s in signals_of(verdict(), NOW, StormConfig(signature_runs=3, agent_runs=0))] == ["signature"]
    assert [s.kind for s in signals_of(verdict(), NOW, StormConfig(signature_runs=0, agent_runs=3))] == ["agent"]
    off = StormConfig(signature_runs=0, agent_runs=0)
    assert signals_of(verdict(), NOW, off) == [] and not off.enabled


def test_signals_round_trip_as_bytes() -> None:
    for signal in signals_of(verdict(), NOW, StormConfig()):
        assert type(signal).from_bytes(signal.to_bytes()) == signal


def test_unreadable_signals_are_rejected() -> None:
    from streams.worker.storm_rules import Signal

    for raw in (b"[]", b"{}", b"not json"):
        with pytest.raises((ValueError, KeyError)):
            Signal.from_bytes(raw)


# --- time --------------------------------------------------------------------------------------------


def test_event_time_is_used_unless_missing_or_a_window_away() -> None:
    assert event_seconds(verdict(event_ts=int((NOW - 10) * 1000)), NOW, 300) == NOW - 10
    assert event_seconds(verdict(event_ts="2026-09-21T12:00:00Z"), NOW, 300) == NOW  # far off: record time
    assert event_seconds(verdict(event_ts=None), NOW, 300) == NOW
    text = verdict(event_ts="2026-09-21T12:00:00Z")  # RFC 3339 text within a (large) window: used
    assert event_seconds(text, NOW, 10**9) == 1_789_992_000.0
    assert event_seconds(verdict(event_ts="not a time"), NOW, 300) == NOW


def test_windows_are_aligned_tumbling_windows() -> None:
    assert window_start(1000.5, 300) == 900.0
    assert window_start(1200.0, 300) == 1200.0


# --- the alert ---------------------------------------------------------------------------------------


def test_the_alert_names_the_storm_and_its_window() -> None:
    config = StormConfig(window_seconds=600, signature_runs=2, agent_runs=0)
    tally: dict[str, Any] | None = None
    fired = False
    signal = None
    for run in ("a", "b"):
        (signal,) = signals_of(verdict(run, f"gw-{run}"), NOW, config)
        tally, fired = observe(tally, signal, 2)
    assert fired and signal is not None and tally is not None
    alert = alert_of(signal, tally, 2, 600)
    assert isinstance(alert, FleetAlert)
    assert alert.kind == "signature" and alert.tool == "exec" and alert.outcome_hash == "a" * 64
    assert alert.agent_id is None and alert.distinct_runs == 2 and alert.decisions == {"warning": 2}
    assert alert.gateways == ["gw-a", "gw-b"]
    assert [s.run_id for s in alert.sample_runs] == ["a", "b"]
    start = NOW - NOW % 600
    assert alert.window_start.endswith("Z") and alert.window_seconds == 600
    again = alert_of(signal, tally, 2, 600)
    assert again.alert_id == alert.alert_id  # a re-published alert keeps its id
    later = signals_of(verdict("a", event_ts=int((start + 600 + 1) * 1000)), start + 601, config)[0]
    assert alert_of(later, tally, 2, 600).alert_id != alert.alert_id  # the next window is another storm


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="whole seconds"):
        StormConfig(window_seconds=1.5)
    with pytest.raises(ValueError, match="between 0"):
        StormConfig(signature_runs=-1)
    with pytest.raises(ValueError, match="between 0"):
        StormConfig(agent_runs=10_001)
    assert StormConfig().threshold("agent") == 20
