"""The worker's start-up helpers that need no Kafka: the library log limiter, its logging config, and the
warning for a group that does not settle."""

from __future__ import annotations

import io
import logging
import logging.config
from pathlib import Path
from typing import Any

import pytest

from streams.errors import CommandError
from streams.worker.settings import WorkerSettings
from streams.worker.startup import (
    LOCK_FILE,
    UNSETTLED_QUIET,
    UNSETTLED_REASSIGNMENTS,
    DataDirLock,
    Reassignments,
    RepeatLimiter,
    check_not_compacted,
    library_logging,
    prepare_data_dir,
    unsettled_line,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record(msg: str, *args: object, name: str = "aiokafka.conn") -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_a_repeated_message_shows_once_per_window_with_the_count_it_held_back() -> None:
    clock = Clock()
    limiter = RepeatLimiter(every=30.0, clock=clock)
    first = record("Unable connect to node with id %s: %s", 111, "refused")
    assert limiter.filter(first) and first.getMessage() == "Unable connect to node with id 111: refused"
    for step in range(40):  # 40 a second, as aiokafka does while the broker is away
        clock.now += 0.025
        assert not limiter.filter(record("Unable connect to node with id %s: %s", 111, f"refused {step}"))
    clock.now = 130.0
    again = record("Unable connect to node with id %s: %s", 111, "refused")
    assert limiter.filter(again)
    assert again.getMessage() == "Unable connect to node with id 111: refused (and 40 more like it in the last 30 s)"
    clock.now += 1
    assert not limiter.filter(record("Unable connect to node with id %s: %s", 111, "refused"))


def test_another_message_or_logger_is_not_held_back() -> None:
    limiter = RepeatLimiter(every=30.0, clock=Clock())
    assert limiter.filter(record("Unable to update metadata from %s", [111]))
    assert limiter.filter(record("Failed fetch messages from %s: %s", 111, "closed"))
    assert limiter.filter(record("Unable to update metadata from %s", [111], name="aiokafka.cluster"))
    assert not limiter.filter(record("Unable to update metadata from %s", [112]))


def test_a_message_after_a_quiet_window_has_no_count() -> None:
    clock = Clock()
    limiter = RepeatLimiter(every=30.0, clock=clock)
    assert limiter.filter(record("Heartbeat failed"))
    clock.now += 31
    late = record("Heartbeat failed")
    assert limiter.filter(late) and late.getMessage() == "Heartbeat failed"


def test_the_logging_config_limits_every_library_logger_and_its_children() -> None:
    """Applied as Faust merges it: the limiter sits on the libraries' handler, so records of child loggers
    (aiokafka.conn, ...) pass through it too; at debug nothing is limited."""
    stream = io.StringIO()
    config = library_logging("info")
    config.pop("merge")
    config["formatters"] = {"colored": {"format": "%(message)s"}}
    config["handlers"]["library"] = {**config["handlers"]["library"], "class": "logging.StreamHandler"}
    config["handlers"]["library"]["stream"] = stream
    logging.config.dictConfig({**config, "disable_existing_loggers": False})
    try:
        child = logging.getLogger("aiokafka.conn.test-child")
        for _ in range(50):
            child.error("Unable connect to node with id %s", 111)
        logging.getLogger("aiokafka.conn.test-child").info("below warning")
        assert stream.getvalue() == "Unable connect to node with id 111\n"
    finally:
        for name in ("faust", "mode", "aiokafka", "kafka"):
            logger = logging.getLogger(name)
            logger.handlers.clear()
            logger.propagate = True
            logger.setLevel(logging.NOTSET)
    debug = library_logging("debug")
    assert "filters" not in debug and all(v == {"level": "DEBUG"} for v in debug["loggers"].values())


def test_the_stale_seek_warning_of_a_rebalance_is_held_back_and_other_seek_failures_are_not() -> None:
    """Logged as Faust logs it: a mode service's logger (which puts the service's label first) with the aiokafka
    error's own text; only the revoked-partition one is expected, and only it is held back."""
    from aiokafka.errors import IllegalStateError, KafkaError
    from mode import Service

    from streams.worker.startup import ToldByTheWorker

    class ShortWaitConsumer(Service):
        pass

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(ToldByTheWorker())
    consumer = ShortWaitConsumer()
    logger = consumer.log.logger
    logger.addHandler(handler)
    try:
        revoked = IllegalStateError("No current assignment for partition TopicPartition(topic='e', partition=0)")
        for ex in (revoked, KafkaError("connection lost")):  # as faust.transport.consumer.Consumer.getmany logs it
            consumer.log.warning(f"exception performing seek when flow not active {ex}")
        consumer.log.warning("anything else")
    finally:
        logger.removeHandler(handler)
    shown = stream.getvalue().splitlines()
    assert [line.split(": ", 1)[1] for line in shown] == [
        "exception performing seek when flow not active KafkaError: connection lost",
        "anything else",
    ], shown


def test_a_leave_the_broker_did_not_answer_is_one_warning_in_the_workers_words() -> None:
    """Logged as aiokafka logs a stopping member's failed LeaveGroup (its group coordinator's two errors): one
    warning line that says what it means remains; the coordinator's other errors stay as they are."""
    import inspect

    from aiokafka.consumer.group_coordinator import GroupCoordinator
    from aiokafka.errors import RequestTimedOutError

    from streams.worker.startup import ToldByTheWorker

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.addFilter(ToldByTheWorker())
    logger = logging.getLogger("aiokafka.consumer.group_coordinator")
    logger.addHandler(handler)
    try:
        err = RequestTimedOutError()
        logger.error("Error sending %s to node %s [%s] -- marking coordinator dead", "LeaveGroupRequest", 0, err)
        logger.error("LeaveGroup request failed: %s", err)
        logger.error("Error sending %s to node %s [%s] -- marking coordinator dead", "HeartbeatRequest", 0, err)
    finally:
        logger.removeHandler(handler)
    shown = stream.getvalue().splitlines()
    assert len(shown) == 2, shown
    said = "WARNING leaving the group: the broker did not confirm it ([Error 7] RequestTimedOutError)"
    # the messages as aiokafka writes them: a change there shows here, not as the two errors coming back
    source = inspect.getsource(GroupCoordinator._maybe_leave_group) + inspect.getsource(GroupCoordinator._send_req)
    assert '"LeaveGroup request failed: %s"' in source and "request.__class__.__name__" in source
    assert '"Error sending %s to node %s [%s] -- marking coordinator dead"' in source
    assert shown[0].startswith(said), shown
    assert "session timeout" in shown[0] and "Nothing is lost" in shown[0]
    assert shown[1].startswith("ERROR Error sending HeartbeatRequest "), shown


def test_stale_stores_are_the_databases_not_below_their_changelog_end(tmp_path: Path) -> None:
    """At or past the end: written elsewhere. Below it: recovery resumes there. No offset: nothing to judge."""
    from streams.worker.local_state import stale_stores

    db = {p: (tmp_path / f"runs-{p}.db", offset) for p, offset in enumerate([4, 5, 9, None])}
    stale = stale_stores({"runs": db}, {"runs": "g-runs-changelog"}, {("g-runs-changelog", p): 5 for p in range(3)})
    assert [(s.partition, s.persisted, s.end) for s in stale] == [(1, 5, 5), (2, 9, 5)]


def test_persisted_offsets_reads_what_faust_wrote_and_discard_removes_it(tmp_path: Path) -> None:
    """Databases written the way Faust's RocksDB store writes its offset are read back without being changed."""
    from rocksdict import Options, Rdict

    from streams.worker.local_state import OFFSET_KEY, discard_stale, persisted_offsets, stale_stores

    for partition, offset in ((0, b"17"), (3, None)):
        db = Rdict(str(tmp_path / f"runs-{partition}.db"), options=Options(raw_mode=True))
        db[b"run"] = b"state"
        if offset is not None:
            db[OFFSET_KEY] = offset
        db.close()
    (tmp_path / "storms-0.db").mkdir()  # another table's, and a directory that is no database
    found = persisted_offsets(tmp_path, "runs")
    assert {p: offset for p, (_, offset) in found.items()} == {0: 17, 3: None}
    stale = stale_stores({"runs": found}, {"runs": "c"}, {("c", 0): 0, ("c", 3): 0})
    discard_stale(stale)
    assert not (tmp_path / "runs-0.db").exists() and (tmp_path / "runs-3.db").exists()
    assert persisted_offsets(tmp_path / "missing", "runs") == {}


def test_lost_topics_are_the_ones_gone_or_made_again_with_another_count() -> None:
    from streams.worker.startup import lost_topics

    expected = {"e": 12, "v": 12, "leader": 1}
    assert lost_topics(expected, {"e": 12, "v": 12, "leader": 1, "other": 3}) == []
    assert lost_topics(expected, {"e": 12, "leader": 4}) == ["leader", "v"]


def test_a_group_that_keeps_reassigning_is_told_once_per_quiet_period() -> None:
    """Six reassignments within a minute warn, with the count; more of them stay quiet for ten minutes, then
    the next burst warns again."""
    watch = Reassignments()
    assert [watch.unsettled(100.0 + 3 * n) for n in range(UNSETTLED_REASSIGNMENTS)] == [None] * 5 + [6]
    assert all(watch.unsettled(118.0 + 3 * n) is None for n in range(100))  # within the quiet period
    later = 100.0 + UNSETTLED_QUIET + 400
    assert watch.unsettled(later) is None  # the window starts over: one alone is no burst
    assert [watch.unsettled(later + n) for n in range(1, 6)] == [None] * 4 + [6]


def test_a_rolling_restart_s_reassignments_spread_over_minutes_do_not_warn() -> None:
    """A dynamic group's rolling restart: two rebalances per worker, one worker every 30 s."""
    watch = Reassignments()
    assert all(watch.unsettled(30.0 * n + extra) is None for n in range(40) for extra in (0.0, 4.0))


def test_the_unsettled_warning_names_the_embedded_broker_s_cause_only_there() -> None:
    embedded = unsettled_line("lw", 6, embedded_broker=True)
    assert embedded.startswith("group lw reassigned its partitions 6 times in 60 s: on the embedded broker")
    assert "--group-instance-id" in embedded and "LOOPWATCH_EMBEDDED=false" in embedded
    kafka = unsettled_line("lw", 9, embedded_broker=False)
    assert "9 times" in kafka and "embedded" not in kafka and "session timeout" in kafka


@pytest.mark.parametrize("policy", ["compact", "delete, compact", "compact,delete"])
def test_a_compacted_input_topic_is_refused(policy: str) -> None:
    with pytest.raises(CommandError, match=r"topic is compacted") as raised:
        check_not_compacted("t.events", policy)
    assert raised.value.where == "t.events"


def test_a_deleting_topic_passes_and_one_the_broker_would_not_describe_is_a_warning(
    capsys: pytest.CaptureFixture[str],
) -> None:
    check_not_compacted("t.events", "delete")
    assert capsys.readouterr().err == ""
    check_not_compacted("t.events", None)
    assert capsys.readouterr().err == (
        "loopwatch worker: warning: could not read the cleanup.policy of topic 't.events'; it must not be compact\n"
    )


def test_a_broker_that_cannot_describe_configs_gets_the_warning_not_a_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """aiokafka raises before it sends DescribeConfigs to a broker that lacks it (IncompatibleBrokerVersion):
    the check is then skipped with its warning, as for a topic the broker will not describe."""
    from aiokafka.errors import IncompatibleBrokerVersion

    import streams.kafka.admin
    import streams.kafka.client
    from streams.worker.settings import WorkerSettings
    from streams.worker.startup import prepare_topics

    async def counts(*_: object, **__: object) -> dict[str, int]:
        return {"t.events": 2}

    async def cannot(*_: object, **__: object) -> dict[str, dict[str, str] | None]:
        raise IncompatibleBrokerVersion("DescribeConfigsRequest")

    async def one_broker(*_: object, **__: object) -> int:
        return 1

    created: list[object] = []
    monkeypatch.setattr(streams.kafka.client, "partition_counts", counts)
    monkeypatch.setattr(streams.kafka.client, "describe_topic_configs", cannot)
    monkeypatch.setattr(streams.kafka.client, "broker_count", one_broker)
    monkeypatch.setattr(streams.kafka.admin, "create_topics", lambda *a, **k: created.append(a))
    settings = WorkerSettings(bootstrap="127.0.0.1:1", store="memory", events_topic="t.events", partitions=2)
    prepare_topics(settings, {"t.events": 2, "t.verdicts": 2}, {})
    assert "could not read the cleanup.policy of topic 't.events'" in capsys.readouterr().err
    assert created  # and the worker goes on to create what is missing


def _prepare(
    monkeypatch: pytest.MonkeyPatch,
    tmp: Path,
    existing: dict[str, int],
    configs: dict[str, dict[str, str] | None],
    *,
    brokers: int = 1,
    replication: list[int] | None = None,
    **settings_given: Any,
) -> list[tuple[dict[str, int], dict[str, dict[str, str]]]]:
    """Run prepare_topics against a broker that holds ``existing`` topics with ``configs``; what it created."""
    import streams.kafka.admin
    import streams.kafka.client
    from streams.worker.settings import WorkerSettings
    from streams.worker.startup import prepare_topics

    async def counts(*_: object, **__: object) -> dict[str, int]:
        return dict(existing)

    async def describe(_: str, topics: list[str], **__: object) -> dict[str, dict[str, str] | None]:
        return {name: configs.get(name, {}) for name in topics}

    async def count_brokers(*_: object, **__: object) -> int:
        return brokers

    created: list[tuple[dict[str, int], dict[str, dict[str, str]]]] = []

    def create(_: str, topics: dict[str, int], **kwargs: Any) -> None:
        created.append((topics, kwargs["configs"]))
        (replication if replication is not None else []).append(kwargs["replication"])

    monkeypatch.setattr(streams.kafka.client, "partition_counts", counts)
    monkeypatch.setattr(streams.kafka.client, "describe_topic_configs", describe)
    monkeypatch.setattr(streams.kafka.client, "broker_count", count_brokers)
    monkeypatch.setattr(streams.kafka.admin, "create_topics", create)
    from streams.config_file import LoadedConfig
    from streams.worker.app import LoopwatchWorker
    from streams.worker.metrics import WorkerMetrics

    settings_given.setdefault("embedded", True)  # one broker: one replica, as expected there
    settings = WorkerSettings(
        bootstrap="127.0.0.1:1", store="memory", group="g", partitions=2, data_dir=str(tmp), **settings_given
    )
    worker = LoopwatchWorker(settings, LoadedConfig.default(), WorkerMetrics(process=False))
    topics = {name: 2 for name in (settings.events_topic, settings.changelog_topic, settings.storm_changelog_topic,
                                   settings.dead_letter_topic, settings.verdicts_topic)}  # fmt: skip
    prepare_topics(settings, topics, worker.topic_configs())
    return created


def test_missing_changelogs_are_created_as_faust_would_and_the_events_topic_is_not_compacted(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The worker creates its topics before Faust would, so it must give them Faust's configs itself, else a
    takeover restores a week of writes, a run quiet for a week loses its state, and expired storm windows stay."""
    (created,) = _prepare(monkeypatch, tmp_path, {}, {})
    topics, configs = created
    assert configs == {
        "g-runs-changelog": {"cleanup.policy": "compact", "min.compaction.lag.ms": str(7 * 24 * 3600 * 1000)},
        "g-storms-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "600000"},  # 2 windows of 300 s
        "loopwatch.dead-letter": {"retention.ms": str(30 * 24 * 3600 * 1000)},
    }
    assert set(configs) < set(topics) and "loopwatch.events" in topics


@pytest.mark.parametrize(
    ("runs", "storms", "warned"),
    [
        ({}, {"cleanup.policy": "compact,delete"}, "changelog 'g-runs-changelog' has cleanup.policy=delete, not the "
         "worker's configs: set cleanup.policy=compact (the deploy topic scripts do)"),
        # compacted alone, the storm table's expired windows (a key each) would stay for ever
        ({"cleanup.policy": "compact"}, {"cleanup.policy": "compact"}, "changelog 'g-storms-changelog' has "
         "cleanup.policy=compact, not the worker's configs: set cleanup.policy=[compact,delete] (the deploy topic "
         "scripts do)"),
        # Kafka lists every config: a storm changelog made without the window's retention shows Kafka's default
        ({"cleanup.policy": "compact", "retention.ms": "604800000"},
         {"cleanup.policy": "delete,compact", "retention.ms": "604800000"}, "changelog 'g-storms-changelog' has "
         "retention.ms=604800000, not the worker's configs: set retention.ms=600000 (the deploy topic scripts do)"),
        ({"cleanup.policy": "compact"}, {"cleanup.policy": "compact, delete"}, None),
    ],
    ids=["runs-deleted", "storms-compacted-only", "storms-retention", "as-created"],
)  # fmt: skip
def test_an_existing_changelog_not_as_the_worker_creates_it_is_a_warning(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    runs: dict[str, str],
    storms: dict[str, str],
    warned: str | None,
) -> None:
    existing = {"loopwatch.events": 2, "g-runs-changelog": 2, "g-storms-changelog": 2}
    created = _prepare(monkeypatch, tmp_path, existing, {"g-runs-changelog": runs, "g-storms-changelog": storms})
    assert capsys.readouterr().err == (f"loopwatch worker: warning: {warned}\n" if warned else "")
    assert [sorted(topics) for topics, _ in created] == [["loopwatch.dead-letter", "loopwatch.verdicts"]]


@pytest.mark.parametrize(
    ("brokers", "setting", "replicas"), [(1, None, 1), (2, None, 2), (5, None, 3), (5, 5, 5), (1, 2, 2)]
)
def test_topics_the_worker_creates_are_replicated_as_the_cluster_allows(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, brokers: int, setting: int | None, replicas: int
) -> None:
    """Faust's default is one replica, which a production cluster kept for good: a topic the worker made before
    the topic scripts ran lost its data with its one broker. 3, or every broker of a smaller cluster; the
    setting wins (a broker refuses more replicas than it has brokers, in one line)."""
    given = {} if setting is None else {"replication_factor": setting}
    replication: list[int] = []
    _prepare(monkeypatch, tmp_path, {}, {}, brokers=brokers, replication=replication, **given)
    assert replication == [replicas]


def test_fewer_replicas_than_three_off_the_embedded_broker_are_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The cluster's metadata lists the brokers that are up: a worker that creates its topics while one of three
    is down makes them with two replicas for good, so it says so (not on the embedded broker, nor when set)."""
    replication: list[int] = []
    _prepare(monkeypatch, tmp_path, {"loopwatch.events": 2}, {}, brokers=2, replication=replication, embedded=False)
    assert replication == [2]
    assert capsys.readouterr().err == (
        "loopwatch worker: warning: creating g-runs-changelog, g-storms-changelog, loopwatch.dead-letter, "
        "loopwatch.verdicts with 2 replicas: the cluster lists 2 brokers up (--replication-factor sets it)\n"
    )
    _prepare(monkeypatch, tmp_path, {}, {}, brokers=2, embedded=False, replication_factor=2)
    assert capsys.readouterr().err == ""


def test_a_failed_start_removes_only_what_it_made(tmp_path: Path) -> None:
    """The data directory and lock file a start made go when it fails before the worker runs; a directory or lock
    file that was there before (an earlier worker's) stays."""
    fresh = prepare_data_dir(WorkerSettings(data_dir=str(tmp_path / "a" / "b" / "data")))
    assert fresh.lock is not None and (fresh.path / LOCK_FILE).exists()
    fresh.undo()
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    (kept / "data").mkdir(parents=True)
    (kept / "data" / LOCK_FILE).write_text("1\n")
    again = prepare_data_dir(WorkerSettings(data_dir=str(kept / "data" / "sub"), store="memory"))
    again.undo()
    assert sorted(p.name for p in kept.rglob("*")) == ["data", LOCK_FILE]
    old = prepare_data_dir(WorkerSettings(data_dir=str(kept / "data")))
    (old.path / "table").mkdir()  # written meanwhile: kept, and so is every directory above it
    old.undo()
    assert sorted(p.name for p in kept.rglob("*")) == ["data", LOCK_FILE, "table"]


def test_a_dot_dot_path_counts_only_the_directories_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``new/../existing``: ``new`` was made, ``existing`` was there (a lexical check took it for made)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "existing").mkdir()
    made = prepare_data_dir(WorkerSettings(data_dir="new/../existing", store="memory"))
    made.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing"]


def test_a_lock_on_a_removed_lock_file_is_taken_again_on_the_new_one(tmp_path: Path) -> None:
    """A failed start removes the lock file it made while holding its lock; a worker that had opened that file
    before must not hold a lock on it then, or a third worker could lock a new file beside it."""
    first = prepare_data_dir(WorkerSettings(data_dir=str(tmp_path / "d")))
    second = DataDirLock(first.path)
    stale = second._open()  # opened before the first start's undo removed the file
    first.undo()
    (tmp_path / "d").mkdir(exist_ok=True)
    calls = iter([stale])
    second._open = lambda: next(calls, None) or DataDirLock._open(second)  # type: ignore[method-assign]
    second.acquire()  # locks the removed file first, sees it is gone, and locks a new one
    with pytest.raises(CommandError, match="data directory in use by another worker"):
        DataDirLock(first.path).acquire()
    second.release()
