"""The coverage-guided harness (:mod:`tests.fuzz.atheris_decode`) with a fixed seed and budget.

Skipped where atheris is not installed (it is an optional dev extra: ``pip install atheris``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("atheris")

RUNS = 20_000
SEED = 1


def test_atheris_fixed_budget(tmp_path: Path) -> None:
    harness = Path(__file__).with_name("atheris_decode.py")
    command = [
        sys.executable,
        str(harness),
        "--write-seeds",
        str(tmp_path),
        f"-runs={RUNS}",
        f"-seed={SEED}",
        "-max_len=4096",
        "-timeout=10",
        "-rss_limit_mb=1024",
        f"-dict={tmp_path / 'json.dict'}",
        str(tmp_path / "corpus"),
    ]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, timeout=180, check=False)
    log = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, log[-4000:]
    assert f"Done {RUNS} runs" in log, log[-4000:]
