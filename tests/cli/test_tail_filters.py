"""tail's verdict filters on records that are not verdicts: one note per topic, and none on verdicts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import pytest

from streams.cli.tail import _note_verdict_filters

VERDICT: dict[str, Any] = {"verdict_id": "v1", "decision": "warning"}
EVENT: dict[str, Any] = {"type": "tool_call", "event_id": "e1"}
ALERT: dict[str, Any] = {"alert_id": "a1", "decisions": {"block": 2}}


def args(decision: str | None = None, escalations: bool = False) -> argparse.Namespace:
    return argparse.Namespace(decision=decision, escalations=escalations)


def notes(
    records: Sequence[tuple[str, dict[str, Any]]], given: argparse.Namespace, capsys: pytest.CaptureFixture[str]
) -> list[str]:
    noted: set[str] = set()
    for topic, record in records:
        _note_verdict_filters(record, topic, given, noted)
    return capsys.readouterr().err.splitlines()


def test_decision_notes_each_topic_of_other_records_once(capsys: pytest.CaptureFixture[str]) -> None:
    records = [("v", VERDICT), ("e", EVENT), ("e", EVENT), ("a", ALERT), ("a", ALERT), ("v", VERDICT)]
    assert notes(records, args(decision="block"), capsys) == [
        "loopwatch tail: warning: --decision keeps only verdicts; e has event records, which it leaves out",
        "loopwatch tail: warning: --decision keeps only verdicts; a has alert records, which it leaves out",
    ]


def test_escalations_note_says_the_records_show_unfiltered(capsys: pytest.CaptureFixture[str]) -> None:
    records = [("d", {"reason": "not_json", "source": {}, "original_sha256": "x"}), ("d", EVENT)]
    assert notes(records, args(escalations=True), capsys) == [
        "loopwatch tail: warning: --escalations applies to verdicts only; d has dead-letter records, which it shows "
        "unfiltered"
    ]


@pytest.mark.parametrize("given", [args(), args(decision="warning"), args(escalations=True)])
def test_nothing_is_noted_on_verdicts_or_without_the_filters(
    given: argparse.Namespace, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [("v", VERDICT)] + ([("e", EVENT)] if given.decision is None and not given.escalations else [])
    assert notes(records, given, capsys) == []
