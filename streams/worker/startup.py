"""What a worker checks before it creates anything, and what it says once it is ready.

Topics are created only once the worker can really start: a crashed first start must not leave topics behind
that make the next attempt (say with another ``--partitions``) fail. So the data directory is created and
locked, the web port is checked and the metrics server bound first; each failure is one error line
(streams/errors.py). Faust's and aiokafka's own start-up messages stay below ``info`` (about 170 lines of
partition tables per start) unless ``--log-level debug``; loopwatch says in one line when it is ready.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from streams.errors import EXIT_UNAVAILABLE, CommandError, mkdir_reason, warn
from streams.worker.local_state import StaleStore
from streams.worker.settings import DEFAULT_REPLICATION, WorkerSettings, replication_for

LOCK_FILE = "loopwatch-worker.lock"
_OWN = {
    "--data-dir": "LOOPWATCH_DATA_DIR",
    "--web-port": "LOOPWATCH_WEB_PORT, 0 turns Faust's web server off",
    "--metrics-port": "LOOPWATCH_METRICS_PORT, 0 turns metrics off",
}


def second_worker_hint(flag: str) -> str:
    """Each worker on a host needs its own directory and ports; ``flag`` is the one that clashed."""
    others = " and ".join(other for other in _OWN if other != flag)
    return f"each worker on a host needs its own {flag} ({_OWN[flag]}), {others}"


class DataDirLock:
    """An exclusive ``flock`` on the data directory for the life of the process (the kernel drops it on exit).

    RocksDB locks each table partition's files only when Faust opens it, after joining the group: a second
    worker on the same directory would retry for 30 s and then crash. This lock refuses it at once.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._file: IO[str] | None = None
        self.created = False  # the lock file held did not exist before (a failed start removes it)

    def acquire(self) -> None:
        for _ in range(3):
            handle = self._open()
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                handle.seek(0)
                holder = handle.read().strip() or "unknown"
                handle.close()
                if exc.errno in (errno.EAGAIN, errno.EACCES):
                    raise CommandError(
                        f"data directory in use by another worker (pid {holder})",
                        str(self.path.parent),
                        second_worker_hint("--data-dir"),
                        code=EXIT_UNAVAILABLE,
                    ) from None
                raise CommandError("cannot lock the data directory", str(self.path), exc.strerror) from None
            if _same_file(handle, self.path):
                break
            handle.close()  # a failed start removed the file this lock opened (DataDir.undo): lock the new one
        else:
            raise CommandError("cannot lock the data directory", str(self.path), "its lock file keeps changing")
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._file = handle

    def _open(self) -> IO[str]:
        """The lock file, opened for writing; ``created`` says whether this call made it."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            self.created = True
        except FileExistsError:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            self.created = False
        return os.fdopen(fd, "r+", encoding="ascii")

    def release(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()


def _same_file(handle: IO[str], path: Path) -> bool:
    """Whether the open ``handle`` is still the file at ``path`` (not one removed since it was opened)."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (held.st_dev, held.st_ino) == (here.st_dev, here.st_ino)


