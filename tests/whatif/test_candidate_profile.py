"""``loopwatch whatif --candidate-profile openclaw-2026.9``: what upgrading the gateways would change."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from tests.support.scenarios import load_2026_9, wire_events

SCENARIOS: list[dict[str, Any]] = load_2026_9()["scenarios"]
START: dict[str, int] = {}
UPGRADE_CHANGES = {  # scenarios on which 2026.7 decides differently
    "v9_untrusted_wrapper_nonce",
    "v9_exec_failure_identity",
    "v9_argument_churn_error_variants",
    "v9_veto_counts_toward_breaker",
    "v9_one_recovery_per_run",
}
DEFAULT_CONFIG = [s for s in SCENARIOS if s["config"] == {"enabled": True} and s["agent_override"] is None]


def _fleet(tmp_path: Path) -> tuple[Path, Path]:
    """Every enabled-by-default 2026.9 scenario as one unversioned stream, each in its own runs."""
    lines: list[str] = []
    for scenario in DEFAULT_CONFIG:
        START[scenario["name"]] = len(lines)
        for event in wire_events(scenario):
            event["run_id"] = f"{scenario['name']}/{event['run_id']}"
            lines.append(json.dumps(event))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tmp_path / "openclaw.json5"
    config.write_text("{tools: {loopDetection: {enabled: true}}}", encoding="utf-8")
    return config, events


def _json(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> dict[str, Any]:
    code = main(["whatif", *argv, "--format", "json"])
    captured = capsysbinary.readouterr()
    assert code == 0, captured.err
    data: dict[str, Any] = json.loads(captured.out)
    return data


def test_candidate_profile_reports_what_the_upgrade_changes(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = _fleet(tmp_path)
    html = tmp_path / "report.html"
    report = _json(
        capsysbinary,
        *("--events", str(events), "--config", str(config)),
        *("--candidate-profile", "openclaw-2026.9", "--html", str(html)),
    )
    assert report["current"]["profiles"].endswith("unversioned events openclaw-2026.7")
    assert report["candidate"]["profiles"] == "every event judged as openclaw-2026.9"
    # The candidate side is exactly what the shipped 2026.9 functions decide, run by run.
    changed = {rc["run_id"]: rc for rc in report["changed_runs"]}
    for scenario in DEFAULT_CONFIG:
        name = scenario["name"]
        start = START[name]
        want = {
            (start + e["index"], e["decision"], e["code"], e["count"]) for e in scenario["expected"] if e["published"]
        }
        runs = [rc for run_id, rc in changed.items() if run_id.startswith(name + "/")]
        got = sorted(
            (ch["index"], m["decision"], m["detector"], m["count"])
            for rc in runs
            for ch in rc["changes"]
            for m in ch["candidate"]
        )
        # changes list only the events whose decisions differ: each candidate decision there is an expected one
        assert set(got) <= want, name
        if name in UPGRADE_CHANGES:
            assert got, name
    rows = {(r["detector"], r["tool"]): r for r in report["summary"]}
    assert rows[("argument_churn", "read")]["candidate"]["calls"]["warning"] == 1
    assert rows[("argument_churn", "read")]["current"]["calls"]["warning"] == 0
    wrapper = rows[("generic_repeat", "web_fetch")]
    assert wrapper["current"]["calls"]["block"] == 0 and wrapper["candidate"]["calls"]["block"] > 0
    assert report["totals"]["candidate"]["runs"]["abort"] > report["totals"]["current"]["runs"]["abort"] == 0
    assert "argument_churn" in html.read_text(encoding="utf-8")


def test_candidate_profile_table_names_both_profiles(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, events = _fleet(tmp_path)
    code = main(["whatif", "--events", str(events), "--config", str(config), "--candidate-profile", "openclaw-2026.9"])
    out = capsys.readouterr().out
    assert code == 0
    assert "every event judged as openclaw-2026.9" in out
    assert any(line.startswith("argument_churn") for line in out.splitlines())


def test_unknown_candidate_profile_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, events = _fleet(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["whatif", "--events", str(events), "--candidate-profile", "openclaw-2027.1"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'openclaw-2027.1'" in capsys.readouterr().err
