"""The command-line tests start where a new operator starts: in an empty directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams.devbroker import EmbeddedBroker


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    directory = tmp_path / "empty"
    directory.mkdir()
    return directory


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A real embedded broker for the tests of one module (127.0.0.1, a free port), stopped after them."""
    embedded = EmbeddedBroker(log_path=tmp_path_factory.mktemp("cli-broker") / "tansu.log")
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()
