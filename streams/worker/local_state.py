"""A RocksDB data directory checked against the cluster's changelogs before Faust opens it.

Each table partition's RocksDB database remembers the last changelog offset it holds (Faust's persisted
offset). On the cluster that wrote it, that offset is always below the changelog's end: the worker sets it only
from confirmed changelog writes. An offset at or past the end means the directory was written against another
cluster, or a changelog that was deleted and created again: with the embedded broker, which keeps everything in
memory, after every broker restart. Faust then stops with a ``ConsistencyError`` traceback when the changelog is
empty or short, and, worse, keeps the old states silently when the changelog holds a single record (its check
skips that case). Those stale states would judge new events of a run with the same id, and their per-partition
positions would make new events look like ones already applied.

The local store is only a cache of the changelog, so such a partition's database is discarded before Faust
starts, and recovery rebuilds it from the changelog, as Kafka Streams does with a store whose checkpoint is
ahead of its changelog. A database whose offset lies below the end is kept: recovery resumes there.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OFFSET_KEY", "StaleStore", "describe", "discard_stale", "persisted_offsets", "stale_stores"]

OFFSET_KEY = b"__faust\0offset__"
"""Where Faust's RocksDB store keeps a partition's persisted changelog offset (``Store.offset_key``)."""


@dataclass(frozen=True)
class StaleStore:
    """One table partition's database that is ahead of its changelog."""

    table: str
    partition: int
    path: Path
    persisted: int  # the last changelog offset the database says it holds
    end: int  # the changelog partition's end offset (the offset of its next record)


def persisted_offsets(tabledir: Path, table: str) -> dict[int, tuple[Path, int | None]]:
    """Every ``<table>-<partition>.db`` database under ``tabledir``: its path and persisted offset (None: none).

    Opened read-only: nothing is written, and a database Faust never finished creating is simply skipped.
    """
    from rocksdict import AccessType, Options, Rdict

    found: dict[int, tuple[Path, int | None]] = {}
    pattern = re.compile(rf"{re.escape(table)}-(\d+)\.db")
    if not tabledir.is_dir():
        return found
    for path in sorted(tabledir.iterdir()):
        match = pattern.fullmatch(path.name)
        if match is None or not (path / "CURRENT").exists():
            continue
        db = Rdict(str(path), options=Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            raw = db.get(OFFSET_KEY)
        finally:
            db.close()
        found[int(match.group(1))] = (path, int(raw) if raw is not None else None)
    return found


def stale_stores(
    persisted: Mapping[str, Mapping[int, tuple[Path, int | None]]],
    changelogs: Mapping[str, str],
    ends: Mapping[tuple[str, int], int],
) -> list[StaleStore]:
    """The databases whose persisted offset is not below their changelog partition's end.

    ``persisted`` is :func:`persisted_offsets` by table, ``changelogs`` each table's changelog topic and
    ``ends`` the changelog partitions' end offsets. A partition the cluster does not list (a changelog with
    fewer partitions) counts as empty.
    """
    stale = []
    for table, stores in persisted.items():
        topic = changelogs[table]
        for partition, (path, offset) in sorted(stores.items()):
            end = ends.get((topic, partition), 0)
            if offset is not None and offset >= end:
                stale.append(StaleStore(table, partition, path, offset, end))
    return stale


def discard_stale(stale: Iterable[StaleStore]) -> None:
    """Remove the stale databases; Faust creates them again, empty, and recovery fills them."""
    for store in stale:
        shutil.rmtree(store.path)


def describe(stale: list[StaleStore]) -> str:
    """One line's worth: which table partitions, and how far ahead of their changelogs they were."""
    parts = [f"{s.table} {s.partition} (offset {s.persisted}, changelog ends at {s.end})" for s in stale]
    return ", ".join(parts)
