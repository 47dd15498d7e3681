"""A benchmark stopped with SIGTERM stops the broker and workers it started (by pid), not only itself.

Its default action ends a process without running ``finally`` blocks, so a killed ``bench/worker_bench.py``
once left a worker running against its vanished broker, spending CPU through every later measurement.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.procs import REPO_ROOT, python_env, wait_until

pytestmark = pytest.mark.integration


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _worker_ready(output: Path) -> bool:
    """Whether a worker of the benchmark printed its ready line (in the log directory the benchmark names)."""
    found = re.search(r"logs in (\S+)", output.read_text(errors="replace"))
    if found is None:
        return False
    logs = [p for p in Path(found.group(1)).glob("*.log") if p.name != "broker.log"]
    return any("ready:" in p.read_text(errors="replace") for p in logs)


def test_a_terminated_worker_bench_stops_its_broker_and_worker(tmp_path: Path) -> None:
    # A worker still starting exits by itself once the broker goes (its start-up check fails); one that runs
    # retries forever. So the benchmark is terminated only once its worker is ready.
    command = [sys.executable, "bench/worker_bench.py", "--events", "20000", "--variants", "raw"]
    command += ["--skip", "stream,b,c,group,latency"]
    output = tmp_path / "bench.out"
    with output.open("wb") as out:
        bench = subprocess.Popen(command, cwd=REPO_ROOT, env=python_env(), stdout=out, stderr=subprocess.STDOUT)
    started: dict[int, str] = {}  # pid -> command line, so a pid reused meanwhile is never taken for ours

    def running() -> list[int]:
        return [pid for pid, cmd in started.items() if _command(pid) == cmd]

    try:

        def worker_running() -> bool:
            # Read again each time: a child seen between its fork and its exec still shows its parent's command.
            for pid in _descendants(bench.pid):
                if command := _command(pid):
                    started[pid] = command
            return _worker_ready(output) and any("streams.cli worker" in cmd for cmd in started.values())

        wait_until(worker_running, timeout=120, message="the benchmark's worker ready")
        assert any("tansu" in cmd for cmd in started.values()), "the embedded broker runs below the benchmark"
        bench.send_signal(signal.SIGTERM)
        bench.wait(60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and running():
            time.sleep(0.2)
        assert running() == []
    finally:
        for pid in running():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if bench.poll() is None:
            bench.kill()
        bench.wait(10)
