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


#: Envelopes written by the encoder before the memo (general path only), one with every column fallback.
GOLDEN = [
    "95010129cf0000019b76daa80097019693a472656164a465786563a174c4040001000294d9403566656365623636666663383666"
    "3338643935323738366336643639366337396332646263323339646434653931623436373239643733613237666235376539d940"
    "36623836623237336666333466636531396436623830346566663561336635373437616461346561613232663164343963303165"
    "353264646237383735623462d9406434373335653361323635653136656565303366353937313862396235643033303139633037"
    "6438623663353166393064613361363636656563313361623335a74e4f542d484558c094d9403662383662323733666633346663"
    "6531396436623830346566663561336635373437616461346561613232663164343963303165353264646237383735623462d946"
    "6572726f723a64343733356533613236356531366565653033663539373138623962356430333031396330376438623663353166"
    "393064613361363636656563313361623335c0a1789601c0a46578656302a3632d31c0c4086b6b6b6b6b6b6b6b9102c408626262"
    "626262626295c303019691a465786563c40100c4204e07408562bedb8b60ce05c1decfe3ad16b72230967de01f640b7e4729b49f"
    "cec400c4205feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e990c2c4107373737373737373737373"
    "7373737373",
    "95010307cf0000019b76daa80197019693a472656164a57772697465a467726570c40400010002c4805feceb66ffc86f38d95278"
    "6c6d696c79c2dbc239dd4e91b46729d73a27fb57e96b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b"
    "4bd4735e3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab354e07408562bedb8b60ce05c1decfe3ad16b722"
    "30967de01f640b7e4729b49fcec400c4806b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4bd4735e"
    "3a265e16eee03f59718b9b5d03019c07d8b6c51f90da3a666eec13ab354e07408562bedb8b60ce05c1decfe3ad16b72230967de0"
    "1f640b7e4729b49fce5feceb66ffc86f38d952786c6d696c79c2dbc239dd4e91b46729d73a27fb57e990c40090c400c0c4087878"
    "787878787878",
]


@pytest.mark.parametrize("hexed", GOLDEN)
def test_stored_envelopes_of_the_previous_encoder_decode_and_re_encode_to_the_same_bytes(hexed: str) -> None:
    from streams.worker import envelope

    raw = bytes.fromhex(hexed)
    stored = envelope.decode(raw)
    codec._PACKED.clear()
    for _ in range(2):  # memo cold, then warm
        assert envelope.encode(stored.partition, stored.last_offset, stored.last_seen_ms, stored.state) == raw
