"""Every ``loopwatch worker`` flag, declared once: flag, environment variable, type, default and help.

The parser, the environment defaults, the ``--help`` text and the flag table in docs/operating.md are all built from
:data:`OPTIONS`, so they cannot drift. Defaults are the fields of :class:`WorkerSettings` (and
:class:`StormConfig`); the variable of ``--some-flag`` is ``LOOPWATCH_SOME_FLAG``. A flag beats its variable,
which beats the default; a variable that does not parse is an error of the worker only (other commands never
read them, but for ``tail``/``publish``'s LOOPWATCH_BOOTSTRAP, through :func:`setting`). The Kafka security flags
have their own table (streams/kafka/security.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from streams.integers import parse_integer, shown
from streams.kafka.client import parse_bootstrap
from streams.topics import MAX_PARTITIONS
from streams.worker.settings import (
    DEFAULT_REPLICATION,
    LINGER_ENOUGH,
    ROCKSDB_WRITE_BUFFERS,
    SettingsError,
    WorkerSettings,
)
from streams.worker.storm_rules import StormConfig

_TRUE: Final = ("1", "true", "yes", "on")
_FALSE: Final = ("0", "false", "no", "off")


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"not a boolean ({'/'.join(_TRUE)} or {'/'.join(_FALSE)})")


T = TypeVar("T")


def integer(text: str) -> int:
    return parse_integer(text)


def number(text: str) -> float:
    """A finite number: ``nan`` passed every range check and then failed the worker at each sweep, and ``inf``
    means nothing a worker setting can use (0 already turns expiry off)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError("not a number") from None
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


#: Python's names of log levels, taken for ours: flag and variable alike (both go through :meth:`Option.value`).
LOG_LEVEL_ALIASES: Final = {"warning": "warn", "critical": "crit", "fatal": "crit"}


def log_level(text: str) -> str:
    lowered = text.strip().lower()
    return LOG_LEVEL_ALIASES.get(lowered, lowered)


def bootstrap(text: str) -> str:
    """HOST:PORT[,HOST:PORT], by the pre-flight check's rule, so a typo is named with its flag or variable."""
    parse_bootstrap(text)
    return text


_TYPE_NAMES: Final[dict[Callable[[str], Any], str]] = {
    integer: "integer",
    number: "number",
    _bool: "boolean",
    str: "text",
    log_level: "choice",
    bootstrap: "HOST:PORT list",
}


@dataclass(frozen=True, slots=True)
class Option:
    flag: str
    field: str  # a WorkerSettings field, or "storms.<StormConfig field>"
    parse: Callable[[str], Any]
    help: str
    choices: tuple[str, ...] | None = None
    default_text: str | None = None  # when the default is computed (shown instead of the field default)
    aliases: tuple[str, ...] = ()  # other names ``parse`` takes for some of the choices

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env(self) -> str:
        return "LOOPWATCH_" + self.dest.upper()

    @property
    def type_name(self) -> str:
        return "choice" if self.choices else _TYPE_NAMES[self.parse]

    @property
    def default(self) -> Any:
        owner: Any = WorkerSettings
        name = self.field
        if name.startswith("storms."):
            owner, name = StormConfig, name.removeprefix("storms.")
        spec = next(f for f in dataclasses.fields(owner) if f.name == name)
        return spec.default

    def shown_default(self) -> str:
        if self.default_text is not None:
            return self.default_text
        value = self.default
        if value is None:
            return "none"
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, float) and value == int(value):
            return str(int(value))
        return str(value)

    @property
    def accepted(self) -> str:
        """The values of a choice as messages and help list them, its aliases too."""
        listed = ", ".join(self.choices or ())
        return f"{listed} (or {', '.join(self.aliases)})" if self.aliases else listed

    def value(self, raw: str) -> Any:
        """Parse a flag or variable value, the one rule of both; ``ValueError`` says why it is unusable."""
        value = self.parse(raw)
        if self.choices and value not in self.choices:
            raise ValueError(f"not one of {self.accepted}")
        return value


