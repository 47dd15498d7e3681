"""Property tests (hypothesis, derandomized): hashing invariants and engine equivalences."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.detection import (
    MISSING,
    Decision,
    LoopConfig,
    RunState,
    ToolEvent,
    apply,
    digest,
)
from streams.detection.outcome import hash_result
from streams.detection.sends import VOLATILE_SEND_KEYS
from tests.support.engine_streams import CONFIGS, WITH_POLLS

PROPS = settings(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ENGINE_PROPS = settings(PROPS, max_examples=200)

json_scalars = (
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80) | st.floats() | st.text(max_size=6)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4),
    max_leaves=16,
)


def shuffled(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [shuffled(v, rnd) for v in value]
    return value


@PROPS
@given(json_values, st.randoms(use_true_random=False), st.sampled_from([None, 0, 2, "\t"]), st.booleans())
def test_key_order_and_whitespace_never_change_a_hash(value: Any, rnd: Any, indent: Any, ascii_only: bool) -> None:
    text = json.dumps(shuffled(value, rnd), indent=indent, ensure_ascii=ascii_only)
    assert digest(json.loads(text)) == digest(value)


# --- exec volatile fields --------------------------------------------------------------------------

VOLATILE_EXEC = ["durationMs", "pid", "sessionId", "cwd", "startedAt", "endedAt", "host_pid", "approvalId"]
volatile = st.dictionaries(st.sampled_from(VOLATILE_EXEC), json_scalars, max_size=5)
short_text = st.text(alphabet="ab \n", max_size=5)


def exec_result(details: dict[str, Any], text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


@PROPS
@given(
    st.sampled_from(["completed", "failed"]),
    st.one_of(st.none(), st.integers(-2, 3)),
    st.booleans(),
    short_text,
    short_text,
    volatile,
    volatile,
)
def test_exec_done_ignores_volatile_fields(
    status: str, exit_code: Any, timed_out: bool, aggregated: str, text: str, vol1: Any, vol2: Any
) -> None:
    stable = {"status": status, "exitCode": exit_code, "timedOut": timed_out, "aggregated": aggregated}
    base = hash_result("exec", {}, exec_result({**vol1, **stable}, text))
    assert base == hash_result("exec", {}, exec_result({**vol2, **stable}, text))
    other_status = "failed" if status == "completed" else "completed"
    assert base != hash_result("exec", {}, exec_result({**vol1, **stable, "status": other_status}, text))
    new_code = 7 if exit_code != 7 else 8
    assert base != hash_result("exec", {}, exec_result({**vol1, **stable, "exitCode": new_code}, text))
    assert base != hash_result("exec", {}, exec_result({**vol1, **stable, "timedOut": not timed_out}, text))
    changed_output = {**stable, "aggregated": aggregated + "zz"}
    assert base != hash_result("exec", {}, exec_result({**vol1, **changed_output}, text))


@PROPS
@given(short_text, short_text, short_text, volatile, volatile)
def test_exec_running_ignores_text_and_volatile_fields(tail: str, text1: str, text2: str, v1: Any, v2: Any) -> None:
    a = hash_result("exec", {}, exec_result({**v1, "status": "running", "tail": tail}, text1))
    assert a == hash_result("exec", {}, exec_result({**v2, "status": "running", "tail": tail}, text2))
    assert a != hash_result("exec", {}, exec_result({**v1, "status": "running", "tail": tail + "x"}, text1))


# --- send ids --------------------------------------------------------------------------------------

safe_keys = st.sampled_from(["ok", "channel", "to", "route", "items", "chatId", "text", "count"])
send_details = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(safe_keys, children, max_size=4),
    max_leaves=12,
)


@PROPS
@given(st.dictionaries(safe_keys, send_details, max_size=5), st.data())
def test_send_ids_never_change_the_hash(details: dict[str, Any], data: st.DataObject) -> None:
    def inject(value: Any) -> Any:
        if isinstance(value, dict):
            noisy = {k: inject(v) for k, v in value.items()}
            for key in data.draw(st.lists(st.sampled_from(sorted(VOLATILE_SEND_KEYS)), max_size=3)):
                noisy[key] = data.draw(json_scalars)
            return noisy
        if isinstance(value, list):
            out = [inject(v) for v in value]
            if data.draw(st.booleans()):
                out.append({"id": data.draw(st.text(max_size=4)), "text": "x", "direction": "out"})
                value.append({"text": "x", "direction": "out"})  # what stripping leaves of it
            return out
        return value

    base = json.loads(json.dumps(details))
    noisy = inject(base)
    for tool, args in (("message", {"action": "send"}), ("sessions_send", MISSING), ("slack", {"to": "#c"})):
        clean = hash_result(tool, args, {"content": [{"type": "text", "text": "a"}], "details": base})
        assert clean == hash_result(tool, args, {"content": [{"type": "text", "text": "b"}], "details": noisy})


# --- engine equivalences ---------------------------------------------------------------------------

scripts = WITH_POLLS.scripts()
build = WITH_POLLS.build


def run(events: list[ToolEvent], config: LoopConfig) -> tuple[dict[str, list[Any]], list[tuple[int, Decision]]]:
    states: dict[str, RunState] = {}
    decisions: list[tuple[int, Decision]] = []
    for index, event in enumerate(events):
        states[event.scope], out = apply(states.get(event.scope), event, config)
        decisions.extend((index, d) for d in out)
    return {scope: state.to_primitive() for scope, state in states.items()}, decisions


@ENGINE_PROPS
@given(scripts, st.sampled_from(CONFIGS))
def test_prehashed_and_raw_inputs_decide_identically(script: Any, config: LoopConfig) -> None:
    raw_states, raw_decisions = run(build(script, "s", prehashed=False), config)
    hashed_states, hashed_decisions = run(build(script, "s", prehashed=True), config)
    assert raw_decisions == hashed_decisions
    assert raw_states == hashed_states


@ENGINE_PROPS
@given(scripts, st.sampled_from(CONFIGS))
def test_applying_twice_is_deterministic(script: Any, config: LoopConfig) -> None:
    events = build(script, "s", prehashed=False)
    assert run(events, config) == run(events, config)


@ENGINE_PROPS
@given(scripts, scripts, st.lists(st.booleans(), max_size=120), st.sampled_from(CONFIGS))
def test_scopes_never_influence_each_other(script_a: Any, script_b: Any, picks: list[bool], config: LoopConfig) -> None:
    # Both scopes use the same de-dup keys and call ids: still independent.
    a, b = build(script_a, "a", prehashed=False), build(script_b, "b", prehashed=False)
    merged: list[ToolEvent] = []
    ia = ib = 0
    for pick in [*picks, *([True] * len(a)), *([False] * len(b))]:
        if pick and ia < len(a):
            merged.append(a[ia])
            ia += 1
        elif not pick and ib < len(b):
            merged.append(b[ib])
            ib += 1
    states, decisions = run(merged, config)
    alone_a_states, alone_a = run(a, config)
    alone_b_states, alone_b = run(b, config)
    assert [d for i, d in decisions if merged[i].scope == "a"] == [d for _, d in alone_a]
    assert [d for i, d in decisions if merged[i].scope == "b"] == [d for _, d in alone_b]
    assert states == {**alone_a_states, **alone_b_states}
