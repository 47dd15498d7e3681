"""Fixtures for the OpenClaw bridge plugin tests: Node on PATH and the plugin's npm dependencies."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PLUGIN_DIR = Path(__file__).resolve().parents[2] / "deploy" / "openclaw-plugin"


@pytest.fixture(scope="session")
def node() -> str:
    """The ``node`` binary; the plugin's kafkajs is installed (``scripts/ensure-deps.sh``, idempotent)."""
    binary = shutil.which("node")
    if binary is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    done = subprocess.run([str(PLUGIN_DIR / "scripts" / "ensure-deps.sh")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"ensure-deps.sh failed:\n{done.stdout}\n{done.stderr}"
    return binary
