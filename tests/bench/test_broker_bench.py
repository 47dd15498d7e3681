"""The broker benchmark: its arithmetic, its flags, and one small run against the real embedded broker."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench.broker_bench import Depth, depths, per_stored_batch, table

REPO = Path(__file__).resolve().parents[2]


def test_the_growth_is_spread_over_every_batch_added_to_every_partition_fetched() -> None:
    first, last = Depth(100, 25.0, 500.0, 0.8), Depth(1100, 25.0, 4500.0, 4.9)
    assert per_stored_batch(first, last, 4) == pytest.approx(1.0)  # 4,000 µs over 1,000 batches x 4 partitions
    assert math.isnan(per_stored_batch(first, first, 4))


def test_the_table_leaves_out_what_cannot_be_divided() -> None:
    rows = [Depth(20, 0.0, 0.0, 0.4), Depth(220, 25.0, 500.0, 0.9)]
    body = table(rows, 2)[1:]
    assert body[0].split()[-1] == "-" and " - " in body[1]  # no growth for the first row, no ratio to a 0 µs fetch
    assert body[1].split()[-2:] == ["1.25", "µs"]


def test_depths_are_sorted_distinct_and_not_negative() -> None:
    assert depths("2000, 0,1000,0") == [0, 1000, 2000]
    for bad in ("", "x", "-1,5"):
        with pytest.raises(argparse.ArgumentTypeError):
            depths(bad)


def test_a_bad_depth_is_one_line_not_a_traceback() -> None:
    command = [sys.executable, "-m", "bench.broker_bench", "--depths", "a,b"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("'a,b' is not a comma-separated list of whole numbers")


def test_a_small_run_on_the_real_broker_prints_one_row_per_depth() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench.broker_bench", "--depths", "0,200", "--rounds", "20", "--partitions", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if "batches per partition" in line)
    rows = [line.split() for line in lines[header + 1 :]]
    assert [row[0] for row in rows] == ["20", "220"]  # each depth as the fetch saw it: the produce rounds added
    assert all(float(row[6]) > 0 for row in rows)  # a fetch's wall time was measured at each depth
