"""The one path from a decoded event to decisions and verdict records.

Replay (file or topic) and the Faust worker both go through here, so streaming output equals replay output
by construction: the only difference between them is where state lives and where verdicts are written. The
worker applies :func:`step` to the state it reads from its table; everything offline keeps its runs in one
:class:`Replayer`.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgpack

from schemas import CURRENT_VERDICT_VERSION, Event, ModelUsageEvent, SourceRef, Verdict, verdict_id
from streams.config_file import LoadedConfig
from streams.decode import scope_key, to_tool_event
from streams.detection import Decision, RunState
from streams.detection.profiles import DEFAULT_PROFILE, apply
from streams.detection.state import EMPTY
from streams.limits import ALWAYS_FITS_RECORDS, MAX_STATE_BYTES
from streams.loop_cost import LoopCost, RunUsage, UsageBook, charge


class Step(NamedTuple):
    """The outcome of applying one event: the new state of its run and what was decided (a named tuple: one is
    built per event, at a fifth of a frozen dataclass's cost)."""

    scope: str
    state: RunState
    decisions: list[Decision]
    profile: str  # the semantics profile that judged the event
    costs: Sequence[LoopCost] = ()  # one per decision when a UsageBook was given
    failure: Exception | None = None  # what the event raised instead (:func:`step`): not applied
    verdicts: Sequence[Verdict | None] = ()  # one per decision: its verdict, None for one not asked for

    def priced(self) -> list[tuple[Decision, LoopCost | None]]:
        """Each decision with its loop cost (None when no UsageBook priced it)."""
        return [(decision, cost) for decision, cost, _verdict in self.rendered()]

    def rendered(self) -> list[tuple[Decision, LoopCost | None, Verdict | None]]:
        """Each decision with its loop cost and its verdict (None: not built, see :func:`step`)."""
        unknown: list[None] = [None] * len(self.decisions)
        costs: Sequence[LoopCost | None] = self.costs or unknown
        return list(zip(self.decisions, costs, self.verdicts or unknown, strict=True))


#: The dead-letter reason (and metric label) of an event that raised while it was applied: a loopwatch defect.
APPLY_FAILED: Final = "apply_failed"
#: The dead-letter reason of an event that would have taken its run's state past what one Kafka record holds.
STATE_TOO_LARGE: Final = "state_too_large"


class StateTooLarge(Exception):
    """The state an event would leave its run with packs to ``size`` bytes, over :data:`MAX_STATE_BYTES`: it
    could not be stored, so the event is not applied (a long ``historySize`` with long ids; not a defect)."""

    def __init__(self, size: int, records: int) -> None:
        super().__init__(size, records)
        self.size = size
        self.records = records


def _check_storable(state: RunState) -> None:
    """Raise :class:`StateTooLarge` for a state the worker could not store (packed once to find out)."""
    size = len(msgpack.packb(state.to_primitive(), use_bin_type=True))
    if size > MAX_STATE_BYTES:
        raise StateTooLarge(size, len(state.history))


def step(
    state: RunState | None,
    event: Event,
    config: LoadedConfig,
    usage: UsageBook | None = None,
    *,
    source: SourceRef | tuple[str, int, int] | None = None,
) -> Step:
    """Apply ``event`` to ``state``, the state of its run (None: the run has none yet).

    A ``model_usage`` event never reaches the detectors: it goes to ``usage`` (when given) and leaves the
    run's state as it was; with ``usage`` every decision is also priced (:mod:`streams.loop_cost`). Each
    published decision's verdict is built here too, naming ``source``: the worker gives its record's (topic,
    partition, offset), made a :class:`SourceRef` only for an event with a verdict. The worker's verdict
    records are these, so building one is part of applying the event; the verdict of a decision the worker
    does not publish is not (``replay --all`` builds those itself), so it cannot make an audit skip an event
    the worker applied.

    An event that raises is not applied: the run keeps its state and usage, and the exception comes back as
    ``failure``. The core is pure, so the same event on the same state raises again wherever it is applied;
    caught here, on the one path, it lets the worker dead-letter it (:func:`failure_reason`) where it would
    otherwise stop its partition on every worker, and lets every audit skip exactly what the worker skipped.
    So is an event whose new state the worker could not store (:class:`StateTooLarge`). Nothing is kept until
    all of it succeeded: the usage is written last.
    """
    run_usage: RunUsage | None = None
    try:
        loop = config.for_event(event.gateway_id, event.agent_id, event.openclaw_version)
        if isinstance(event, ModelUsageEvent):
            scope = scope_key(event)
            if usage is not None:
                usage.record(scope, event)
            return Step(scope, state or EMPTY, [], loop.profile)
        tool_event = to_tool_event(event)
        new_state, decisions = apply(state, tool_event, loop)
        if len(new_state.history) > ALWAYS_FITS_RECORDS:  # else it fits whatever its ids (streams.limits)
            _check_storable(new_state)
        if not decisions:
            return Step(tool_event.scope, new_state, decisions, loop.profile)
        costs: list[LoopCost] = []
        if usage is not None:
            run_usage, costs = charge(usage.runs.get(tool_event.scope), decisions, loop)
        verdicts = _published(event, decisions, costs, config.config_hash, loop.profile, source)
    except MemoryError:
        raise  # the host's, not the event's: another attempt may apply it
    except Exception as exc:  # any defect of the core: the caller reports it
        return Step(scope_key(event), state or EMPTY, [], DEFAULT_PROFILE, (), exc)  # judged by no profile
    if run_usage is not None and usage is not None:
        usage.runs[tool_event.scope] = run_usage
    return Step(tool_event.scope, new_state, decisions, loop.profile, costs, None, verdicts)


def _published(
    event: Event,
    decisions: list[Decision],
    costs: list[LoopCost],
    config_hash: str,
    profile: str,
    source: SourceRef | tuple[str, int, int] | None,
) -> list[Verdict | None]:
    """The verdict of each published decision, None for the others."""
    out: list[Verdict | None] = []
    for i, decision in enumerate(decisions):
        if not decision.published:
            out.append(None)
            continue
        if isinstance(source, tuple):  # made once, and only for an event with a verdict
            topic, partition, offset = source
            source = SourceRef(topic=topic, partition=partition, offset=offset)
        cost = costs[i] if costs else None
        out.append(to_verdict(event, decision, config_hash=config_hash, source=source, profile=profile, cost=cost))
    return out


def failure_reason(failure: Exception) -> str:
    """The dead-letter reason of an event not applied (:func:`step`)."""
    return STATE_TOO_LARGE if isinstance(failure, StateTooLarge) else APPLY_FAILED


def failure_detail(failure: Exception) -> str:
    """What is said of an event not applied (:func:`step`). Of one that raised, the exception's type only, as
    its message may quote the event's values."""
    if isinstance(failure, StateTooLarge):
        return (
            f"the run's state would take {failure.size:,} bytes with its {failure.records:,} calls, over the "
            f"{MAX_STATE_BYTES:,} a stored run may take (lower historySize)"
        )
    return f"{type(failure).__name__} raised while applying the event (a loopwatch defect)"


class Replayer:
    """Run states by scope key, advanced event by event through :func:`step`: the one offline replay loop.

    File and topic replay, the ``--with-state`` audits and their warm-up, explanations and what-if all keep
    their runs here, so they cannot differ in how state is carried or in which decisions count: the published
    ones (what the worker sends), or every one with ``include_all``.
    """

    __slots__ = ("config", "include_all", "report", "states", "usage")

    def __init__(
        self,
        config: LoadedConfig,
        states: Mapping[str, RunState | None] | None = None,
        *,
        include_all: bool = False,
        report: bool = True,
    ) -> None:
        self.config = config
        self.include_all = include_all
        self.report = report  # False: events not applied are left for the caller's own pass to report
        self.states: dict[str, RunState | None] = dict(states) if states else {}
        self.usage = UsageBook()  # the runs' model usage: prices their decisions, never changes one

    def state(self, scope: str) -> RunState | None:
        return self.states.get(scope)

    def restart(self, scope: str) -> None:
        """Forget ``scope``'s state: its next event starts the run afresh (as after the worker expired it)."""
        self.states[scope] = None
        self.usage.runs.pop(scope, None)  # the worker's envelope carries both, and expiry drops both

    def apply(self, event: Event, source: SourceRef | None = None) -> Step:
        """Apply ``event`` to its run's state and keep the new one; its published decisions' verdicts name
        ``source``. An event not applied is reported on stderr (the worker dead-letters it,
        :func:`failure_reason`) and leaves its run as it was."""
        state = self.states.get(scope_key(event))
        result = step(state, event, self.config, self.usage, source=source)
        self.states[result.scope] = result.state
        if result.failure is not None and self.report:
            where = f"event {event.event_id!r} of gateway {event.gateway_id!r}"
            reason, detail = failure_reason(result.failure), failure_detail(result.failure)
            print(f"{where}: not applied ({reason}): {detail}", file=sys.stderr)
        return result

    def counted(self, result: Step) -> list[tuple[Decision, LoopCost | None]]:
        """The decisions of ``result`` that count (see the class docstring), each with its loop cost."""
        return [(d, c) for d, c in result.priced() if self.include_all or d.published]

    def records(self, event: Event, index: int, source: SourceRef | None = None) -> list[dict[str, Any]]:
        """Apply ``event``; one replay output record per counted decision: its verdict plus ``index`` (line or
        offset) and ``published`` (whether the worker sends it)."""
        result = self.apply(event, source)
        out = []
        for decision, cost, verdict in result.rendered():
            if verdict is None and self.include_all:  # one the worker does not publish: not built by the step
                config_hash, profile = self.config.config_hash, result.profile
                verdict = to_verdict(
                    event, decision, config_hash=config_hash, source=source, profile=profile, cost=cost
                )
            if verdict is not None:
                out.append({"index": index, "published": decision.published, **verdict.model_dump(mode="json")})
        return out


def to_verdict(
    event: Event,
    decision: Decision,
    *,
    config_hash: str,
    source: SourceRef | None = None,
    profile: str = DEFAULT_PROFILE,
    cost: LoopCost | None = None,
) -> Verdict:
    return Verdict(
        verdict_id=verdict_id(event.gateway_id, event.event_id, decision.decision, decision.detector),
        decision=decision.decision,
        detector=decision.detector,
        count=decision.count,
        threshold=decision.threshold,
        gateway_id=event.gateway_id,
        agent_id=event.agent_id,
        session_id=event.session_id,
        run_id=event.run_id,
        tool=decision.tool or None,
        call_id=decision.call_id,
        event_id=event.event_id,
        paired_tool=decision.paired_tool,
        outcome_hash=decision.outcome_hash,
        message=decision.message,
        source=source,
        event_ts=event.ts,
        config_hash=config_hash,
        profile=profile,
        version=CURRENT_VERDICT_VERSION,
        **(cost.verdict_fields() if cost is not None else {}),
    )


__all__ = [
    "APPLY_FAILED",
    "STATE_TOO_LARGE",
    "Replayer",
    "StateTooLarge",
    "Step",
    "failure_detail",
    "failure_reason",
    "step",
    "to_verdict",
]
