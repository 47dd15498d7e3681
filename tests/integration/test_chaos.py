"""Chaos: overlapping membership changes and a frozen broker while one events stream flows.

Per seed, on a broker of its own (it gets SIGSTOPped): two workers in one group, a feeder producing fleet
traffic with looping runs, ~2% bad records and ~3% exact duplicates, and, overlapping, in a seeded order:
SIGKILL a worker and restart it 1-5 s later, SIGTERM the other and restart it, a third worker joining and
being SIGKILLed, the broker SIGSTOPped for 5-10 s and continued. Afterwards:

- the verdict topic equals ``loopwatch replay`` of the same events (0 missing, 0 extra, 0 differing;
  byte-identical re-publications allowed),
- every run's stored state covers its run's last event and equals a crash-free run's,
- every bad record is dead-lettered with its reason, re-publications carry the same identity,
- the group's committed offsets reach the end of every events partition,
- no worker logged a skipped delivery (:mod:`streams.worker.offsets`) or a gap; a worker that exits by
  itself is restarted (as an orchestrator would) and reported.

``LOOPWATCH_CHAOS_SEEDS`` (default 4: one batch of parallel seeds, covering bulk, stream and no standby; more
for a longer run) sets how many seeds run, ``LOOPWATCH_CHAOS_FIRST_SEED`` the first, and
``LOOPWATCH_CHAOS_ROUNDS`` (default 1) how many rounds of disturbances each seed's (longer) stream gets,
``LOOPWATCH_CHAOS_PARALLEL`` (default 4) how many seeds run at once. Every third seed runs the workers with
``--delivery stream``, the others with the default bulk delivery; ``LOOPWATCH_CHAOS_DELIVERY`` (bulk or stream)
runs every seed with one. Every fourth seed from seed 2 runs them with ``--standby-replicas 0``, so no worker
keeps a warm copy of another's partitions and every takeover restores the state from the changelog alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from streams.devbroker import EmbeddedBroker
from streams.simulate import simulate
from streams.worker import envelope
from streams.worker.processing import InputRecord, plan_batch
from tests.support.kafka import Record, TopicReader, true_end_offsets
from tests.support.worker import (
    Feeder,
    Names,
    WorkerProcess,
    clean_states,
    event_positions,
    last_states,
    metric,
    new_names,
    replay_published,
    verdicts_by_id,
    without_source,
    write_config,
)

pytestmark = pytest.mark.integration

SEEDS = int(os.environ.get("LOOPWATCH_CHAOS_SEEDS", "4"))
FIRST_SEED = int(os.environ.get("LOOPWATCH_CHAOS_FIRST_SEED", "1"))
ROUNDS = int(os.environ.get("LOOPWATCH_CHAOS_ROUNDS", "1"))  # disturbance rounds per seed (the stream grows too)
PARALLEL = int(os.environ.get("LOOPWATCH_CHAOS_PARALLEL", "4"))  # seeds at once, each with its own broker
DELIVERY = os.environ.get("LOOPWATCH_CHAOS_DELIVERY")
EVENTS = 2500 * ROUNDS


def delivery_of(seed: int) -> str:
    return DELIVERY or ("stream" if seed % 3 == 0 else "bulk")


def standby_of(seed: int) -> int:
    return 0 if seed % 4 == 2 else 1


def stream(seed: int) -> list[tuple[bytes | None, bytes]]:
    """Fleet traffic with bad records; ~3% of the valid records repeated exactly a little later."""
    rng = random.Random(seed)
    records: list[tuple[bytes | None, bytes]] = list(
        simulate(gateways=30, rate=1000.0, duration=EVENTS / 1000.0, seed=seed, malformed=0.02)
    )
    out: list[tuple[bytes | None, bytes]] = []
    later: list[tuple[int, tuple[bytes | None, bytes]]] = []
    for i, rec in enumerate(records):
        out.append(rec)
        if rng.random() < 0.03 and _valid(*rec):
            later.append((i + rng.randint(1, 40), rec))
        while later and later[0][0] <= i:
            out.append(later.pop(0)[1])
    out.extend(rec for _, rec in later)
    return out


def _valid(key: bytes | None, value: bytes | None) -> bool:
    return not plan_batch([InputRecord("t", 0, 0, key, value)], 0).dead_letters


class Chaos:
    """The seeded schedule of membership changes and the broker freeze, run against live processes."""

    def __init__(
        self, seed: int, broker: EmbeddedBroker, names: Names, workdir: Path, config: Path, attempt: int = 0
    ) -> None:
        self.rng = random.Random(seed * 7919 + attempt)  # another attempt: the same kinds of change, other times
        self.delivery = delivery_of(seed)
        self.standby = standby_of(seed)
        self.broker = broker
        self.names = names
        self.workdir = workdir
        self.config = config
        self.workers: dict[str, WorkerProcess] = {}
        self.all: list[WorkerProcess] = []
        self.log: list[str] = []
        self._threads: list[threading.Thread] = []
        self._locks = {name: threading.Lock() for name in ("w1", "w2", "w3")}

    def start(self, name: str) -> WorkerProcess:
        store = "rocksdb" if name == "w1" else "memory"  # memory: every takeover recovers from the changelog
        worker = WorkerProcess(
            self.broker.bootstrap, self.names, self.workdir, config=self.config, store=store, name=name,
            extra=("--delivery", self.delivery, "--standby-replicas", str(self.standby)),
        )  # fmt: skip
        self.workers[name] = worker.start()
        self.all.append(worker)
        return worker

    def later(self, delay: float, what: str, action: Callable[[], object]) -> None:
        def run() -> None:
            time.sleep(delay)
            self.log.append(f"{time.monotonic() - self.t0:5.1f}s {what}")
            action()

        thread = threading.Thread(target=run, daemon=True)
        self._threads.append(thread)
        thread.start()

    def kill_and_restart(self, name: str, pause: float) -> None:
        with self._locks[name]:
            self.workers[name].kill()
            time.sleep(pause)
            self.start(name)

    def term_and_restart(self, name: str, pause: float) -> None:
        with self._locks[name]:
            self.workers[name].stop(timeout=30.0)
            time.sleep(pause)
            self.start(name)

    def join_and_die(self, pause: float) -> None:
        with self._locks["w3"]:
            worker = self.start("w3")
            time.sleep(pause)
            worker.kill()

    def freeze_broker(self, pause: float) -> None:
        assert self.broker.pid is not None
        os.kill(self.broker.pid, signal.SIGSTOP)
        time.sleep(pause)
        os.kill(self.broker.pid, signal.SIGCONT)

    def run(self) -> None:
        """Per round, every disturbance starts within ~15 s of the round's start, so they overlap."""
        self.t0 = time.monotonic()
        for round_no in range(ROUNDS):
            self._round(round_no * 14.0)

    def _round(self, at: float) -> None:
        rng = self.rng
        kill = rng.choice(["w1", "w2"])
        again = rng.choice(["w1", "w2"])
        pauses = [rng.uniform(1.0, 5.0), rng.uniform(0.2, 2.0), rng.uniform(5.0, 10.0), rng.uniform(1.0, 5.0)]
        lifetime = rng.uniform(3.0, 6.0)
        actions: list[tuple[str, Callable[[], object]]] = [
            (f"SIGKILL {kill}, restart {pauses[0]:.1f}s later", lambda: self.kill_and_restart(kill, pauses[0])),
            (f"SIGTERM {_other(kill)}, restart", lambda: self.term_and_restart(_other(kill), pauses[1])),
            (f"w3 joins, SIGKILL {lifetime:.1f}s later", lambda: self.join_and_die(lifetime)),
            (f"broker SIGSTOP {pauses[2]:.1f}s", lambda: self.freeze_broker(pauses[2])),
            (f"SIGKILL {again}, restart {pauses[3]:.1f}s later", lambda: self.kill_and_restart(again, pauses[3])),
        ]
        rng.shuffle(actions)
        for what, action in actions:
            at += rng.uniform(0.5, 3.5)
            self.later(at, what, action)

    def join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
            assert not thread.is_alive(), "chaos schedule did not finish"

    def live(self) -> list[WorkerProcess]:
        return [w for w in self.workers.values() if w.alive()]


