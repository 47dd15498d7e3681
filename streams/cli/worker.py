"""``loopwatch worker``: run a detection worker (Faust) against a Kafka cluster or the embedded broker.

Every flag has a ``LOOPWATCH_*`` variable (streams/worker/options.py, one table for both). Before anything is
created the worker checks that it can really start (streams/worker/startup.py); then topics are created (or
checked): the events, verdicts and dead-letter topics and the run table's changelog all get the same partition
count, because the changelog must be co-partitioned with the events topic.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Mapping
from typing import Any

from streams.cli._config import load_config, note_detection_off
from streams.cli._signals import sigterm_raises
from streams.errors import EXIT_UNAVAILABLE, CommandError
from streams.kafka.security import KafkaSecurity, KafkaSecurityError, add_security_arguments, security_from_args
from streams.profile_choice import add_profile_arguments
from streams.worker import options
from streams.worker.settings import SettingsError, WorkerSettings, environ
from streams.worker.storm_rules import StormConfig

DESCRIPTION = (
    "Run a streaming detection worker: read events from Kafka, keep each run's state in a table backed by a "
    "changelog topic, and publish verdicts, dead letters and fleet storm alerts. It creates its data directory "
    "and the loopwatch topics, and prints one line when it is ready. Every flag can also be set by the "
    "environment variable named in its help."
)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("worker", help="run a streaming detection worker (Faust)", description=DESCRIPTION)
    options.add_arguments(p)
    add_security_arguments(p)
    add_profile_arguments(p)
    p.set_defaults(func=run)


_HELP = "see 'loopwatch worker --help'"


def settings_from_args(args: argparse.Namespace) -> WorkerSettings:
    """The settings of flags, then ``LOOPWATCH_*`` variables, then defaults; ``SettingsError`` when unusable."""
    values = options.resolve(args, environ())
    storm_values = {k.removeprefix("storms."): values.pop(k) for k in list(values) if k.startswith("storms.")}
    try:
        storms = StormConfig(**storm_values)
    except ValueError as exc:
        raise SettingsError(str(exc), *_storm_fields_at_fault(storm_values)) from None
    return WorkerSettings(**values, storms=storms, security=kafka_security_from_args(args))


def _storm_fields_at_fault(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The storm settings refused on their own: StormConfig's message does not say which flag to fix."""
    fault = []
    for name, value in values.items():
        try:
            StormConfig(**{name: value})
        except ValueError:
            fault.append(f"storms.{name}")
    return tuple(fault)


def settings_failure(exc: SettingsError, args: argparse.Namespace, env: Mapping[str, str]) -> CommandError:
    """The one-line error of unusable settings: ``<what> (<flags>): <hint>``.

    A value that came from a ``LOOPWATCH_*`` variable is not on the command line, so the line shows the variable
    and its value too (``LOOPWATCH_PARTITIONS='0' must be a positive integer (--partitions)``, as ``publish``
    says it); with several settings at fault each is ``--flag via LOOPWATCH_FLAG``.
    """
    what = exc.what
    names: list[str] = []
    for field in exc.fields:
        option = options.option_of(field)
        if option is None:
            names.append(field)
            continue
        raw = None if isinstance(exc, options.VariableError) else options.variable_value(option, args, env)
        if raw is None:
            names.append(option.flag)
        elif len(exc.fields) == 1:
            what = f"{option.env}={raw!r} {what}"
            names.append(option.flag)
        else:
            names.append(f"{option.flag} via {option.env}")
    return CommandError(what, ", ".join(names) or None, exc.hint or _HELP)


class _Terminated(BaseException):
    """SIGTERM while the worker starts, before Faust handles the signal itself (it may wait up to --kafka-wait
    seconds for a broker). A BaseException, so that no start-up step's ``except Exception`` takes it for a
    failure of that step."""


def run(args: argparse.Namespace) -> int:
    """Start the worker; SIGTERM at any point stops it with the same line and status as a running worker's."""
    try:
        with sigterm_raises(_Terminated):
            return _run(args)
    except _Terminated:
        print("loopwatch worker: stopped (exit status 0)", file=sys.stderr, flush=True)
        return 0


