"""The 2026.7 profile decides byte-for-byte as before the semantics profiles existed.

Two checks: (1) on random event streams (hypothesis), the profile dispatcher every shell now calls gives
exactly what the 2026.7 entry point ``streams.detection.engine.apply`` gives, decisions and stored state;
(2) a fixed corpus of 400 pseudo-random streams over four configs yields the very digest that the engine
produced before this change (computed from the pre-change tree and frozen here).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streams.detection import LoopConfig, RunState, ToolEvent, engine
from streams.detection.profiles import apply
from tests.support.engine_streams import BASIC, CONFIGS

ENGINE_PROPS = settings(
    derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow], max_examples=200
)
# sha256 over the corpus below, produced by the engine before the profiles were added (commit 34d7635).
FROZEN_DIGEST = "5be19b562f1673ad4767e6432961ecbb92ca2117158e3f41df4d4cd1bc076fb7"


def _run(fn: Any, events: list[ToolEvent], config: LoopConfig) -> bytes:
    states: dict[str, RunState] = {}
    out: list[Any] = []
    for index, event in enumerate(events):
        states[event.scope], decisions = fn(states.get(event.scope), event, config)
        out.extend([index, *dataclasses.astuple(d)] for d in decisions)
    final = sorted((scope, state.to_primitive()) for scope, state in states.items())
    packed: bytes = msgpack.packb([out, final], use_bin_type=True)
    return packed


@ENGINE_PROPS
@given(BASIC.scripts(), st.sampled_from(CONFIGS), st.booleans())
def test_dispatcher_equals_the_2026_7_engine(script: Any, config: LoopConfig, prehashed: bool) -> None:
    events = BASIC.build(script, "run-1", prehashed)
    assert _run(apply, events, config) == _run(engine.apply, events, config)


def corpus() -> list[tuple[list[ToolEvent], LoopConfig]]:
    rnd = random.Random(20260715)
    cases = []
    for n in range(400):
        script = []
        for _ in range(rnd.randint(1, 25)):
            kind = rnd.choice(["call", "call", "alternate", "result", "compaction", "repeat"])
            if kind in ("call", "alternate"):
                step = (
                    kind,
                    rnd.randrange(len(BASIC.tools)),
                    rnd.randrange(len(BASIC.args)),
                    rnd.randrange(len(BASIC.outcomes)),
                )
                script.append((*step, rnd.randint(1, 12)))
            elif kind == "result":
                script.append((kind, rnd.randint(0, 30), rnd.randrange(len(BASIC.outcomes)), 0, 1))
            else:
                script.append((kind, rnd.randint(1, 6), 0, 0, 1))
        cases.append((BASIC.build(script, f"run-{n % 3}", n % 2 == 1), CONFIGS[n % len(CONFIGS)]))
    return cases


def corpus_digest(fn: Any) -> str:
    h = hashlib.sha256()
    for events, config in corpus():
        h.update(_run(fn, events, config))
    return h.hexdigest()


def test_fixed_corpus_matches_the_pre_change_digest() -> None:
    assert corpus_digest(apply) == FROZEN_DIGEST
