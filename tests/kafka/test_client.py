"""The connection check every command makes before a Kafka client starts (streams.kafka.client.preflight)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from streams.errors import EXIT_UNAVAILABLE, CommandError
from streams.kafka.client import preflight
from streams.kafka.security import KafkaSecurity
from tests.support.procs import free_port


def test_nothing_listening_is_tried_again_for_the_wait_then_one_error() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(CommandError) as caught:
        preflight(bootstrap, KafkaSecurity(), wait=1.0, waiting=said.append)
    assert 0.5 <= time.monotonic() - started < 5
    assert caught.value.code == EXIT_UNAVAILABLE and caught.value.where == bootstrap
    assert caught.value.text().startswith(f"cannot connect to Kafka ({bootstrap}): nothing listens there")
    assert said == [f"nothing listens at {bootstrap} yet; waiting up to 1 s for Kafka"]


def test_without_a_wait_nothing_listening_fails_at_once_and_says_nothing_else() -> None:
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(CommandError):
        preflight(f"127.0.0.1:{free_port()}", KafkaSecurity(), waiting=said.append)
    assert time.monotonic() - started < 1 and said == []


def test_a_listener_that_is_not_kafka_is_not_waited_for() -> None:
    """Only a refused connection is worth waiting for: a wrong listener stays wrong."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def close_every_connection() -> None:
            for _ in range(5):  # bounded: the check connects once
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                conn.close()

        threading.Thread(target=close_every_connection, daemon=True).start()
        said: list[str] = []
        started = time.monotonic()
        with pytest.raises(CommandError) as caught:
            preflight(f"127.0.0.1:{port}", KafkaSecurity(), wait=30.0, waiting=said.append)
        assert time.monotonic() - started < 5 and said == []
        assert caught.value.what == "the broker closed the connection without a Kafka answer"


def test_a_sasl_refusal_names_what_the_listener_offers() -> None:
    import struct

    from streams.kafka.client import _sasl_refusal

    def answer(error: int, *offered: str) -> bytes:
        return struct.pack(">hi", error, len(offered)) + b"".join(
            struct.pack(">h", len(name)) + name.encode() for name in offered
        )

    assert _sasl_refusal(answer(0, "PLAIN"), "PLAIN") is None
    assert _sasl_refusal(answer(33, "PLAIN", "SCRAM-SHA-512"), "SCRAM-SHA-256") == (
        "the listener does not offer SASL mechanism SCRAM-SHA-256",
        "it offers PLAIN, SCRAM-SHA-512; set --sasl-mechanism (LOOPWATCH_KAFKA_SASL_MECHANISM) to one of them",
    )
    no_sasl = "the listener does not offer SASL mechanism PLAIN"
    for refused in (answer(34), answer(33, "PLAIN")):  # Kafka's listener without SASL, the embedded broker
        refusal = _sasl_refusal(refused, "PLAIN")
        assert refusal is not None and refusal[0] == no_sasl
