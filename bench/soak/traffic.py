"""Soak traffic: the deterministic fleet of :mod:`streams.simulate`, with shorter healthy runs.

The soak needs many distinct runs (>= 100,000 in 10 minutes at about 2,500 events/s, so about 15 events per
run or fewer), each of which goes idle for good and must be expired by the worker's TTL. The simulator's
loop archetypes (generic repeats, ping-pong, unknown-tool retries, post-compaction loops, exec polling, message
sends) are kept exactly as they are, so verdicts keep coming; only the "progressing" runs (56 % of runs, 4-30
calls in the simulator) are shortened to 2-10 calls. Mean run length is then about 11 events.

Run lifetime: every gateway keeps :data:`streams.simulate.RUNS_PER_GATEWAY` runs open and the next event
goes to a random open run, so with ``gateways = rate / 25`` each open run gets an event every 0.16 s on
average and a run of 11 events lasts about 2 s of wall time. The chance that one run waits 15 s for its next
event is below e^-90: runs never resume after a TTL of 30 s (the soak checks this on the recorded events).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from streams.simulate import fleet_events

#: Calls in a shortened "progressing" run (the simulator uses 4-30).
PROGRESSING_CALLS = (2, 10)
#: Events per second per gateway (4 open runs each): sets how long a run stays open.
EVENTS_PER_GATEWAY = 25.0


def gateways_for(rate: float) -> int:
    return max(10, round(rate / EVENTS_PER_GATEWAY))


def soak_events(*, rate: float, seed: int, hashed: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """Endless ``(scope key, event)`` pairs; the caller stamps ``ts`` when it sends the event."""
    return fleet_events(gateways=gateways_for(rate), seed=seed, hashed=hashed, progressing_calls=PROGRESSING_CALLS)
