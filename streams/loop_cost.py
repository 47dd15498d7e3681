"""What loops cost: per-run model usage, attributed to the loops the detectors find.

Pure (no clock, Kafka or randomness) and outside :mod:`streams.detection`: usage never reaches the detectors,
so it cannot change a decision. Replay, explain, what-if and the worker all price decisions here, in event
order, so they report the same figures.

Attribution. A run's ``model_usage`` events add up into its running total. The first decision of a loop (a
loop = one repeated call or pair of calls in one run: the decision's warning key without the latest result
hash, so a loop's warnings and its blocks, whose keys differ only by that hash, are one loop) marks the total
at that moment; every later decision of
that loop carries what the run consumed since then (``tokens_in_loop``, ``cost_usd_in_loop``). Usage before
the first decision is the cost of finding the loop, not of the loop. The metrics add, per published
decision, what was consumed since the loop's previous published decision, so their sum over a loop is its
cost up to its last decision.

Savings (an estimate, and named so): a block or abort saves the model calls the loop would otherwise have
made, priced at the loop's mean usage per model call since its first decision (the run's mean when the loop
has seen no call yet). A block saves one call (the model turn that would have read the blocked call's
result); an abort saves ``criticalThreshold`` calls (left alone, the loop would have had to repeat that often
again before the gateway's own critical threshold blocked it). Warnings save nothing.

Unknown stays unknown: a run that never reported usage has null figures; a cost is null unless every model
call it covers was priced by the gateway.

Bounded: figures saturate at :data:`TOKEN_CEILING` and :data:`COST_CEILING`; at most :data:`MAX_LOOPS` loops
per run (the oldest is forgotten: a forgotten loop that decides again starts afresh) and the last
:data:`DEDUP_CAPACITY` usage event keys (a redelivered usage event counts once).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from schemas.events import ModelUsageEvent
from streams.detection import Decision
from streams.detection.types import LoopConfig

MAX_LOOPS: Final = 16
DEDUP_CAPACITY: Final = 64
_DIGEST: Final = 8
_FORMAT: Final = 1
_LATEST_RESULT = re.compile(r"(:[0-9a-f]{64}):(?:error:)?[0-9a-f]{64}$")


#: Where usage figures stop growing: 2**53, the largest integer every JSON reader (JavaScript's too) keeps exact.
#: No real run comes near it. Unbounded, a gateway sending huge token counts (each field may be 2**53) pushed a
#: run's sum past 2**64 within a few hundred events, which neither the state's msgpack nor the verdict's JSON
#: encodes: the run could never be stored again, and its partition stopped on every worker.
TOKEN_CEILING: Final = 2**53
#: The same for summed costs (US dollars): finite, so a difference of two sums is never ``inf - inf``.
COST_CEILING: Final = float(2**53)


@dataclass(frozen=True, slots=True)
class Tally:
    """Usage added up: model calls, tokens, the summed known cost and how many calls had one."""

    calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    priced: int = 0

    def plus(self, event: ModelUsageEvent) -> Tally:
        known = event.cost_usd is not None
        return Tally(
            self.calls + 1,
            min(self.tokens + event.tokens, TOKEN_CEILING),
            min(self.cost_usd + (event.cost_usd or 0.0), COST_CEILING),
            self.priced + known,
        )

    def minus(self, earlier: Tally) -> Tally:
        return Tally(
            self.calls - earlier.calls,
            self.tokens - earlier.tokens,
            self.cost_usd - earlier.cost_usd,
            self.priced - earlier.priced,
        )

    @property
    def cost_known(self) -> bool:
        return self.priced == self.calls

    def to_list(self) -> list[Any]:
        return [self.calls, self.tokens, self.cost_usd, self.priced]

    @classmethod
    def from_list(cls, obj: Any) -> Tally:
        calls, tokens, cost, priced = obj
        if not (type(calls) is int and type(tokens) is int and type(priced) is int and type(cost) is float):
            raise ValueError("malformed usage tally")
        return cls(calls, tokens, cost, priced)


@dataclass(frozen=True, slots=True)
class Loop:
    """One loop of a run: the run's total at its first decision and at its last published one."""

    key: bytes
    start: Tally
    reported: Tally


