"""The bridge plugin's records are valid wire events (schemas/events.py), and its gateway-side hashes are loopwatch's.

``scripts/emit-sample-events.mjs`` drives the real hook handlers through a representative session twice,
with ``hashOnGateway`` on and off, and prints every record it would publish. Each record must decode with
loopwatch's own decoder, carry its scope key as record key, and the hashed and raw variants of every event
must mean exactly the same thing to the core (same call signature, same outcome hash, same run history).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from schemas.events import CompactionRetryEvent, ToolCallEvent, ToolResultEvent
from streams.decode import decode_line, scope_key, to_tool_event
from streams.detection import MISSING, LoopConfig, Outcome, RunState, apply, args_hash, hash_outcome
from tests.openclaw.conftest import PLUGIN_DIR

Lines = list[dict[str, Any]]


@pytest.fixture(scope="module")
def lines(node: str) -> Lines:
    done = subprocess.run(
        [node, "scripts/emit-sample-events.mjs"],
        cwd=PLUGIN_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    # split("\n"), not splitlines(): records legitimately contain U+2028 and other line separators.
    return [json.loads(line) for line in done.stdout.split("\n") if line]


def _by_mode(lines: Lines, mode: str) -> Lines:
    return [line for line in lines if line["mode"] == mode]


def test_every_record_decodes_and_is_keyed_by_its_scope_key(lines: Lines) -> None:
    assert len(lines) > 100
    for line in lines:
        event = decode_line(line["value"])
        assert line["key"] == scope_key(event), line
        assert event.gateway_id == "gw-sample"
        assert isinstance(event.ts, int)
        assert event.version == 1
        assert event.event_id
        to_tool_event(event)


def test_both_modes_publish_the_same_event_sequence(lines: Lines) -> None:
    hashed = [decode_line(line["value"]) for line in _by_mode(lines, "hash")]
    raw = [decode_line(line["value"]) for line in _by_mode(lines, "raw")]
    assert [type(e) for e in hashed] == [type(e) for e in raw]
    assert {type(e) for e in hashed} == {ToolCallEvent, ToolResultEvent, CompactionRetryEvent}
    for h, r in zip(hashed, raw, strict=True):
        assert (h.session_id, h.run_id, h.agent_id) == (r.session_id, r.run_id, r.agent_id)
    # Compactions carry the run id the tool hooks saw, so they land in the run's scope.
    compactions = [e for e in hashed if isinstance(e, CompactionRetryEvent)]
    assert [c.run_id for c in compactions] == ["run-a", "  run-b\u3000"]
    assert [scope_key(c) for c in compactions] == ["run-a", "run-b"]


def test_calls_that_never_reached_openclaws_tool_wrapper_are_not_published(lines: Lines) -> None:
    # The sample session's made-up tool name gets an after_tool_call but no before_tool_call.
    tools = {json.loads(line["value"]).get("tool") for line in lines}
    assert "grep_all" not in tools and {"read", "exec", "process"} <= tools


def test_hash_mode_never_sends_raw_arguments_or_results(lines: Lines) -> None:
    for line in _by_mode(lines, "hash"):
        record = json.loads(line["value"])
        assert not {"args", "result", "error"} & record.keys(), record
        if record["type"] != "compaction_retry":
            assert "args_hash" in record


def _outcome(event: ToolCallEvent | ToolResultEvent) -> Outcome:
    if event.error is not None:
        return Outcome(error=event.error)
    if event.result is not None:
        return Outcome(result=event.result)
    return Outcome(result_hash=event.result_hash, unknown_tool_name=event.unknown_tool_name)


def test_gateway_hashes_equal_what_loopwatch_computes_from_raw_records(lines: Lines) -> None:
    hashed = [decode_line(line["value"]) for line in _by_mode(lines, "hash")]
    raw = [decode_line(line["value"]) for line in _by_mode(lines, "raw")]
    checked = 0
    for h, r in zip(hashed, raw, strict=True):
        if isinstance(h, CompactionRetryEvent):
            continue
        assert isinstance(r, ToolCallEvent | ToolResultEvent)
        assert isinstance(h, ToolCallEvent | ToolResultEvent)
        raw_args = r.args if r.has_args else MISSING
        assert args_hash(h.tool, MISSING, h.args_hash) == args_hash(r.tool, raw_args, r.args_hash), h.tool
        if isinstance(h, ToolResultEvent):
            assert isinstance(r, ToolResultEvent)
            expected = hash_outcome(r.tool, raw_args, _outcome(r))
            assert (h.result_hash, h.unknown_tool_name) == expected, h.tool
            checked += 1
    assert checked >= 40


def test_both_modes_build_the_same_run_history(lines: Lines) -> None:
    config = LoopConfig(enabled=True)
    histories: dict[str, dict[str, Any]] = {}
    for mode in ("hash", "raw"):
        states: dict[str, RunState] = {}
        for line in _by_mode(lines, mode):
            event = to_tool_event(decode_line(line["value"]))
            states[event.scope], decisions = apply(states.get(event.scope), event, config)
            assert decisions == []
        histories[mode] = {scope: state.history for scope, state in states.items()}
    assert histories["hash"] == histories["raw"]
    # Every executed call got its outcome attached (tool_result matched the pending tool_call)...
    for history in histories["hash"].values():
        pending = [record for record in history if record.result is None]
        # ...except OpenClaw's own loop veto, whose result has no hash.
        assert [record.call_id for record in pending] == ["call-15"]
