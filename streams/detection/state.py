"""``RunState``: everything loopwatch remembers about one scope key, and its compact form.

States are immutable values: :func:`streams.detection.engine.apply` returns a new one and the old one stays
valid, which keeps replays, retries and what-if runs trivially correct. Unchanged parts are shared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from streams.detection.digest_ring import WIDTH
from streams.detection.guard import GuardState
from streams.detection.records import CallRecord, History
from streams.detection.state_codec import decode_records, encode_records

FORMAT_VERSION: Final = 1
MAX_WARNING_KEYS: Final = 256
MAX_BLOCKED_IDS: Final = 4096
DEDUP_CAPACITY: Final = 256


@dataclass(frozen=True, slots=True)
class RunState:
    """State of one scope key.

    * ``history`` - the newest ``historySize`` call records (Deviation 1: one window per scope key);
    * ``buckets`` - last published warning bucket per warning key (8-byte key digest), insertion-ordered,
      at most 256 keys; shared between states, so never mutate it;
    * ``blocked`` - digests of the last 4,096 blocked call ids;
    * ``guard`` - the post-compaction guard, None until the first ``compaction_retry``;
    * ``seen`` - digests of the last 256 event de-duplication keys.
    """

    history: History = ()
    buckets: dict[bytes, int] = field(default_factory=dict)
    blocked: bytes = b""
    guard: GuardState | None = None
    seen: bytes = b""

    def to_primitive(self) -> list[Any]:
        """Only lists, ints, bools, str, bytes and None: ready for msgpack (JSON once bytes are encoded)."""
        guard: list[Any] | None = None
        if self.guard is not None:
            g = self.guard
            first = encode_records([CallRecord(*g.first)]) if g.first is not None else []
            guard = [g.enabled, g.window_size, g.remaining, first, g.mixed]
        buckets = self.buckets
        return [
            FORMAT_VERSION,
            encode_records(self.history),
            b"".join(buckets),
            list(buckets.values()),
            self.blocked,
            guard,
            self.seen,
        ]

    @classmethod
    def from_primitive(cls, obj: Any) -> RunState:
        """Inverse of :meth:`to_primitive`; raises ``ValueError`` on anything it did not produce."""
        if isinstance(obj, list | tuple) and len(obj) == 9 and obj[0] == 2:  # the 2026.9 profile's format
            from streams.detection.gen9_state import RunState9

            return RunState9.from_primitive(obj)
        try:
            version, history, bucket_keys, bucket_values, blocked, guard, seen = obj
        except (TypeError, ValueError):
            raise ValueError("RunState primitive must be a list of 7 items") from None
        if version != FORMAT_VERSION:
            raise ValueError(f"unsupported RunState format {version!r}")
        keys = _bytes(bucket_keys, "bucket keys", WIDTH)
        if not isinstance(bucket_values, list | tuple) or len(bucket_values) * WIDTH != len(keys):
            raise ValueError("bucket keys and values do not match")
        if not all(type(v) is int for v in bucket_values):
            raise ValueError("bucket values must be integers")
        buckets = {keys[at * WIDTH : (at + 1) * WIDTH]: v for at, v in enumerate(bucket_values)}
        return cls(
            decode_records(history),
            buckets,
            _bytes(blocked, "blocked", WIDTH),
            _guard(guard),
            _bytes(seen, "seen", WIDTH),
        )


def _guard(obj: Any) -> GuardState | None:
    if obj is None:
        return None
    try:
        enabled, size, remaining, first, mixed = obj
    except (TypeError, ValueError):
        raise ValueError("guard must be a list of 5 items") from None
    if not (type(enabled) is bool and type(size) is int and type(remaining) is int and type(mixed) is bool):
        raise ValueError("malformed guard state")
    observed = decode_records(first)
    if len(observed) > 1 or any(r.result is None or r.call_id or r.unknown for r in observed):
        raise ValueError("malformed guard observation")
    obs = (observed[0].tool, observed[0].sig, observed[0].result or "") if observed else None
    return GuardState(enabled, size, remaining, obs, mixed)


def _bytes(value: Any, what: str, width: int) -> bytes:
    if not isinstance(value, bytes | bytearray) or len(value) % width:
        raise ValueError(f"{what} must be bytes in units of {width}")
    return bytes(value)


EMPTY: Final = RunState()
