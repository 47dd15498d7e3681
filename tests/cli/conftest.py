"""The command-line tests start where a new operator starts: in an empty directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    directory = tmp_path / "empty"
    directory.mkdir()
    return directory
