"""Bounded FIFO sets of short digests held in one immutable ``bytes`` value.

Used for the de-duplication keys and the blocked call ids of a scope: membership is a ``bytes.find``, adding
copies one small buffer, the value is shared safely between old and new states, and it serialises as is.
Only equality matters for these keys, so 8-byte BLAKE2b digests stand in for the strings.
"""

from __future__ import annotations

import hashlib
from typing import Final

WIDTH: Final = 8


def short_digest(text: str) -> bytes:
    """An 8-byte digest of a string (lone surrogates allowed)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=WIDTH).digest()


def ring_contains(ring: bytes, item: bytes) -> bool:
    """Whether ``item`` is one of the ``WIDTH``-aligned entries of ``ring``."""
    at = ring.find(item)
    while at >= 0:
        if at % WIDTH == 0:
            return True
        at = ring.find(item, at + 1)
    return False


def ring_push(ring: bytes, item: bytes, capacity: int) -> bytes:
    """``ring`` with ``item`` appended, keeping only the newest ``capacity`` entries."""
    keep = WIDTH * (capacity - 1)
    if len(ring) > keep:
        ring = ring[len(ring) - keep :]
    return ring + item