@dataclass(slots=True)
class DataDir:
    """The worker's data directory, its lock, and what this start made, so that a start that fails before the
    worker runs (no broker, a port in use, wrong topics) leaves nothing behind (:meth:`undo`)."""

    path: Path
    lock: DataDirLock | None
    made: list[Path] = field(default_factory=list)  # directories this start created, outermost first

    def undo(self) -> None:
        """Remove the lock file this start made (while still holding its lock, so that no other worker can lock
        the removed file) and release the lock; then the directories this start made, if still empty."""
        if self.lock is not None:
            if self.lock.created:
                self.lock.path.unlink(missing_ok=True)
            self.lock.release()
        for directory in reversed(self.made):
            try:
                directory.rmdir()
            except OSError:
                return  # something else is in it now: keep it, and its parents


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents, one level at a time; the ones this call created, outermost
    first (a ``..`` in the path is never counted as made: its ``mkdir`` finds it there)."""
    made: list[Path] = []
    try:
        for level in (*reversed(directory.parents), directory):
            try:
                level.mkdir()
            except FileExistsError:
                continue
            made.append(level)
        directory.mkdir(exist_ok=True)  # a file where the directory should be still fails here
    except OSError as exc:
        DataDir(directory, None, made).undo()
        raise CommandError(
            "cannot create the data directory",
            str(directory),
            f"{mkdir_reason(exc, directory)}; choose another --data-dir",
        ) from None
    return made


def prepare_data_dir(settings: WorkerSettings) -> DataDir:
    """Create the data directory with its parents and, for RocksDB, lock it; its path is absolute."""
    directory = Path(settings.data_dir).expanduser().absolute()
    made = _make_dirs(directory)
    if settings.store != "rocksdb":
        return DataDir(directory, None, made)
    lock = DataDirLock(directory)
    try:
        lock.acquire()
    except BaseException:
        DataDir(directory, None, made).undo()  # a directory that holds a lock file stays
        raise
    return DataDir(directory, lock, made)


def check_port_free(host: str, port: int, what: str, flag: str) -> None:
    """Refuse a port another process listens on, before anything is created (bound again later by Faust)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT is no clash
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CommandError(
                    f"{what} port in use", f"{host}:{port}", second_worker_hint(flag),
                    code=EXIT_UNAVAILABLE,
                ) from None  # fmt: skip
            raise CommandError(f"cannot bind the {what} port", f"{host}:{port}", exc.strerror) from None


