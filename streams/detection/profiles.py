"""Semantics profiles: which OpenClaw generation's loop-detection rules decide an event.

OpenClaw changed ``tools.loopDetection`` a lot between generations, and a fleet runs several at once, so
every event is judged by the rules of the gateway that produced it: ``openclaw-2026.7`` (configurable
thresholds; :mod:`streams.detection.engine`, the default) or ``openclaw-2026.9`` (fixed thresholds,
argument churn, vetoes toward the breaker, one recovery per run; :mod:`streams.detection.gen9_engine`).
Pure: the version table maps a gateway's OpenClaw version to a profile; the shells add overrides.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from streams.detection import engine, gen9_engine
from streams.detection.config import normalize_agent_id
from streams.detection.state import RunState
from streams.detection.types import PROFILE_2026_7, PROFILE_2026_9, Decision, LoopConfig, ToolEvent

PROFILES: Final = (PROFILE_2026_7, PROFILE_2026_9)
DEFAULT_PROFILE: Final = PROFILE_2026_7
Version = tuple[int, int, int]
# (first version, profile), ascending: a version gets the profile of the last row it reaches. The configurable
# generation was read in 2026.7.35 (and holds from 2026.6.11); the fixed one in 2026.9.6 (and the 2026.8 line).
VERSION_TABLE: Final[tuple[tuple[Version, str], ...]] = (((0, 0, 0), PROFILE_2026_7), ((2026, 8, 0), PROFILE_2026_9))
_VERSION: Final = re.compile(r"\s*v?(\d{1,6})\.(\d{1,6})\.(\d{1,6})(?:[-+.][0-9A-Za-z.+-]*)?\s*")


@functools.lru_cache(maxsize=256)  # stamped on every event of a gateway, and a fleet runs a few versions
def parse_version(text: str) -> Version | None:
    """``2026.9.6`` (optionally ``v``-prefixed or with a pre-release/build suffix) as a tuple, else None."""
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def profile_for_version(version: str | None, table: tuple[tuple[Version, str], ...] = VERSION_TABLE) -> str | None:
    """The profile the table gives an OpenClaw version; None when there is no (parsable) version."""
    parsed = parse_version(version) if version is not None else None
    if parsed is None:
        return None
    chosen: str | None = None
    for first, profile in table:
        if parsed >= first:
            chosen = profile
    return chosen


@dataclass(frozen=True, slots=True)
class ProfileChoice:
    """Overrides first (``<gateway>/<agent>``, then ``<agent>``, then the gateway), then the event's OpenClaw
    version through ``table``, then ``default`` (for events without a usable version)."""

    default: str = DEFAULT_PROFILE
    gateways: Mapping[str, str] = field(default_factory=dict)
    agents: Mapping[str, str] = field(default_factory=dict)
    table: tuple[tuple[Version, str], ...] = VERSION_TABLE

    def profile(self, gateway_id: str, agent_id: str | None, version: str | None) -> str:
        if self.agents:
            agent = normalize_agent_id(agent_id)
            chosen = self.agents.get(f"{gateway_id}/{agent}") or self.agents.get(agent)
            if chosen is not None:
                return chosen
        chosen = self.gateways.get(gateway_id)
        if chosen is not None:
            return chosen
        return profile_for_version(version, self.table) or self.default

    @property
    def only(self) -> str | None:
        """The one profile every event gets, when nothing else can apply."""
        if self.table or self.gateways or self.agents:
            return None
        return self.default

    def describe(self) -> str:
        if self.only is not None:
            return f"every event judged as {self.only}"
        extra = " with per-gateway/agent overrides" if self.gateways or self.agents else ""
        return f"profile by OpenClaw version{extra}; unversioned events {self.default}"

    def forced(self, profile: str) -> ProfileChoice:
        """Every event judged by ``profile`` (what-if candidates)."""
        return ProfileChoice(profile, {}, {}, ())


def apply(state: RunState | None, event: ToolEvent, config: LoopConfig) -> tuple[RunState, list[Decision]]:
    """Apply ``event`` under ``config.profile``'s rules (2026.7 is :func:`streams.detection.engine.apply`)."""
    if config.profile == PROFILE_2026_9:
        return gen9_engine.apply(state, event, config)
    return engine.apply(state, event, config)
