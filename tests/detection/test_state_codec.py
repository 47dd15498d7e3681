"""The memoised record encoder is exact: same output as the general encoder, and it round-trips.

The worker writes every run's state after every batch, so :func:`encode_records` reuses per-record packed
parts; these properties pin it to :func:`encode_records_general` (the encoding stored states were written
with) for any records, including hostile ones (non-hex digests, upper case, whitespace, odd tool names,
empty call ids) and with the memo warm, cold and cleared while in use.
"""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.detection import RunState, digest
from streams.detection import state_codec as codec
from streams.detection.records import CallRecord

HEX = [digest(i) for i in range(4)]
_text = st.text(max_size=4)
_digests = st.sampled_from(HEX) | st.sampled_from(HEX).map(str.upper) | st.sampled_from(HEX).map(lambda h: h[:-1] + " ")
_tools = st.sampled_from(["read", "exec", "t:x", "", "😀"]) | _text


@st.composite
def call_records(draw: st.DrawFn) -> CallRecord:
    tool = draw(_tools)
    args = draw(_digests | _text)
    sig = tool + ":" + args if draw(st.integers(0, 9)) else draw(_text)  # rarely a sig without the tool prefix
    result = draw(st.none() | _digests | _digests.map(lambda h: "error:" + h) | st.just("error:") | _text)
    call_id = draw(st.none() | st.just("") | _text)
    unknown = draw(st.none() | st.just("") | _text)
    return CallRecord(tool, sig, result, call_id, unknown)


#: Mostly well-formed records (the fast path), some of everything else.
records = st.lists(
    st.builds(
        lambda t, a, r, c: CallRecord(t, t + ":" + a, r, c),
        st.sampled_from(["read", "exec", "write"]),
        st.sampled_from(HEX),
        st.none() | st.sampled_from(HEX) | st.sampled_from(HEX).map(lambda h: "error:" + h),
        st.none() | st.sampled_from(["c1", "c2"]),
    )
    | call_records(),
    max_size=40,
)


@settings(
    max_examples=200, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(records, st.booleans())
def test_memoised_encoding_equals_the_general_one(history: list[CallRecord], clear: bool) -> None:
    if clear:
        codec._PACKED.clear()
    reference = codec.encode_records_general(history)
    assert codec.encode_records(history) == reference  # memo cold or warm
    assert codec.encode_records(history) == reference  # memo warm
    back = codec.decode_records(msgpack.unpackb(msgpack.packb(reference)))
    packed_sigs_only = all(r.sig.startswith(r.tool + ":") for r in history)
    if packed_sigs_only:  # the format stores the tool once: a sig must start with its tool name
        assert back == tuple(history)


def test_empty_call_ids_survive_a_round_trip() -> None:
    """A pending record's call id "" must come back as "" (a ``tool_result`` with call id "" attaches by it)."""
    history = (CallRecord("read", "read:" + HEX[0], None, ""), CallRecord("read", "read:" + HEX[1], HEX[2]))
    state = RunState(history=history)
    assert RunState.from_primitive(msgpack.unpackb(msgpack.packb(state.to_primitive()))) == state


def test_the_memo_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codec, "_PACKED_MAX", 50)
    codec._PACKED.clear()
    for i in range(120):
        codec.encode_records([CallRecord("t", "t:" + digest(i), digest(-i))])
    assert len(codec._PACKED) <= 50
