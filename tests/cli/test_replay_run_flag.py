"""``replay --run`` as an operator types it, through the real ``loopwatch`` executable (the refusals of flags that
would do nothing are in test_operator_wording.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import lw


def _events(empty: Path) -> str:
    """A small simulated fleet in ``w.jsonl``; returns one of its run ids."""
    assert lw(empty, "simulate", "--duration", "10", "--out", "w.jsonl").code == 0
    first = json.loads((empty / "w.jsonl").read_text(encoding="utf-8").splitlines()[0])
    return str(first["run_id"])


def test_a_run_id_is_trimmed_as_run_ids_are(empty: Path) -> None:
    """``--run "  r1  "`` said "not found" (exit 1) although the scope key of a run is its trimmed run id."""
    run = _events(empty)
    padded = lw(empty, "replay", "--events", "w.jsonl", "--run", f" \t{run}  ")
    assert padded.code == 0 and padded.out == lw(empty, "replay", "--events", "w.jsonl", "--run", run).out
    assert padded.out.startswith(f"run {run}: ")


def test_a_blank_run_id_is_a_bad_value(empty: Path) -> None:
    _events(empty)
    blank = lw(empty, "replay", "--events", "w.jsonl", "--run", "   ")
    assert (blank.code, blank.out) == (2, "")
    assert blank.err.count("\n") == 1 and "not be blank (--run)" in blank.err
