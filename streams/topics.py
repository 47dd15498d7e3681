"""Every topic and table name loopwatch uses, and the one rule that names a table's changelog.

The worker, the audits (``replay --with-state`` reads the run table's changelog) and the deployment manifests
must agree on these names, so they are written here once.
"""

from __future__ import annotations

from typing import Final

EVENTS_TOPIC: Final = "loopwatch.events"
VERDICTS_TOPIC: Final = "loopwatch.verdicts"
DEAD_LETTER_TOPIC: Final = "loopwatch.dead-letter"
FLEET_ALERTS_TOPIC: Final = "loopwatch.fleet-alerts"

#: The worker's run table (state per scope key) and its windowed storm table.
RUN_TABLE: Final = "runs"
STORM_TABLE: Final = "storms"


def changelog_topic(group: str, table: str = RUN_TABLE) -> str:
    """The changelog of ``table`` in the worker of consumer group ``group``, named as Faust names it
    (``<app id>-<table>-changelog``; the worker's app id is its group)."""
    return f"{group}-{table}-changelog"


def storm_signals_topic(group: str) -> str:
    """Verdicts re-keyed by storm key, so each key's windows live in one partition."""
    return f"{group}-storm-signals"


__all__ = [
    "DEAD_LETTER_TOPIC",
    "EVENTS_TOPIC",
    "FLEET_ALERTS_TOPIC",
    "RUN_TABLE",
    "STORM_TABLE",
    "VERDICTS_TOPIC",
    "changelog_topic",
    "storm_signals_topic",
]
