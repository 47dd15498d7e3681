"""A stand-in for a defect of the detection core, which :func:`streams.runner.step` must quarantine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import streams.runner
from streams.detection.types import ToolEvent


def core_raises(
    monkeypatch: pytest.MonkeyPatch,
    when: Callable[[ToolEvent], bool],
    error: Callable[[ToolEvent], Exception],
) -> None:
    """Make the core raise ``error(tool_event)`` for the tool events ``when`` picks; the rest apply as usual."""
    core = streams.runner.apply

    def apply(state: Any, tool_event: ToolEvent, loop: Any) -> Any:
        if when(tool_event):
            raise error(tool_event)
        return core(state, tool_event, loop)

    monkeypatch.setattr(streams.runner, "apply", apply)
