"""Per-record resource limits of the event decoder: hostile input must cost bounded CPU and memory.

Records come from many gateways over a shared topic, so a single bad record (buggy or hostile) must never
crash the worker, stall its partition or pin memory. :class:`DecodeLimits` bounds what one record may make
the decoder and the detection core do; a record over a limit is rejected like any other bad record (it goes
to the dead-letter topic with a reason, ``oversized`` for ``max_bytes`` and ``limits_exceeded`` for the rest).

What each limit protects, and why its default never rejects a realistic tool call:

``max_bytes`` = 1 MiB (``oversized``)
    Checked before parsing. Bounds the parse (orjson) and everything after it linearly. A single string may
    use the whole budget: a ``write`` of a ~1 MiB file passes, and strings cost the core only linear,
    C-speed work (quoting and SHA-256, about 3 ms per MiB), so there is no separate string limit.
``max_depth`` = 128
    Nesting depth of the whole record (the record object itself is depth 1, ``args`` depth 2). The core's
    canonical JSON and send-id stripping recurse about 3 Python frames per level, so 128 levels stay far from
    the interpreter's recursion limit (1,000) whatever the caller's stack; orjson alone would allow 1,024,
    which crashes the core with ``RecursionError``. Real payloads rarely nest beyond 20 levels; 128 leaves
    room for DOM or syntax-tree dumps.
``max_values`` = 20,000
    JSON values in the record: every object, array, string, number, ``true``/``false``/``null`` (an object
    member counts once, for its value). Canonical hashing costs the core 0.1-3 µs per value (floats with
    large exponents are the dearest: their shortest repr), so this caps the core at about 60 ms per record
    for the worst shape measured on a shared 2-core machine and about 25 ms for any other shape. Large
    structured results have a few thousand values (a 1,000-row, 10-column table is 11,000), and payloads of
    real text hit ``max_bytes`` long before this. Gateways with bigger payloads should send ``args_hash`` /
    ``result_hash`` instead of raw values.
``max_id_length`` = 1,024 characters
    ``event_id``, ``gateway_id``, ``agent_id``, ``session_id``, ``run_id``, ``tool``, ``call_id`` and
    ``unknown_tool_name``. These are kept, not hashed: in the run state (tool names, call ids and missing-tool
    names of up to ``historySize`` records, written to the store and its changelog after every event), as
    Kafka and store keys (the scope key) and in memoised per-agent configs. Real ids are under 100
    characters (OpenAI-style tool names are at most 64).

A run's state must also fit in one Kafka record, which the decoder cannot check: see :data:`MAX_STATE_BYTES`.

The checks run after the parse, on the parsed record, and cost almost nothing for typical events: the length
and a byte count prove most records cannot exceed a limit (see :func:`record_violation`). Memory: an accepted
record holds at most ``max_values`` Python objects plus its strings; the parse of a rejected one is transient
(at worst about 20 MiB for 1 MiB of empty arrays) and freed as soon as it is rejected.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Final

from streams.detection.digest_ring import WIDTH
from streams.detection.state import DEDUP_CAPACITY, MAX_BLOCKED_IDS, MAX_WARNING_KEYS

#: orjson rejects documents nested deeper than this itself (reported as ``not_json``).
ORJSON_MAX_DEPTH: Final = 1024

#: Event fields that are identifiers, names or keys rather than payload; bounded by ``max_id_length``.
ID_FIELDS: Final = (
    "event_id",
    "gateway_id",
    "agent_id",
    "session_id",
    "run_id",
    "tool",
    "call_id",
    "unknown_tool_name",
)


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """Explicit per-record limits of :func:`streams.decode.decode_event` (see the module docstring)."""

    max_bytes: int = 1_048_576
    max_depth: int = 128
    max_values: int = 20_000
    max_id_length: int = 1_024
    #: Length (bytes or characters) of JSON text too short to break any limit but ``max_bytes``: its checks
    #: are skipped. Derived; JSON needs two characters per nesting level and per value (all but one).
    trivial_size: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_depth", "max_values", "max_id_length"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if self.max_depth > ORJSON_MAX_DEPTH:
            raise ValueError(f"max_depth {self.max_depth} is above what the JSON parser allows ({ORJSON_MAX_DEPTH})")
        trivial = min(2 * self.max_depth + 1, 2 * self.max_values - 1, self.max_id_length)
        object.__setattr__(self, "trivial_size", trivial)


DEFAULT_LIMITS: Final = DecodeLimits()

#: Up to this length the ``[``/``{`` count (C speed, under 1 ns a byte) is cheaper than walking and usually
#: proves the walk unnecessary; longer records are mostly long strings, which the walk skips for free.
COUNT_BELOW: Final = 4096

_CONTAINERS: Final = frozenset((dict, list))


def record_violation(obj: dict[str, Any], text: bytes | bytearray | str, limits: DecodeLimits) -> str | None:
    """Which limit but ``max_bytes`` a parsed record object breaks (a detail naming no values), or None.

    ``text`` is the JSON the record was parsed from. Cheap upper bounds skip the walk where they can: JSON
    of ``n`` characters nests at most ``n // 2`` levels, holds at most ``(n + 1) // 2`` values (each takes a
    character, and all but one a separator) and strings shorter than ``n``; and its depth is at most its
    number of ``[`` and ``{`` characters (string contents included). Otherwise one iterative level-by-level
    walk stops as soon as a limit is passed, so it costs at most about ``max_values`` steps.
    """
    size = len(text)
    if size <= limits.trivial_size:
        return None
    walk = size > COUNT_BELOW or (size + 1) // 2 > limits.max_values
    if not walk and size // 2 > limits.max_depth:
        walk = _opens(text) > limits.max_depth
    problem = _walk(obj, limits.max_depth, limits.max_values) if walk else None
    if problem is None and size > limits.max_id_length:
        problem = id_violation(obj, limits)
    return problem


def _opens(text: bytes | bytearray | str) -> int:
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def _walk(value: object, max_depth: int, max_values: int) -> str | None:
    if type(value) not in _CONTAINERS:
        return None
    level: list[Any] = [value]
    depth = 1
    count = 1
    containers = _CONTAINERS
    while True:
        below: list[Any] = []
        push = below.append
        for node in level:
            items: Collection[Any] = node.values() if type(node) is dict else node
            count += len(items)
            if count > max_values:
                return f"max_values: more than {max_values} JSON values (at least {count})"
            for item in items:
                if type(item) in containers:
                    push(item)
        if not below:
            return None
        depth += 1
        if depth > max_depth:
            return f"max_depth: nesting deeper than {max_depth} levels"
        level = below


def id_violation(obj: dict[str, Any], limits: DecodeLimits) -> str | None:
    """Which identifier field of a record object is longer than ``max_id_length``, or None."""
    limit = limits.max_id_length
    for name in ID_FIELDS:
        value = obj.get(name)
        if type(value) is str and len(value) > limit:
            return f"max_id_length: {name} is {len(value)} characters > limit {limit}"
    return None


#: The largest record the worker's producer sends (Faust's ``producer_max_request_size``, its default, set by the
#: worker so no environment variable can lower it under :data:`MAX_STATE_BYTES`).
MAX_RECORD_REQUEST: Final = 1_000_000

#: The most bytes a run's packed core state may take (msgpack, as stored). The worker keeps a run as one
#: changelog record, and its producer refuses records over :data:`MAX_RECORD_REQUEST` bytes;
#: the rest of that record (the scope key, at most 4 KiB; model usage, under 2 KiB; the envelope's header; Kafka's
#: framing) fits in the difference. An event that would take its run past it is not applied
#: (:func:`streams.runner.step`): a state that cannot be stored would stop its partition on every worker.
MAX_STATE_BYTES: Final = 990_000

#: The most one call record adds to a packed state: its tool name, call id and missing-tool name at
#: ``max_id_length`` characters of 4 UTF-8 bytes each (strings keep a 5-byte header at most), with room for its
#: digests, kinds, indexes and 2026.9 marks (under 256 bytes even when nothing packs as binary).
RECORD_BYTES_BOUND: Final = 3 * (4 * DEFAULT_LIMITS.max_id_length + 5) + 256

#: The most everything but the history adds: full rings of blocked ids, de-duplication keys and warning keys
#: (with their counts), the guard's first record and the fixed fields.
OTHER_BYTES_BOUND: Final = (
    (MAX_BLOCKED_IDS + DEDUP_CAPACITY + MAX_WARNING_KEYS) * WIDTH + 9 * MAX_WARNING_KEYS + RECORD_BYTES_BOUND + 256
)

#: A history of up to this many records always fits in :data:`MAX_STATE_BYTES`, whatever its ids: below it no
#: state is measured, so the default ``historySize`` (30) costs nothing. Longer histories are measured per event.
ALWAYS_FITS_RECORDS: Final = (MAX_STATE_BYTES - OTHER_BYTES_BOUND) // RECORD_BYTES_BOUND

#: The fewest bytes a completed call adds (a one-character tool name, both digests binary, no call id): a history
#: longer than ``MAX_STATE_BYTES`` over this can outgrow a record whatever the ids (``config check`` warns).
COMPACT_RECORD_BYTES: Final = 65
