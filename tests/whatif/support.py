"""Helpers for the what-if tests: run the command on scenario files, and a tiny model of the semantics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from tests.support.scenarios import load_scenarios, wire_events, write_inputs

SCENARIOS = {s["name"]: s for s in load_scenarios()}


def scenario_files(name: str, directory: Path) -> tuple[Path, Path]:
    """The scenario's config (JSON5) and events (JSON Lines), as ``loopwatch replay`` takes them."""
    scenario = SCENARIOS[name]
    return write_inputs(scenario, directory, wire_events(scenario))


def candidate_file(name: str, directory: Path, **overrides: Any) -> Path:
    """The scenario's ``tools.loopDetection`` block with ``overrides`` applied, as a candidate config file."""
    block = {**(SCENARIOS[name]["config"] or {}), **overrides}
    path = directory / f"candidate-{name}.json5"
    path.write_text(json.dumps({"tools": {"loopDetection": block}}), encoding="utf-8")
    return path


def whatif(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> dict[str, Any]:
    """``loopwatch whatif … --format json``; asserts exit status 0."""
    code = main(["whatif", *argv, "--format", "json"])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err.decode()
    report: dict[str, Any] = json.loads(captured.out)
    return report


Decision = tuple[int, str, str, int, bool]  # index, decision, detector, count, published


def identical_calls_model(n: int, warning: int, critical: int) -> list[Decision]:
    """Decisions for ``n`` identical calls with identical results, derived by hand from OpenClaw's rules.

    Clamping: ``critical <= warning`` runs as ``warning + 1``. genericRepeat: a call warns when at least
    ``warning`` earlier identical calls are in the history (count = that number) and blocks when the no-progress
    streak (here: every earlier recorded call) reaches ``critical`` (count = the streak). A blocked call is not
    recorded, so the streak stays at ``critical`` and every later call is blocked with that count.
    Deviation 2 of docs/semantics.md: a warning is published when ``count // warning`` passes the last published
    bucket (start 0); blocks are always published. (History 30 and global 30 are not reached for n <= 30.)
    """
    critical = max(critical, warning + 1)
    out: list[Decision] = []
    recorded = 0
    last_bucket = 0
    for index in range(n):
        if recorded >= critical:
            out.append((index, "block", "generic_repeat", recorded, True))
            continue
        if recorded >= warning:
            bucket = recorded // warning
            published = bucket > last_bucket
            if published:
                last_bucket = bucket
            out.append((index, "warning", "generic_repeat", recorded, published))
        recorded += 1
    return out


def expected_changes(
    current: list[Decision], candidate: list[Decision], *, include_all: bool
) -> list[tuple[int, list[tuple[str, str, int, bool]], list[tuple[str, str, int, bool]]]]:
    """The per-event differences a what-if report must list for one run."""

    def by_index(decisions: list[Decision]) -> dict[int, list[tuple[str, str, int, bool]]]:
        out: dict[int, list[tuple[str, str, int, bool]]] = {}
        for index, decision, detector, count, published in decisions:
            if published or include_all:
                out.setdefault(index, []).append((decision, detector, count, published))
        return out

    a, b = by_index(current), by_index(candidate)
    return [(i, a.get(i, []), b.get(i, [])) for i in sorted(set(a) | set(b)) if a.get(i, []) != b.get(i, [])]


def reported_changes(
    report: dict[str, Any],
) -> list[tuple[int, list[tuple[str, str, int, bool]], list[tuple[str, str, int, bool]]]]:
    runs = report["changed_runs"]
    assert len(runs) <= 1
    if not runs:
        return []

    def marks(side: list[dict[str, Any]]) -> list[tuple[str, str, int, bool]]:
        return [(m["decision"], m["detector"], m["count"], m["published"]) for m in side]

    return [(c["index"], marks(c["current"]), marks(c["candidate"])) for c in runs[0]["changes"]]