def _other(name: str) -> str:
    return "w2" if name == "w1" else "w1"


def read_all(bootstrap: str, topic: str, partitions: int) -> list[Record]:
    """Every record of ``topic`` up to its end offsets (no quiet-period guess: the seeds run side by side)."""
    ends = true_end_offsets(bootstrap, topic, range(partitions))

    def complete(records: list[Record]) -> bool:
        last = {rec.partition: rec.offset for rec in records}
        return all(end == 0 or last.get(p, -1) >= end - 1 for p, end in ends.items())

    with TopicReader(bootstrap, topic, partitions) as reader:
        return list(reader.poll_until(complete, 90.0, f"{topic} read to its end offsets {ends}"))


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    async def run() -> dict[int, int | None]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
        await consumer.start()
        try:
            return {p: await consumer.committed(TopicPartition(topic, p)) for p in range(partitions)}
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), 30.0))


def wait_settled(broker: EmbeddedBroker, names: Names, chaos: Chaos, timeout: float) -> None:
    """Until the group committed the end of every events partition (or ``timeout``: the checks then say why).

    Like an orchestrator, restarts w1 or w2 if it exited by itself (Faust ends the process on some commit
    errors while the broker is frozen); each such exit is noted in the schedule with its reason.
    """
    ends = true_end_offsets(broker.bootstrap, names.events, range(names.partitions))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name in ("w1", "w2"):
            worker = chaos.workers[name]
            if not worker.alive():
                chaos.log.append(f"{name} exited by itself: {exit_reason(worker)}; restarted")
                chaos.start(name)
        committed = committed_offsets(broker.bootstrap, names.group, names.events, names.partitions)
        if all(committed[p] == ends[p] for p in range(names.partitions)):
            return
        time.sleep(1.0)


