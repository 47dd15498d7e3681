"""Process helpers for integration tests: free ports, bounded waits, and no leftover processes.

Every process started through :func:`start_process` leads its own process group and is recorded in a registry;
:func:`stop_all` (called from the session fixture and ``atexit``) stops whatever is still running, by pid.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

from streams.devbroker import free_port

__all__ = [
    "REPO_ROOT",
    "free_port",
    "kill_process",
    "python_env",
    "sigterm_as_interrupt",
    "start_process",
    "stop_all",
    "stop_process",
    "wait_until",
]

REPO_ROOT = Path(__file__).resolve().parents[2]

T = TypeVar("T")

_registry: dict[int, subprocess.Popen[bytes]] = {}
_log_files: dict[int, IO[bytes]] = {}
_lock = threading.Lock()


def wait_until(
    predicate: Callable[[], T],
    timeout: float,
    interval: float = 0.1,
    *,
    message: str = "condition",
) -> T:
    """Poll ``predicate`` until it returns a truthy value (returned); ``TimeoutError`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{message} not reached within {timeout:.1f}s")
        time.sleep(interval)


def python_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for a child Python process that imports this repository's packages."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def start_process(
    cmd: Sequence[str],
    env: Mapping[str, str] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    *,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own process group (stdout+stderr to ``log_path``) and register it for cleanup."""
    log_file: IO[bytes] | None = None
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        log_file = open(log_path, "ab")  # noqa: SIM115 - closed by stop_process
    proc = subprocess.Popen(
        list(cmd),
        env=dict(env) if env is not None else None,
        cwd=str(cwd) if cwd is not None else str(REPO_ROOT),
        stdin=subprocess.DEVNULL,
        stdout=log_file if log_file is not None else subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    with _lock:
        _registry[proc.pid] = proc
        if log_file is not None:
            _log_files[proc.pid] = log_file
    return proc


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # The child leads its own group (start_new_session), so its pgid is its pid: this reaches its children too
    # without ever touching an unrelated process group.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def stop_process(
    proc: subprocess.Popen[bytes], timeout: float = 10.0, *, sig: signal.Signals = signal.SIGTERM
) -> int | None:
    """Send ``sig`` (default SIGTERM) to the process group, SIGKILL after ``timeout``; reap; return status."""
    try:
        if proc.poll() is None:
            _signal_group(proc, sig)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5.0)
        else:
            _signal_group(proc, signal.SIGKILL)  # the leader is gone; make sure no child of it lingers
        return proc.returncode
    finally:
        with _lock:
            _registry.pop(proc.pid, None)
            log_file = _log_files.pop(proc.pid, None)
        if log_file is not None:
            log_file.close()


def kill_process(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGKILL the process group at once (a crash), reap, and return the status."""
    return stop_process(proc, timeout=5.0, sig=signal.SIGKILL)


def stop_all(timeout: float = 5.0) -> list[int]:
    """Stop every registered process still running; returns their pids (for a leftover report)."""
    with _lock:
        procs = list(_registry.values())
    leftovers = [proc.pid for proc in procs if proc.poll() is None]
    for proc in procs:
        stop_process(proc, timeout)
    if leftovers:
        print(f"tests.support.procs: stopped leftover processes {leftovers}", file=sys.stderr)
    return leftovers


atexit.register(stop_all)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside, SIGTERM raises ``KeyboardInterrupt`` in the main thread, so ``finally`` blocks and ``atexit`` stop
    what a benchmark started; SIGTERM's default action ends the process at once and leaves its brokers and
    workers running (a worker then retries its vanished broker, burning CPU, until someone kills it)."""

    def interrupt(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
