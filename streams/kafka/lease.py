"""Whether this group member still owns its partitions: writes to their tables are safe only while it does.

Nothing fences a late writer in Kafka without transactions. A worker frozen for longer than its session (a
paused VM, swap, a stopped process), or one whose revocation outlasted the group's rebalance timeout, has
lost its partitions to another member without knowing it; the states it still had in flight, written after
the new owner recovered the table, would end the changelog with an older state of those runs (and a restore
from it, or the same worker taking the partition back, would roll them back).

The group coordinator hands a member's partitions to another only once the member has left the group: its
session expired (no heartbeat reached the coordinator for ``session_timeout``) or a rebalance went on
without it for ``rebalance_timeout``. So a member owns its partitions

* until ``session_timeout`` after it *sent* the last heartbeat the coordinator answered with no error or
  with "rebalance in progress" (which keeps the session; aiokafka counts both as a success), or after its
  last assignment; and
* while a revocation is under way, for at most ``rebalance_timeout`` after it began (the rebalance began
  before, by at most a heartbeat interval).

Each bound is taken with a margin (:data:`MARGIN`) for the time a write takes to reach the broker. The worker
waits while ownership is unsure and stops, writing nothing, once it is lost (``streams.worker.app``); the
ownership is confirmed by aiokafka's heartbeats (``streams.kafka.compat``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final, Literal

__all__ = ["LOST", "MARGIN", "OWNED", "UNSURE", "Ownership", "OwnershipLease", "OwnershipLost"]

Ownership = Literal["owned", "unsure", "lost"]
OWNED: Final[Ownership] = "owned"
UNSURE: Final[Ownership] = "unsure"  # no recent heartbeat confirmed it: wait for the next answer
LOST: Final[Ownership] = "lost"  # the partitions may have another owner: write nothing more

#: Share of each timeout kept back, for the write to reach the broker and for the coordinator's own clock.
MARGIN: Final = 0.25
_POLL: Final = 0.05


class OwnershipLost(RuntimeError):
    """The member can no longer vouch for owning its partitions: nothing more may be written for them."""


class OwnershipLease:
    """The bounds above, kept from the times the consumer reports (``time.monotonic()`` seconds)."""

    def __init__(self, session_timeout: float, rebalance_timeout: float) -> None:
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self._confirmed = float("-inf")
        self._revoking_since: float | None = None

    def confirmed(self, sent_at: float) -> None:
        """A heartbeat sent at ``sent_at`` was answered: the session held at least until then."""
        if sent_at > self._confirmed:
            self._confirmed = sent_at

    def assigned(self, at: float) -> None:
        """An assignment completed at ``at``: the partitions are this member's, from then on."""
        self._revoking_since = None
        self.confirmed(at)

    def revoking(self, at: float) -> None:
        """A revocation began at ``at`` (the first one counts until the next assignment)."""
        if self._revoking_since is None:
            self._revoking_since = at

    def state(self, now: float) -> Ownership:
        keep = 1.0 - MARGIN
        since = self._revoking_since
        if since is not None and now - since >= self.rebalance_timeout * keep:
            return LOST
        if now - self._confirmed < self.session_timeout * keep:
            return OWNED
        return LOST if since is not None else UNSURE

    async def wait_owned(self, stopping: Callable[[], bool] = lambda: False) -> bool:
        """True once the partitions are owned; False while unsure once ``stopping()`` (a stopping member, whose
        heartbeats have ended, writes nothing instead of waiting); raise :class:`OwnershipLost` once they may
        not be owned.

        Unsure does not last: the next heartbeat's answer confirms the session, or it tells aiokafka to join
        again, which begins with a revocation (then lost)."""
        while True:
            state = self.state(time.monotonic())
            if state == OWNED:
                return True
            if state == LOST:
                raise OwnershipLost(
                    "this worker can no longer be sure that it owns its partitions (no heartbeat answered for"
                    f" {self.session_timeout:g} s, or a revocation longer than {self.rebalance_timeout:g} s):"
                    " it stops without writing, and its events are applied again by their owner"
                )
            if stopping():
                return False
            await asyncio.sleep(_POLL)