class RepeatLimiter(logging.Filter):
    """Lets a library message through once per ``every`` seconds, counting what it held back in between.

    While Kafka is unreachable aiokafka logs the same few errors about 40 times a second, forever; an operator
    needs to see that it happens and that it goes on, not 140,000 lines an hour. Messages are told apart by
    their logger and format string, so each distinct problem still shows at once.
    """

    def __init__(self, every: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self._clock = clock
        self._shown: dict[tuple[str, str], tuple[float, int]] = {}  # (logger, format) -> (shown at, held back)

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = self._clock()
        shown = self._shown.get(key)
        if shown is not None and now - shown[0] < self.every:
            self._shown[key] = (shown[0], shown[1] + 1)
            return False
        if shown is not None and shown[1]:
            record.msg = f"{record.msg} (and {shown[1]} more like it in the last {now - shown[0]:.0f} s)"
        if len(self._shown) >= _REPEATS_REMEMBERED:
            self._shown.clear()
        self._shown[key] = (now, 0)
        return True


#: Faust's warning when a fetch during a rebalance seeks partitions aiokafka has already revoked. That seek is
#: superfluous: recovery seeks every newly assigned partition before the flow resumes, and the delivery check
#: (``CompatConsumer``) would catch a position it left wrong.
STALE_SEEK: Final = "exception performing seek when flow not active IllegalStateError"


#: aiokafka's two errors when a stopping member's LeaveGroup gets no answer (a Ctrl-C while the group forms):
#: the first only repeats the second, which :class:`ToldByTheWorker` says in the worker's words.
LEAVE_SEND_FAILED: Final = "Error sending LeaveGroupRequest"
LEAVE_FAILED: Final = "LeaveGroup request failed: "
LEAVE_FAILED_SAID: Final = (
    "leaving the group: the broker did not confirm it (%s); the other members take over this worker's "
    "partitions after its session timeout instead of at once. Nothing is lost: what it did not commit is "
    "delivered again"
)


class ToldByTheWorker(logging.Filter):
    """Holds back library records that would only mislead: a failure the worker reports in its own line
    (Faust's crash on a changelog that ends before the local store, ``ConsistencyError``, told as the cluster
    having lost the worker's topics, exit status 3, whose traceback would come before that line), Faust's
    warning on every rebalance about a seek of revoked partitions (:data:`STALE_SEEK`), and aiokafka's two
    timestamped errors for a best-effort leave the broker did not answer, said once as a warning instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and type(exc).__name__ == "ConsistencyError":
            return False
        message = record.getMessage()
        if record.name.startswith("aiokafka.") and record.levelno == logging.ERROR:
            if message.startswith(LEAVE_SEND_FAILED):
                return False
            if message.startswith(LEAVE_FAILED):
                record.msg, record.args = LEAVE_FAILED_SAID, (message[len(LEAVE_FAILED) :],)
                record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
                return True
        # mode's service loggers put the service's label before the message: "[^--ShortWaitConsumer]: ..."
        return not (record.levelno == logging.WARNING and STALE_SEEK in message)


_REPEATS_REMEMBERED = 1000  # distinct library messages remembered before the limiter starts over
_LIBRARIES = ("faust", "mode", "aiokafka", "kafka")


def library_logging(log_level: str) -> dict[str, Any]:
    """A Faust ``logging_config`` (merged into Faust's own): library loggers at warning and above, each repeated
    message at most every 30 s (:class:`RepeatLimiter`); at ``--log-level debug`` everything, unlimited."""
    if log_level == "debug":
        return {"version": 1, "merge": True, "loggers": {name: {"level": "DEBUG"} for name in _LIBRARIES}}
    return {
        "version": 1,
        "merge": True,
        "filters": {"repeats": {"()": RepeatLimiter}, "told": {"()": ToldByTheWorker}},
        # Faust's own handler and format (mode.utils.logging), with the limiter: a logger's filters would not
        # see its children's records (aiokafka.conn, ...), a handler's see all that reach it.
        "handlers": {
            "library": {"class": "colorlog.StreamHandler", "formatter": "colored", "filters": ["told", "repeats"]}
        },
        "loggers": {name: {"level": "WARNING", "handlers": ["library"], "propagate": False} for name in _LIBRARIES},
    }


#: A group that reassigns its partitions this often within the window is not settling (a rolling restart of
#: dynamic members costs two rebalances per worker, spread over minutes).
UNSETTLED_REASSIGNMENTS: Final = 6
UNSETTLED_WINDOW: Final = 60.0
#: Once warned, the next warning waits this long: the line names the cause, the counter keeps the tally.
UNSETTLED_QUIET: Final = 600.0


class Reassignments:
    """Tells when the consumer group keeps reassigning partitions, a member leaving and joining without end: the
    worker still runs, but stops every few seconds. The caller passes the (monotonic) clock."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()
        self._quiet_until = float("-inf")

    def unsettled(self, now: float) -> int | None:
        """Records a reassignment at ``now``; the count in the window when that deserves a warning, else None."""
        self._times.append(now)
        while self._times[0] <= now - UNSETTLED_WINDOW:
            self._times.popleft()
        if len(self._times) < UNSETTLED_REASSIGNMENTS or now < self._quiet_until:
            return None
        self._quiet_until = now + UNSETTLED_QUIET
        return len(self._times)


#: Tansu 0.6.0 holds each join and sync of a static member 3 s, and a group keeps the session of the member that
#: formed it: with the embedded broker's 3 s session the static member is evicted before it ever syncs.
STATIC_ON_EMBEDDED: Final = (
    "every worker of the group needs --group-instance-id, or none does (or set LOOPWATCH_EMBEDDED=false on the "
    "others): the embedded broker holds a static member's joins 3 s, longer than the short sessions"
)


def unsettled_line(group: str, count: int, *, embedded_broker: bool) -> str:
    """The warning for a group that does not settle, with the cause this broker makes likely."""
    cause = (
        f"on the embedded broker, {STATIC_ON_EMBEDDED}"
        if embedded_broker
        else "a member keeps leaving and joining: look for a worker that restarts in a loop, or one that stays "
        "silent longer than its session timeout"
    )
    return f"group {group} reassigned its partitions {count} times in {UNSETTLED_WINDOW:.0f} s: {cause}"


def announce_ready(
    app: Any,
    settings: WorkerSettings,
    data_dir: Path,
    *,
    rebalanced: Callable[[], None],
    embedded_broker: bool,
    out: IO[str] = sys.stderr,
    clock: Callable[[], float] = time.monotonic,
) -> Callable[[], Awaitable[None]]:
    """The ``on_ready`` of :meth:`LoopwatchWorker.run`: one ``ready`` line, then a line per later reassignment,
    and a warning when they come so often that the group is not settling. ``rebalanced`` counts each one."""
    state = {"ready": False}
    store = f"rocksdb in {data_dir}" if settings.store == "rocksdb" else "memory"
    metrics = f"http://{settings.metrics_host}:{settings.metrics_port}/metrics" if settings.metrics_port else "off"
    reassignments = Reassignments()

    def assigned() -> str:
        mine = [tp for tp in app.assignor.assigned_actives() if tp.topic == settings.events_topic]
        return f"{len(mine)} of {settings.partitions} partitions of {settings.events_topic}"

    def say(line: str) -> None:
        with contextlib.suppress(OSError):
            print(line, file=out, flush=True)

    async def on_ready() -> None:
        state["ready"] = True
        say(f"loopwatch worker: ready: group {settings.group}, {assigned()}, store {store}, metrics {metrics}")

    async def on_rebalance_complete(sender: Any = None, **kwargs: Any) -> None:
        rebalanced()
        count = reassignments.unsettled(clock())
        if count is not None:
            say("loopwatch worker: warning: " + unsettled_line(settings.group, count, embedded_broker=embedded_broker))
        if state["ready"]:
            say(f"loopwatch worker: partitions reassigned: {assigned()}")

    app.on_rebalance_complete.connect(on_rebalance_complete, weak=False)
    return on_ready


def prepare_topics(settings: WorkerSettings, topics: dict[str, int], configs: dict[str, dict[str, str]]) -> None:
    """Check existing topics, then create the missing ones; raises :class:`CommandError` if the worker must stop.

    Checked first, so that a mismatch creates nothing: the events topic and the changelog must both have
    ``--partitions`` partitions (co-partitioning). Output topics with another count only get a warning, and so
    does an existing changelog whose configs differ from ``configs`` (``LoopwatchWorker.topic_configs``), which
    missing topics are created with.
    """
    import asyncio

    from streams.kafka.admin import create_topics
    from streams.kafka.client import broker_count, describe_topic_configs, partition_counts

    existing = asyncio.run(partition_counts(settings.bootstrap, security=settings.security))
    streamed = [name for name in (settings.events_topic, settings.storm_signals_topic) if name in existing]
    changelogs = [name for name in (settings.changelog_topic, settings.storm_changelog_topic) if name in existing]
    try:
        described = asyncio.run(
            describe_topic_configs(settings.bootstrap, streamed + changelogs, security=settings.security)
        )
    except Exception:  # a broker without DescribeConfigs, or an answer aiokafka cannot read: checked by nobody
        described = {}
    for name in streamed:
        check_not_compacted(name, _policy(described.get(name)))
    for name in changelogs:
        check_changelog(name, described.get(name), configs.get(name, {}))
    strict = {
        settings.events_topic,
        settings.changelog_topic,
        settings.storm_signals_topic,
        settings.storm_changelog_topic,
    }
    for name, want in topics.items():
        have = existing.get(name)
        if have is None or have == want:
            continue
        if name in strict:
            raise CommandError(
                f"topic has {have} partitions, {want} required",
                name,
                "the events topic and the run table's changelog must be co-partitioned; use a matching "
                "--partitions or recreate the topics",
            )
        if want == 1:  # Faust's leader topic: a broker that creates unknown topics made it with its default
            raise CommandError(
                f"topic has {have} partitions, {want} required",
                name,
                "Faust's leader election needs one partition; delete the topic (the worker creates it again), or "
                "restart the embedded broker",
            )
        warn("worker", f"topic {name!r} has {have} partitions, not {want}")
    missing = {name: n for name, n in topics.items() if name not in existing}
    if missing:
        wanted = {name: config for name, config in configs.items() if name in missing}
        brokers = asyncio.run(broker_count(settings.bootstrap, security=settings.security))
        replication = replication_for(brokers, settings.replication_factor)
        if replication < DEFAULT_REPLICATION and settings.replication_factor is None and not settings.embedded:
            warn("worker", f"creating {', '.join(sorted(missing))} with {replication} replicas: the cluster lists "
                           f"{brokers} brokers up (--replication-factor sets it)")  # fmt: skip
        create_topics(settings.bootstrap, missing, replication=replication, configs=wanted, security=settings.security)


def check_not_compacted(topic: str, policy: str | None) -> None:
    """Refuse an input topic that Kafka compacts; warn when the broker would not say (``policy`` None).

    The worker reads every offset of its input topics in order (docs/delivery.md): compaction deletes events of a
    run before they are applied, and the holes it leaves look like skipped offsets, which the worker re-reads
    without end."""
    if policy is None:
        warn("worker", f"could not read the cleanup.policy of topic {topic!r}; it must not be compact")
    elif "compact" in _flags(policy):
        raise CommandError(
            f"topic is compacted (cleanup.policy={policy})",
            topic,
            "the worker must read every offset of its input topics; set cleanup.policy=delete or use another topic",
        )


def check_changelog(topic: str, have: dict[str, str] | None, want: dict[str, str]) -> None:
    """Warn of a changelog whose configs are not the ones the worker creates it with (made by hand, or by a
    worker from before it set them). A run changelog that is deleted, not compacted, loses the states of runs
    quiet for longer than its retention; a storm changelog that is compacted but not deleted keeps every
    expired window for ever. Nothing is said where the broker would not describe the topic, nor of a config it
    does not list (Tansu lists only what was set)."""
    policy = _policy(have)
    if have is None or policy is None:
        return
    differ: dict[str, str] = {}
    if _flags(policy) != _flags(want.get("cleanup.policy", "delete")):
        differ["cleanup.policy"] = policy
    differ.update(
        {key: have[key] for key, value in want.items() if key != "cleanup.policy" and have.get(key, value) != value}
    )
    if differ:
        found = ", ".join(f"{key}={value}" for key, value in differ.items())
        fix = " and ".join(f"{key}={_config_value(want.get(key, 'delete'))}" for key in differ)
        warn("worker", f"changelog {topic!r} has {found}, not the worker's configs: set {fix} (the deploy topic "
                       "scripts do)")  # fmt: skip


def _policy(config: dict[str, str] | None) -> str | None:
    """A described topic's ``cleanup.policy``: Kafka's default ``delete`` where the broker lists none (Tansu lists
    only what was set), None where it would not describe the topic."""
    return None if config is None else config.get("cleanup.policy") or "delete"


def _flags(policy: str) -> set[str]:
    """The flags of a ``cleanup.policy`` (``"compact, delete"``: compact and delete)."""
    return {part.strip() for part in policy.split(",") if part.strip()}


def _config_value(value: str) -> str:
    """A config value as ``kafka-configs --add-config`` takes it: a list in brackets."""
    return f"[{value}]" if "," in value else value


def discard_stale_state(settings: WorkerSettings, tabledir: Path, changelogs: dict[str, str]) -> list[StaleStore]:
    """Remove the RocksDB table partitions that are ahead of their changelogs (:mod:`streams.worker.local_state`).

    Runs after the topics exist and before Faust opens a database; returns what it removed.
    """
    import asyncio

    from streams.kafka.compat import end_offsets
    from streams.worker.local_state import discard_stale, persisted_offsets, stale_stores

    if settings.store != "rocksdb":
        return []
    persisted = {table: persisted_offsets(tabledir, table) for table in changelogs}
    wanted = [(changelogs[table], partition) for table, stores in persisted.items() for partition in stores]
    if not wanted:
        return []
    ends = asyncio.run(end_offsets(settings.bootstrap, wanted, **settings.security.aiokafka_kwargs()))
    stale = stale_stores(persisted, changelogs, {(tp.topic, tp.partition): end for tp, end in ends.items()})
    discard_stale(stale)
    return stale


def lost_topics(expected: Mapping[str, int], present: Mapping[str, int]) -> list[str]:
    """The worker's topics (``{name: partitions}`` as made at start) that the cluster no longer has, or has
    with another partition count: recreated by a broker that lost them (Tansu creates unknown topics with 4)."""
    return sorted(name for name, partitions in expected.items() if present.get(name) != partitions)
