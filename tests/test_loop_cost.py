"""Loop cost accounting (streams/loop_cost.py): attribution, bounded state, and never a different decision."""

from __future__ import annotations

import io
from typing import Any

import msgpack
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemas import ModelUsageEvent
from streams.audit.replay import replay_lines
from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection import Decision
from streams.detection.types import LoopConfig
from streams.loop_cost import (
    COST_CEILING,
    DEDUP_CAPACITY,
    MAX_LOOPS,
    TOKEN_CEILING,
    UNKNOWN,
    RunUsage,
    Tally,
    add_up,
    charge,
    record,
)
from streams.simulate import simulate_events
from streams.worker import envelope
from streams.worker.processing import InputRecord, RunProcessor, plan_batch
from tests.support.worker import keyed

LOOP = LoopConfig(enabled=True, warning_threshold=3, critical_threshold=5)
_id = iter(range(10**9))


def usage(tokens: int = 100, cost: float | None = 0.01, event_id: str | None = None) -> ModelUsageEvent:
    return ModelUsageEvent(
        type="model_usage",
        event_id=event_id or f"u{next(_id)}",
        gateway_id="gw",
        session_id="s",
        run_id="r",
        ts=0,
        input_tokens=tokens,
        cost_usd=cost,
    )


def decision(kind: str = "block", key: str = "generic:exec:abc", *, published: bool = True) -> Decision:
    return Decision(kind, "generic_repeat", 5, 5, "m", "exec", None, key, published)  # type: ignore[arg-type]


def test_a_run_without_usage_has_unknown_figures_and_no_state() -> None:
    assert charge(None, [decision(), decision("warning")], LOOP) == (None, [UNKNOWN, UNKNOWN])


def test_usage_since_the_loops_first_decision_is_attributed_to_it() -> None:
    state = record(None, usage(1000))  # before the loop was found: the cost of finding it
    state, (first,) = charge(state, [decision("warning")], LOOP)
    assert first.tokens_in_loop == 0 and first.cost_usd_in_loop == 0.0 and first.saved_tokens is None
    state = record(record(state, usage(200)), usage(300))
    state, (block,) = charge(state, [decision("block")], LOOP)
    assert block.tokens_in_loop == 500 and block.cost_usd_in_loop == pytest.approx(0.02)
    assert block.tokens_since_reported == 500
    assert block.saved_tokens == 250 and block.saved_cost_usd == pytest.approx(0.01)  # one call at the loop's mean
    state = record(state, usage(100))
    state, (again,) = charge(state, [decision("block")], LOOP)
    assert again.tokens_in_loop == 600 and again.tokens_since_reported == 100
    assert add_up([first, block, again]).tokens == again.tokens_in_loop  # what the metrics add up to


def test_an_abort_saves_critical_threshold_calls_and_a_new_loop_counts_apart() -> None:
    state = record(record(None, usage(400)), usage(600))
    state, (abort,) = charge(state, [decision("abort", "guard:read")], LOOP)
    # No call in the loop yet: the run's mean (500 tokens, $0.01) per call, 5 calls (criticalThreshold).
    assert abort.tokens_in_loop == 0 and abort.saved_tokens == 2500 and abort.saved_cost_usd == pytest.approx(0.05)
    state = record(state, usage(50))
    state, (other,) = charge(state, [decision("warning", "generic:grep:x")], LOOP)
    assert other.tokens_in_loop == 0


def test_cost_is_unknown_unless_every_call_in_the_loop_was_priced() -> None:
    state, _ = charge(record(None, usage()), [decision("warning")], LOOP)
    state = record(record(state, usage(cost=0.5)), usage(cost=None))
    _, (block,) = charge(state, [decision()], LOOP)
    assert block.tokens_in_loop == 200 and block.cost_usd_in_loop is None and block.saved_cost_usd is None


def test_a_repeated_usage_event_counts_once() -> None:
    once = record(None, usage(event_id="same"))
    assert record(once, usage(event_id="same")) is once
    assert once.total == Tally(1, 100, 0.01, 1)


