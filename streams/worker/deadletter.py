"""Dead-letter records: a bad input record, why it was rejected, and its original bytes.

A bad record must never stop its partition, and operators need enough to find and replay it: the reason (a
closed set, also the metric label), a detail that never quotes argument or result values, the source
coordinates and the original key and value (base64). Kafka brokers reject records above their size limit
(1 MB by default), so the original is cut to fit :data:`MAX_RECORD_BYTES` and its key to :data:`MAX_KEY_BYTES`,
each flagged when cut: an undeliverable dead-letter record would stall the partition it is meant to protect.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

import orjson

from streams.decode import REJECT_REASONS
from streams.runner import APPLY_FAILED, STATE_TOO_LARGE

#: Upper bound of an encoded dead-letter record (below Kafka's default ``message.max.bytes`` of 1 MB).
MAX_RECORD_BYTES: Final = 900_000
#: Most bytes of a rejected record's key kept, as its dead-letter record's key and in its value: a key is a scope
#: key (well under this), so only a hostile or broken producer's key is cut, and the record still fits.
MAX_KEY_BYTES: Final = 4_096
_ENVELOPE_SLACK: Final = 4_096
#: Every dead-letter reason (the closed set of the metric label): a record refused, or an event not applied.
DEAD_LETTER_REASONS: Final = (*REJECT_REASONS, APPLY_FAILED, STATE_TOO_LARGE)


@dataclass(frozen=True, slots=True)
class DeadLetterPolicy:
    """How much of a rejected record is kept: data minimisation for records that may carry tool arguments.

    ``original="full"`` keeps the bytes up to ``max_original_bytes`` (and always within the record limit);
    ``original="digest"`` keeps only their sha256 (always present) and the reason.
    """

    original: Literal["full", "digest"] = "full"
    max_original_bytes: int = MAX_RECORD_BYTES

    def __post_init__(self) -> None:
        if self.original not in ("full", "digest"):
            raise ValueError(f"dead-letter original must be full or digest, not {self.original!r}")
        if self.max_original_bytes < 0:
            raise ValueError("dead-letter max original bytes must not be negative")


DEFAULT_POLICY: Final = DeadLetterPolicy()


def rfc3339_ms(epoch_ms: float) -> str:
    """UTC RFC 3339 text with millisecond precision."""
    return datetime.fromtimestamp(epoch_ms / 1000.0, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def dead_letter_record(
    *,
    reason: str,
    detail: str,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    original: bytes,
    received_at_ms: float,
    max_bytes: int = MAX_RECORD_BYTES,
    policy: DeadLetterPolicy = DEFAULT_POLICY,
) -> bytes:
    """The JSON value of one ``loopwatch.dead-letter`` record."""
    key_b64 = base64.b64encode(dead_letter_key(key) or b"").decode("ascii") if key is not None else None
    detail = detail if len(detail) <= 1000 else detail[:997] + "..."
    budget = max_bytes - _ENVELOPE_SLACK - len(key_b64 or "") - len(detail) * 4
    keep = max(0, budget // 4 * 3)  # base64 turns 3 bytes into 4 characters
    keep = 0 if policy.original == "digest" else min(keep, policy.max_original_bytes)
    truncated = len(original) > keep
    record: dict[str, object] = {
        "reason": reason,
        "detail": detail,
        "source": {"topic": topic, "partition": partition, "offset": offset},
        "key": key_b64,
        "original": base64.b64encode(original[:keep] if truncated else original).decode("ascii"),
        "original_sha256": hashlib.sha256(original).hexdigest(),
        "received_at": rfc3339_ms(received_at_ms),
    }
    if key is not None and len(key) > MAX_KEY_BYTES:
        record["key_truncated"] = True
        record["key_size"] = len(key)
        record["key_sha256"] = hashlib.sha256(key).hexdigest()
    if policy.original == "digest":
        record["original"] = None
        record["original_size"] = len(original)
    elif truncated:
        record["original_truncated"] = True
        record["original_size"] = len(original)
    return orjson.dumps(record)


def dead_letter_key(key: bytes | None) -> bytes | None:
    """The key a dead-letter record is sent with: the rejected record's own, cut to :data:`MAX_KEY_BYTES`.

    An uncut key of several hundred KB would push the record past the producer's request limit, and a dead
    letter that cannot be sent stops the partition it is meant to keep moving."""
    return key if key is None or len(key) <= MAX_KEY_BYTES else key[:MAX_KEY_BYTES]
