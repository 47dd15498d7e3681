"""The stored-run envelope: exact round trip, cheap header peek, and rejection of foreign values."""

from __future__ import annotations

import msgpack
import orjson
import pytest

from streams.config_file import LoadedConfig
from streams.decode import decode_event, to_tool_event
from streams.detection import RunState, apply
from streams.worker import envelope
from streams.worker.envelope import EnvelopeError
from tests.worker.support import CONFIG, event


def some_state(n: int = 6) -> RunState:
    state: RunState | None = None
    for i in range(n):
        ev = decode_event(orjson.dumps(event(i, "a")))
        state, _ = apply(state, to_tool_event(ev), CONFIG.for_agent("main"))
    assert state is not None
    return state


def test_round_trip_is_exact() -> None:
    state = some_state()
    raw = envelope.encode(3, 9, 1_800_000_000_123, state)
    stored = envelope.decode(raw)
    assert (stored.partition, stored.last_offset, stored.last_seen_ms) == (3, 9, 1_800_000_000_123)
    assert stored.state == state
    assert envelope.encode(3, 9, 1_800_000_000_123, stored.state) == raw


def test_empty_state_round_trip() -> None:
    raw = envelope.encode(0, 0, 0, RunState())
    assert envelope.decode(raw).state == RunState()


def test_peek_reads_the_header_only() -> None:
    raw = envelope.encode(5, 1234, 42, some_state())
    header = envelope.peek(raw)
    assert (header.partition, header.last_offset, header.last_seen_ms) == (5, 1234, 42)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1",
        msgpack.packb([1, 2, 3]),
        msgpack.packb([2, 0, 0, 0, []]),  # future format
        msgpack.packb([1, "p", 0, 0, []]),
        msgpack.packb([1, 0, 0, 0, ["not", "a", "state"]]),
        msgpack.packb([1, 0, 0, 0, [], []]),  # one field too many
        msgpack.packb({"a": 1}),
    ],
)
def test_foreign_values_are_rejected(raw: bytes) -> None:
    with pytest.raises(EnvelopeError):
        envelope.decode(raw)


def test_a_json_record_is_named_as_what_it_is() -> None:
    """``replay --with-state --state-topic loopwatch.events`` said "not a stored run (unpack(b) received extra
    data)": msgpack's words. An event read as a stored run is named as a JSON record, by decode and peek alike."""
    event = b'{"type":"tool_call","event_id":"e1"}'
    for read in (envelope.decode, envelope.peek):
        with pytest.raises(EnvelopeError, match=r"^not a stored run \(a JSON record, as events and verdicts are\)$"):
            read(event)
    with pytest.raises(EnvelopeError) as raised:
        envelope.decode(b"\xc1")
    assert str(raised.value) == "not a stored run (not loopwatch's stored-run envelope)"  # not msgpack's words


@pytest.mark.parametrize("raw", [b"", b"\xc1", msgpack.packb([1, 2]), msgpack.packb([2, 0, 0, 0, []])])
def test_peek_rejects_foreign_values(raw: bytes) -> None:
    with pytest.raises(EnvelopeError):
        envelope.peek(raw)


def test_full_window_stays_small() -> None:
    """Worst case at default settings (30 records, full de-duplication ring) stays under 4 KiB."""
    config = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True}}}).for_agent("main")
    assert config.history_size == 30
    state: RunState | None = None
    for i in range(300):
        ev = decode_event(orjson.dumps(event(i, "a", args={"n": i}, text=f"t{i}")))
        state, _ = apply(state, to_tool_event(ev), config)
    assert state is not None
    raw = envelope.encode(11, 10**9, 1_800_000_000_000, state)
    assert len(raw) < 4096, len(raw)
