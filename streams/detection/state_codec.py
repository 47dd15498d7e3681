"""Compact, fast primitive encoding of call records for :class:`~streams.detection.state.RunState`.

The state of a scope is written to the store (and its changelog) after every event, so the encoding must be
small and cheap. Records are stored column by column: an interned tool table, one index byte per record, and
all hex digests packed as raw bytes converted in one call; rare parts (call ids of pending records, missing
tool names) go to a sparse list. A column that holds anything other than canonical lowercase hex digests
(e.g. a malformed gateway hash) falls back to a list of strings, so decoding is exact for every input.
Per-record work is kept in C (``zip``, ``map``, slicing) because Python-level loops dominate the cost, and
the hex conversions of a record are memoised: it is re-encoded with every write while it is in the window.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from itertools import repeat
from operator import add
from typing import Any, Final

from streams.detection.records import CallRecord

_ERROR: Final = "error:"
_ERROR_LEN: Final = len(_ERROR)
_HEX_LEN: Final = 64
_NO_RESULT, _HEX_RESULT, _ERROR_RESULT = 0, 1, 2
_new_record: Final = partial(tuple.__new__, CallRecord)
_slices: list[slice] = []


def _hex_blob(parts: Sequence[str]) -> bytes | None:
    """All parts as one bytes value if every part is a 64-digit lowercase hex string, else None."""
    if set(map(len, parts)) != {_HEX_LEN}:
        return None
    joined = "".join(parts)
    try:
        blob = bytes.fromhex(joined)
    except ValueError:
        return None
    # fromhex skips whitespace (the blob would be shorter) and accepts upper case.
    return blob if len(blob) * 2 == len(joined) and joined.lower() == joined else None


def _hex_parts(blob: bytes) -> list[str]:
    text = blob.hex()
    count = len(text) // _HEX_LEN
    while len(_slices) < count:
        at = len(_slices) * _HEX_LEN
        _slices.append(slice(at, at + _HEX_LEN))
    return list(map(text.__getitem__, _slices[:count]))


def _result_kind(result: str | None) -> int:
    if result is None:
        return _NO_RESULT
    return _HEX_RESULT if len(result) == _HEX_LEN else _ERROR_RESULT


#: Per-record packed parts ``(args digest, result kind, result digest)``, or None when a record does not pack
#: (its history then takes the general path). A record stays in the window for up to ``historySize`` writes,
#: so this turns the hex conversions of every write into one per record. Cleared when full: bounded memory.
_PACKED: dict[CallRecord, tuple[bytes, int, bytes] | None] = {}
_PACKED_MAX: Final = 65_536
_NO_DIGEST: Final = b""


def _pack_record(rec: CallRecord) -> tuple[bytes, int, bytes] | None:
    tool, sig, result = rec[0], rec[1], rec[2]
    args = sig[len(tool) + 1 :]
    if len(args) != _HEX_LEN or args.lower() != args:
        return None
    if result is None:
        kind, digest = _NO_RESULT, None
    elif len(result) == _HEX_LEN:
        kind, digest = _HEX_RESULT, result
    elif result.startswith(_ERROR) and len(result) == _ERROR_LEN + _HEX_LEN:
        kind, digest = _ERROR_RESULT, result[_ERROR_LEN:]
    else:
        return None
    if digest is not None and digest.lower() != digest:
        return None
    try:
        packed_args = bytes.fromhex(args)
        packed_result = _NO_DIGEST if digest is None else bytes.fromhex(digest)
    except ValueError:
        return None
    # fromhex skips whitespace: a short value means the text was not 64 hex digits
    if len(packed_args) * 2 != _HEX_LEN or (digest is not None and len(packed_result) * 2 != _HEX_LEN):
        return None
    return packed_args, kind, packed_result


def _packed(rec: CallRecord) -> tuple[bytes, int, bytes] | None:
    if len(_PACKED) >= _PACKED_MAX:
        _PACKED.clear()
    parts = _PACKED[rec] = _pack_record(rec)
    return parts


def encode_records(records: Sequence[CallRecord]) -> list[Any]:
    """``[tools, tool_index, args, result_kinds, results, sparse]`` (see the module docstring).

    Records whose digests all pack (the usual case) are encoded from memoised per-record parts; any other
    history takes :func:`encode_records_general`. Both give the same output for every input.
    """
    if not records:
        return []
    parts = list(map(_PACKED.get, records, repeat(False)))
    if False in parts:
        parts = [_packed(rec) if got is False else got for rec, got in zip(records, parts, strict=True)]
    if None in parts:
        return encode_records_general(records)
    tools_col, _, _, call_ids, unknowns = zip(*records, strict=True)
    tools = list(dict.fromkeys(tools_col))
    if len(tools) == 1:
        tool_index: bytes | list[int] = bytes(len(records))
    else:
        index = {name: at for at, name in enumerate(tools)}
        positions = list(map(index.__getitem__, tools_col))
        tool_index = bytes(positions) if len(tools) <= 256 else positions
    args, kinds, results = zip(*parts, strict=True)
    kinds_col = bytes(kinds) if _NO_RESULT in kinds or _ERROR_RESULT in kinds else b""
    sparse: list[Any] = []
    if call_ids.count(None) != len(call_ids) or unknowns.count(None) != len(unknowns):  # "" is kept too
        sparse = _sparse(call_ids, unknowns)
    return [tools, tool_index, b"".join(args), kinds_col, b"".join(results), sparse]


def _sparse(call_ids: Sequence[str | None], unknowns: Sequence[str | None]) -> list[Any]:
    sparse: list[Any] = []
    for at, (call_id, unknown) in enumerate(zip(call_ids, unknowns, strict=True)):
        if call_id is not None or unknown is not None:
            sparse += (at, call_id, unknown)
    return sparse


def encode_records_general(records: Sequence[CallRecord]) -> list[Any]:
    """:func:`encode_records` for any records, without the memo (also its reference in tests)."""
    if not records:
        return []
    tools_col, sigs, results, call_ids, unknowns = zip(*records, strict=True)
    tools = list(dict.fromkeys(tools_col))
    index = {name: at for at, name in enumerate(tools)}
    positions = list(map(index.__getitem__, tools_col))
    tool_index: bytes | list[int] = bytes(positions) if len(tools) <= 256 else positions
    cut = [slice(len(name) + 1, None) for name in tools]  # the args hash after "tool:"
    args = list(map(str.__getitem__, sigs, map(cut.__getitem__, positions)))
    packed_args = _hex_blob(args)
    args_col: bytes | list[str] = args if packed_args is None else packed_args

    kinds: bytes | None = None
    results_col: bytes | list[str | None] | None = None
    if None not in results and set(map(len, results)) == {_HEX_LEN}:
        packed = _hex_blob(results)  # the common case: every record complete, no error outcomes
        if packed is not None:
            kinds, results_col = b"", packed
    elif all(r is None or len(r) == _HEX_LEN or r.startswith(_ERROR) for r in results):
        present = [r if len(r) == _HEX_LEN else r[_ERROR_LEN:] for r in results if r is not None]
        packed = _hex_blob(present) if present else b""
        if packed is not None:
            kinds, results_col = bytes(map(_result_kind, results)), packed
    if results_col is None:
        results_col = list(results)

    sparse: list[Any] = []
    if call_ids.count(None) != len(call_ids) or unknowns.count(None) != len(unknowns):
        sparse = _sparse(call_ids, unknowns)
    return [tools, tool_index, args_col, kinds, results_col, sparse]


def decode_records(obj: Any) -> tuple[CallRecord, ...]:
    """Inverse of :func:`encode_records`; raises ``ValueError`` on anything it did not produce."""
    if not obj:
        return ()
    try:
        return _decode(obj)
    except (TypeError, IndexError, KeyError, StopIteration) as exc:
        raise ValueError(f"malformed call records: {exc!r}") from None


def _decode(obj: Any) -> tuple[CallRecord, ...]:
    tools, tool_index, args_col, kinds, results_col, sparse = obj
    if not all(type(name) is str for name in tools) or not all(
        type(at) is int and 0 <= at < len(tools) for at in set(tool_index)
    ):
        raise ValueError("malformed call records: tool table")
    count = len(tool_index)
    tools_col = list(map(tools.__getitem__, tool_index))
    prefixes = [name + ":" for name in tools]
    if isinstance(args_col, bytes):
        args = _hex_parts(args_col)
    else:
        args = list(args_col)
        if not all(type(a) is str for a in args):
            raise ValueError("malformed call records: args column")
    if len(args) != count:
        raise ValueError("malformed call records: args column")
    sigs = list(map(add, map(prefixes.__getitem__, tool_index), args))

    results: list[str | None]
    if kinds is None:
        results = list(results_col)
        if not all(r is None or type(r) is str for r in results):
            raise ValueError("malformed call records: results column")
    elif not kinds:
        results = list(_hex_parts(results_col))
    else:
        parts = iter(_hex_parts(results_col))
        results = [
            None if kind == _NO_RESULT else next(parts) if kind == _HEX_RESULT else _ERROR + next(parts)
            for kind in kinds
        ]
        if next(parts, None) is not None or max(kinds) > _ERROR_RESULT:
            raise ValueError("malformed call records: results column")
    if len(results) != count:
        raise ValueError("malformed call records: column lengths differ")

    if not sparse:
        return tuple(map(_new_record, zip(tools_col, sigs, results, [None] * count, [None] * count, strict=True)))
    call_ids: list[str | None] = [None] * count
    unknowns: list[str | None] = [None] * count
    if len(sparse) % 3:
        raise ValueError("malformed call records: sparse column")
    for at in range(0, len(sparse), 3):
        pos, call_id, unknown = sparse[at : at + 3]
        if not (type(pos) is int and 0 <= pos < count and _optional_str(call_id) and _optional_str(unknown)):
            raise ValueError("malformed call records: sparse column")
        call_ids[pos] = call_id
        unknowns[pos] = unknown
    return tuple(map(_new_record, zip(tools_col, sigs, results, call_ids, unknowns, strict=True)))


def _optional_str(value: Any) -> bool:
    return value is None or type(value) is str
