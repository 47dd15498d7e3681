"""Running the real ``loopwatch`` executable as a user does, for the command-line tests (tests/cli/)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

LOOPWATCH = str(Path(sys.executable).parent / "loopwatch")
READY_TIMEOUT = 60.0
CONFIG = "{ tools: { loopDetection: { enabled: true } } }\n"  # an OpenClaw config with loop detection on


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str
    seconds: float

    @property
    def first_error(self) -> str:
        return self.err.splitlines()[0] if self.err else ""


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment without any LOOPWATCH_* setting: the defaults are what is tested."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_") and k != "PYTHONPATH"}
    env.update(extra or {})
    return env


def lw(
    cwd: Path, *args: str, env: Mapping[str, str] | None = None, timeout: float = 60.0, stdin: str | None = None
) -> Result:
    """Run ``loopwatch ARGS`` in ``cwd``; ``stdin``, when given, is its input (``loopwatch publish -``)."""
    started = time.monotonic()
    done = subprocess.run(
        [LOOPWATCH, *args],
        cwd=cwd,
        env=clean_env(env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    result = Result(done.returncode, done.stdout, done.stderr, time.monotonic() - started)
    assert "Traceback" not in result.out + result.err, result.err
    return result


def repeated_reads(run: str, count: int) -> list[dict[str, object]]:
    """``count`` reads of one file by run ``run``, stamped now: a loop the detectors flag."""
    now = int(time.time() * 1000)
    return [
        {
            "type": "tool_call", "event_id": f"{run}-e{i}", "gateway_id": "gw-cli", "agent_id": "main",
            "session_id": f"{run}-s", "run_id": run, "ts": now + i, "tool": "read", "call_id": f"{run}-c{i}",
            "args": {"path": "/repo/same.txt"}, "result": "the same text",
        }
        for i in range(count)
    ]  # fmt: skip
