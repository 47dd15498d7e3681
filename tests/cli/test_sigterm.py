"""SIGTERM stops a command exactly as Ctrl-C does: one line, exit 130, and nothing from asyncio.

``loopwatch simulate --bootstrap B --realtime`` stopped with SIGTERM printed ``Task was destroyed but it is
pending!`` (aiokafka's ``MessageAccumulator.close()``) after its one line in most runs: the exception raised by the
SIGTERM handler broke out of the event loop, which then cancelled every task at once, the producer's sender among
them. Each run is repeated: the old failure depended on where in the loop the signal landed.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from streams.devbroker import EmbeddedBroker
from streams.kafka.client import partition_counts
from tests.support.cli import LOOPWATCH, READY_TIMEOUT, clean_env
from tests.support.kafka import true_end_offsets
from tests.support.procs import start_process, stop_process, wait_until

RUNS = 3


def _published(bootstrap: str, topic: str) -> bool:
    """Records of ``topic`` have reached the broker: the producer runs, the signal lands while it publishes."""
    counts = asyncio.run(partition_counts(bootstrap, timeout=5.0))
    if topic not in counts:
        return False
    return sum(true_end_offsets(bootstrap, topic, range(counts[topic])).values()) > 0


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("run", range(RUNS))
def test_a_signal_stops_a_realtime_simulate_with_one_line_and_130(
    broker: EmbeddedBroker, empty: Path, sig: signal.Signals, run: int
) -> None:
    topic = f"stopped-{sig.name.lower()}-{run}"
    log = empty.parent / "simulate.log"  # stdout and stderr: simulate --bootstrap writes nothing to stdout
    argv = ["simulate", "--bootstrap", broker.bootstrap, "--topic", topic, "--realtime", "--duration", "60"]
    proc = start_process([LOOPWATCH, *argv], env=clean_env(), log_path=log, cwd=empty)
    try:
        wait_until(
            lambda: proc.poll() is not None or _published(broker.bootstrap, topic),
            READY_TIMEOUT,
            0.2,
            message="simulate publishing",
        )
        assert proc.poll() is None, log.read_text(encoding="utf-8")
    finally:
        code = stop_process(proc, 30, sig=sig)
    assert (code, log.read_text(encoding="utf-8")) == (130, "loopwatch simulate: interrupted\n")
