"""The one path from a decoded event to decisions and verdict records.

Replay (file or topic) and the Faust worker both go through here, so streaming output equals replay output
by construction: the only difference between them is where state lives and where verdicts are written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from schemas import Event, SourceRef, Verdict, verdict_id
from streams.config_file import LoadedConfig
from streams.decode import to_tool_event
from streams.detection import Decision, RunState, apply

VERDICT_VERSION = 1


@dataclass(frozen=True, slots=True)
class Step:
    """The outcome of applying one event: the new state of its run and what was decided."""

    scope: str
    state: RunState
    decisions: list[Decision]


def step(load: Callable[[str], RunState | None], event: Event, config: LoadedConfig) -> Step:
    """Apply ``event`` to the state ``load`` returns for its scope key."""
    tool_event = to_tool_event(event)
    new_state, decisions = apply(load(tool_event.scope), tool_event, config.for_agent(event.agent_id))
    return Step(tool_event.scope, new_state, decisions)


def to_verdict(
    event: Event,
    decision: Decision,
    *,
    config_hash: str,
    source: SourceRef | None = None,
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
        version=VERDICT_VERSION,
    )
