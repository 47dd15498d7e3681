"""``replay --compare-verdicts``: replayed verdicts against the ones the worker published (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from streams.kafka import reader
from streams.kafka.reader import TopicRead
from streams.record_lines import scope_label

COMPARED_FIELDS: Final = ("decision", "detector", "count", "threshold", "message", "source")


def in_range(verdict: Mapping[str, Any], topic: str, ranges: Mapping[int, tuple[int, int]]) -> bool:
    """Whether a recorded verdict's source lies in the replayed ``[start, end)`` offsets of ``topic``."""
    source = verdict.get("source")
    if not isinstance(source, dict) or source.get("topic") != topic:
        return False
    partition, offset = source.get("partition"), source.get("offset")
    if not isinstance(partition, int) or not isinstance(offset, int) or partition not in ranges:
        return False
    start, end = ranges[partition]
    return start <= offset < end


@dataclass(frozen=True, slots=True)
class Difference:
    kind: str  # missing | extra | different
    verdict_id: str
    replayed: Mapping[str, Any] | None
    recorded: Mapping[str, Any] | None
    fields: tuple[str, ...] = ()

    def describe(self) -> str:
        v = self.replayed if self.replayed is not None else self.recorded
        assert v is not None
        where = _where(v.get("source"))
        head = f"{self.kind} {self.verdict_id} {v.get('decision')} {v.get('detector')} {scope_label(v)} {where}"
        if self.kind != "different" or self.replayed is None or self.recorded is None:
            return head
        changes = ", ".join(
            f"{name}: replay {_short(self.replayed.get(name))} != topic {_short(self.recorded.get(name))}"
            for name in self.fields
        )
        return f"{head}: {changes}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "verdict_id": self.verdict_id,
            "fields": list(self.fields),
            "replayed": self.replayed,
            "recorded": self.recorded,
        }


def _where(source: Any) -> str:
    if isinstance(source, dict):
        return f"source={source.get('topic')}[{source.get('partition')}]@{source.get('offset')}"
    return "source=none"


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 80 else text[:77] + "..."


@dataclass(frozen=True, slots=True)
class Comparison:
    replayed: int
    recorded: int  # distinct verdict ids recorded in range
    duplicates: int  # recorded copies beyond the first with identical compared content
    differences: list[Difference]

    @property
    def equal(self) -> bool:
        return not self.differences

    def count(self, kind: str) -> int:
        return sum(1 for d in self.differences if d.kind == kind)

    def summary(self) -> str:
        verdict = "equal" if self.equal else "DIFFERENT"
        return (
            f"{verdict}: {self.replayed} replayed verdicts, {self.recorded} recorded in range "
            f"({self.duplicates} duplicates); {self.count('missing')} missing, {self.count('extra')} extra, "
            f"{self.count('different')} different"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "equal": self.equal,
            "replayed": self.replayed,
            "recorded": self.recorded,
            "duplicates": self.duplicates,
            "missing": self.count("missing"),
            "extra": self.count("extra"),
            "different": self.count("different"),
            "differences": [d.to_json() for d in self.differences],
        }


