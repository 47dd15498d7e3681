"""SIGTERM stops a command exactly as Ctrl-C does: one error line, exit 130, and nothing from asyncio. An
interrupted ``publish`` or ``simulate --bootstrap`` says first, on stdout, how many of its records are in Kafka.

``loopwatch simulate --bootstrap B --realtime`` stopped with SIGTERM printed ``Task was destroyed but it is
pending!`` (aiokafka's ``MessageAccumulator.close()``) after its one line in most runs: the exception raised by the
SIGTERM handler broke out of the event loop, which then cancelled every task at once, the producer's sender among
them. Each run is repeated: the old failure depended on where in the loop the signal landed.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from subprocess import PIPE

import pytest

from streams.devbroker import EmbeddedBroker
from streams.kafka.client import partition_counts
from tests.support.cli import LOOPWATCH, READY_TIMEOUT, clean_env, lw
from tests.support.kafka import true_end_offsets
from tests.support.procs import start_process, stop_process, wait_until

RUNS = 3


def _partitions(bootstrap: str, topic: str) -> int:
    return asyncio.run(partition_counts(bootstrap, timeout=5.0))[topic]


def _published(bootstrap: str, topic: str) -> bool:
    """Records of ``topic`` have reached the broker: the producer runs, the signal lands while it publishes."""
    counts = asyncio.run(partition_counts(bootstrap, timeout=5.0))
    if topic not in counts:
        return False
    return sum(true_end_offsets(bootstrap, topic, range(counts[topic])).values()) > 0


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("run", range(RUNS))
def test_a_signal_stops_a_realtime_simulate_saying_what_it_sent_and_130(
    broker: EmbeddedBroker, empty: Path, sig: signal.Signals, run: int
) -> None:
    topic = f"stopped-{sig.name.lower()}-{run}"
    argv = ["simulate", "--bootstrap", broker.bootstrap, "--topic", topic, "--realtime", "--duration", "60"]
    _interrupt(broker, empty, sig, topic, argv, rf"sent (\d+) events to {topic} in \d+\.\d s, then interrupted")


@pytest.mark.integration
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_publish_sends_says_what_it_sent_and_130(
    broker: EmbeddedBroker, empty: Path, big: Path, sig: signal.Signals
) -> None:
    """publish said only "interrupted": what a user should send again was unknown. The broker is paused while the
    signal lands, so publish is still waiting for confirmations then, on any machine; resumed, it delivers what
    the producer held, and the count matches the topic."""
    topic = f"publish-{sig.name.lower()}"
    argv = ["publish", str(big), "--bootstrap", broker.bootstrap, "--topic", topic]
    line = rf"sent (\d+) events to {topic}, then interrupted"
    assert 0 < _interrupt(broker, empty, sig, topic, argv, line, pause=True) < 120_000


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120,000 events: publish takes a few seconds to send them, so a signal lands while it sends."""
    home = tmp_path_factory.mktemp("big")
    assert lw(home, "simulate", "--rate", "2000", "--duration", "60", "--out", "big.jsonl").code == 0
    return home / "big.jsonl"


def _interrupt(
    broker: EmbeddedBroker,
    empty: Path,
    sig: signal.Signals,
    topic: str,
    argv: list[str],
    line: str,
    *,
    pause: bool = False,
) -> int:
    """Stop ``loopwatch ARGV`` with ``sig`` once records of ``topic`` reach the broker (with ``pause``, while the
    broker is stopped for a second): 130, and first ``line``, whose count is what is in Kafka (every record the
    producer held is delivered as it stops, and counted). Returns the count."""
    log = empty.parent / f"{topic}.log"  # stdout and stderr
    proc = start_process([LOOPWATCH, *argv], env=clean_env(), log_path=log, cwd=empty)
    code: int | None = None
    try:
        wait_until(
            lambda: proc.poll() is not None or _published(broker.bootstrap, topic),
            READY_TIMEOUT,
            0.05,
            message=f"{argv[0]} publishing",
        )
        assert proc.poll() is None, log.read_text(encoding="utf-8")
        if pause:
            assert broker.pid is not None
            os.kill(broker.pid, signal.SIGSTOP)
            try:
                time.sleep(0.5)  # its sends wait for confirmations that cannot come
                proc.send_signal(sig)
                time.sleep(0.5)
            finally:
                os.kill(broker.pid, signal.SIGCONT)
            code = proc.wait(30)
    finally:
        if not pause:
            code = stop_process(proc, 30, sig=sig)
        stop_process(proc, 5)
    said = log.read_text(encoding="utf-8").splitlines()
    assert code == 130 and len(said) == 2 and said[1] == f"loopwatch {argv[0]}: interrupted", said
    in_kafka = sum(true_end_offsets(broker.bootstrap, topic, range(_partitions(broker.bootstrap, topic))).values())
    counted = re.fullmatch(line, said[0])
    assert counted is not None and int(counted.group(1)) == in_kafka, (said, in_kafka)
    return in_kafka


