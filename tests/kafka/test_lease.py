"""The ownership lease (streams.kafka.lease): owned only within a session of an answered heartbeat, and within
a rebalance timeout of a revocation's start; and aiokafka's heartbeats confirm it."""

from __future__ import annotations

import asyncio
import inspect
import time
from types import SimpleNamespace
from typing import Any

import pytest
from aiokafka.consumer.group_coordinator import GroupCoordinator
from hypothesis import given
from hypothesis import strategies as st

from streams.kafka.compat import KafkaCompatError, _confirm_ownership_by_heartbeats
from streams.kafka.lease import LOST, MARGIN, OWNED, UNSURE, OwnershipLease, OwnershipLost

SESSION, REBALANCE = 3.0, 60.0

_times = st.floats(min_value=0.0, max_value=500.0, allow_nan=False)
_steps = st.lists(st.tuples(st.sampled_from(["confirmed", "assigned", "revoking"]), _times), max_size=12)


@given(steps=_steps, now=_times)
def test_owned_only_within_both_bounds(steps: list[tuple[str, float]], now: float) -> None:
    """Whatever the reports, OWNED implies: a confirmation within the session (less the margin) and no
    revocation older than the rebalance timeout (less the margin), counted from the first since the last
    assignment. That is the whole safety argument: the coordinator cannot have handed the partitions on."""
    lease = OwnershipLease(SESSION, REBALANCE)
    confirmed, revoking = float("-inf"), None
    for what, at in steps:
        getattr(lease, what)(at)
        if what in ("confirmed", "assigned"):
            confirmed = max(confirmed, at)
        if what == "assigned":
            revoking = None
        elif what == "revoking" and revoking is None:
            revoking = at
    state = lease.state(now)
    keep = 1 - MARGIN
    if state == OWNED:
        assert now - confirmed < SESSION * keep
        assert revoking is None or now - revoking < REBALANCE * keep
    if revoking is not None and now - revoking >= REBALANCE * keep:
        assert state == LOST
    if state == UNSURE:
        assert revoking is None  # a revocation without a recent heartbeat is never waited out


def test_a_frozen_member_is_unsure_until_a_heartbeat_answers_or_a_revocation_begins() -> None:
    lease = OwnershipLease(SESSION, REBALANCE)
    assert lease.state(0.0) == UNSURE  # never assigned
    lease.assigned(10.0)
    assert lease.state(11.0) == OWNED
    assert lease.state(10.0 + SESSION) == UNSURE  # frozen through a session: maybe evicted
    lease.confirmed(20.0)  # ... the next heartbeat was answered: it was not
    assert lease.state(20.5) == OWNED
    lease.revoking(21.0)  # a rebalance: heartbeats ("rebalance in progress") keep the session
    lease.confirmed(22.0)
    assert lease.state(22.5) == OWNED
    assert lease.state(22.0 + SESSION) == LOST  # revoking, and no heartbeat answered: evicted
    lease.confirmed(21.0 + REBALANCE)
    assert lease.state(21.0 + REBALANCE * (1 - MARGIN)) == LOST  # a revocation this long: the group went on
    lease.assigned(100.0)
    assert lease.state(100.5) == OWNED


def test_waiting_returns_once_owned_gives_up_when_stopping_and_raises_once_lost() -> None:
    async def scenario() -> None:
        lease = OwnershipLease(SESSION, REBALANCE)
        waiting = asyncio.ensure_future(lease.wait_owned())
        await asyncio.sleep(0.1)
        assert not waiting.done()  # unsure: it waits
        lease.confirmed(time.monotonic())
        await asyncio.wait_for(waiting, 1.0)
        stopping = OwnershipLease(SESSION, REBALANCE)  # unsure, and stopping: no heartbeat will come
        assert await asyncio.wait_for(stopping.wait_owned(lambda: True), 1.0) is False
        lost = OwnershipLease(SESSION, REBALANCE)
        lost.revoking(time.monotonic())
        with pytest.raises(OwnershipLost, match="no longer be sure"):
            await asyncio.wait_for(lost.wait_owned(), 1.0)

    asyncio.run(scenario())


def test_answered_heartbeats_confirm_the_lease_from_when_they_were_sent() -> None:
    """aiokafka's ``_do_heartbeat`` (the seam) returns True when the answer keeps the session."""
    assert inspect.iscoroutinefunction(GroupCoordinator._do_heartbeat)
    lease = OwnershipLease(SESSION, REBALANCE)
    answers = [True, False]

    async def do_heartbeat() -> bool:
        await asyncio.sleep(0.05)
        return answers.pop(0)

    coordinator = SimpleNamespace(_do_heartbeat=do_heartbeat)
    consumer: Any = SimpleNamespace(_coordinator=coordinator)
    _confirm_ownership_by_heartbeats(consumer, lease)

    async def scenario() -> None:
        before = time.monotonic()
        assert await coordinator._do_heartbeat() is True
        assert before <= lease._confirmed < before + 0.05  # the send, not the answer
        confirmed = lease._confirmed
        assert await coordinator._do_heartbeat() is False
        assert lease._confirmed == confirmed  # an unanswered heartbeat confirms nothing

    asyncio.run(scenario())


def test_a_consumer_without_the_seam_stops_the_worker_at_start() -> None:
    with pytest.raises(KafkaCompatError, match="heartbeats cannot confirm"):
        _confirm_ownership_by_heartbeats(SimpleNamespace(_coordinator=SimpleNamespace()), OwnershipLease(1, 1))  # type: ignore[arg-type]