def _content(verdict: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(orjson.dumps(verdict.get(name), option=orjson.OPT_SORT_KEYS) for name in COMPARED_FIELDS)


def _changed(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(name for name, x, y in zip(COMPARED_FIELDS, _content(a), _content(b), strict=True) if x != y)


def compare_verdicts(replayed: Iterable[Mapping[str, Any]], recorded: Iterable[Mapping[str, Any]]) -> Comparison:
    """Missing (replay only), extra (topic only) and different (same id, other content) verdicts.

    Only published replay verdicts count. Recorded copies of one id with identical content are duplicates
    (at-least-once delivery), not differences; copies that disagree with the replay each count as different.
    """
    mine: dict[str, Mapping[str, Any]] = {}
    for v in replayed:
        if v.get("published", True):
            mine.setdefault(str(v["verdict_id"]), v)
    theirs: dict[str, list[Mapping[str, Any]]] = {}
    for v in recorded:
        theirs.setdefault(str(v.get("verdict_id")), []).append(v)
    differences: list[Difference] = []
    duplicates = 0
    for vid, want in mine.items():
        copies = theirs.get(vid)
        if not copies:
            differences.append(Difference("missing", vid, want, None))
            continue
        seen: set[tuple[Any, ...]] = set()
        for got in copies:
            content = _content(got)
            if content in seen:
                duplicates += 1
                continue
            seen.add(content)
            changed = _changed(want, got)
            if changed:
                differences.append(Difference("different", vid, want, got, changed))
    for vid, copies in theirs.items():
        if vid in mine:
            continue
        differences.append(Difference("extra", vid, None, copies[0]))
        duplicates += len(copies) - len({_content(c) for c in copies})
    order = {"missing": 0, "extra": 1, "different": 2}
    differences.sort(key=lambda d: (order[d.kind], _sort_source(d), d.verdict_id))
    return Comparison(len(mine), len(theirs), duplicates, differences)


def _sort_source(d: Difference) -> tuple[int, int]:
    v = d.replayed if d.replayed is not None else d.recorded
    source = v.get("source") if v is not None else None
    if isinstance(source, dict):
        p, o = source.get("partition"), source.get("offset")
        return (p if isinstance(p, int) else -1, o if isinstance(o, int) else -1)
    return (-1, -1)


@dataclass(frozen=True, slots=True)
class ConfigMismatch:
    """Recorded verdicts decided with another config than the replay's: ``others`` counts them per config_hash,
    ``recorded`` is how many verdicts were looked at."""

    others: dict[str, int]
    recorded: int
    replay_hash: str

    def describe(self) -> str:
        listed = ", ".join(f"{h[:12]} ({n})" for h, n in sorted(self.others.items(), key=lambda kv: -kv[1]))
        return (
            f"{sum(self.others.values())} of {self.recorded} recorded verdicts were decided with another config "
            f"(config_hash {listed}) than this replay ({self.replay_hash[:12]})"
        )


#: What a config mismatch means for ``--with-state``, which then fails (exit status 1).
STATES_UNDER_ANOTHER_CONFIG: Final = (
    "--with-state cannot use the worker's stored states under another config (their runs look compacted and are "
    "left out)"
)


def config_mismatch(recorded: Iterable[Mapping[str, Any]], replay_hash: str) -> ConfigMismatch | None:
    """The one rule telling that the worker judged with another config than a replay: recorded verdicts (those
    of the replayed range) carrying another ``config_hash``. None when every one carries the replay's."""
    others: dict[str, int] = {}
    total = 0
    for verdict in recorded:
        total += 1
        recorded_hash = verdict.get("config_hash")
        if isinstance(recorded_hash, str) and recorded_hash != replay_hash:
            others[recorded_hash] = others.get(recorded_hash, 0) + 1
    return ConfigMismatch(others, total, replay_hash) if others else None


def verdict_values(read: TopicRead, topic: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Decoded verdict objects of a verdicts topic read, and a note for every undecodable record."""
    out: list[dict[str, Any]] = []
    notes: list[str] = []
    for partition in sorted(read.records):
        for rec in read.records[partition]:
            try:
                value = orjson.loads(rec.value)
            except orjson.JSONDecodeError:
                value = None
            if not isinstance(value, dict) or not isinstance(value.get("verdict_id"), str):
                notes.append(f"{topic}[{partition}]@{rec.offset}: not a verdict record, ignored")
                continue
            out.append(value)
    reader.check_kind(topic, "verdicts", len(out), notes)
    return out, notes


__all__ = [
    "COMPARED_FIELDS",
    "STATES_UNDER_ANOTHER_CONFIG",
    "Comparison",
    "ConfigMismatch",
    "Difference",
    "compare_verdicts",
    "config_mismatch",
    "in_range",
    "verdict_values",
]
