"""``loopwatch replay`` as a user runs it: bad lines, exit codes, determinism, published filtering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from streams.cli import main
from tests.support.scenarios import load_scenarios, wire_events, write_inputs

SCENARIO = next(s for s in load_scenarios() if s["name"] == "generic_warning_then_block_sticky")


def _run(capsysbinary: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, list[dict[str, Any]], str]:
    code = main(["replay", *argv])
    cap = capsysbinary.readouterr()
    return code, [json.loads(x) for x in cap.out.splitlines()], cap.err.decode()


def _inputs(tmp_path: Path, lines: list[bytes] | None = None) -> tuple[Path, Path]:
    config, events = write_inputs(SCENARIO, tmp_path, wire_events(SCENARIO))
    if lines is not None:
        events.write_bytes(b"\n".join(lines) + b"\n")
    return config, events


def test_published_only_by_default_and_all_with_flag(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = _inputs(tmp_path)
    code, published, _ = _run(capsysbinary, "--events", str(events), "--config", str(config))
    assert code == 0
    code, everything, _ = _run(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    assert code == 0
    assert published == [d for d in everything if d["published"]]
    assert len(everything) > len(published) > 0
    first = published[0]
    for field in ("index", "decision", "detector", "count", "run_id", "tool", "published", "verdict_id"):
        assert field in first
    assert first["message"].startswith("WARNING:")
    assert any(d["message"].startswith("CRITICAL:") for d in published)


def test_replaying_twice_is_byte_identical(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    config, events = _inputs(tmp_path)
    main(["replay", "--events", str(events), "--config", str(config), "--all"])
    first = capsysbinary.readouterr().out
    main(["replay", "--events", str(events), "--config", str(config), "--all"])
    assert capsysbinary.readouterr().out == first


def _bad_lines() -> list[bytes]:
    good = [json.dumps(e).encode() for e in wire_events(SCENARIO)]
    bad = [
        b"{not json",
        b'{"type": "tool_call", "event_id": "\xff\xfe"}',
        b'{"type": "tool_call", "gateway_id": "g"}',
        b'{"type": "teleport", "event_id": "x", "gateway_id": "g", "session_id": "s"}',
        b'["an", "array"]',
    ]
    return [bad[0], *good[:5], bad[1], bad[2], *good[5:], bad[3], bad[4]]


def test_bad_lines_reported_with_line_numbers_and_exit_2(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    config, events = _inputs(tmp_path, _bad_lines())
    code, _, err = _run(capsysbinary, "--events", str(events), "--config", str(config))
    assert code == 2
    n_good = len(SCENARIO["events"])
    for line_no, reason in [
        (1, "not_json"),
        (7, "not_utf8"),
        (8, "schema_invalid"),
        (n_good + 4, "unknown_type"),
        (n_good + 5, "not_object"),
    ]:
        assert f":{line_no}: invalid event ({reason})" in err, err


def test_skip_invalid_goes_on_and_matches_clean_input(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    clean_dir = tmp_path / "clean"
    clean_dir.mkdir()
    config, clean = _inputs(clean_dir)
    _, want, _ = _run(capsysbinary, "--events", str(clean), "--config", str(config), "--all")
    _, dirty = _inputs(tmp_path, _bad_lines())
    code, got, err = _run(capsysbinary, "--events", str(dirty), "--config", str(config), "--all", "--skip-invalid")
    assert code == 0
    assert err.count("invalid event") == 5
    # Indexes shift by the bad lines before each event; everything else is equal.
    strip = [{k: v for k, v in d.items() if k != "index"} for d in got]
    assert strip == [{k: v for k, v in d.items() if k != "index"} for d in want]
    assert [d["index"] for d in got] == [d["index"] + (1 if d["index"] < 5 else 3) for d in want]


def test_missing_events_file_is_an_error(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    code, _, err = _run(capsysbinary, "--events", str(tmp_path / "nope.jsonl"))
    assert code == 2
    assert "cannot read" in err


def test_unparseable_config_is_an_error_with_position(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    _, events = _inputs(tmp_path)
    bad = tmp_path / "bad.json5"
    bad.write_text("{\n  tools: {\n    loopDetection: { enabled: true,, }\n  }\n}\n")
    code, _, err = _run(capsysbinary, "--events", str(events), "--config", str(bad))
    assert code == 2
    assert "bad.json5:3:" in err


def test_duplicate_events_change_nothing(tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    config, events = _inputs(tmp_path)
    _, want, _ = _run(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    lines = events.read_bytes().splitlines()
    doubled = [x for line in lines for x in (line, line)]
    events.write_bytes(b"\n".join(doubled) + b"\n")
    _, got, _ = _run(capsysbinary, "--events", str(events), "--config", str(config), "--all")
    assert [{**d, "index": d["index"] // 2} for d in got] == want
