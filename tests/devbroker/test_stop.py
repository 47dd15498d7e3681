"""Stopping the embedded broker: a kill while a stop waits for it ends the stop at once (the demo's second Ctrl-C)."""

from __future__ import annotations

import signal
import socket
import threading

import pytest

from streams.devbroker import EmbeddedBroker

pytestmark = pytest.mark.integration


def test_kill_while_stop_waits_for_a_connected_client() -> None:
    broker = EmbeddedBroker(stop_timeout=20.0).start()
    client = socket.create_connection((broker.host, broker.port or 0), timeout=5)  # Tansu's SIGTERM waits for it
    codes: list[int | None] = []
    stopping = threading.Thread(target=lambda: codes.append(broker.stop()))
    try:
        stopping.start()
        stopping.join(0.5)
        assert stopping.is_alive(), "the broker stopped at once although a client was connected"
        broker.kill()
        stopping.join(10)
        assert not stopping.is_alive()
        assert codes == [-signal.SIGKILL]
        assert not broker.is_running() and broker.pid is None
        broker.kill()  # after the stop: nothing to kill, no error
    finally:
        client.close()
        broker.stop()
        stopping.join(25)
