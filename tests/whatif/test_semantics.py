"""What-if on the shared conformance scenarios reports exactly the differences the semantics imply.

Expectations come from OpenClaw's rules (hand-derived numbers, or the small model in ``support.py``
whose docstring cites the rules), never from the implementation's own output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.scenarios import expected_decisions
from tests.whatif.support import (
    SCENARIOS,
    candidate_file,
    expected_changes,
    identical_calls_model,
    reported_changes,
    scenario_files,
    whatif,
)

STICKY = "generic_warning_then_block_sticky"  # 23 identical read calls, identical results, enabled, defaults
N_STICKY = len(SCENARIOS[STICKY]["events"])


def _row(report: dict[str, Any], detector: str = "generic_repeat", tool: str = "read") -> dict[str, Any]:
    rows = [r for r in report["summary"] if (r["detector"], r["agent_id"], r["tool"]) == (detector, "main", tool)]
    assert len(rows) == 1, report["summary"]
    row: dict[str, Any] = rows[0]
    return row


def test_model_matches_the_shared_scenario_for_defaults() -> None:
    want = [(i, d, code, c, p) for i, d, code, c, p in expected_decisions(SCENARIOS[STICKY])]
    assert identical_calls_model(N_STICKY, 10, 20) == want


def test_critical_15_moves_the_first_block_from_index_20_to_15(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, criticalThreshold=15)
    report = whatif(capsysbinary, "--config", str(config), "--candidate", str(candidate), "--events", str(events))
    # Published view: the warning at index 10 (count 10) stays; indices 15..19 become blocks (count 15);
    # the three blocks at 20..22 keep blocking, now with count 15.
    block15 = [("block", "generic_repeat", 15, True)]
    assert reported_changes(report) == [
        *[(i, [], block15) for i in range(15, 20)],
        *[(i, [("block", "generic_repeat", 20, True)], block15) for i in range(20, 23)],
    ]
    texts = [c["text"] for c in report["changed_runs"][0]["changes"]]
    assert texts[0] == "index 15 (read): none → block generic_repeat count 15"
    assert texts[-1] == "index 22 (read): block generic_repeat count 20 → block generic_repeat count 15"
    row = _row(report)
    assert row["current"] == {
        "runs": {"warning": 1, "block": 1, "abort": 0},
        "calls": {"warning": 1, "block": 3, "abort": 0},
    }
    assert row["candidate"] == {
        "runs": {"warning": 1, "block": 1, "abort": 0},
        "calls": {"warning": 1, "block": 8, "abort": 0},
    }

    every = whatif(
        capsysbinary, "--config", str(config), "--candidate", str(candidate), "--events", str(events), "--all"
    )
    # Every decision: warnings for counts 10..14 stay (not listed); 15..19 turn from warnings into blocks.
    changes = reported_changes(every)
    assert [c[0] for c in changes] == list(range(15, 23))
    assert changes[0] == (15, [("warning", "generic_repeat", 15, False)], block15)
    assert _row(every)["candidate"]["calls"] == {"warning": 5, "block": 8, "abort": 0}
    assert _row(every)["current"]["calls"] == {"warning": 10, "block": 3, "abort": 0}


def test_warning_12_moves_the_first_warning_to_index_12_published_in_buckets_of_12(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, warningThreshold=12)
    report = whatif(capsysbinary, "--config", str(config), "--candidate", str(candidate), "--events", str(events))
    # 12..19 warn with count 12..19, all in bucket 1 of 12: only index 12 is published. Blocks unchanged.
    assert reported_changes(report) == [
        (10, [("warning", "generic_repeat", 10, True)], []),
        (12, [], [("warning", "generic_repeat", 12, True)]),
    ]
    assert report["changed_runs"][0]["changes"][1]["text"] == "index 12 (read): none → warning generic_repeat count 12"
    every = whatif(
        capsysbinary, "--config", str(config), "--candidate", str(candidate), "--events", str(events), "--all"
    )
    assert reported_changes(every) == [
        (10, [("warning", "generic_repeat", 10, True)], []),
        (11, [("warning", "generic_repeat", 11, False)], []),
        (12, [("warning", "generic_repeat", 12, False)], [("warning", "generic_repeat", 12, True)]),
    ]


@pytest.mark.parametrize(
    ("overrides", "warning", "critical"),
    [
        ({"criticalThreshold": 15}, 10, 15),
        ({"warningThreshold": 12}, 12, 20),
        ({"warningThreshold": 5, "criticalThreshold": 8}, 5, 8),
        ({"warningThreshold": 4}, 4, 20),  # published at 4, 8, 12, 16 (buckets of 4)
        ({"criticalThreshold": 25}, 10, 25),  # never blocks within 23 calls
        ({"warningThreshold": 8, "criticalThreshold": 8}, 8, 8),  # runs as 8/9 (clamp)
        ({"enabled": False}, 10**9, 10**9),  # rolling detection off: nothing at all
    ],
)
@pytest.mark.parametrize("include_all", [False, True])
def test_changes_follow_the_semantics(
    overrides: dict[str, Any],
    warning: int,
    critical: int,
    include_all: bool,
    tmp_path: Path,
    capsysbinary: pytest.CaptureFixture[bytes],
) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    candidate = candidate_file(STICKY, tmp_path, **overrides)
    argv = ["--config", str(config), "--candidate", str(candidate), "--events", str(events)]
    report = whatif(capsysbinary, *argv, *(["--all"] if include_all else []))
    current = identical_calls_model(N_STICKY, 10, 20)
    cand = identical_calls_model(N_STICKY, warning, critical)
    assert reported_changes(report) == expected_changes(current, cand, include_all=include_all)
    counted = [d for d in cand if d[4] or include_all]
    calls = {k: sum(1 for d in counted if d[1] == k) for k in ("warning", "block", "abort")}
    totals = report["totals"]["candidate"]
    assert totals["calls"] == calls
    assert totals["runs"] == {k: int(v > 0) for k, v in calls.items()}


def test_same_config_changes_nothing(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    report = whatif(capsysbinary, "--config", str(config), "--candidate", str(config), "--events", str(events))
    assert report["changed_runs"] == []
    assert all(r["current"] == r["candidate"] for r in report["summary"])


def test_sweep_critical_threshold_on_the_sticky_scenario(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = scenario_files(STICKY, tmp_path)
    report = whatif(
        capsysbinary,
        "--config",
        str(config),
        "--events",
        str(events),
        "--sweep",
        "criticalThreshold=8..26",
        "--all",
    )
    assert report["candidate"] is None and report["changed_runs"] == []
    points = report["sweep"]["points"]
    assert [p["value"] for p in points] == list(range(8, 27))
    assert report["sweep"]["current_value"] == 20
    for p in points:
        model = identical_calls_model(N_STICKY, 10, p["value"])
        # clamping: critical <= warning (10) runs as 11; the global breaker follows at least critical + 1.
        effective = max(p["value"], 11)
        assert p["resolved"]["criticalThreshold"] == effective
        assert p["resolved"]["globalCircuitBreakerThreshold"] == max(30, effective + 1)
        blocks = max(0, N_STICKY - effective)
        assert p["calls"]["block"] == blocks == sum(1 for d in model if d[1] == "block")
        assert p["calls"]["warning"] == sum(1 for d in model if d[1] == "warning")
        assert p["runs"]["block"] == int(blocks > 0)


def test_sweep_unknown_tool_threshold(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    # 12 calls of exec failing with "Tool exec not found", changing args (the unknown-tool threshold): with
    # threshold t the call at index t is the first blocked (t earlier failures), sticky to the end: 12 - t blocks;
    # none for t >= 12.
    config, events = scenario_files("unknown_tool_block_at_threshold", tmp_path)
    report = whatif(
        capsysbinary,
        "--config",
        str(config),
        "--events",
        str(events),
        "--sweep",
        "unknownToolThreshold=1..14",
    )
    got = {p["value"]: (p["calls"]["block"], p["calls"]["warning"]) for p in report["sweep"]["points"]}
    assert got == {t: (max(0, 12 - t), 0) for t in range(1, 15)}


def test_guard_window_sweep_and_candidate(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    # compaction_retry then 5 identical calls with identical results; rolling detection off, post-compaction guard on.
    # Window w aborts on the w-th identical observation (index w, count w) when w <= 5; never for w > 5.
    name = "guard_window_size_5_at"
    config, events = scenario_files(name, tmp_path)
    report = whatif(
        capsysbinary,
        "--config",
        str(config),
        "--events",
        str(events),
        "--sweep",
        "postCompactionGuard.windowSize=1..7",
    )
    assert {p["value"]: p["calls"]["abort"] for p in report["sweep"]["points"]} == {w: int(w <= 5) for w in range(1, 8)}
    candidate = candidate_file(name, tmp_path, postCompactionGuard={"windowSize": 3})
    report = whatif(capsysbinary, "--config", str(config), "--candidate", str(candidate), "--events", str(events))
    assert reported_changes(report) == [
        (3, [], [("abort", "compaction_loop_persisted", 3, True)]),
        (5, [("abort", "compaction_loop_persisted", 5, True)], []),
    ]
    assert _row(report, "compaction_loop_persisted")["candidate"]["runs"]["abort"] == 1