def test_unpublished_decisions_do_not_move_what_the_metrics_have_counted() -> None:
    state, _ = charge(record(None, usage()), [decision("warning")], LOOP)
    state = record(state, usage(70))
    state, (held,) = charge(state, [decision("warning", published=False)], LOOP)
    assert held.tokens_in_loop == 70 and held.tokens_since_reported == 0
    _, (block,) = charge(state, [decision()], LOOP)
    assert block.tokens_since_reported == 70


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("usage"), st.integers(0, 10**6), st.one_of(st.none(), st.floats(0, 5)), st.integers(0, 80)),
        st.tuples(st.just("decide"), st.sampled_from(["warning", "block", "abort"]), st.integers(0, 40), st.booleans()),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_state_stays_bounded_and_figures_consistent(ops: list[tuple[Any, ...]]) -> None:
    state: RunUsage | None = None
    for op in ops:
        if op[0] == "usage":
            state = record(state, usage(op[1], op[2], event_id=f"e{op[3]}"))  # ids repeat: redeliveries
            continue
        _, kind, loop, published = op
        state, (cost,) = charge(state, [decision(kind, f"k{loop}", published=published)], LOOP)
        if state is None:
            assert cost == UNKNOWN
            continue
        assert cost.tokens_in_loop is not None and cost.tokens_in_loop >= 0
        assert 0 <= cost.tokens_since_reported <= cost.tokens_in_loop
        assert len(state.loops) <= MAX_LOOPS
        assert len(state.seen) <= DEDUP_CAPACITY * 8
        assert RunUsage.from_primitive(state.to_primitive()) == state
    if state is not None:  # a redelivered id counts once (while remembered), a new one always
        ids = [op[3] for op in ops if op[0] == "usage"]
        assert len(set(ids)) <= state.total.calls <= len(ids)


