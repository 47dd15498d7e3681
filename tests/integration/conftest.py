"""Integration fixtures: one embedded broker (Tansu) per test session, stopped by pid whatever happens.

``broker`` gives its bootstrap address (``127.0.0.1:PORT``); ``embedded_broker`` the
:class:`streams.devbroker.tansu.EmbeddedBroker` itself. Tests must create their topics explicitly (the broker
auto-creates unknown topics with 4 partitions) and use their own topic names: the broker is shared.
Processes started through :mod:`tests.support.procs` are stopped at session end too, and ``atexit`` covers an
interpreter exit that skips fixture teardown.
"""

from __future__ import annotations

import atexit
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # tests/integration has no __init__.py: make `tests.support` importable
    sys.path.insert(0, str(REPO_ROOT))

from streams.devbroker import BrokerError, EmbeddedBroker  # noqa: E402
from tests.support import procs  # noqa: E402

_timings: list[tuple[str, float]] = []


@pytest.fixture(scope="session")
def embedded_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    log_path = tmp_path_factory.mktemp("broker") / "tansu.log"
    broker = EmbeddedBroker(log_path=log_path)
    atexit.register(broker.stop)
    try:
        broker.start()
    except BrokerError as exc:
        pytest.skip(f"embedded broker unavailable: {exc}")
    try:
        yield broker
    finally:
        procs.stop_all()
        broker.stop()


@pytest.fixture(scope="session")
def broker(embedded_broker: EmbeddedBroker) -> str:
    """Bootstrap address of the session's embedded broker."""
    return embedded_broker.bootstrap


@pytest.fixture(scope="session")
def timings() -> list[tuple[str, float]]:
    """Append ``(label, seconds)``; printed in the terminal summary (join, takeover and recovery times)."""
    return _timings


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _timings:
        terminalreporter.section("loopwatch integration timings")
        for label, seconds in _timings:
            terminalreporter.write_line(f"{label}: {seconds:.2f} s")
