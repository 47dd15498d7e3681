"""``loopwatch simulate``: deterministic, decodable, realistic enough that detection sees what it should."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.cli import main
from streams.config_file import LoadedConfig
from streams.decode import InvalidEvent, decode_event, scope_key
from streams.runner import Replayer
from streams.simulate import (
    BASE_TS_MS,
    EAGER_GATEWAYS,
    MALFORMED_KINDS,
    RUNS_PER_GATEWAY,
    _Fleet,
    event_count,
    seed_tag,
    simulate,
    simulate_events,
    start_of,
)

ENABLED = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True}}})
GATEWAYS, RATE, DURATION = 5, 100.0, 40.0  # 4,000 events


def _fleet(seed: int, **options: Any) -> list[tuple[bytes, bytes]]:
    return list(simulate(gateways=GATEWAYS, rate=RATE, duration=DURATION, seed=seed, **options))


def _decisions(values: list[bytes], config: LoadedConfig) -> list[tuple[int, str, str, str, int, bool]]:
    """``(index, decision, detector, tool, count, published)`` for every decision, as replay --all sees it."""
    replayer = Replayer(config)
    out: list[tuple[int, str, str, str, int, bool]] = []
    for index, value in enumerate(values):
        try:
            event = decode_event(value)
        except InvalidEvent:
            continue
        result = replayer.apply(event)
        out += [(index, d.decision, d.detector, d.tool, d.count, d.published) for d in result.decisions]
    return out


@pytest.fixture(scope="module")
def raw_values() -> list[bytes]:
    return [v for _, v in _fleet(11)]


@pytest.fixture(scope="module")
def raw_decisions(raw_values: list[bytes]) -> list[tuple[int, str, str, str, int, bool]]:
    return _decisions(raw_values, ENABLED)


def test_same_seed_same_bytes_and_different_seed_differs() -> None:
    def run(seed: int) -> list[tuple[bytes, bytes]]:
        return _fleet(seed, hashed=True, malformed=0.05)

    first = run(3)
    assert first == run(3)
    assert first != run(4)
    assert len(first) == 4000


def test_command_writes_the_same_bytes_to_a_file_and_to_stdout(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    argv = ["simulate", "--gateways", "3", "--rate", "50", "--duration", "10", "--seed", "9"]
    assert main([*argv, "--malformed", "0.1", "--out", str(tmp_path / "a.jsonl")]) == 0
    assert main([*argv, "--malformed", "0.1", "--out", str(tmp_path / "b.jsonl")]) == 0
    assert main([*argv, "--malformed", "0.1"]) == 0
    stdout = capsysbinary.readouterr().out
    data = (tmp_path / "a.jsonl").read_bytes()
    assert data == (tmp_path / "b.jsonl").read_bytes() == stdout
    values = [v for _, v in simulate(gateways=3, rate=50, duration=10, seed=9, malformed=0.1)]
    assert data == b"".join(v + b"\n" for v in values)
    assert data.count(b"\n") == 500


def test_realtime_needs_bootstrap_and_bad_numbers_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["simulate", "--gateways", "1", "--rate", "5", "--duration", "1", "--realtime"]) == 2
    assert "--realtime does nothing without --bootstrap" in capsys.readouterr().err
    for bad in (["--rate", "0"], ["--gateways", "0"], ["--malformed", "1.5"]):
        argv = {"--gateways": "1", "--rate": "5", "--duration": "1"}
        argv[bad[0]] = bad[1]
        with pytest.raises(SystemExit) as exc:
            main(["simulate", *[x for kv in argv.items() for x in kv]])
        assert exc.value.code == 2


def test_valid_records_decode_in_time_order_keyed_by_scope(raw_values: list[bytes]) -> None:
    records = _fleet(11)
    assert [v for _, v in records] == raw_values
    start = start_of(11)
    last_ts: float = start
    per_run: dict[str, list[dict[str, Any]]] = {}
    for key, value in records:
        event = decode_event(value)  # raises on any invalid record
        assert key.decode() == scope_key(event)
        ts = event.ts_ms()
        assert last_ts <= ts < start + DURATION * 1000
        last_ts = ts
        per_run.setdefault(key.decode(), []).append(json.loads(value))
    assert len(per_run) > 100
    types = Counter(e["type"] for events in per_run.values() for e in events)
    assert types["tool_call"] and types["tool_result"] and types["compaction_retry"]
    # A separate tool_result directly follows its own call, with the same call id and args.
    for events in per_run.values():
        for i, e in enumerate(events):
            if e["type"] == "tool_result":
                call = events[i - 1]
                assert call["type"] == "tool_call" and "result" not in call and "error" not in call
                assert (call["call_id"], call["args"]) == (e["call_id"], e["args"])
    # event ids are unique per gateway (the de-duplication key)
    ids = [(e["gateway_id"], e["event_id"]) for events in per_run.values() for e in events]
    assert len(ids) == len(set(ids))


def test_simulate_events_are_the_same_events_as_dicts(raw_values: list[bytes]) -> None:
    events = list(simulate_events(gateways=GATEWAYS, rate=RATE, duration=DURATION, seed=11))
    assert events == [json.loads(v) for v in raw_values]


@pytest.mark.parametrize("oversized", [False, True])
def test_malformed_fraction_lands_in_the_expected_reasons(oversized: bool) -> None:
    total, fraction = 3000, 0.1
    if oversized:  # each oversized record is over 1 MiB: keep the sample small
        total, fraction = 300, 0.3
    reasons: Counter[str] = Counter()
    for _, value in simulate(
        gateways=4, rate=100, duration=total / 100, seed=5, malformed=fraction, oversized=oversized
    ):
        try:
            decode_event(value)
        except InvalidEvent as exc:
            reasons[exc.reason] += 1
    expected = set(MALFORMED_KINDS) if oversized else set(MALFORMED_KINDS) - {"oversized"}
    assert set(reasons) == expected  # every kind occurs and each gives the reason it is named after
    bad = sum(reasons.values())
    sigma = (total * fraction * (1 - fraction)) ** 0.5
    assert abs(bad - total * fraction) < 4 * sigma, (bad, total * fraction)


def test_the_mix_warns_blocks_and_aborts_with_detection_enabled(
    raw_decisions: list[tuple[int, str, str, str, int, bool]],
) -> None:
    seen = Counter((decision, detector) for _, decision, detector, _, _, _ in raw_decisions)
    for expected in [
        ("warning", "generic_repeat"),
        ("block", "generic_repeat"),
        ("warning", "ping_pong"),
        ("block", "ping_pong"),
        ("block", "unknown_tool_repeat"),
        ("abort", "compaction_loop_persisted"),
    ]:
        assert seen[expected] > 0, (expected, seen)
    # Most traffic is healthy: far fewer decisions than events.
    assert len({i for i, *_ in raw_decisions}) < 0.25 * 4000


def test_guard_aborts_even_with_rolling_detection_off(raw_values: list[bytes]) -> None:
    decisions = _decisions(raw_values, LoadedConfig.default())
    assert decisions and {(d[1], d[2]) for d in decisions} == {("abort", "compaction_loop_persisted")}


def test_sends_and_progressing_polls_never_flag(
    raw_values: list[bytes], raw_decisions: list[tuple[int, str, str, str, int, bool]]
) -> None:
    tools = Counter(json.loads(v).get("tool") for v in raw_values)
    assert tools["message"] + tools["telegram"] > 100 and tools["process"] > 100
    flagged_tools = {tool for _, _, _, tool, _, _ in raw_decisions}
    assert not flagged_tools & {"message", "telegram", "process"}
    # Sends with fresh ids are never blocked, even with much lower thresholds.
    strict = LoadedConfig.from_document(
        {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5}}}
    )
    blocked = {tool for _, decision, _, tool, _, _ in _decisions(raw_values, strict) if decision == "block"}
    assert not blocked & {"message", "telegram"}


def test_hashed_traffic_gives_the_same_decisions(
    raw_decisions: list[tuple[int, str, str, str, int, bool]],
) -> None:
    hashed = [v for _, v in _fleet(11, hashed=True)]
    events = [json.loads(v) for v in hashed]
    polls = 0
    for e in events:
        if e["type"] == "compaction_retry":
            continue
        assert "args_hash" in e and not {"args", "result", "error"} & e.keys(), e
        polls += e.get("poll_action") in ("poll", "log")
    assert polls > 100  # process polls travel hashed with their action hint
    assert _decisions(hashed, ENABLED) == raw_decisions


def test_ids_and_start_time_derive_from_the_seed() -> None:
    """Two simulations with different seeds can share a topic: no event, run or session id in common."""

    def ids(seed: int) -> tuple[set[str], int]:
        events = list(simulate_events(gateways=3, rate=50, duration=4, seed=seed))
        found = {e["event_id"] for e in events} | {e["session_id"] for e in events}
        found |= {e["run_id"] for e in events if e["run_id"]}
        return found, events[0]["ts"]

    (a, start_a), (b, start_b) = ids(1), ids(2)
    assert not a & b
    assert (start_a, start_b) == (start_of(1), start_of(2)) and start_a != start_b
    assert start_of(0) == BASE_TS_MS and seed_tag(1) != seed_tag(2)
    assert all(f"-{seed_tag(1)}-" in i for i in a)
    later = list(simulate_events(gateways=1, rate=10, duration=1, seed=1, start_ms=BASE_TS_MS * 2))
    assert later[0]["ts"] == BASE_TS_MS * 2  # --realtime passes the wall clock


@given(st.integers(), st.integers())
def test_different_seeds_have_different_tags(one: int, other: int) -> None:
    # 2914 and 7535 shared a tag (and 15 run ids) when the tag was 3 bytes of the seed's hash.
    assert (seed_tag(one) == seed_tag(other)) == (one == other)
    assert seed_tag(2914) != seed_tag(7535) and len(seed_tag(2914)) == 6 and "-" not in seed_tag(-5)


def _digest(**options: Any) -> str:
    digest = hashlib.sha256()
    for key, value in simulate(**options):
        digest.update(key + b"\0" + value + b"\n")
    return digest.hexdigest()[:16]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"gateways": 5, "rate": 100.0, "duration": 40.0, "seed": 11}, "6b64c6dcafcb7258"),
        ({"gateways": 5, "rate": 100.0, "duration": 40.0, "seed": 3, "hashed": True, "malformed": 0.05},
         "9dcb0d3b2d77a7af"),
        ({"gateways": 2, "rate": 100, "duration": 20, "seed": 7, "usage": True}, "5d8ba0f722cf6df7"),
        ({"gateways": 100, "rate": 1000.0, "duration": 0.05, "seed": 2}, "e4b0bedca9e7249c"),  # fewer events than runs
        ({"gateways": 253, "rate": 10000.0, "duration": 1.0, "seed": 5}, "012088702f0c7867"),  # a latency bench fleet
    ],
)  # fmt: skip
def test_the_bytes_of_ordinary_fleets_never_change(options: dict[str, Any], expected: str) -> None:
    """Benchmarks and recorded figures (docs/) rely on the same arguments giving the same bytes: these digests
    were taken before huge fleets became lazy, and must stay (a fleet drawn up front is drawn as it always was).
    Retaken once, deliberately, when the seed tag became the seed's hex instead of a colliding hash: every id
    keeps its length, so event sizes are as before."""
    assert _digest(**options) == expected


def test_a_huge_fleet_costs_only_the_runs_its_events_reach() -> None:
    """20,000 gateways and one event took 21 s and 1.7 GB: every slot's first run was drawn up front. A fleet
    larger than EAGER_GATEWAYS with fewer events than runs draws a run when its slot gets its first event."""
    first = list(simulate(gateways=10**9, rate=1.0, duration=5.0, seed=4, malformed=0.2))
    assert first == list(simulate(gateways=10**9, rate=1.0, duration=5.0, seed=4, malformed=0.2))  # deterministic
    assert len(first) == 5
    lazy = _Fleet(gateways=10**9, seed=4, hashed=False, eager=False)
    assert not lazy.slots and not lazy.gateways
    for i in range(50):
        lazy.next_event(i)
    assert len(lazy.slots) <= 50 and len(lazy.gateways) <= 50
    eager = _Fleet(gateways=EAGER_GATEWAYS, seed=4, hashed=False)
    assert len(eager.slots) == EAGER_GATEWAYS * RUNS_PER_GATEWAY


def test_event_count_is_rate_times_duration_and_refuses_the_unbounded() -> None:
    assert (event_count(60.0, 60.0), event_count(60.0, 0.001), event_count(0.5, 3.0)) == (3600, 0, 1)
    for rate, duration in ((0.0, 1.0), (1.0, -1.0), (1e308, 1e308)):
        with pytest.raises(ValueError):
            event_count(rate, duration)