@pytest.mark.integration
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_interrupted_simulate_whose_stdout_is_full_says_it_all_on_one_line(
    broker: EmbeddedBroker, empty: Path
) -> None:
    """The count could not be written, and the failure then turned the status into 2 with a second line."""
    topic = "interrupted-full"
    argv = ["simulate", "--bootstrap", broker.bootstrap, "--topic", topic, "--realtime", "--duration", "60"]
    with open("/dev/full", "wb") as full:
        proc = subprocess.Popen([LOOPWATCH, *argv], cwd=empty, env=clean_env(), stdout=full, stderr=PIPE)
    try:
        wait_until(lambda: proc.poll() is not None or _published(broker.bootstrap, topic), READY_TIMEOUT, 0.2,
                   message="simulate publishing")  # fmt: skip
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        stop_process(proc, 5)
    in_kafka = sum(true_end_offsets(broker.bootstrap, topic, range(_partitions(broker.bootstrap, topic))).values())
    assert proc.returncode == 130 and re.fullmatch(
        rf"loopwatch simulate: sent {in_kafka} events to {topic} in \d+\.\d s, then interrupted, but cannot write "
        r"that to the output \(stdout\): No space left on device; free space there, or send the output elsewhere\n",
        err.decode(),
    ), err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_line_is_imported_is_one_line_and_130(empty: Path, sig: signal.Signals) -> None:
    """Its imports take about half a second: a Ctrl-C then printed a ``KeyboardInterrupt`` traceback, and a
    SIGTERM killed it (143, not in the exit table). The signal
    is sent once the interpreter reports (``-X importtime``) one of the command line's first modules imported, so
    it lands among the imports on any machine, not before the interpreter handles it."""
    env = {**clean_env(), "PYTHONPROFILEIMPORTTIME": "1"}
    for command in (["worker"], ["simulate"], ["broker"], ["--help"]):
        proc = subprocess.Popen([LOOPWATCH, *command], cwd=empty, env=env, stdout=PIPE, stderr=PIPE)
        try:
            assert proc.stderr is not None
            seen = b""
            deadline = time.monotonic() + 30
            while b"streams.errors" not in seen and time.monotonic() < deadline:  # imported by streams.cli
                seen += proc.stderr.readline()
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            stop_process(proc, 5)
        said = [line for line in (seen + err).decode().splitlines() if not line.startswith("import time:")]
        assert (proc.returncode, out, said) == (130, b"", ["loopwatch: interrupted"]), command


@pytest.mark.integration
def test_ctrl_c_once_publish_said_what_it_sent_leaves_its_status_0(broker: EmbeddedBroker, empty: Path) -> None:
    """A Ctrl-C in the moment between the summary and the exit ended with 130 (the process killed by the signal
    during the interpreter's exit) or with a traceback from an exit hook: a publish that had finished looked
    undone."""
    (empty / "e.jsonl").write_bytes(b"".join(_events(40)))
    for attempt in range(4):
        argv = ["publish", "e.jsonl", "--bootstrap", broker.bootstrap, "--topic", f"done-{attempt}"]
        proc = subprocess.Popen([LOOPWATCH, *argv], cwd=empty, env=clean_env(), stdout=PIPE, stderr=PIPE)
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()
            proc.send_signal(signal.SIGINT)
            proc.wait(30)
            err = proc.stderr.read()
        finally:
            stop_process(proc, 5)
        assert line == f"sent 40 events to done-{attempt}\n".encode()
        assert (proc.returncode, err) == (0, b""), (attempt, err)


def _events(count: int) -> list[bytes]:
    from streams.simulate import simulate

    return [value + b"\n" for _, value in simulate(gateways=2, rate=50, duration=60, seed=3)][:count]
