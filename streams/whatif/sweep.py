"""Sensitivity sweeps: one config key over a range of values, runs and calls flagged for each.

Where the value goes (so a sweep means what it says for every agent): into the global
``tools.loopDetection`` block (created if absent) **and** into every ``agents.list[].tools.loopDetection``
block that sets the key itself. An agent that inherits the key follows the global value through the normal
merge; an agent that overrides it would otherwise mask the sweep. Everything else in the config is kept,
and every swept config is resolved by the real rules, so runtime clamping applies (``warningThreshold=25``
with the default critical 20 runs as 25/26/30): the resolved thresholds are reported per value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streams.config_file import AgentBlock, LoadedConfig
from streams.integers import parse_integer, shown
from streams.whatif.analysis import IndexedEvent, Tally, evaluate, tally

#: Sweepable keys (OpenClaw names, nested with a dot) and the resolved LoopConfig field each one sets.
SWEEP_KEYS: Final[dict[str, str]] = {
    "warningThreshold": "warning_threshold",
    "criticalThreshold": "critical_threshold",
    "globalCircuitBreakerThreshold": "global_circuit_breaker_threshold",
    "unknownToolThreshold": "unknown_tool_threshold",
    "historySize": "history_size",
    "postCompactionGuard.windowSize": "guard_window_size",
}
MAX_SWEEP_VALUES: Final = 200
_SWEEP_MAX: Final = 2**53
# Signed, so that a negative value is refused as not positive rather than as not a range.
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?$")
_LIST = re.compile(r"^\s*-?\d+\s*(,\s*-?\d+\s*)*$")


class SweepError(ValueError):
    """A ``--sweep`` argument that cannot be understood."""


@dataclass(frozen=True, slots=True)
class SweepSpec:
    key: str
    values: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """The result for one value: the resolved default-agent thresholds and what was flagged."""

    value: int
    resolved: dict[str, int]
    tally: Tally
    not_applied: int = 0  # events this value cannot apply (the worker would dead-letter them)


@dataclass(frozen=True, slots=True)
class SweepResult:
    key: str
    current_value: int  # the current config's resolved value (default agent), marked in the chart
    points: tuple[SweepPoint, ...]


def parse_sweep(text: str) -> SweepSpec:
    """``key=a..b``, ``key=a..b:step`` or ``key=v1,v2,…`` with positive integers."""
    key, sep, spec = text.partition("=")
    key = key.strip()
    if not sep:
        raise SweepError(f"expected KEY=a..b[:step], got {text!r}")
    if key not in SWEEP_KEYS:
        raise SweepError(f"cannot sweep {key!r}; one of: {', '.join(SWEEP_KEYS)}")
    match = _RANGE.match(spec)
    if match is not None:
        low, high = _number(match.group(1)), _number(match.group(2))
        step = _number(match.group(3)) if match.group(3) is not None else 1
        if step < 1:
            raise SweepError("the step must be a positive integer")
        if low > high:
            raise SweepError(f"empty range {low}..{high}")
        span = range(low, high + 1, step)  # counted before it is built: 1..10**9 must not fill the memory
        _check_count(len(span))
        values = tuple(span)
    elif _LIST.match(spec):
        values = tuple(sorted({_number(v) for v in spec.split(",")}))
    else:
        raise SweepError(f"expected a..b, a..b:step or a comma list of integers, got {spec!r}")
    if values[0] < 1:
        raise SweepError("values must be positive integers (others fall back to the default at runtime)")
    _check_count(len(values))
    return SweepSpec(key, values)


def _number(text: str) -> int:
    """One integer of a sweep, at most 2**53 (the largest a JSON config keeps exact)."""
    try:
        return parse_integer(text, most=_SWEEP_MAX)
    except ValueError as exc:
        raise SweepError(f"{shown(text.strip())} is {exc}") from None


def _check_count(count: int) -> None:
    if count > MAX_SWEEP_VALUES:
        raise SweepError(f"{count} values; at most {MAX_SWEEP_VALUES} (use a step)")


def _path(key: str) -> tuple[str, ...]:
    return tuple(key.split("."))


def _sets(block: object, path: Sequence[str]) -> bool:
    for part in path[:-1]:
        if not isinstance(block, dict):
            return False
        block = block.get(part)
    return isinstance(block, dict) and path[-1] in block


def _assign(block: dict[str, object], path: Sequence[str], value: int) -> None:
    target = block
    for part in path[:-1]:
        nested = target.get(part)
        if not isinstance(nested, dict):
            nested = {}
            target[part] = nested
        target = nested
    target[path[-1]] = value


def with_value(config: LoadedConfig, key: str, value: int) -> LoadedConfig:
    """``config`` with ``key`` set to ``value`` by the module's rule (global block + agents that set it)."""
    if key not in SWEEP_KEYS:
        raise SweepError(f"cannot sweep {key!r}")
    path = _path(key)
    block = copy.deepcopy(config.global_block) if isinstance(config.global_block, dict) else {}
    _assign(block, path, value)
    agents: list[AgentBlock] = []
    for agent in config.agents:
        if _sets(agent.block, path) and isinstance(agent.block, dict):
            agent_block = copy.deepcopy(agent.block)
            _assign(agent_block, path, value)
            agents.append(AgentBlock(agent.agent_id, agent.index, agent_block))
        else:
            agents.append(agent)
    return LoadedConfig(block, agents, path=config.path)


def _resolved(config: LoadedConfig) -> dict[str, int]:
    c = config.default_config
    return {
        "warningThreshold": c.warning_threshold,
        "criticalThreshold": c.critical_threshold,
        "globalCircuitBreakerThreshold": c.global_circuit_breaker_threshold,
        "unknownToolThreshold": c.unknown_tool_threshold,
        "historySize": c.history_size,
        "postCompactionGuard.windowSize": c.guard_window_size,
    }


def run_sweep(
    events: Sequence[IndexedEvent], config: LoadedConfig, spec: SweepSpec, *, include_all: bool = False
) -> SweepResult:
    """Evaluate ``config`` with each value of the sweep; counting as in the comparison."""
    points = []
    for value in spec.values:
        swept = with_value(config, spec.key, value)
        evaluation = evaluate(events, swept, include_all=include_all)
        points.append(SweepPoint(value, _resolved(swept), tally(evaluation.flags), len(evaluation.not_applied)))
    current = _resolved(config)[spec.key]
    return SweepResult(spec.key, current, tuple(points))