def test_huge_usage_figures_saturate_so_a_run_can_always_be_stored_and_priced() -> None:
    """Each token field may be 2**53: a few hundred such events once pushed a run's sum past 2**64, which the
    envelope's msgpack refuses, so the run could never be stored again and its partition stopped."""
    big = 2**53
    fields = {"gateway_id": "gw", "session_id": "s", "run_id": "r", "ts": 0, "cost_usd": 1e308}
    tokens = {name: big for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")}
    events = [ModelUsageEvent(type="model_usage", event_id=f"u{i}", **fields, **tokens) for i in range(600)]
    state: RunUsage | None = None
    for event in events:
        state = record(state, event)
    assert state is not None and (state.total.tokens, state.total.cost_usd) == (TOKEN_CEILING, COST_CEILING)
    assert RunUsage.from_primitive(msgpack.unpackb(msgpack.packb(state.to_primitive()))) == state
    boundless = LoopConfig(enabled=True, warning_threshold=3, critical_threshold=10**300)  # a float in the file
    _, (abort,) = charge(state, [decision("abort")], boundless)
    assert (abort.saved_tokens, abort.saved_cost_usd) == (TOKEN_CEILING, COST_CEILING)
    assert orjson.loads(orjson.dumps(abort.verdict_fields()))["saved_tokens_estimate"] == TOKEN_CEILING
    # through the worker's processing: the run's envelope encodes
    records = [InputRecord("t", 0, i, b"r", orjson.dumps(e.model_dump(mode="json"))) for i, e in enumerate(events)]
    group = plan_batch(records, 0).groups[b"r"]
    assert RunProcessor(LoadedConfig.default()).process(group, records, None, 0).value is not None


def _replay(events: list[dict[str, Any]], config_path: Any) -> list[dict[str, Any]]:
    out = io.BytesIO()
    code = replay_lines(
        (orjson.dumps(e) for e in events), load_openclaw_config(config_path), out, include_all=True, skip_invalid=False
    )
    assert code == 0
    return [orjson.loads(line) for line in out.getvalue().splitlines()]


DECIDED = ("decision", "detector", "count", "threshold", "run_id", "tool", "event_id", "published", "message")


@pytest.fixture(scope="module")
def eager_config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("cfg") / "openclaw.json"
    path.write_text('{"tools": {"loopDetection": {"enabled": true, "warningThreshold": 4, "criticalThreshold": 8}}}')
    return path


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
def test_replay_with_and_without_usage_events_decides_identically(eager_config: Any, seed: int) -> None:
    path = eager_config
    events = list(simulate_events(gateways=3, rate=100.0, duration=15.0, seed=seed, usage=True))
    assert any(e["type"] == "model_usage" for e in events)
    with_usage = _replay(events, path)
    without = _replay([e for e in events if e["type"] != "model_usage"], path)
    assert [tuple(v[k] for k in DECIDED) for v in with_usage] == [tuple(v[k] for k in DECIDED) for v in without]
    assert all(v["tokens_in_loop"] is None for v in without)
    assert all(v["tokens_in_loop"] is not None for v in with_usage)


def test_the_worker_prices_verdicts_as_replay_does_and_keeps_usage_in_the_envelope(tmp_path: Any) -> None:
    path = tmp_path / "openclaw.json"
    path.write_text('{"tools": {"loopDetection": {"enabled": true, "warningThreshold": 3, "criticalThreshold": 5}}}')
    events = list(simulate_events(gateways=2, rate=100.0, duration=20.0, seed=7, usage=True))
    want = {v["verdict_id"]: v for v in _replay(events, path) if v["published"]}
    processor = RunProcessor(load_openclaw_config(path))

    records = [InputRecord("t", 0, i, key, value) for i, (key, value) in enumerate(keyed(events))]
    store: dict[bytes, bytes] = {}
    got: dict[str, dict[str, Any]] = {}
    for start in range(0, len(records), 97):  # batches split runs: usage must survive in the envelope
        batch = records[start : start + 97]
        plan = plan_batch(batch, 0)
        for group in plan.groups.values():
            result = processor.process(group, batch, store.get(group.key), 0)
            assert result.value is not None
            store[group.key] = result.value
            for pub in result.publications:
                verdict = orjson.loads(pub.value)
                got[verdict["verdict_id"]] = verdict
    assert got.keys() == want.keys() and got
    for vid, verdict in got.items():
        for field in ("tokens_in_loop", "cost_usd_in_loop", "saved_tokens_estimate", "saved_cost_usd_estimate"):
            assert verdict[field] == want[vid][field], (vid, field)
    assert any(envelope.decode(value).usage is not None for value in store.values())


def test_envelopes_without_usage_keep_their_old_bytes() -> None:
    from streams.detection.state import EMPTY

    plain = envelope.encode(1, 2, 3, EMPTY)
    assert len(msgpack.unpackb(plain)) == 5
    assert envelope.decode(plain).usage is None and envelope.peek(plain).last_offset == 2
    run_usage = record(None, usage())
    with_usage = envelope.encode(1, 2, 3, EMPTY, run_usage)
    assert envelope.decode(with_usage).usage == run_usage and envelope.peek(with_usage).last_offset == 2
    with pytest.raises(envelope.EnvelopeError):
        envelope.decode(msgpack.packb([*msgpack.unpackb(with_usage), "extra"]))


def test_the_commands_show_the_same_figures(tmp_path: Any) -> None:
    """The real executable: simulate --usage, then replay, replay --run and whatif agree on the loop costs."""
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).parent / "loopwatch")
    config = tmp_path / "openclaw.json"
    config.write_text('{"tools": {"loopDetection": {"enabled": true, "warningThreshold": 3, "criticalThreshold": 5}}}')
    events = tmp_path / "events.jsonl"

    def run(*args: str) -> str:
        proc = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    run(
        "simulate",
        "--gateways",
        "2",
        "--rate",
        "100",
        "--duration",
        "20",
        "--seed",
        "7",
        "--usage",
        "--out",
        str(events),
    )
    verdicts = [
        orjson.loads(line) for line in run("replay", "--events", str(events), "--config", str(config)).splitlines()
    ]
    priced = [v for v in verdicts if v["decision"] == "block" and v["tokens_in_loop"]]
    assert priced, "no block with usage in the loop"
    block = priced[0]
    explained = run("replay", "--events", str(events), "--config", str(config), "--run", block["run_id"])
    assert f"in loop: {block['tokens_in_loop']} tokens" in explained
    assert "model_usage" in explained
    report = orjson.loads(
        run("whatif", "--events", str(events), "--config", str(config), "--candidate", str(config), "--format", "json")
    )
    current = report["loop_cost"]["current"]
    assert current == report["loop_cost"]["candidate"]
    saved = sum(v["saved_tokens_estimate"] or 0 for v in verdicts)
    assert current["saved_tokens_estimate"] == saved > 0
    assert current["tokens_in_loops"] >= max(v["tokens_in_loop"] for v in verdicts)


def test_a_full_usage_state_stays_small() -> None:
    """At capacity (16 loops, 64 remembered ids, huge totals) the usage adds under 1.5 KiB to a run's envelope."""
    state: RunUsage | None = None
    for i in range(DEDUP_CAPACITY + 10):
        state = record(state, usage(2**40, 1e6 + i))
    for loop in range(MAX_LOOPS + 5):
        state, _ = charge(state, [decision("block", f"generic:exec:{loop}")], LOOP)
    assert state is not None and len(state.loops) == MAX_LOOPS and len(state.seen) == DEDUP_CAPACITY * 8
    assert len(msgpack.packb(state.to_primitive(), use_bin_type=True)) < 1536
