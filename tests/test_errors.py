"""The one error model: the line format, Kafka failures without doubled class names, replay's config hint."""

from __future__ import annotations

import argparse
import errno
from pathlib import Path

import pytest

from streams.cli.replay import config_hash_hint
from streams.errors import EXIT_UNAVAILABLE, EXIT_USAGE, CommandError, file_reason
from streams.kafka.client import kafka_failure
from streams.kafka.security import PLAINTEXT
from streams.worker import options
from streams.worker.settings import SettingsError


class KafkaConnectionError(Exception):
    """Named like aiokafka's: its message repeats the class name."""


def test_line_format() -> None:
    error = CommandError("cannot connect to Kafka", "127.0.0.1:9092", "start a broker", code=EXIT_UNAVAILABLE)
    assert error.line("tail") == "loopwatch tail: cannot connect to Kafka (127.0.0.1:9092): start a broker"
    assert CommandError("bad").line("config check") == "loopwatch config check: bad"


def test_kafka_failures_name_the_class_once() -> None:
    exc = KafkaConnectionError("KafkaConnectionError: Unable to bootstrap from [('127.0.0.1', 1)]")
    error = kafka_failure(exc, "cannot follow the topics", "127.0.0.1:1", PLAINTEXT)
    assert error.line("tail") == (
        "loopwatch tail: cannot follow the topics (127.0.0.1:1): KafkaConnectionError: Unable to bootstrap from "
        "[('127.0.0.1', 1)]"
    )
    assert error.code == EXIT_UNAVAILABLE
    timeout = kafka_failure(TimeoutError(), "cannot publish to t", "b:1", PLAINTEXT)
    assert timeout.text() == "cannot publish to t (b:1): no answer in time; the broker may be overloaded or unreachable"


def test_worker_options_resolve_flag_then_variable_then_default() -> None:
    args = argparse.Namespace(**{o.dest: None for o in options.OPTIONS})
    args.partitions = 3
    values = options.resolve(args, {"LOOPWATCH_PARTITIONS": "6", "LOOPWATCH_MAX_BATCH": "50"})
    assert (values["partitions"], values["max_batch"], values["batch_linger"]) == (3, 50, 0.01)
    assert options.resolve(args, {"LOOPWATCH_EMBEDDED": "yes"})["embedded"] is True
    with pytest.raises(SettingsError, match=r"LOOPWATCH_STORE='redis' is not one of rocksdb, memory"):
        options.resolve(args, {"LOOPWATCH_STORE": "redis"})
    with pytest.raises(SettingsError, match=r"LOOPWATCH_SWEEP_INTERVAL='soon' is not a number"):
        options.resolve(args, {"LOOPWATCH_SWEEP_INTERVAL": "soon"})


def test_compare_hint_names_other_config_hashes() -> None:
    recorded = [{"config_hash": "a" * 64}, {"config_hash": "a" * 64}, {"config_hash": "b" * 64}]
    hint = config_hash_hint(recorded, "b" * 64)
    assert hint == (
        "loopwatch replay: note: 2 of 3 recorded verdicts were decided with another config (config_hash "
        "aaaaaaaaaaaa (2)) than this replay (bbbbbbbbbbbb): pass the worker's config file with --config"
    )
    assert config_hash_hint(recorded[2:], "b" * 64) is None
    assert CommandError("x").code == EXIT_USAGE


def test_file_reason_says_what_to_do_about_permissions(tmp_path: Path) -> None:
    """Permission errors cannot be made as root (the tests may run as root), so the reason is checked alone."""
    denied = PermissionError(errno.EACCES, "Permission denied")
    (tmp_path / "there.html").write_text("", encoding="utf-8")
    assert file_reason(denied, tmp_path / "new.html", writing=True) == (
        f"Permission denied; the directory {tmp_path} must be writable"
    )
    assert file_reason(denied, tmp_path / "there.html", writing=True) == "Permission denied; the file must be writable"
    assert file_reason(denied, tmp_path / "there.html") == "Permission denied; the file must be readable"
    full = OSError(errno.ENOSPC, "No space left on device")
    assert (
        file_reason(full, tmp_path / "x")
        == "No space left on device; free space there, or give a path on another device"
    )
    # Any other failure to write says what to do too (whatif --html /dev/full said only the system's words).
    assert file_reason(OSError(errno.EIO, "Input/output error"), tmp_path / "x", writing=True) == (
        "Input/output error; give another path"
    )
