"""The CPU reader the broker's note and the benchmarks share."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from streams.devbroker import cpu_seconds

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_process_and_its_main_thread_count_their_cpu_and_an_exited_one_reads_none() -> None:
    before = cpu_seconds(os.getpid())
    assert before is not None
    deadline = time.monotonic() + 10  # bounded: it takes about 0.05 s of work on an idle core
    while (cpu_seconds(os.getpid()) or 0.0) - before < 0.05 and time.monotonic() < deadline:
        sum(range(10_000))
    assert (cpu_seconds(os.getpid()) or 0.0) - before >= 0.05
    main = cpu_seconds(os.getpid(), threading.main_thread().native_id)
    assert main is not None and main <= (cpu_seconds(os.getpid()) or 0.0)
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    assert cpu_seconds(int(done.stdout)) is None
