"""``loopwatch replay --topic … --run RUN_ID --with-state``: explain a run from the worker's stored state.

The run's events in the range are picked out (:func:`run_events`); its base state is chosen from the changelog
and warmed up exactly as for a ``--with-state`` listing (:func:`streams.audit.with_state.confirm_bases`,
:func:`streams.audit.with_state.start_partition`), and :func:`streams.audit.explain_run` starts from that state
instead of empty; where the worker expired the run inside the range, the event it restarted the run with starts
from empty too, and its step says so (:attr:`streams.audit.replay.ExplainStep.restart`). Every :class:`RunStart` says
where the state came from (its origin, how many earlier events were re-applied, how many calls were already in
the history, where the run restarted), so an auditor can tell why a verdict fired on the first replayed call.
Pure: the CLI (:mod:`streams.cli.replay`) reads the records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streams.audit import changelog as audit_changelog
from streams.audit import replay as audit
from streams.audit import with_state as audit_state
from streams.audit.changelog import Origin
from streams.config_file import LoadedConfig
from streams.decode import scope_key


@dataclass(frozen=True, slots=True)
class RunStart:
    """Where the explanation of a run starts in one partition."""

    partition: int
    first_offset: int  # the run's first event in the range
    origin: Origin
    changelog_offset: int | None  # the changelog record the base came from (None: no stored state)
    covered_offset: int  # the last source offset the base covers (warm-up applies the run's events after it)
    warmed: int  # earlier events of the run re-applied silently
    skipped: tuple[int, ...]  # offsets in the range a newer stored state already covers (not explained)
    history: int  # calls already in the run's history when its first explained event arrives
    expiries: audit_changelog.Expiries  # the worker's expiries of the run in the range

    def describe(self) -> str:
        at = f"changelog offset {self.changelog_offset}"
        where = {
            "stored": f"from the worker's stored state ({at}) covering offsets <= {self.covered_offset}",
            "first": f"from empty: the run began in the worker batch of its first event in range (first state at {at})",
            "expired": f"from empty: the worker expired the run (tombstone at {at}) and began it again after "
            f"offset {self.covered_offset}",
            "compacted": f"from a newer stored state of a compacted changelog ({at}) covering offsets "
            f"<= {self.covered_offset}",
            "empty": "from empty: the worker stored no state of the run",
        }[self.origin]
        restarts, idle = self.expiries.restarts, self.expiries.idle
        tail = ""
        if restarts:
            at_offsets = _join(tuple(r.offset for r in restarts))
            tail += f"; {len(restarts)} restarts from empty after an expiry in range (at offsets {at_offsets})"
        if idle:
            tail += f"; expired without a later event in range (tombstones at changelog offsets {_join(idle)})"
        return (
            f"start {self.partition}@{self.first_offset}: {where}; {self.warmed} earlier events re-applied "
            f"silently; {self.history} calls already in the history; {len(self.skipped)} events skipped "
            f"(already in the stored state){tail}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "first_offset": self.first_offset,
            "origin": self.origin,
            "changelog_offset": self.changelog_offset,
            "covered_offset": self.covered_offset,
            "warmed": self.warmed,
            "skipped": list(self.skipped),
            "history": self.history,
            "restarts": [r.to_json() for r in self.expiries.restarts],
            "expired_without_return": list(self.expiries.idle),
            "expiry_unknown": list(self.expiries.unknowable()),
            "description": self.describe(),
        }


def _join(offsets: tuple[int, ...]) -> str:
    return ", ".join(map(str, offsets))


@dataclass(frozen=True, slots=True)
class StatefulExplanation:
    steps: list[audit.ExplainStep]
    starts: list[RunStart]

    @property
    def skipped(self) -> int:
        return sum(len(s.skipped) for s in self.starts)

    def render(self, run: str, config: LoadedConfig) -> str:
        """:func:`streams.audit.replay.render_explain` with a ``start`` line per partition."""
        return audit.render_explain(self.steps, run, config, [s.describe() for s in self.starts])

    def to_json(self, run: str) -> dict[str, Any]:
        return {"run": run, "events": audit.explain_json(self.steps), "state": [s.to_json() for s in self.starts]}


def run_events(
    events: Mapping[int, Sequence[audit.PositionedEvent]], run: str
) -> dict[int, list[audit.PositionedEvent]]:
    """The events of ``run`` (run id or scope key) per partition; partitions without any are left out."""
    out: dict[int, list[audit.PositionedEvent]] = {}
    for partition in sorted(events):
        mine = [pe for pe in events[partition] if audit.run_matches(pe.event, run)]
        if mine:
            out[partition] = mine
    return out


def explain_from_state(
    plan: audit_state.StatePlan,
    events: Mapping[int, Sequence[audit.PositionedEvent]],
    warm: Mapping[int, Sequence[audit.PositionedEvent]],
    config: LoadedConfig,
    run: str,
) -> StatefulExplanation:
    """Explain ``run`` from its stored state; ``events`` are its events in the range (:func:`run_events`),
    ``plan`` and ``warm`` what :func:`streams.audit.with_state.read_state` returns for them."""
    bases = audit_state.confirm_bases(plan, events, warm, config)
    steps: list[audit.ExplainStep] = []
    starts: list[RunStart] = []
    for partition in sorted(events):
        start = audit_state.start_partition(partition, warm, bases, config)
        kept = [pe for pe in events[partition] if not start.covers(pe)]
        restarts = {offset: r.describe() for offset, r in start.restarts.items()}
        steps += audit.explain_run(kept, config, run, start.replayer.states, restarts, start.replayer.usage.runs)
        firsts = audit_state.first_offsets({partition: events[partition]})
        for (p, key), first in sorted(firsts.items()):
            base, state = bases[(p, key)], start.replayer.state(key)
            skipped = tuple(pe.index for pe in events[partition] if scope_key(pe.event) == key and start.covers(pe))
            starts.append(
                RunStart(
                    partition,
                    first,
                    base.origin,
                    base.changelog_offset,
                    base.after,
                    start.warmed.get(key, 0),
                    skipped,
                    len(state.history) if state is not None else 0,
                    base.expiries,
                )
            )
    return StatefulExplanation(steps, starts)