@dataclass(frozen=True, slots=True)
class RunUsage:
    """The usage state of one run (immutable, like the core's ``RunState``)."""

    total: Tally = Tally()
    loops: tuple[Loop, ...] = ()
    seen: bytes = b""

    def to_primitive(self) -> list[Any]:
        """Lists, ints, floats and bytes only: ready for msgpack."""
        loops = [[loop.key, loop.start.to_list(), loop.reported.to_list()] for loop in self.loops]
        return [_FORMAT, self.total.to_list(), loops, self.seen]

    @classmethod
    def from_primitive(cls, obj: Any) -> RunUsage:
        """Inverse of :meth:`to_primitive`; raises ``ValueError`` on anything it did not produce."""
        try:
            version, total, loops, seen = obj
            if version != _FORMAT or not isinstance(seen, bytes) or len(seen) % _DIGEST:
                raise ValueError("unsupported usage state")
            parsed = tuple(Loop(bytes(key), Tally.from_list(a), Tally.from_list(b)) for key, a, b in loops)
            return cls(Tally.from_list(total), parsed, seen)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"bad usage state: {exc}") from None


EMPTY_USAGE: Final = RunUsage()


@dataclass(frozen=True, slots=True)
class LoopCost:
    """What one decision's loop cost: the verdict's figures (None = unknown) and the metric increments."""

    tokens_in_loop: int | None = None
    cost_usd_in_loop: float | None = None
    saved_tokens: int | None = None
    saved_cost_usd: float | None = None
    tokens_since_reported: int = 0
    cost_usd_since_reported: float = 0.0

    def verdict_fields(self) -> dict[str, Any]:
        """The verdict fields (schemas.verdict.Verdict) this cost fills."""
        return {
            "tokens_in_loop": self.tokens_in_loop,
            "cost_usd_in_loop": self.cost_usd_in_loop,
            "saved_tokens_estimate": self.saved_tokens,
            "saved_cost_usd_estimate": self.saved_cost_usd,
        }


UNKNOWN: Final = LoopCost()


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=_DIGEST).digest()


def record(usage: RunUsage | None, event: ModelUsageEvent) -> RunUsage:
    """The run's usage after one ``model_usage`` event (the same state again for a repeated event)."""
    usage = usage or EMPTY_USAGE
    key = _digest(event.dedup_key)
    seen = usage.seen
    if any(seen[at : at + _DIGEST] == key for at in range(0, len(seen), _DIGEST)):
        return usage
    seen = (seen + key)[-DEDUP_CAPACITY * _DIGEST :]
    return RunUsage(usage.total.plus(event), usage.loops, seen)


def loop_key(decision: Decision) -> bytes:
    """Which loop a decision belongs to (see the module docstring)."""
    return _digest(_LATEST_RESULT.sub(r"\1", decision.warning_key))


def _saved_calls(decision: Decision, loop: LoopConfig) -> int:
    if decision.decision == "block":
        return 1
    if decision.decision == "abort":
        return loop.critical_threshold
    return 0


def _cost(spent: Tally) -> float | None:
    return spent.cost_usd if spent.cost_known else None