# Faust's and our own error lines, and the CLI's one-line failures ("loopwatch worker: no Kafka answer ...").
_EXIT_LINE = re.compile(r"CRITICAL|Error:|Exception:|^loopwatch worker: (?!starting|ready|stopped)")


def exit_reason(worker: WorkerProcess) -> str:
    lines = [line for line in worker.log().splitlines() if _EXIT_LINE.search(line)]
    return lines[-1].strip()[:300] if lines else "no reason logged"


def check(broker: EmbeddedBroker, names: Names, records: list[tuple[bytes | None, bytes]], config: Path) -> str:
    bootstrap = broker.bootstrap
    events_topic = read_all(bootstrap, names.events, names.partitions)
    valid = [orjson.loads(value) for key, value in records if _valid(key, value)]
    problems: list[str] = []

    want = replay_published(valid, config)
    got, duplicates = verdicts_by_id(read_all(bootstrap, names.verdicts, names.partitions))
    missing = set(want) - set(got)
    extra = set(got) - set(want)
    differing = {v for v in set(got) & set(want) if without_source(got[v]) != without_source(want[v])}
    if missing or extra or differing:
        problems.append(f"verdicts: {len(missing)} missing, {len(extra)} extra, {len(differing)} differing")
    positions = event_positions(events_topic)
    for vid, verdict in got.items():
        source = verdict["source"]
        if positions.get((source["partition"], source["offset"]), {}).get("event_id") != verdict["event_id"]:
            problems.append(f"verdict {vid}: source does not point at its event")

    changelog = read_all(bootstrap, names.changelog, names.partitions)
    stored = last_states(changelog)
    last_event: dict[bytes, tuple[int, int]] = {}
    for rec in events_topic:
        if rec.key is not None and _valid(rec.key, rec.value):
            last_event[rec.key] = (rec.partition, rec.offset)
    last_applied: dict[bytes, tuple[int, int]] = {}
    for rec in changelog:
        if rec.key is not None and rec.value is not None:
            env = envelope.decode(rec.value)
            last_applied[rec.key] = (env.partition, env.last_offset)
    behind = [k for k, where in last_event.items() if last_applied.get(k, (-1, -1))[1] < where[1]]
    if behind:
        problems.append(f"{len(behind)} runs' stored state ends before their last event")
    clean = clean_states(valid, config)
    differ = [k for k in clean if stored.get(k) != clean[k]]
    if differ:
        problems.append(f"{len(differ)} of {len(clean)} runs' stored state differs from a crash-free run's")

    expected_dead = {}
    for rec in events_topic:
        planned = plan_batch([InputRecord(names.events, rec.partition, rec.offset, rec.key, rec.value)], 0)
        for dead in planned.dead_letters:
            expected_dead[(rec.partition, rec.offset)] = dead.reason
    dead_letters: dict[tuple[int, int], set[tuple[str, str]]] = {}
    for rec in read_all(bootstrap, names.dead_letter, names.partitions):
        doc = orjson.loads(rec.value or b"{}")
        src = doc["source"]
        assert src["topic"] == names.events
        dead_letters.setdefault((src["partition"], src["offset"]), set()).add((doc["reason"], doc["original_sha256"]))
    not_dead = [pos for pos in expected_dead if pos not in dead_letters]
    wrong = [pos for pos, seen in dead_letters.items() if {r for r, _ in seen} != {expected_dead.get(pos)}]
    changed = [pos for pos, seen in dead_letters.items() if len(seen) != 1]
    if not_dead or wrong or changed:
        problems.append(
            f"dead letters: {len(not_dead)} bad records not dead-lettered, {len(wrong)} with a wrong reason, "
            f"{len(changed)} re-published with another identity"
        )

    ends = true_end_offsets(bootstrap, names.events, range(names.partitions))
    committed = committed_offsets(bootstrap, names.group, names.events, names.partitions)
    short = {p: (committed[p], ends[p]) for p in ends if committed[p] != ends[p]}
    if short:
        problems.append(f"group commits short of the end (committed, end): {short}")
    assert not problems, "\n".join(problems)
    return (
        f"{len(got)} verdicts ({duplicates} re-published), {len(expected_dead)} dead letters, "
        f"{sum(ends.values())} events"
    )


