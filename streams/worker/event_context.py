"""Run table operations "as" a given Faust event, so they use that event's partition.

Faust picks a table key's changelog partition and its RocksDB partition database from the *current event*
(a context variable its stream iterator sets per event). A batch holds events of several partitions, and
outside the iterator there is no current event at all (``Stream.take()`` batches hit exactly that: table
writes raise ``TypeError`` or, with a stale event, land in the wrong partition). Setting the variable to the
run's own source event for the duration of each read and write keeps every key in its source partition:
the co-partitioning that table recovery and rebalancing rely on.

Bulk delivery has no Faust events at all: :func:`source_partition` stands in for one, carrying only what the
table and its stores read from the current event (the source topic and partition).

This is Faust's own mechanism (``faust.streams._current_event``; pinned faust-streaming 0.15.3), used
exactly as its stream iterator uses it; tests/integration/test_worker_*.py checks the resulting changelog
partitions on a real broker.
"""

from __future__ import annotations

import weakref
from typing import Any

from faust import streams as _faust_streams
from faust.types import TP

_CURRENT_EVENT: Any = _faust_streams._current_event


class _AsCurrentEvent:
    """A class, not a ``@contextmanager`` generator: entered twice per run and batch, it costs half as much."""

    __slots__ = ("_ref", "_token")

    def __init__(self, event: Any) -> None:
        self._ref = weakref.ref(event)

    def __enter__(self) -> None:
        self._token = _CURRENT_EVENT.set(self._ref)

    def __exit__(self, *exc: object) -> None:
        _CURRENT_EVENT.reset(self._token)


def as_current_event(event: Any) -> _AsCurrentEvent:
    """Within the ``with`` block, ``faust.current_event()`` is ``event``."""
    return _AsCurrentEvent(event)


class _SourceMessage:
    __slots__ = ("partition", "topic", "tp")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.tp = TP(topic, partition)


class _SourceEvent:
    __slots__ = ("__weakref__", "message")

    def __init__(self, topic: str, partition: int) -> None:
        self.message = _SourceMessage(topic, partition)


def source_partition(topic: str, partition: int) -> Any:
    """A stand-in current event of ``topic[partition]``: table keys read or written "as" it use that partition."""
    return _SourceEvent(topic, partition)
