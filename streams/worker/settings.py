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

from streams.kafka.security import PLAINTEXT, KafkaSecurity
from streams.topics import (
    DEAD_LETTER_TOPIC,
    EVENTS_TOPIC,
    FLEET_ALERTS_TOPIC,
    STORM_TABLE,
    VERDICTS_TOPIC,
    changelog_topic,
    storm_signals_topic,
)
from streams.worker.storm_rules import StormConfig

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"
DEFAULT_GROUP: Final = "loopwatch"
DEFAULT_PARTITIONS: Final = 12
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
    """A setting (flag or environment variable) has an unusable value."""


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How one worker process runs. ``embedded`` selects short group sessions for the embedded broker; None
    leaves it to ``loopwatch worker``, which asks the broker (:func:`streams.kafka.admin.is_embedded_broker`)."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    group: str = DEFAULT_GROUP
    config_path: str | None = None
    partitions: int = DEFAULT_PARTITIONS
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
        if self.partitions < 1:
            raise SettingsError(f"partitions must be at least 1, not {self.partitions}")
        if self.store not in ("rocksdb", "memory"):
            raise SettingsError(f"store must be rocksdb or memory, not {self.store!r}")
        if self.state_ttl < 0:
            raise SettingsError("state TTL must not be negative (0 disables expiry)")
        if not 0 <= self.batch_linger <= 1:
            raise SettingsError("batch linger must be between 0 and 1 second")
        if not 0 <= self.batch_budget <= 1:
            raise SettingsError("batch budget must be between 0 and 1 second")
        if self.delivery not in ("bulk", "stream"):
            raise SettingsError(f"delivery must be bulk or stream, not {self.delivery!r}")
        if not 1 <= self.max_batch <= 10_000:
            raise SettingsError("max batch must be between 1 and 10000")
        for name, port in (("metrics", self.metrics_port), ("web", self.web_port)):
            if not 0 <= port <= 65535:
                raise SettingsError(f"{name} port {port} out of range")
        if self.sweep_interval is not None and not self.sweep_interval > 0:
            raise SettingsError("sweep interval must be positive")
        if self.dead_letter_original not in ("full", "digest"):
            raise SettingsError(f"dead-letter original must be full or digest, not {self.dead_letter_original!r}")
        if self.dead_letter_max_original < 0:
            raise SettingsError("dead-letter max original bytes must not be negative")
        if not self.bootstrap.strip():
            raise SettingsError("bootstrap address is empty")
        if self.embedded and self.group_instance_id:
            # measured: Tansu 0.6.0 rebalances a group with static members every ~6 s, without end
            raise SettingsError("static membership (--group-instance-id) does not work with the embedded broker")
        if not 1 <= self.rocksdb_write_buffer_mb <= 1024:
            raise SettingsError("RocksDB write buffer must be between 1 and 1024 MiB")
        if not 1 <= self.rocksdb_block_cache_mb <= 65536:
            raise SettingsError("RocksDB block cache must be between 1 and 65536 MiB")
        if not 0 <= self.state_cache_runs <= 1_000_000:
            raise SettingsError("state cache must hold between 0 and 1000000 runs")
        if not 0 <= self.standby_replicas <= 8:
            raise SettingsError("standby replicas must be between 0 and 8")
        if not 0 <= self.kafka_wait <= 3600:
            raise SettingsError("Kafka wait must be between 0 and 3600 seconds")

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


def env_int(env: Mapping[str, str], name: str, fallback: int) -> int:
    raw = env_default(env, name, None)
    if raw is None:
        return fallback
    try:
        return int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer") from None


def environ() -> Mapping[str, str]:
    return os.environ
