"""Every topic and table name loopwatch uses, and the one rule that names a table's changelog.

The worker, the audits (``replay --with-state`` reads the run table's changelog) and the deployment manifests
must agree on these names, so they are written here once. So is the rule every topic name must follow
(:func:`topic_name_problem`): each command checks a name it is given with it before anything is created, instead
of learning from the broker (or not at all: the embedded broker accepts names Kafka refuses).
"""

from __future__ import annotations

import string
from typing import Final

EVENTS_TOPIC: Final = "loopwatch.events"
VERDICTS_TOPIC: Final = "loopwatch.verdicts"
DEAD_LETTER_TOPIC: Final = "loopwatch.dead-letter"
FLEET_ALERTS_TOPIC: Final = "loopwatch.fleet-alerts"

#: The worker's run table (state per scope key) and its windowed storm table.
RUN_TABLE: Final = "runs"
STORM_TABLE: Final = "storms"


#: How long the run table's changelog keeps every version of a run (7 days, Kafka's default retention and the
#: events topic's): ``replay --with-state`` over any retained range then starts each run from the worker's state.
_AUDIT_HISTORY_MS: Final = 7 * 24 * 3600 * 1000
#: Dead letters keep the original bytes for forensics, longer than the events they came with.
_DEAD_LETTER_RETENTION_MS: Final = 30 * 24 * 3600 * 1000


def topic_configs(*, run_changelog: str, dead_letter: str) -> dict[str, dict[str, str]]:
    """What loopwatch adds to the configs Faust gives its changelogs (compacted; the storms' windows also
    deleted once expired: ``streams.kafka.compat.changelog_configs``): the run table's changelog keeps every
    version for audits, dead letters are kept a month. Every other topic keeps the broker's defaults (the events
    and the storm signals must not be compacted: the worker reads every offset of them)."""
    return {
        run_changelog: {"min.compaction.lag.ms": str(_AUDIT_HISTORY_MS)},
        dead_letter: {"retention.ms": str(_DEAD_LETTER_RETENTION_MS)},
    }


#: Kafka's own limit (its ``Topic.validate``): longer names, other characters, "." and ".." are refused.
TOPIC_NAME_MAX: Final = 249
TOPIC_NAME_RULE: Final = "a Kafka topic name is 1-249 letters, digits, '.', '_' or '-', and not '.' or '..'"
_TOPIC_CHARACTERS: Final = frozenset(string.ascii_letters + string.digits + "._-")


#: The most partitions a loopwatch topic may be given: far beyond any fleet (one worker per partition at most),
#: and low enough that a typo (``--partitions 120000``) is refused instead of creating topics that slow every
#: client of the broker down.
MAX_PARTITIONS: Final = 10_000


def partition_count_problem(count: int) -> str | None:
    """Why ``count`` cannot be a loopwatch topic's partition count; None when it can. The one rule for the
    worker's ``--partitions``, ``publish --partitions`` and ``broker --topic NAME:PARTITIONS``."""
    if count < 1:
        return "must be a positive integer"
    if count > MAX_PARTITIONS:
        return f"must be at most {MAX_PARTITIONS}"
    return None


def topic_name_problem(name: str) -> str | None:
    """Why Kafka would refuse ``name`` as a topic name, in a few words; None when it is a valid name.

    The one check of every topic name loopwatch is given (worker flags, ``broker --topic``, the argparse type
    of streams/cli/_args.py), so that all of them refuse the same names with the same words.
    """
    if not name:
        return "a topic name cannot be empty"
    if len(name) > TOPIC_NAME_MAX:
        return f"a topic name has at most {TOPIC_NAME_MAX} characters, not {len(name)}"
    if name in (".", ".."):
        return f"{name!r} cannot be a topic name"
    bad = sorted(set(name) - _TOPIC_CHARACTERS)
    if bad:
        return f"{name!r} has characters a topic name cannot have ({', '.join(map(repr, bad))})"
    return None


def changelog_topic(group: str, table: str = RUN_TABLE) -> str:
    """The changelog of ``table`` in the worker of consumer group ``group``, named as Faust names it
    (``<app id>-<table>-changelog``; the worker's app id is its group)."""
    return f"{group}-{table}-changelog"


def storm_signals_topic(group: str) -> str:
    """Verdicts re-keyed by storm key, so each key's windows live in one partition."""
    return f"{group}-storm-signals"


def leader_topic(group: str) -> str:
    """Faust's leader-election topic of the worker of ``group`` (``<app id>-__assignor-__leader``)."""
    return f"{group}-__assignor-__leader"


__all__ = [
    "DEAD_LETTER_TOPIC",
    "EVENTS_TOPIC",
    "FLEET_ALERTS_TOPIC",
    "MAX_PARTITIONS",
    "RUN_TABLE",
    "STORM_TABLE",
    "TOPIC_NAME_MAX",
    "TOPIC_NAME_RULE",
    "VERDICTS_TOPIC",
    "changelog_topic",
    "leader_topic",
    "partition_count_problem",
    "storm_signals_topic",
    "topic_configs",
    "topic_name_problem",
]