def charge(
    usage: RunUsage | None, decisions: Iterable[Decision], loop: LoopConfig
) -> tuple[RunUsage | None, list[LoopCost]]:
    """Price each decision of one event; the run's usage state afterwards (None stays None: nothing known)."""
    decisions = list(decisions)
    if usage is None or usage.total.calls == 0:
        return usage, [UNKNOWN for _ in decisions]
    total = usage.total
    loops = {item.key: item for item in usage.loops}
    costs: list[LoopCost] = []
    for decision in decisions:
        key = loop_key(decision)
        current = loops.pop(key, None) or Loop(key, total, total)
        spent = total.minus(current.start)
        since = total.minus(current.reported)
        mean = spent if spent.calls else total
        calls = _saved_calls(decision, loop)
        saved_tokens = saved_cost = None
        if calls:
            within = mean.tokens * calls < TOKEN_CEILING * mean.calls  # exact: no float can overflow here
            saved_tokens = round(mean.tokens * calls / mean.calls) if within else TOKEN_CEILING
            saved_cost = min(mean.cost_usd * calls / mean.calls, COST_CEILING) if mean.cost_known else None
        costs.append(
            LoopCost(
                tokens_in_loop=spent.tokens,
                cost_usd_in_loop=_cost(spent),
                saved_tokens=saved_tokens,
                saved_cost_usd=saved_cost,
                tokens_since_reported=since.tokens if decision.published else 0,
                cost_usd_since_reported=since.cost_usd if decision.published else 0.0,
            )
        )
        loops[key] = Loop(key, current.start, total) if decision.published else current
    kept = tuple(loops.values())[-MAX_LOOPS:]  # dict order: least recently decided first
    return RunUsage(total, kept, usage.seen), costs


def loop_cost_text(tokens: int | None, cost: float | None, saved_tokens: int | None, saved_cost: float | None) -> str:
    """``in loop: N tokens, $C; saved ~M tokens, ~$S`` (``unknown`` where the figures are null): one wording for
    explain and tail."""
    if tokens is None:
        return "in loop: usage unknown"
    text = f"in loop: {tokens} tokens, " + (f"${cost:.4f}" if cost is not None else "cost unknown")
    if saved_tokens is not None:
        text += f"; saved ~{saved_tokens} tokens, " + (
            f"~${saved_cost:.4f}" if saved_cost is not None else "cost unknown"
        )
    return text


class UsageBook:
    """Usage states by scope key, for shells that hold many runs in memory (replay, explain, what-if)."""

    def __init__(self) -> None:
        self.runs: dict[str, RunUsage] = {}

    def record(self, scope: str, event: ModelUsageEvent) -> None:
        self.runs[scope] = record(self.runs.get(scope), event)


@dataclass(frozen=True, slots=True)
class CostTotals:
    """Loop costs added up over decisions, as the worker's metrics add them: tokens and (known) cost in loops,
    and the estimated savings of blocks and aborts. ``priced`` says whether any decision had usage at all."""

    tokens: int = 0
    cost_usd: float = 0.0
    saved_tokens: int = 0
    saved_cost_usd: float = 0.0
    priced: bool = False

    def plus(self, cost: LoopCost) -> CostTotals:
        if cost.tokens_in_loop is None:
            return self
        return CostTotals(
            self.tokens + cost.tokens_since_reported,
            self.cost_usd + cost.cost_usd_since_reported,
            self.saved_tokens + (cost.saved_tokens or 0),
            self.saved_cost_usd + (cost.saved_cost_usd or 0.0),
            True,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens_in_loops": self.tokens if self.priced else None,
            "cost_usd_in_loops": self.cost_usd if self.priced else None,
            "saved_tokens_estimate": self.saved_tokens if self.priced else None,
            "saved_cost_usd_estimate": self.saved_cost_usd if self.priced else None,
        }

    def text(self) -> str:
        if not self.priced:
            return "usage unknown (no model_usage events)"
        return (
            f"{self.tokens} tokens, ${self.cost_usd:.4f} in loops; "
            f"blocks and aborts saved ~{self.saved_tokens} tokens, ~${self.saved_cost_usd:.4f}"
        )


def add_up(costs: Iterable[LoopCost | None]) -> CostTotals:
    totals = CostTotals()
    for cost in costs:
        if cost is not None:
            totals = totals.plus(cost)
    return totals
