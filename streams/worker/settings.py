"""Worker settings: one frozen value built from the command line, with environment-variable defaults.

Everything a deployment varies is a flag with a ``LOOPWATCH_*`` environment default (the table of
streams/worker/options.py), so containers and the Kubernetes StatefulSet configure workers without a custom
entry point (see deploy/README.md). The field defaults here are the flags' defaults.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from streams.integers import parse_integer, shown
from streams.kafka.security import PLAINTEXT, KafkaSecurity
from streams.topics import (
    DEAD_LETTER_TOPIC,
    EVENTS_TOPIC,
    FLEET_ALERTS_TOPIC,
    STORM_TABLE,
    TOPIC_NAME_RULE,
    VERDICTS_TOPIC,
    changelog_topic,
    leader_topic,
    partition_count_problem,
    storm_signals_topic,
    topic_name_problem,
)
from streams.worker.storm_rules import StormConfig

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
DEFAULT_GROUP: Final = "loopwatch"
DEFAULT_PARTITIONS: Final = 12
#: Replicas of each topic the worker creates on a cluster of that many brokers or more (the deploy scripts' 3).
DEFAULT_REPLICATION: Final = 3
MAX_REPLICATION: Final = 32
DEFAULT_METRICS_PORT: Final = 9464
DEFAULT_WEB_PORT: Final = 6066
DEFAULT_STATE_TTL: Final = 24 * 3600.0
DEFAULT_DATA_DIR: Final = ".state/worker"
# Faust opens one RocksDB per table partition with a 64 MiB write buffer (up to 3) and a 2 GiB block cache.
# Every batch rewrites its runs' states and every expiry writes a tombstone, so such memtables fill with
# superseded versions and the worker's memory grew by hundreds of MB for a few MB of live state (bench/soak).
DEFAULT_ROCKSDB_WRITE_BUFFER_MB: Final = 4.0
DEFAULT_ROCKSDB_BLOCK_CACHE_MB: Final = 8.0
ROCKSDB_WRITE_BUFFERS: Final = 2
# Decoded run states kept in memory, about 6 KiB each for the simulated mix (the stored bytes are 1-2 KiB): a
# batch touching a run whose state is held skips decoding the table's bytes (about 20 us). One worker draining the
# benchmark's 500-gateway backlog (17,000 runs) decoded 0.04 states per event with 1,024 and 0.005 with 4,096:
# under a microsecond per event, not worth 18 MiB more by default (loopwatch_state_decodes_total shows the rate).
DEFAULT_STATE_CACHE_RUNS: Final = 1024
# Events that make a batch worth starting without lingering: its per-batch work (about 1 ms: table reads,
# produce calls, the hand-over) is then about a tenth of it, and waiting for more only delays these events.
LINGER_ENOUGH: Final = 100

StoreKind = Literal["rocksdb", "memory"]
Delivery = Literal["bulk", "stream"]


class SettingsError(ValueError):
    """A setting (flag or environment variable) has an unusable value.

    ``what`` says what is wrong without naming the setting, and ``fields`` are the :class:`WorkerSettings`
    fields at fault (``storms.<field>`` for a storm setting), so that ``loopwatch worker`` can name the flags or
    variables they came from (streams/cli/worker.py); ``hint`` replaces its "see --help" when there is more to say.
    """

    def __init__(self, what: str, *fields: str, hint: str | None = None) -> None:
        super().__init__(f"{what} ({', '.join(fields)})" if fields else what)
        self.what = what
        self.fields = fields
        self.hint = hint


_WILDCARD_HOSTS: Final = frozenset({"", "0.0.0.0", "::"})
_DISTINCT_TOPICS_HINT: Final = (
    "give each of the worker's topics its own name; a worker that writes to a topic it reads feeds its own output "
    "back into itself"
)


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How one worker process runs. ``embedded`` selects short group sessions for the embedded broker; None
    leaves it to ``loopwatch worker``, which asks the broker (:func:`streams.kafka.admin.is_embedded_broker`)."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    group: str = DEFAULT_GROUP
    config_path: str | None = None
    partitions: int = DEFAULT_PARTITIONS
    replication_factor: int | None = None  # of the topics it creates; None: replication_for(the cluster's brokers)
    store: StoreKind = "rocksdb"
    data_dir: str = DEFAULT_DATA_DIR
    state_ttl: float = DEFAULT_STATE_TTL
    metrics_port: int = DEFAULT_METRICS_PORT
    metrics_host: str = "127.0.0.1"
    web_port: int = DEFAULT_WEB_PORT
    web_host: str = "127.0.0.1"
    embedded: bool | None = None
    max_batch: int = 500
    batch_linger: float = 0.01
    batch_budget: float = 0.008  # seconds of processing a batch below a full one aims at (see _batch_limit)
    delivery: Delivery = "bulk"  # how the events topic's records reach the processor (streams.worker.app)
    sweep_interval: float | None = None
    log_level: str = "info"
    worker_id: str | None = None
    group_instance_id: str | None = None  # static membership (KIP-345)
    events_topic: str = EVENTS_TOPIC
    verdicts_topic: str = VERDICTS_TOPIC
    dead_letter_topic: str = DEAD_LETTER_TOPIC
    fleet_alerts_topic: str = FLEET_ALERTS_TOPIC
    storms: StormConfig = field(default_factory=StormConfig)
    dead_letter_original: Literal["full", "digest"] = "full"
    dead_letter_max_original: int = 900_000
    rocksdb_write_buffer_mb: float = DEFAULT_ROCKSDB_WRITE_BUFFER_MB
    rocksdb_block_cache_mb: float = DEFAULT_ROCKSDB_BLOCK_CACHE_MB
    state_cache_runs: int = DEFAULT_STATE_CACHE_RUNS
    standby_replicas: int = 1  # Faust's default; the trade-off is in the --standby-replicas help (options.py)
    security: KafkaSecurity = PLAINTEXT  # TLS/SASL for every client (streams.kafka.security)
    kafka_wait: float = 30.0  # seconds to wait for a broker that does not listen yet (a broker starting with it)

    def __post_init__(self) -> None:
        """Every rule a setting must follow, checked here once, whoever builds the settings (the CLI, tests)."""
        problem = partition_count_problem(self.partitions)
        if problem is not None:
            raise SettingsError(problem, "partitions")
        if self.replication_factor is not None and not 1 <= self.replication_factor <= MAX_REPLICATION:
            raise SettingsError(f"must be between 1 and {MAX_REPLICATION}", "replication_factor")
        if self.store not in ("rocksdb", "memory"):
            raise SettingsError(f"must be rocksdb or memory, not {self.store!r}", "store")
        if self.state_ttl < 0:
            raise SettingsError("must be 0 or more (0 disables expiry)", "state_ttl")
        if not 0 <= self.batch_linger <= 1:
            raise SettingsError("must be between 0 and 1 second", "batch_linger")
        if not 0 <= self.batch_budget <= 1:
            raise SettingsError("must be between 0 and 1 second", "batch_budget")
        if self.delivery not in ("bulk", "stream"):
            raise SettingsError(f"must be bulk or stream, not {self.delivery!r}", "delivery")
        if not 1 <= self.max_batch <= 10_000:
            raise SettingsError("must be between 1 and 10000", "max_batch")
        for name in ("metrics_port", "web_port"):
            if not 0 <= getattr(self, name) <= 65535:
                raise SettingsError("must be a port number from 0 to 65535", name)
        if self.sweep_interval is not None and not self.sweep_interval > 0:
            raise SettingsError("must be a positive number", "sweep_interval")
        if self.dead_letter_original not in ("full", "digest"):
            raise SettingsError(f"must be full or digest, not {self.dead_letter_original!r}", "dead_letter_original")
        if self.dead_letter_max_original < 0:
            raise SettingsError("must be 0 or more", "dead_letter_max_original")
        if not self.bootstrap.strip():
            raise SettingsError("must name at least one HOST:PORT", "bootstrap")
        if self.embedded and self.group_instance_id:
            # Tansu 0.6.0 holds a static member's joins 3 s, past a 3 s session: the group rebalances without end
            raise SettingsError(
                "static membership does not work with the embedded broker", "group_instance_id", "embedded"
            )
        if not 1 <= self.rocksdb_write_buffer_mb <= 1024:
            raise SettingsError("must be between 1 and 1024 MiB", "rocksdb_write_buffer_mb")
        if not 1 <= self.rocksdb_block_cache_mb <= 65536:
            raise SettingsError("must be between 1 and 65536 MiB", "rocksdb_block_cache_mb")
        if not 0 <= self.state_cache_runs <= 1_000_000:
            raise SettingsError("must be between 0 and 1000000 runs", "state_cache_runs")
        if not 0 <= self.standby_replicas <= 8:
            raise SettingsError("must be between 0 and 8", "standby_replicas")
        if not 0 <= self.kafka_wait <= 3600:
            raise SettingsError("must be between 0 and 3600 seconds", "kafka_wait")
        if self.metrics_port and not self.metrics_host.strip():  # the port check binds '' as every interface
            raise SettingsError(
                "must not be empty",
                "metrics_host",
                hint="the address the metrics server binds: 127.0.0.1 (the default), or 0.0.0.0 for every interface",
            )
        self._check_ports_apart()
        self._check_topics()

    def _check_ports_apart(self) -> None:
        """Both servers on one port: the second bind failed with a traceback once the worker was half up."""
        port = self.web_port
        if port == 0 or port != self.metrics_port:  # 0 is no server at all, not a port
            return
        hosts = {self.web_host.strip().lower(), self.metrics_host.strip().lower()}
        hosts = {"127.0.0.1" if host == "localhost" else host for host in hosts}
        if len(hosts) == 1 or hosts & _WILDCARD_HOSTS:
            raise SettingsError(
                f"the web server and the metrics server cannot both listen on port {port}",
                "web_port",
                "metrics_port",
                hint="give them different ports (0 turns either server off)",
            )

    def worker_topics(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Every topic this worker reads or writes: ``{what it is: (name, the fields that name it)}``."""
        group = ("group",)
        return {
            "events topic": (self.events_topic, ("events_topic",)),
            "verdicts topic": (self.verdicts_topic, ("verdicts_topic",)),
            "dead-letter topic": (self.dead_letter_topic, ("dead_letter_topic",)),
            "fleet alerts topic": (self.fleet_alerts_topic, ("fleet_alerts_topic",)),
            "storm signals topic": (self.storm_signals_topic, group),
            "run table's changelog": (self.changelog_topic, group),
            "storm table's changelog": (self.storm_changelog_topic, group),
            "leader-election topic": (leader_topic(self.group), group),
        }

    def _check_topics(self) -> None:
        """Valid Kafka names, and no two alike: a dead-letter topic equal to the events topic dead-lettered each
        dead letter again, hundreds of records a second from one bad one."""
        if not self.group:
            raise SettingsError(
                "must not be empty",
                "group",
                hint="it is the consumer group and the Faust app id, and names the worker's changelog topics",
            )
        topics = self.worker_topics()
        for what, (name, fields) in topics.items():
            problem = topic_name_problem(name)
            if problem is None:
                continue
            if fields == ("group",):
                problem = f"cannot name the worker's {what}: {problem}"
            raise SettingsError(problem, *fields, hint=TOPIC_NAME_RULE)
        seen: dict[str, tuple[str, tuple[str, ...]]] = {}
        for what, (name, fields) in topics.items():
            if name in seen:
                first, first_fields = seen[name]
                raise SettingsError(
                    f"the {first} and the {what} are both {name!r}",
                    *dict.fromkeys(first_fields + fields),
                    hint=_DISTINCT_TOPICS_HINT,
                )
            seen[name] = (what, fields)

    @property
    def changelog_topic(self) -> str:
        """The run table's changelog."""
        return changelog_topic(self.group)

    @property
    def storm_changelog_topic(self) -> str:
        return changelog_topic(self.group, STORM_TABLE)

    def table_options(self) -> dict[str, int]:
        """RocksDB options of every table partition: a bounded memtable and cache (ignored by the memory store)."""
        mib = 1024 * 1024
        return {
            "write_buffer_size": int(self.rocksdb_write_buffer_mb * mib),
            "max_write_buffer_number": ROCKSDB_WRITE_BUFFERS,
            "block_cache_size": int(self.rocksdb_block_cache_mb * mib),
        }

    @property
    def storm_signals_topic(self) -> str:
        return storm_signals_topic(self.group)

    @property
    def effective_sweep_interval(self) -> float:
        """How often idle runs are expired and the state gauges refreshed: a tenth of the TTL, 0.5-10 s."""
        if self.sweep_interval is not None:
            return self.sweep_interval
        if self.state_ttl <= 0:
            return 30.0
        return min(10.0, max(0.5, self.state_ttl / 10.0))


def env_default(env: Mapping[str, str], name: str, fallback: str | None) -> str | None:
    value = env.get(name)
    return value if value not in (None, "") else fallback


def replication_for(brokers: int, setting: int | None) -> int:
    """Replicas of a topic the worker creates: the setting, else :data:`DEFAULT_REPLICATION` or the cluster's
    brokers if fewer (1 on the embedded broker). Faust's own default is 1, which a production cluster would keep
    for good: a topic made before the topic scripts ran was never replicated."""
    return setting if setting is not None else max(1, min(DEFAULT_REPLICATION, brokers))


def env_int(env: Mapping[str, str], name: str, fallback: int) -> int:
    raw = env_default(env, name, None)
    if raw is None:
        return fallback
    try:
        return parse_integer(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}={shown(raw)} is {exc}") from None


def environ() -> Mapping[str, str]:
    return os.environ
