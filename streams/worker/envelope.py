"""The stored-run envelope: what the worker keeps per scope key around the core's :class:`RunState`.

The core knows nothing about Kafka, so delivery bookkeeping lives here, next to the state it protects and in
the same table value (one write, one changelog record, atomically consistent):

* ``partition`` / ``last_offset``: the source coordinates of the newest event applied. A redelivered event
  (same partition, offset at or below it) is never applied twice;
* ``last_seen_ms``: processing time of the last write, for the idle-run TTL;
* the core state's primitive form;
* optionally, the run's model usage (:class:`streams.loop_cost.RunUsage`): only runs whose gateway reports
  usage carry this sixth field, so every other envelope stays byte-for-byte what it was.

There are no recorded verdicts to re-publish: the worker writes a state only after the broker confirmed every
verdict of the events it covers (see :mod:`streams.worker.app`), so a stored state proves its verdicts were
delivered, and the envelope stays as small as the core state (under 4 KiB at default settings, plus at most
2 KiB of usage).

Encoded as one msgpack array. The first four fields are plain integers so :func:`peek` can read them without
decoding the core state (the TTL sweep looks at every run).
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgpack

from streams.detection import RunState
from streams.loop_cost import RunUsage

FORMAT: Final = 1
_FIELDS: Final = (5, 6)  # without / with the run's usage


class EnvelopeError(ValueError):
    """A stored value this worker did not write (or a future format)."""


class Header(NamedTuple):
    """The envelope fields the TTL sweep needs (named tuples here: one is built per run and sweep or write)."""

    partition: int
    last_offset: int
    last_seen_ms: int


class StoredRun(NamedTuple):
    """A decoded envelope."""

    partition: int
    last_offset: int
    last_seen_ms: int
    state: RunState
    usage: RunUsage | None = None


def encode(
    partition: int, last_offset: int, last_seen_ms: int, state: RunState, usage: RunUsage | None = None
) -> bytes:
    fields = [FORMAT, partition, last_offset, last_seen_ms, state.to_primitive()]
    if usage is not None:
        fields.append(usage.to_primitive())
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def _not_stored(raw: bytes) -> str:
    """Why ``raw`` is no envelope, in the operator's terms (msgpack's own words, "unpack(b) received extra data",
    named nothing they could act on): a JSON record is what another topic holds."""
    if raw[:1] in (b"{", b"["):
        return "not a stored run (a JSON record, as events and verdicts are)"
    return "not a stored run (not loopwatch's stored-run envelope)"


def decode(raw: bytes) -> StoredRun:
    """Inverse of :func:`encode`; raises :class:`EnvelopeError` on anything else."""
    try:
        obj = msgpack.unpackb(raw, raw=False)
        version, partition, last_offset, last_seen_ms, primitive, *rest = obj
        if len(rest) > 1:
            raise ValueError("too many fields")
    except (ValueError, TypeError, msgpack.UnpackException):
        raise EnvelopeError(_not_stored(raw)) from None
    if version != FORMAT:
        raise EnvelopeError(f"unsupported stored-run format {version!r}")
    if not all(type(v) is int for v in (partition, last_offset, last_seen_ms)):
        raise EnvelopeError("stored-run header must be integers")
    try:
        state = RunState.from_primitive(primitive)
    except ValueError as exc:
        raise EnvelopeError(f"bad core state: {exc}") from None
    try:
        usage = RunUsage.from_primitive(rest[0]) if rest else None
    except ValueError as exc:
        raise EnvelopeError(str(exc)) from None
    return StoredRun(partition, last_offset, last_seen_ms, state, usage)


def peek(raw: bytes) -> Header:
    """The header of an envelope without decoding the rest."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(raw)
    try:
        if unpacker.read_array_header() not in _FIELDS:
            raise EnvelopeError("not a stored run")
        version, partition, last_offset, last_seen_ms = (unpacker.unpack() for _ in range(4))
    except (ValueError, TypeError, msgpack.UnpackException):
        raise EnvelopeError(_not_stored(raw)) from None
    if version != FORMAT or not all(type(v) is int for v in (partition, last_offset, last_seen_ms)):
        raise EnvelopeError("unsupported stored-run header")
    return Header(partition, last_offset, last_seen_ms)
