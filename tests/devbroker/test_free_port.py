"""``free_port`` hands out listen ports that no outgoing connection can take while a child starts."""

from __future__ import annotations

import socket

import pytest

from streams.devbroker import free_port, tansu
from streams.devbroker.tansu import _ephemeral_floor


def test_ports_lie_below_the_ephemeral_range_and_are_never_repeated() -> None:
    floor = _ephemeral_floor()
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= port < floor for port in ports)


def test_ports_in_use_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    # A range of ten ports, nine of them held by listeners this test binds itself: the tenth comes back.
    base = free_port()
    while base + 10 >= _ephemeral_floor():  # pragma: no cover - room for the range below the floor
        base = free_port()
    held: list[socket.socket] = []
    free_one = None
    try:
        for port in range(base, base + 10):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                sock.close()
                continue
            if free_one is None and port != base:
                free_one = port
                sock.close()
                continue
            sock.listen()
            held.append(sock)
        assert free_one is not None
        monkeypatch.setattr(tansu, "_LISTEN_PORTS_FLOOR", base)
        monkeypatch.setattr(tansu, "_ephemeral_floor", lambda: base + 10)
        monkeypatch.setattr(tansu, "_handed_out", set())
        assert free_port() == free_one
    finally:
        for sock in held:
            sock.close()
