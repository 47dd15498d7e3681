"""Group membership on the embedded broker: a mix it cannot settle is told, not left silent.

Tansu 0.6.0 holds every join and sync of a static member (``--group-instance-id``) 3 s, and a group keeps the
session timeout of the member that formed it. A dynamic worker there forms the group with the short embedded
session, so a static member beside it is evicted before it syncs, again and again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.worker.startup import UNSETTLED_REASSIGNMENTS
from tests.support.procs import wait_until
from tests.support.worker import WorkerProcess, bootstrap_of, metric, new_names

pytestmark = pytest.mark.integration

UNSETTLED = re.compile(
    r"^loopwatch worker: warning: group \S+ reassigned its partitions (\d+) times in 60 s: (.*)$", re.M
)


def test_a_static_worker_beside_a_dynamic_one_is_named_by_both(broker: str, tmp_path: Path) -> None:
    """The static worker says at start what its group needs; the dynamic one warns once it sees the group
    reassign its partitions over and over, and counts each rebalance."""
    names = new_names("mixed")
    dynamic = WorkerProcess(bootstrap_of(broker), names, tmp_path, name="dynamic", store="memory")
    static = WorkerProcess(
        bootstrap_of(broker), names, tmp_path, name="static", store="memory", extra=["--group-instance-id", "lw-0"]
    )
    static.cmd.remove("--embedded")  # as an operator starts it: the broker is recognised, the flag refused
    try:
        dynamic.start().wait_ready()
        static.start()
        wait_until(lambda: "static membership on the embedded broker" in static.log(), 60, 0.2, message="note")
        match = wait_until(lambda: UNSETTLED.search(dynamic.log()), 120, 0.5, message="the unsettled warning")
        assert match is not None
        assert int(match.group(1)) >= UNSETTLED_REASSIGNMENTS
        assert "on the embedded broker" in match.group(2) and "--group-instance-id" in match.group(2)
        assert metric(dynamic.metrics(), "loopwatch_rebalances_total") >= UNSETTLED_REASSIGNMENTS
        assert len(UNSETTLED.findall(dynamic.log())) == 1  # once; the counter keeps the tally
        note = next(line for line in static.log().splitlines() if "static membership" in line)
        assert f"in group {names.group} every worker of the group needs --group-instance-id" in note
    finally:
        static.stop()
        dynamic.stop()
