"""The bounds of a run's packed state (streams.limits) against the largest states the core can build."""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.detection.gen9_state import RunState9
from streams.detection.guard import GuardState
from streams.detection.records import CallRecord
from streams.detection.state import DEDUP_CAPACITY, MAX_BLOCKED_IDS, MAX_WARNING_KEYS, RunState
from streams.limits import (
    ALWAYS_FITS_RECORDS,
    COMPACT_RECORD_BYTES,
    DEFAULT_LIMITS,
    MAX_STATE_BYTES,
    OTHER_BYTES_BOUND,
    RECORD_BYTES_BOUND,
)

LONGEST = DEFAULT_LIMITS.max_id_length
WIDE = "\U0001d4e7"  # 4 bytes in UTF-8: the longest an accepted id can be in bytes


def _packed(state: RunState) -> int:
    return len(msgpack.packb(state.to_primitive(), use_bin_type=True))


def _id(at: int, kind: str) -> str:
    """A distinct id of the longest length, in 4-byte characters."""
    tag = f"{kind}{at}"
    return tag + WIDE * (LONGEST - len(tag))


def _worst_record(at: int, *, hex_args: bool, result: str) -> CallRecord:
    tool = _id(at, "t")
    args = f"{at:064x}" if hex_args else f"{at:064X}"  # upper case does not pack as binary
    outcome = {"none": None, "hex": f"{at:064x}", "error": f"error:{at:064x}", "odd": f"error:{at:064X}"}[result]
    return CallRecord(tool, f"{tool}:{args}", outcome, _id(at, "c"), _id(at, "u"))


def _fullest(records: int, *, hex_args: bool, result: str, gen9: bool) -> RunState:
    history = tuple(_worst_record(at, hex_args=hex_args, result=result) for at in range(records))
    guard = GuardState(True, 2**31, 2**31, _worst_record(records, hex_args=hex_args, result=result), True)
    parts = (
        history,
        {at.to_bytes(8, "big"): 2**63 - at for at in range(MAX_WARNING_KEYS)},
        b"\xff" * 8 * MAX_BLOCKED_IDS,
        guard,
        b"\xff" * 8 * DEDUP_CAPACITY,
    )
    if gen9:
        marks = tuple((True, "F" * 64, True) for _ in history)
        return RunState9(*parts, marks, True)
    return RunState(*parts)


@settings(max_examples=12, deadline=None)
@given(
    records=st.sampled_from([0, 1, 7, ALWAYS_FITS_RECORDS]),
    hex_args=st.booleans(),
    result=st.sampled_from(["none", "hex", "error", "odd"]),
    gen9=st.booleans(),
)
def test_no_state_packs_larger_than_its_bound(records: int, hex_args: bool, result: str, gen9: bool) -> None:
    """The bounds decide when a state is not measured at all: a state they underestimate could reach the
    producer unmeasured, be refused, and stop its partition on every worker."""
    size = _packed(_fullest(records, hex_args=hex_args, result=result, gen9=gen9))
    assert size <= records * RECORD_BYTES_BOUND + OTHER_BYTES_BOUND
    if records == ALWAYS_FITS_RECORDS:
        assert size <= MAX_STATE_BYTES


def test_the_bounds_are_near_the_worst_case() -> None:
    """Loose bounds would measure states for nothing: the worst record takes most of its bound."""
    one = _packed(_fullest(1, hex_args=False, result="odd", gen9=True))
    two = _packed(_fullest(2, hex_args=False, result="odd", gen9=True))
    assert two - one > 0.95 * RECORD_BYTES_BOUND
    assert ALWAYS_FITS_RECORDS >= 30  # the default historySize is never measured


def test_a_history_of_compact_calls_outgrows_a_record_past_the_figure_config_check_gives() -> None:
    calls = MAX_STATE_BYTES // COMPACT_RECORD_BYTES + 1
    history = tuple(CallRecord("r", f"r:{at:064x}", f"{at:064x}") for at in range(calls))
    assert _packed(RunState(history)) > MAX_STATE_BYTES
    assert _packed(RunState(history[:1000])) >= 1000 * COMPACT_RECORD_BYTES
