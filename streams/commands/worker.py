"""``loopwatch worker``: run a detection worker (Faust) against a Kafka cluster or the embedded broker.

Every flag has a ``LOOPWATCH_*`` environment default. Topics are created (or checked) before the worker
joins the group: the events, verdicts and dead-letter topics and the run table's changelog all get the same
partition count, because the changelog must be co-partitioned with the events topic.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from streams.config_file import ConfigFileError, LoadedConfig, format_warning, load_openclaw_config
from streams.kafka_security import KafkaSecurity, KafkaSecurityError, add_security_arguments, security_from_args
from streams.profile_choice import add_profile_arguments, configure_profiles
from streams.storms import DEFAULT_AGENT_RUNS, DEFAULT_SIGNATURE_RUNS, DEFAULT_WINDOW_SECONDS, StormConfig
from streams.topics import DEAD_LETTER_TOPIC, EVENTS_TOPIC, FLEET_ALERTS_TOPIC, VERDICTS_TOPIC
from streams.worker.settings import (
    DEFAULT_BOOTSTRAP,
    DEFAULT_DATA_DIR,
    DEFAULT_GROUP,
    DEFAULT_METRICS_PORT,
    DEFAULT_PARTITIONS,
    DEFAULT_ROCKSDB_BLOCK_CACHE_MB,
    DEFAULT_ROCKSDB_WRITE_BUFFER_MB,
    DEFAULT_STATE_TTL,
    DEFAULT_WEB_PORT,
    ROCKSDB_WRITE_BUFFERS,
    SettingsError,
    WorkerSettings,
    env_bool,
    env_default,
    env_float,
    env_int,
    environ,
)

log = logging.getLogger("loopwatch.worker")


def register(subparsers: Any) -> None:
    env = environ()
    try:
        partitions = env_int(env, "LOOPWATCH_PARTITIONS", DEFAULT_PARTITIONS)
        metrics_port = env_int(env, "LOOPWATCH_METRICS_PORT", DEFAULT_METRICS_PORT)
        web_port = env_int(env, "LOOPWATCH_WEB_PORT", DEFAULT_WEB_PORT)
        ttl = env_float(env, "LOOPWATCH_STATE_TTL", DEFAULT_STATE_TTL)
        embedded = env_bool(env, "LOOPWATCH_EMBEDDED", False)
        dead_letter_max = env_int(env, "LOOPWATCH_DEAD_LETTER_MAX_ORIGINAL", 900_000)
    except SettingsError as exc:
        # Parsers are built for every command: a bad variable must not break ``loopwatch replay``.
        print(f"warning: {exc}; using the built-in default", file=sys.stderr)
        partitions, metrics_port, web_port, ttl, embedded, dead_letter_max = (
            DEFAULT_PARTITIONS,
            DEFAULT_METRICS_PORT,
            DEFAULT_WEB_PORT,
            DEFAULT_STATE_TTL,
            False,
            900_000,
        )
    try:
        storm_window = env_float(env, "LOOPWATCH_STORM_WINDOW", DEFAULT_WINDOW_SECONDS)
        storm_runs = env_int(env, "LOOPWATCH_STORM_RUNS", DEFAULT_SIGNATURE_RUNS)
        storm_agent_runs = env_int(env, "LOOPWATCH_STORM_AGENT_RUNS", DEFAULT_AGENT_RUNS)
    except SettingsError as exc:
        print(f"warning: {exc}; using the built-in storm defaults", file=sys.stderr)
        storm_window, storm_runs, storm_agent_runs = DEFAULT_WINDOW_SECONDS, DEFAULT_SIGNATURE_RUNS, DEFAULT_AGENT_RUNS
    try:
        rocksdb_write_buffer = env_float(env, "LOOPWATCH_ROCKSDB_WRITE_BUFFER_MB", DEFAULT_ROCKSDB_WRITE_BUFFER_MB)
        rocksdb_block_cache = env_float(env, "LOOPWATCH_ROCKSDB_BLOCK_CACHE_MB", DEFAULT_ROCKSDB_BLOCK_CACHE_MB)
    except SettingsError as exc:
        print(f"warning: {exc}; using the built-in RocksDB defaults", file=sys.stderr)
        rocksdb_write_buffer, rocksdb_block_cache = DEFAULT_ROCKSDB_WRITE_BUFFER_MB, DEFAULT_ROCKSDB_BLOCK_CACHE_MB
    p = subparsers.add_parser(
        "worker",
        help="run a streaming detection worker (Faust)",
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "--bootstrap",
        default=env_default(env, "LOOPWATCH_BOOTSTRAP", DEFAULT_BOOTSTRAP),
        help="Kafka bootstrap servers host:port[,host:port] (LOOPWATCH_BOOTSTRAP)",
    )
    p.add_argument(
        "--config",
        default=env_default(env, "LOOPWATCH_CONFIG", None),
        help="OpenClaw config file (JSON5): tools.loopDetection, per-agent overrides (LOOPWATCH_CONFIG)",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=metrics_port,
        help="Prometheus /metrics port, 0 to disable (LOOPWATCH_METRICS_PORT)",
    )
    p.add_argument(
        "--metrics-host",
        default=env_default(env, "LOOPWATCH_METRICS_HOST", "127.0.0.1"),
        help="address the metrics server binds (LOOPWATCH_METRICS_HOST)",
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=partitions,
        help="partition count of every loopwatch topic and of the changelog (LOOPWATCH_PARTITIONS)",
    )
    p.add_argument(
        "--store",
        choices=("rocksdb", "memory"),
        default=env_default(env, "LOOPWATCH_STORE", "rocksdb"),
        help="run table storage; both are rebuilt from the changelog topic (LOOPWATCH_STORE)",
    )
    p.add_argument(
        "--data-dir",
        default=env_default(env, "LOOPWATCH_DATA_DIR", DEFAULT_DATA_DIR),
        help="directory of the RocksDB files, one per worker (LOOPWATCH_DATA_DIR)",
    )
    p.add_argument(
        "--state-ttl",
        type=float,
        default=ttl,
        help="seconds of inactivity after which a run's state is dropped, 0 = never (LOOPWATCH_STATE_TTL)",
    )
    p.add_argument(
        "--group",
        default=env_default(env, "LOOPWATCH_GROUP", DEFAULT_GROUP),
        help="consumer group and Faust app id (LOOPWATCH_GROUP)",
    )
    p.add_argument(
        "--web-port",
        type=int,
        default=web_port,
        help="Faust's web server port on 127.0.0.1 (LOOPWATCH_WEB_PORT)",
    )
    p.add_argument(
        "--embedded",
        action="store_true",
        default=embedded,
        help="short group sessions for the embedded test broker; never on real Kafka (LOOPWATCH_EMBEDDED)",
    )
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warn", "error", "crit"),
        default=_log_level(env_default(env, "LOOPWATCH_LOG_LEVEL", "info")),
        help="log level (LOOPWATCH_LOG_LEVEL)",
    )
    p.add_argument(
        "--events-topic",
        default=env_default(env, "LOOPWATCH_EVENTS_TOPIC", EVENTS_TOPIC),
        help="input topic (LOOPWATCH_EVENTS_TOPIC)",
    )
    p.add_argument(
        "--verdicts-topic",
        default=env_default(env, "LOOPWATCH_VERDICTS_TOPIC", VERDICTS_TOPIC),
        help="verdicts topic (LOOPWATCH_VERDICTS_TOPIC)",
    )
    p.add_argument(
        "--dead-letter-topic",
        default=env_default(env, "LOOPWATCH_DEAD_LETTER_TOPIC", DEAD_LETTER_TOPIC),
        help="dead-letter topic (LOOPWATCH_DEAD_LETTER_TOPIC)",
    )
    p.add_argument(
        "--fleet-alerts-topic",
        default=env_default(env, "LOOPWATCH_FLEET_ALERTS_TOPIC", FLEET_ALERTS_TOPIC),
        help="fleet storm alerts topic (LOOPWATCH_FLEET_ALERTS_TOPIC)",
    )
    p.add_argument(
        "--storm-window",
        type=float,
        default=storm_window,
        help="fleet storms: tumbling window length in whole seconds (LOOPWATCH_STORM_WINDOW)",
    )
    p.add_argument(
        "--storm-runs",
        type=int,
        default=storm_runs,
        help="fleet storms: distinct runs with the same (tool, detector, outcome hash) in one window that raise "
        "an alert, 0 = off (LOOPWATCH_STORM_RUNS)",
    )
    p.add_argument(
        "--storm-agent-runs",
        type=int,
        default=storm_agent_runs,
        help="fleet storms: distinct runs of one agent with verdicts of one detector in one window that raise an "
        "alert, 0 = off (LOOPWATCH_STORM_AGENT_RUNS)",
    )
    p.add_argument(
        "--sweep-interval",
        type=float,
        default=None,
        help="seconds between TTL sweeps and state-gauge refreshes (default: TTL/10, within 0.5-10 s)",
    )
    p.add_argument("--max-batch", type=int, default=500, help="most events applied per batch (one state write per run)")
    p.add_argument(
        "--batch-linger",
        type=float,
        default=0.01,
        help="under load, seconds to let a batch fill before processing it (bigger batches, less CPU)",
    )
    p.add_argument(
        "--rocksdb-write-buffer-mb",
        type=float,
        default=rocksdb_write_buffer,
        help=f"RocksDB memtable size per table partition, MiB ({ROCKSDB_WRITE_BUFFERS} of them at most; "
        "LOOPWATCH_ROCKSDB_WRITE_BUFFER_MB)",
    )
    p.add_argument(
        "--rocksdb-block-cache-mb",
        type=float,
        default=rocksdb_block_cache,
        help="RocksDB block cache per table partition, MiB (LOOPWATCH_ROCKSDB_BLOCK_CACHE_MB)",
    )
    p.add_argument(
        "--group-instance-id",
        default=env_default(env, "LOOPWATCH_GROUP_INSTANCE_ID", None),
        help="static group membership: a stable id per worker (e.g. the StatefulSet pod name), so a restart "
        "within the session timeout moves no partitions; unset = dynamic membership (LOOPWATCH_GROUP_INSTANCE_ID)",
    )
    p.add_argument(
        "--dead-letter-original",
        choices=("full", "digest"),
        default=env_default(env, "LOOPWATCH_DEAD_LETTER_ORIGINAL", "full"),
        help="keep rejected records' bytes on the dead-letter topic, or only their sha256 "
        "(LOOPWATCH_DEAD_LETTER_ORIGINAL)",
    )
    p.add_argument(
        "--dead-letter-max-original",
        type=int,
        default=dead_letter_max,
        help="most bytes of a rejected record kept on the dead-letter topic (LOOPWATCH_DEAD_LETTER_MAX_ORIGINAL)",
    )
    add_security_arguments(p)
    add_profile_arguments(p)
    p.set_defaults(func=run)


def _log_level(value: str | None) -> str:
    text = (value or "info").strip().lower()
    return {"warning": "warn", "critical": "crit", "fatal": "crit"}.get(text, text)


def settings_from_args(args: argparse.Namespace) -> WorkerSettings:
    return WorkerSettings(
        bootstrap=args.bootstrap,
        group=args.group,
        config_path=args.config,
        partitions=args.partitions,
        store=args.store,
        data_dir=args.data_dir,
        state_ttl=args.state_ttl,
        metrics_port=args.metrics_port,
        metrics_host=args.metrics_host,
        web_port=args.web_port,
        embedded=args.embedded,
        max_batch=args.max_batch,
        batch_linger=args.batch_linger,
        sweep_interval=args.sweep_interval,
        log_level=args.log_level,
        worker_id=env_default(environ(), "LOOPWATCH_WORKER_ID", None),
        group_instance_id=args.group_instance_id or None,
        events_topic=args.events_topic,
        verdicts_topic=args.verdicts_topic,
        dead_letter_topic=args.dead_letter_topic,
        fleet_alerts_topic=args.fleet_alerts_topic,
        storms=storm_config_from_args(args),
        dead_letter_original=args.dead_letter_original,
        dead_letter_max_original=args.dead_letter_max_original,
        rocksdb_write_buffer_mb=args.rocksdb_write_buffer_mb,
        rocksdb_block_cache_mb=args.rocksdb_block_cache_mb,
        security=kafka_security_from_args(args),
    )


def storm_config_from_args(args: argparse.Namespace) -> StormConfig:
    try:
        return StormConfig(
            window_seconds=args.storm_window, signature_runs=args.storm_runs, agent_runs=args.storm_agent_runs
        )
    except ValueError as exc:
        raise SettingsError(str(exc)) from None


def prepare_topics(settings: WorkerSettings, topics: dict[str, int]) -> str | None:
    """Check existing topics, then create the missing ones; returns a problem that must stop the worker.

    Checked first, so that a mismatch creates nothing: the events topic and the changelog must both have
    ``--partitions`` partitions (co-partitioning). Output topics with another count only get a warning.
    """
    import asyncio

    from streams.broker import create_topics
    from streams.kafka_io import partition_counts

    existing = asyncio.run(partition_counts(settings.bootstrap, security=settings.security))
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
        if name in strict or want == 1:
            return (
                f"topic {name!r} has {have} partitions, {want} required (the events topic and the run table's "
                "changelog must be co-partitioned); use a matching --partitions or recreate the topics"
            )
        print(f"loopwatch worker: warning: topic {name!r} has {have} partitions, not {want}", file=sys.stderr)
    missing = {name: n for name, n in topics.items() if name not in existing}
    if missing:
        create_topics(settings.bootstrap, missing, security=settings.security)
    return None


def run(args: argparse.Namespace) -> int:
    # Imported here: Faust is heavy and other commands do not need it.
    from streams.broker import TopicMismatchError
    from streams.metrics import WorkerMetrics
    from streams.worker.app import LoopwatchWorker

    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        print(f"loopwatch worker: {exc}", file=sys.stderr)
        return 2
    try:
        config = load_openclaw_config(settings.config_path) if settings.config_path else LoadedConfig.default()
        profile_warnings = configure_profiles(config, args.profiles, args.default_profile)
    except ConfigFileError as exc:
        print(f"loopwatch worker: {exc}", file=sys.stderr)
        return 2
    for warning in config.warnings:
        print(f"loopwatch worker: {format_warning(warning)}", file=sys.stderr)
    for line in profile_warnings:
        print(f"loopwatch worker: {line}", file=sys.stderr)
    metrics = WorkerMetrics()
    worker = LoopwatchWorker(settings, config, metrics)
    try:
        problem = prepare_topics(settings, worker.required_topics())
    except TopicMismatchError as exc:
        print(f"loopwatch worker: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        from streams.kafka_io import describe_failure

        message = describe_failure(exc, settings.bootstrap, settings.security)
        print(f"loopwatch worker: cannot create topics on {settings.bootstrap}: {message}", file=sys.stderr)
        return 1
    if problem:
        print(f"loopwatch worker: {problem}", file=sys.stderr)
        return 2
    if settings.metrics_port:
        try:
            metrics.serve(settings.metrics_port, settings.metrics_host)
        except OSError as exc:
            print(f"loopwatch worker: metrics port {settings.metrics_port}: {exc.strerror}", file=sys.stderr)
            return 1
    print(
        f"loopwatch worker: group {settings.group}, {settings.partitions} partitions, "
        f"store {settings.store}, "
        f"storms {_storms_summary(settings.storms)}, "
        f"config {settings.config_path or '(defaults)'} hash {config.config_hash}, "
        f"metrics {settings.metrics_host}:{settings.metrics_port or '-'}, "
        f"kafka {settings.security.describe()}",
        file=sys.stderr,
        flush=True,
    )
    return worker.run()


def _storms_summary(storms: StormConfig) -> str:
    if not storms.enabled:
        return "off"
    return f"{storms.signature_runs}/{storms.agent_runs} runs per {storms.window_seconds:.0f}s"


def kafka_security_from_args(args: argparse.Namespace) -> KafkaSecurity:
    """TLS/SASL settings (flags > LOOPWATCH_KAFKA_* > --kafka-config file); errors become SettingsError."""
    try:
        return security_from_args(args)
    except KafkaSecurityError as exc:
        raise SettingsError(str(exc)) from None