OPTIONS: Final[tuple[Option, ...]] = (
    Option("--bootstrap", "bootstrap", bootstrap, "Kafka bootstrap servers, HOST:PORT[,HOST:PORT]"),
    Option(
        "--kafka-wait",
        "kafka_wait",
        number,
        "seconds to wait at start for a broker where nothing listens yet (one started with the worker); any other "
        "Kafka problem stops the worker at once",
    ),
    Option("--config", "config_path", str, "OpenClaw config file (JSON5): tools.loopDetection, per-agent overrides"),
    Option("--group", "group", str, "consumer group and Faust app id; also names the changelog topics"),
    Option(
        "--group-instance-id",
        "group_instance_id",
        str,
        "static group membership: a stable id per worker (e.g. the StatefulSet pod name), so a restart within the "
        "session timeout moves no partitions; unset = dynamic membership",
    ),
    Option(
        "--partitions",
        "partitions",
        integer,
        f"partition count of every loopwatch topic and of the changelogs (at most {MAX_PARTITIONS})",
    ),
    Option(
        "--replication-factor",
        "replication_factor",
        integer,
        "replicas of each topic the worker creates (existing topics keep theirs)",
        default_text=f"{DEFAULT_REPLICATION}, or the cluster's brokers if fewer",
    ),
    Option("--store", "store", str, "run table storage; both are rebuilt from the changelog", ("rocksdb", "memory")),
    Option("--data-dir", "data_dir", str, "this worker's own directory (RocksDB files), created with its parents"),
    Option(
        "--state-ttl", "state_ttl", number, "seconds without events after which a run's state is dropped, 0 = never"
    ),
    Option("--metrics-port", "metrics_port", integer, "Prometheus /metrics port, 0 = no metrics server"),
    Option("--metrics-host", "metrics_host", str, "address the metrics server binds"),
    Option("--web-port", "web_port", integer, "port of Faust's web server on 127.0.0.1, 0 = no web server"),
    Option("--worker-id", "worker_id", str, "names this worker in the Kafka client id (loopwatch-ID)"),
    Option(
        "--embedded",
        "embedded",
        _bool,
        "short group sessions and fetch waits for the embedded broker (joins in seconds, not half a minute); "
        "never on real Kafka",
        default_text="on when the broker is loopwatch broker (unless --group-instance-id), else off",
    ),
    Option(
        "--log-level",
        "log_level",
        log_level,
        "log level; Faust's and the Kafka client's own messages show only at debug, or when warnings",
        ("debug", "info", "warn", "error", "crit"),
        aliases=tuple(LOG_LEVEL_ALIASES),
    ),
    Option("--events-topic", "events_topic", str, "input topic"),
    Option("--verdicts-topic", "verdicts_topic", str, "verdicts topic"),
    Option("--dead-letter-topic", "dead_letter_topic", str, "dead-letter topic (rejected records and why)"),
    Option("--fleet-alerts-topic", "fleet_alerts_topic", str, "fleet storm alerts topic"),
    Option("--storm-window", "storms.window_seconds", number, "fleet storms: window length, whole seconds"),
    Option(
        "--storm-runs",
        "storms.signature_runs",
        integer,
        "fleet storms: distinct runs with the same tool, detector and outcome in one window that raise an alert, "
        "0 = off",
    ),
    Option(
        "--storm-agent-runs",
        "storms.agent_runs",
        integer,
        "fleet storms: distinct runs of one agent with verdicts of one detector in one window that raise an alert, "
        "0 = off",
    ),
    Option(
        "--sweep-interval",
        "sweep_interval",
        number,
        "seconds between expiry sweeps and state-gauge refreshes",
        default_text="a tenth of the TTL, within 0.5-10; 30 with --state-ttl 0",
    ),
    Option("--max-batch", "max_batch", integer, "most events applied per batch (one state write per run)"),
    Option(
        "--batch-linger",
        "batch_linger",
        number,
        "under load, seconds the oldest waiting events may wait for more before their batch starts "
        f"(not once {LINGER_ENOUGH} wait)",
    ),
    Option(
        "--batch-budget",
        "batch_budget",
        number,
        "while fewer than a full batch wait, seconds of processing a batch aims at (measured per event), so an "
        "event's verdict waits for fewer others; a full batch's worth waiting is taken whole, 0 = always whole",
    ),
    Option(
        "--delivery",
        "delivery",
        str,
        "how events reach the processor: in bulk from the consumer's fetch loop, or one Faust event each "
        "(about 5 times the CPU per event; the earlier path, kept for comparison)",
        ("bulk", "stream"),
    ),
    Option(
        "--rocksdb-write-buffer-mb",
        "rocksdb_write_buffer_mb",
        number,
        f"RocksDB memtable size per table partition, MiB ({ROCKSDB_WRITE_BUFFERS} of them at most)",
    ),
    Option(
        "--rocksdb-block-cache-mb", "rocksdb_block_cache_mb", number, "RocksDB block cache per table partition, MiB"
    ),
    Option(
        "--state-cache-runs",
        "state_cache_runs",
        integer,
        "decoded run states kept in memory (about 6 KiB each), so a batch need not decode a run's stored state "
        "again; size it to the runs a worker touches (loopwatch_state_decodes_total counts the misses), 0 = none",
    ),
    Option(
        "--standby-replicas",
        "standby_replicas",
        integer,
        "copies of each table partition other workers keep warm from its changelog: a takeover finds the state "
        "ready, but every copy costs its worker CPU for each state write (0: a new owner restores from the changelog)",
    ),
    Option(
        "--dead-letter-original",
        "dead_letter_original",
        str,
        "keep a rejected record's bytes on the dead-letter topic (full), or only its sha256 (digest)",
        ("full", "digest"),
    ),
    Option(
        "--dead-letter-max-original",
        "dead_letter_max_original",
        integer,
        "most bytes of a rejected record kept on the dead-letter topic",
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per option; the value stays None unless given, so :func:`resolve` can fall back to the variable.
    A choice is checked by :meth:`Option.value`, not by argparse, so the flag takes what its variable takes."""
    for option in OPTIONS:
        also = f"; {', '.join(option.aliases)} also accepted" if option.aliases else ""
        text = f"{option.help} (env {option.env}; default {option.shown_default()}{also})"
        if option.parse is _bool:
            parser.add_argument(
                option.flag, dest=option.dest, action="store_const", const=True, default=None, help=text
            )
            continue
        parser.add_argument(
            option.flag,
            dest=option.dest,
            type=_argparse_type(option),
            default=None,
            metavar=option.dest.upper() if option.choices is None else "{" + ",".join(option.choices) + "}",
            help=text,
        )


def flag_value(parse: Callable[[str], T], text: str) -> T:
    """``parse(text)`` for argparse: its ``ValueError`` becomes the flag's one-line error ("'x' is not ...")."""
    try:
        return parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{shown(text)} is {exc}") from None


def _argparse_type(option: Option) -> Callable[[str], Any]:
    def convert(text: str) -> Any:
        return flag_value(option.value, text)

    convert.__name__ = option.type_name  # argparse names the type in some messages
    return convert


class VariableError(SettingsError):
    """A variable's value does not parse; ``what`` already names the variable and its value."""


def resolve(args: argparse.Namespace, env: Mapping[str, str]) -> dict[str, Any]:
    """``{field: value}`` for every option: the flag, else its variable, else the default."""
    return {option.field: setting(option, args, env) for option in OPTIONS}


def setting(option: Option, args: argparse.Namespace, env: Mapping[str, str]) -> Any:
    """One option's value: the flag, else its variable, else the default. Also for the other commands that take
    a worker flag and its variable (``tail``/``publish --bootstrap``), so they read and refuse it alike."""
    value = getattr(args, option.dest, None)
    if value is not None:
        return value
    raw = variable_value(option, args, env)
    if raw is None:
        return option.default
    try:
        return option.value(raw)
    except ValueError as exc:
        raise VariableError(f"{option.env}={shown(raw)} is {exc}", option.field) from None


def variable_value(option: Option, args: argparse.Namespace, env: Mapping[str, str]) -> str | None:
    """The text of the option's variable when the setting comes from it (no flag given, the variable not empty):
    an error about the value must then name the variable, which the user cannot see on the command line."""
    if getattr(args, option.dest, None) is not None:
        return None
    raw = env.get(option.env)
    return raw if raw else None


def option_of(field: str) -> Option | None:
    """The option that sets a :class:`WorkerSettings` field (``storms.<field>`` for a storm setting), if any."""
    return next((option for option in OPTIONS if option.field == field), None)


def markdown_table() -> str:
    """The table of worker flags in docs/operating.md (a test checks that the file has exactly this): the
    worker's own options, then the profile choice it shares with replay."""
    from streams.profile_choice import PROFILE_FLAGS

    lines = ["| flag | environment | type | default | what it sets |", "|---|---|---|---|---|"]
    for option in OPTIONS:
        kind = "/".join(option.choices) if option.choices else option.type_name
        kind += f" (or {'/'.join(option.aliases)})" if option.aliases else ""
        lines.append(f"| `{option.flag}` | `{option.env}` | {kind} | {option.shown_default()} | {option.help} |")
    lines += [f"| `{f.flag}` | `{f.env}` | {f.kind} | {f.default} | {f.help} |" for f in PROFILE_FLAGS]
    return "\n".join(lines)


if __name__ == "__main__":  # python -m streams.worker.options: print the docs/operating.md table
    print(markdown_table())