_DEFECT = re.compile(r"were never delivered|not counted as processed|deleted by retention|expiry index disagreed")


def assert_no_defects(worker: WorkerProcess) -> None:
    """No skipped delivery and no gap logged. aiokafka's errors while the broker is frozen (session expired,
    coordinator dead, commit refused for a member that left) are what this test provokes, not defects."""
    bad = [line for line in worker.log().splitlines() if _DEFECT.search(line)]
    assert not bad, f"worker {worker.name}:\n" + "\n".join(bad[:10])


class GroupWedged(AssertionError):
    """The seed could not finish because the embedded broker's group never formed again (not a worker defect)."""


def wedged_group(bootstrap: str, group: str) -> str | None:
    """The embedded broker's group that never forms again (docs/embedded-broker.md), or None.

    Its signature: DescribeGroups reports the state ``Unknown`` while members are listed, none of them with
    subscription metadata. Real Kafka has no such state; members that join send their metadata with the join.
    """

    async def describe() -> Any:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
        await admin.start()
        try:
            (response,) = await admin.describe_consumer_groups([group])
        finally:
            await admin.close()
        return response.groups[0]

    try:
        row = asyncio.run(asyncio.wait_for(describe(), 15.0))
    except Exception:  # an unreadable group is not the signature
        return None
    state, members = row[2], list(row[5])
    if state == "Unknown" and members and not any(member[3] for member in members):
        return f"group state Unknown with {len(members)} members without metadata"
    return None


