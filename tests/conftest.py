"""How the suite runs in two processes (``make test``: pytest-xdist, ``-n 2 --dist loadgroup``).

Every test marked ``integration`` (a real broker, real workers, real servers) runs in one process, one after
another, as they would alone: their timing bounds were set on a machine that ran nothing beside them but their
own processes. The quick tests share the other process, so they finish while the integration tests run.

Hypothesis checks properties, not speed: its per-example deadline would fail a test that a busy core slowed
down, so it is off (``deadline=None``).
"""

from __future__ import annotations

import pytest
from hypothesis import settings

settings.register_profile("loopwatch", deadline=None)
settings.load_profile("loopwatch")

SERIAL_GROUP = "integration"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