def _run(args: argparse.Namespace) -> int:
    from streams.kafka.admin import is_embedded_broker
    from streams.kafka.client import kafka_failure, preflight
    from streams.worker.startup import (
        STATIC_ON_EMBEDDED,
        announce_ready,
        check_port_free,
        discard_stale_state,
        library_logging,
        prepare_data_dir,
        prepare_topics,
    )

    try:
        settings = settings_from_args(args)
    except SettingsError as exc:
        raise settings_failure(exc, args, environ()) from None
    config = load_config(settings.config_path, args, "worker")
    made = prepare_data_dir(settings)
    data_dir = made.path
    settings = dataclasses.replace(settings, data_dir=str(data_dir))
    try:  # a start that fails before the worker runs leaves no directory or lock file it made
        check_port_free(settings.web_host, settings.web_port, "web", "--web-port")
        check_port_free(settings.metrics_host, settings.metrics_port, "metrics", "--metrics-port")
        preflight(
            settings.bootstrap,
            settings.security,
            wait=settings.kafka_wait,
            waiting=lambda line: print(f"loopwatch worker: {line}", file=sys.stderr, flush=True),
        )
        embedded_broker = bool(settings.embedded)
        if settings.embedded is None:  # not set: on when the broker is the embedded one, unless membership is static
            try:
                embedded_broker = asyncio.run(is_embedded_broker(settings.bootstrap, settings.security))
            except Exception as exc:
                raise kafka_failure(
                    exc, "cannot read the cluster's metadata", settings.bootstrap, settings.security
                ) from None
            settings = dataclasses.replace(settings, embedded=embedded_broker and not settings.group_instance_id)
        # Imported only now: Faust takes seconds to import, and every check above should fail fast.
        from streams.worker.app import LoopwatchWorker
        from streams.worker.local_state import describe as describe_stale
        from streams.worker.metrics import WorkerMetrics

        metrics = WorkerMetrics()
        worker = LoopwatchWorker(settings, config, metrics)
        if settings.metrics_port:
            try:
                metrics.serve(settings.metrics_port, settings.metrics_host)
            except OSError as exc:
                where = f"{settings.metrics_host}:{settings.metrics_port}"
                raise CommandError("cannot serve metrics", where, exc.strerror, code=EXIT_UNAVAILABLE) from None
        try:
            prepare_topics(settings, worker.required_topics(), worker.topic_configs())
        except CommandError:
            raise
        except Exception as exc:
            raise kafka_failure(exc, "cannot create topics", settings.bootstrap, settings.security) from None
        try:
            stale = discard_stale_state(settings, *worker.local_tables())
        except Exception as exc:
            raise kafka_failure(
                exc, "cannot read the changelogs' end offsets", settings.bootstrap, settings.security
            ) from None
        print(
            f"loopwatch worker: starting: group {settings.group}, {settings.partitions} partitions, "
            f"store {settings.store}, data dir {data_dir}, "
            f"storms {_storms_summary(settings.storms)}, "
            f"config {settings.config_path or '(defaults)'} hash {config.config_hash[:12]}, "
            f"kafka {settings.security.describe()}"
            + (" (the embedded broker: short sessions)" if settings.embedded else ""),
            file=sys.stderr,
            flush=True,
        )
        note_detection_off(config, "worker", "--config (LOOPWATCH_CONFIG)")
        if stale:
            print(
                f"loopwatch worker: note: discarded the local state of table partitions ahead of their changelogs "
                f"({describe_stale(stale)}): the data directory was written against another broker or changelog "
                "(the embedded broker forgets everything when it restarts); they are rebuilt from the changelogs",
                file=sys.stderr,
                flush=True,
            )
        worker.app.conf.logging_config = library_logging(settings.log_level)
        if embedded_broker and settings.group_instance_id:
            print(
                f"loopwatch worker: note: static membership on the embedded broker keeps Faust's 60 s session; "
                f"in group {settings.group} {STATIC_ON_EMBEDDED}",
                file=sys.stderr,
                flush=True,
            )
        on_ready = announce_ready(
            worker.app, settings, data_dir, rebalanced=metrics.rebalances.inc, embedded_broker=embedded_broker
        )
    except BaseException:
        made.undo()
        raise
    try:
        code = worker.run(on_ready)
    finally:
        if made.lock is not None:
            made.lock.release()
    print(f"loopwatch worker: stopped (exit status {code})", file=sys.stderr, flush=True)
    return code


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
