"""Replay: the detection core over recorded events, with the worker's verdict records as output.

Topic replay follows the worker exactly: records are processed per partition in offset order (a run never spans
partitions), records the worker dead-letters are skipped (:func:`streams.audit.source.decode_records`), and each
verdict carries ``source = {topic, partition, offset}`` of its triggering record, so ``verdict_id`` and
``source`` equal what the worker publishes. Replay starts from empty state: a range that does not begin at a
run's first event can legitimately disagree with the worker for that run (``--with-state``:
:mod:`streams.audit.with_state`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import IO, Any

import orjson

from streams.audit.source import PositionedEvent, decode_lines
from streams.config_file import LoadedConfig
from streams.runner import Replayer


def replay_partitions(
    events: Mapping[int, Sequence[PositionedEvent]], config: LoadedConfig, topic: str, *, include_all: bool
) -> list[dict[str, Any]]:
    """Run the core per partition in offset order; one record per decision, like file replay plus ``source``.

    ``index`` is the triggering record's offset; ``published`` says whether the worker publishes it.
    """
    out: list[dict[str, Any]] = []
    for partition in sorted(events):
        replayer = Replayer(config, include_all=include_all)
        for pe in events[partition]:
            out.extend(replayer.records(pe.event, pe.index, pe.source(topic)))
    return out


def replay_lines(
    lines: Iterator[bytes],
    config: LoadedConfig,
    out: IO[bytes],
    *,
    include_all: bool,
    skip_invalid: bool,
    name: str = "<events>",
) -> int:
    """Apply every line in order; write one JSON object per decision.

    Without ``skip_invalid`` the first bad line stops the replay (later lines are still checked so that every
    bad line is reported) and the exit status is 2: an audit must not silently diverge from the input.
    """
    replayer = Replayer(config, include_all=include_all)
    bad = 0
    for index, event in decode_lines(lines, name):
        if event is None:
            bad += 1
            continue
        if bad and not skip_invalid:
            continue
        for record in replayer.records(event, index):
            out.write(orjson.dumps(record) + b"\n")
    out.flush()
    if bad and not skip_invalid:
        return 2
    return 0


__all__ = [
    "replay_lines",
    "replay_partitions",
]
