"""Hypothesis fuzzing of the decoder and the core (fixed seed and budget; see :mod:`tests.fuzz.hostile`).

Property, for every input: ``decode_event`` raises nothing but :class:`InvalidEvent` with a reason from the
closed set and a detail that quotes no payload, or it returns an event the core processes without an
exception, and the record costs bounded CPU time.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.decode import INVALID_REASONS, InvalidEvent, decode_event, decode_line
from tests.fuzz.hostile import FUZZ, RECORD_CPU_BOUND_S, Tally, check_record, plain, record, records, to_bytes

_TOKENS = st.sampled_from(
    [
        b"{",
        b"}",
        b"[",
        b"]",
        b",",
        b":",
        b'"',
        b"\\",
        b"0",
        b"-1e999",
        b"18446744073709551616",
        b"null",
        b"\xff",
        b"\xed\xa0\x80",  # a UTF-8-encoded surrogate
        b"\\ud800",
        b'"type"',
        b'"tool_call"',
        b'"tool_result"',
        b'"args"',
        b'"event_id":"e"',
        b'"session_id":"s"',
        b'"gateway_id":"g"',
        b'"ts":1',
        b'"tool":"exec"',
        b"[" * 200,
        b"{}" * 50,
    ]
)
token_soup = st.lists(_TOKENS, max_size=40).map(b"".join)


@FUZZ
@given(st.binary(max_size=600) | token_soup)
def test_arbitrary_bytes_never_raise_anything_but_invalid_event(data: bytes) -> None:
    check_record(data)


@settings(FUZZ, max_examples=100)
@given(st.text(max_size=300) | token_soup.map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_decode_line_agrees_with_decode_event(text: str) -> None:
    """Replay files and the worker must reject (and accept) the same records for the same reasons."""
    try:
        line_event = decode_line(text)
    except InvalidEvent as exc:
        assert exc.reason in INVALID_REASONS
        with_reason: str | None = exc.reason
    else:
        with_reason = None
    try:
        event = decode_event(text.encode("utf-8", "surrogatepass"))
    except InvalidEvent as exc:
        # A surrogate is "not UTF-8" as text and invalid UTF-8 bytes as a record: both say not_utf8.
        assert exc.reason == with_reason, (exc.reason, with_reason)
    else:
        assert with_reason is None and event == line_event


def test_hostile_records_cover_every_path() -> None:
    """Hostile records (the strategy) reach every rejection reason and the core, within the CPU bound."""
    tally = Tally()

    @settings(FUZZ, max_examples=250)
    @given(records())
    def run(data: bytes) -> None:
        check_record(data, tally)

    run()
    seen = set(tally.reasons)
    expected = {"accepted", "not_json", "not_utf8", "limits_exceeded", "schema_invalid", "unknown_type"}
    assert expected <= seen, tally.reasons
    assert tally.worst_cpu_s < RECORD_CPU_BOUND_S


_MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 10_000), st.binary(min_size=1, max_size=4)
    ),
    min_size=1,
    max_size=4,
)


@FUZZ
@given(
    st.sampled_from(
        [
            to_bytes(record()),
            to_bytes(record(type=plain("tool_result"), result=plain({"content": [], "details": {"status": "ok"}}))),
            to_bytes(record(tool=plain("message"), args=plain({"action": "send", "to": "u", "text": "hi"}))),
            to_bytes(record(type=plain("compaction_retry"), tool=None, args=None)),
        ]
    ),
    _MUTATIONS,
)
def test_mutated_valid_records(data: bytes, mutations: list[tuple[str, int, bytes]]) -> None:
    buf = bytearray(data)
    for op, at, chunk in mutations:
        at %= len(buf) + 1
        if op == "insert":
            buf[at:at] = chunk
        elif op == "delete":
            del buf[at : at + len(chunk)]
        else:
            buf[at : at + len(chunk)] = chunk
    check_record(bytes(buf))
