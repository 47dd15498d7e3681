"""``loopwatch replay --run RUN_ID``: explain one run event by event, from empty or from the worker's stored state.

:func:`explain_run` shows, for every event of the run, what the detectors saw (the counts on the history before
a call), what was decided and whether the worker publishes it; :func:`render_explain` prints it.

With ``--with-state`` the run's events in the range are picked out (:func:`run_events`); its base state is chosen
from the changelog and warmed up exactly as for a ``--with-state`` listing
(:func:`streams.audit.with_state.confirm_bases`, :func:`streams.audit.with_state.start_partition`), and
:func:`explain_run` starts from that state instead of empty; where the worker expired the run inside the range,
the event it restarted the run with starts from empty too, and its step says so (:attr:`ExplainStep.restart`).
Every :class:`RunStart` says where the state came from (its origin, how many earlier events were re-applied, how
many calls were already in the history, where the run restarted), so an auditor can tell why a verdict fired on
the first replayed call.
Pure: the CLI (:mod:`streams.cli.replay`) reads the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import Event, ModelUsageEvent
from streams.audit import changelog, source, with_state
from streams.audit.changelog import Origin
from streams.audit.source import PositionedEvent
from streams.config_file import LoadedConfig
from streams.decode import scope_key, to_tool_event
from streams.detection import RunState
from streams.detection.detectors import no_progress_streak, ping_pong, unknown_tool_streak
from streams.detection.outcome import args_hash, hash_outcome
from streams.loop_cost import RunUsage, loop_cost_text
from streams.runner import Replayer, failure_detail, failure_reason


@dataclass(frozen=True, slots=True)
class Counts:
    """What the detectors see for a tool_call, on the history before the call (as the core computes it)."""

    recent_count: int
    no_progress_streak: int
    ping_pong: int
    unknown_tool_streak: int
    history: int


@dataclass(frozen=True, slots=True)
class ExplainedDecision:
    decision: str
    detector: str
    count: int
    threshold: int
    published: bool
    message: str
    tokens_in_loop: int | None = None
    cost_usd_in_loop: float | None = None
    saved_tokens_estimate: int | None = None
    saved_cost_usd_estimate: float | None = None


@dataclass(frozen=True, slots=True)
class ExplainStep:
    label: str
    type: str
    event_id: str
    tool: str
    call_id: str | None
    args_hash: str | None
    result_hash: str | None
    counts: Counts | None
    decisions: list[ExplainedDecision]
    detection_enabled: bool
    restart: str | None = None  # why the scope's state was emptied right before this event (worker expiry)
    usage: dict[str, Any] | None = None  # a model_usage event: its tokens and cost
    not_applied: str | None = None  # why the event was not applied (it raised: the worker dead-lettered it)


def run_matches(event: Event, run: str) -> bool:
    return event.run_id == run or scope_key(event) == run


def explain_run(
    events: Iterable[PositionedEvent],
    config: LoadedConfig,
    run: str,
    start: Mapping[str, RunState | None] | None = None,
    restarts: Mapping[int, str] | None = None,
    usage: Mapping[str, RunUsage] | None = None,
) -> list[ExplainStep]:
    """Every event of ``run`` (by run id or scope key) in order, with detector counts and decisions.

    Counts are computed with the core's own detector functions on the scope's history before the event is
    applied; the state then advances through the same :class:`streams.runner.Replayer` as replay.
    ``start`` holds the scopes' states before the first event (default: empty; see :mod:`streams.audit.explain`);
    ``restarts`` maps an event's index to why its scope's state is emptied right before it; ``usage`` holds the
    scopes' model usage stored with ``start``.
    """
    replayer = Replayer(config, start)
    replayer.usage.runs.update(usage or {})
    steps: list[ExplainStep] = []
    for pe in events:
        event = pe.event
        if not run_matches(event, run):
            continue
        restart = restarts.get(pe.index) if restarts is not None else None
        if restart is not None:
            replayer.restart(scope_key(event))
        before = replayer.state(scope_key(event))
        result = replayer.apply(event)  # first: an event that raises is shown as the worker took it, not applied
        if result.failure is not None:
            reason = f"not applied ({failure_reason(result.failure)}, dead-lettered): {failure_detail(result.failure)}"
            steps.append(ExplainStep(pe.label, event.type, event.event_id, "", None, None, None, None, [], True,
                                     restart, not_applied=reason))  # fmt: skip
            continue
        if isinstance(event, ModelUsageEvent):
            steps.append(_usage_step(pe.label, event, restart))
            continue
        tool_event = to_tool_event(event)
        loop = config.for_event(event.gateway_id, event.agent_id, event.openclaw_version)
        sig: str | None = None
        result_hash: str | None = None
        counts: Counts | None = None
        if tool_event.kind != "compaction_retry":
            sig = args_hash(tool_event.tool, tool_event.args, tool_event.args_hash)
            if tool_event.outcome is not None:
                result_hash = hash_outcome(
                    tool_event.tool, tool_event.args, tool_event.outcome, tool_event.poll_action
                )[0]
        if tool_event.kind == "tool_call" and sig is not None:
            history = before.history if before is not None else ()
            pp = ping_pong(history, sig)
            counts = Counts(
                recent_count=[r.sig for r in history].count(sig),
                no_progress_streak=no_progress_streak(history, sig)[0],
                ping_pong=pp.length if pp is not None else 0,
                unknown_tool_streak=unknown_tool_streak(history, tool_event.tool)[0],
                history=len(history),
            )
        steps.append(
            ExplainStep(
                label=pe.label,
                type=event.type,
                event_id=event.event_id,
                tool=tool_event.tool,
                call_id=tool_event.call_id,
                args_hash=sig.split(":", 1)[1] if sig is not None and ":" in sig else sig,
                result_hash=result_hash,
                counts=counts,
                decisions=[
                    ExplainedDecision(
                        d.decision,
                        d.detector,
                        d.count,
                        d.threshold,
                        d.published,
                        d.message,
                        **(cost.verdict_fields() if cost is not None else {}),
                    )
                    for d, cost in result.priced()
                ],
                detection_enabled=loop.enabled,
                restart=restart,
            )
        )
    return steps


def _usage_step(label: str, event: ModelUsageEvent, restart: str | None) -> ExplainStep:
    figures = {"model": event.model, "tokens": event.tokens, "cost_usd": event.cost_usd}
    return ExplainStep(label, event.type, event.event_id, "", None, None, None, None, [], True, restart, figures)


def _h(value: str | None) -> str:
    return value[:12] if value else "-"


def render_explain(steps: Sequence[ExplainStep], run: str, config: LoadedConfig, start: Sequence[str] = ()) -> str:
    """The text explanation: a heading, the ``start`` lines (where the run's state came from), then each step."""
    if not steps:
        return "\n".join([f"run {run}: no events", *start]) + "\n"
    lines = [f"run {run}: {len(steps)} events (config {config.config_hash[:12]})", *start]
    for s in steps:
        if s.restart is not None:
            lines.append(f"{'':>10}{s.restart}")
        if s.usage is not None:
            cost = s.usage["cost_usd"]
            priced = f"${cost:.4f}" if cost is not None else "unpriced"
            lines.append(
                f"{s.label:>8}  {s.type:<16} {s.usage['model'] or '-':<18} {s.usage['tokens']} tokens, {priced}"
            )
            continue
        if s.not_applied is not None:
            lines.append(f"{s.label:>8}  {s.type:<16} event {s.event_id}: {s.not_applied}")
            continue
        head = f"{s.label:>8}  {s.type:<16} {s.tool or '-':<18} call={s.call_id or '-'}"
        head += f" args={_h(s.args_hash)} result={_h(s.result_hash)}"
        lines.append(head)
        if s.counts is not None:
            c = s.counts
            state = "" if s.detection_enabled else " (detection disabled for this agent)"
            lines.append(
                f"{'':>10}saw: recentCount={c.recent_count} noProgressStreak={c.no_progress_streak} "
                f"pingPong={c.ping_pong} unknownToolStreak={c.unknown_tool_streak} history={c.history}{state}"
            )
        for d in s.decisions:
            shown = "published" if d.published else "not published (same warning bucket)"
            lines.append(
                f"{'':>10}-> {d.decision.upper()} {d.detector}: count {d.count} >= threshold {d.threshold}, "
                f"{shown}: {d.message}"
            )
            if d.tokens_in_loop is not None:
                figures = (d.tokens_in_loop, d.cost_usd_in_loop, d.saved_tokens_estimate, d.saved_cost_usd_estimate)
                lines.append(f"{'':>13}{loop_cost_text(*figures)}")
    return "\n".join(lines) + "\n"


def explain_json(steps: Sequence[ExplainStep]) -> list[dict[str, Any]]:
    from dataclasses import asdict

    return [asdict(s) for s in steps]


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
    expiries: changelog.Expiries  # the worker's expiries of the run in the range

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
    steps: list[ExplainStep]
    starts: list[RunStart]

    @property
    def skipped(self) -> int:
        return sum(len(s.skipped) for s in self.starts)

    def render(self, run: str, config: LoadedConfig) -> str:
        """:func:`streams.audit.replay.render_explain` with a ``start`` line per partition."""
        return render_explain(self.steps, run, config, [s.describe() for s in self.starts])

    def to_json(self, run: str) -> dict[str, Any]:
        return {"run": run, "events": explain_json(self.steps), "state": [s.to_json() for s in self.starts]}


def run_events(
    events: Mapping[int, Sequence[source.PositionedEvent]], run: str
) -> dict[int, list[source.PositionedEvent]]:
    """The events of ``run`` (run id or scope key) per partition; partitions without any are left out."""
    out: dict[int, list[source.PositionedEvent]] = {}
    for partition in sorted(events):
        mine = [pe for pe in events[partition] if run_matches(pe.event, run)]
        if mine:
            out[partition] = mine
    return out


def explain_from_state(
    plan: with_state.StatePlan,
    events: Mapping[int, Sequence[source.PositionedEvent]],
    warm: Mapping[int, Sequence[source.PositionedEvent]],
    config: LoadedConfig,
    run: str,
) -> StatefulExplanation:
    """Explain ``run`` from its stored state; ``events`` are its events in the range (:func:`run_events`),
    ``plan`` and ``warm`` what :func:`streams.audit.with_state.read_state` returns for them."""
    bases = with_state.confirm_bases(plan, events, warm, config)
    steps: list[ExplainStep] = []
    starts: list[RunStart] = []
    for partition in sorted(events):
        start = with_state.start_partition(partition, warm, bases, config)
        kept = [pe for pe in events[partition] if not start.covers(pe)]
        restarts = {offset: r.describe() for offset, r in start.restarts.items()}
        steps += explain_run(kept, config, run, start.replayer.states, restarts, start.replayer.usage.runs)
        firsts = with_state.first_offsets({partition: events[partition]})
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


__all__ = [
    "Counts",
    "ExplainStep",
    "ExplainedDecision",
    "RunStart",
    "StatefulExplanation",
    "explain_from_state",
    "explain_json",
    "explain_run",
    "render_explain",
    "run_events",
    "run_matches",
]