def run_seed(seed: int, workdir: Path, attempt: int = 0) -> str:
    """One seed on a broker of its own; returns a summary, raises AssertionError with the schedule if it fails.

    ``attempt`` > 0 keeps the seed's traffic, delivery and standby setting and draws the disturbances' times
    anew: the broker's wedge (:class:`GroupWedged`) depends on their timing, and the same times wedged it
    twice in a row on a slower machine, which left the seed unchecked.
    """
    workdir.mkdir(parents=True)
    broker = EmbeddedBroker(log_path=workdir / "tansu.log")
    broker.start()
    names = new_names(f"chaos{seed}")
    config = write_config(workdir)
    records = stream(seed)
    chaos = Chaos(seed, broker, names, workdir, config, attempt)
    try:
        for worker in [chaos.start("w1"), chaos.start("w2")]:
            worker.wait_ready()
        feeder = Feeder(broker.bootstrap, names.events, records, chunk=100, pause=0.35).start()
        chaos.run()
        chaos.join(60.0 * ROUNDS)
        feeder.join(90.0 * ROUNDS)
        try:
            wait_settled(broker, names, chaos, 90.0)
            summary = check(broker, names, records, config)
            skipped = sum(metric(w.metrics(), "loopwatch_skipped_offsets_total") for w in chaos.live())
            for worker in chaos.all:
                assert_no_defects(worker)
        except AssertionError as exc:
            detail = f"{exc}\n  schedule: " + "; ".join(chaos.log)
            wedge = wedged_group(broker.bootstrap, names.group)
            if wedge is not None:
                raise GroupWedged(f"{wedge}\n  {detail}") from None
            raise AssertionError(detail) from None
        setup = f"{chaos.delivery}, {chaos.standby} standby"
        return f"{setup}: {summary}, {skipped:.0f} skipped offsets; " + "; ".join(chaos.log)
    finally:
        for worker in chaos.all:
            worker.stop()
        if broker.pid is not None:  # never leave it stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(broker.pid, signal.SIGCONT)
        broker.stop()


@pytest.mark.timeout(150 * ROUNDS * (math.ceil(SEEDS / PARALLEL) + 1) + 120)  # + 1: a re-run after a wedge
def test_chaos(tmp_path: Path) -> None:
    seeds = range(FIRST_SEED, FIRST_SEED + SEEDS)
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="chaos") as pool:
        runs = {seed: pool.submit(run_seed, seed, tmp_path / f"seed-{seed}") for seed in seeds}
    failures = []
    for seed, run in runs.items():
        try:
            try:
                print(f"seed {seed}: {run.result()}")
            except GroupWedged as exc:
                # Once more on a fresh broker, the same kinds of change at other times: a worker defect fails
                # it again; a second wedge fails the test too.
                print(f"seed {seed}: the embedded broker's group never formed again ({exc}); re-run:")
                print(f"seed {seed}: {run_seed(seed, tmp_path / f'seed-{seed}-again', attempt=1)}")
        except AssertionError as exc:
            print(f"seed {seed}: FAILED {exc}")
            failures.append(f"seed {seed}: {exc}")
    assert not failures, f"{len(failures)} of {len(runs)} seeds failed:\n" + "\n".join(failures)


def test_the_stream_has_bad_records_and_duplicates() -> None:
    records = stream(FIRST_SEED)
    bad = sum(not _valid(*rec) for rec in records)
    counts = Counter(rec for rec in records if _valid(*rec))
    assert 0.01 * len(records) < bad < 0.04 * len(records)
    assert sum(n - 1 for n in counts.values()) > 0.02 * len(records)
