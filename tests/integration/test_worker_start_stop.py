"""A worker stopped while it starts: no ``ready`` line, and exit status 0 as for a running worker's stop.

Stopped by SIGINT or SIGTERM about 1.5 s after its start, the worker printed ``loopwatch worker: ready: group …,
0 of 12 partitions …`` and then ``stopped (exit status 0)``. mode still awaits the app's ``on_started`` after a
stop cut its start short, and Faust's ``App.on_started`` waits for table recovery only once recovery has started:
a stop during the second Faust's table manager sleeps before it starts recovery (which joins the group) went on
to the start-up hook the ready line hung on (``_Worker.came_up`` in streams/worker/app.py now checks). The ready
line promises partitions assigned and tables recovered (docs/operating.md). The real executable runs from an
empty directory against the session's embedded broker.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.cli import LOOPWATCH, clean_env
from tests.support.procs import start_process, stop_process, wait_until
from tests.support.worker import Names, bootstrap_of, new_names

pytestmark = pytest.mark.integration

#: Faust's line as its table manager starts (shown at --log-level debug), then sleeps 1 s before it starts the
#: recovery that joins the group: Faust handles SIGINT and SIGTERM by then, and the worker cannot be ready.
#: A stop in that second printed the false ready line.
STARTING_TABLES = "[^--TableManager]: Starting..."
#: aiokafka's line as the consumer sends its JoinGroup: the embedded broker holds it about 1.5 s.
JOINING = "(Re-)joining group"
READY = "loopwatch worker: ready"
STOPPED = "loopwatch worker: stopped (exit status 0)"


def worker_cmd(broker: str, names: Names, *extra: str) -> list[str]:
    """``loopwatch worker`` on the test's own topics and group, memory store, no web or metrics server."""
    return [LOOPWATCH, "worker", "--bootstrap", bootstrap_of(broker), "--group", names.group,
            "--partitions", str(names.partitions), "--events-topic", names.events,
            "--verdicts-topic", names.verdicts, "--dead-letter-topic", names.dead_letter,
            "--fleet-alerts-topic", names.fleet_alerts, "--store", "memory",
            "--web-port", "0", "--metrics-port", "0", *extra]  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("moment", [STARTING_TABLES, JOINING], ids=["tables-starting", "joining"])
def test_a_worker_stopped_before_it_is_ready_never_says_ready(
    broker: str, tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    names = new_names(f"early-{sig.name.lower()}", partitions=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    log = tmp_path / "worker.log"
    proc = start_process(worker_cmd(broker, names, "--log-level", "debug"), env=clean_env(), log_path=log, cwd=empty)
    try:
        wait_until(lambda: moment in log.read_text(encoding="utf-8", errors="replace"), 60, 0.01, message=moment)
        assert READY not in log.read_text(encoding="utf-8", errors="replace")
        signalled = time.monotonic()
        status = stop_process(proc, 30, sig=sig)  # SIGKILL after 30 s: then the status is not 0
        took = time.monotonic() - signalled
    finally:
        stop_process(proc, 5)
    text = log.read_text(encoding="utf-8", errors="replace")
    own = [line for line in text.splitlines() if line.startswith("loopwatch worker: ")]
    assert status == 0, text[-3000:]
    assert not [line for line in own if line.startswith(READY)], own
    assert own[-1] == STOPPED, own
    assert "Traceback" not in text
    assert took < 15, f"the stop took {took:.1f} s"


def test_a_worker_stopped_once_ready_says_ready_then_stopped(broker: str, tmp_path: Path) -> None:
    """The other side of the guard: a worker that got there still says so, and stops with 0. At the default log
    level a start and a stop print the worker's own lines only: the remedies' routine notes (end offsets
    corrected on every start, a leave on every stop) were timestamped lines among them."""
    names = new_names("ready-stop", partitions=2)
    empty = tmp_path / "empty"
    empty.mkdir()
    log = tmp_path / "worker.log"
    proc = start_process(worker_cmd(broker, names), env=clean_env(), log_path=log, cwd=empty)
    try:
        wait_until(lambda: READY in log.read_text(encoding="utf-8"), 60, 0.1, message="ready")
        status = stop_process(proc, 30, sig=signal.SIGINT)
    finally:
        stop_process(proc, 5)
    lines = log.read_text(encoding="utf-8").splitlines()
    own = [line for line in lines if line.startswith("loopwatch worker: ")]
    assert own == lines, lines
    ready = [line for line in own if line.startswith(READY)]
    assert status == 0, own
    assert ready == [f"{READY}: group {names.group}, 2 of 2 partitions of {names.events}, store memory, metrics off"], (
        own
    )
    assert own[-1] == STOPPED, own
