"""The committed JSON Schema files must equal what the models generate (``python -m schemas.generate``)."""

from __future__ import annotations

import json
from pathlib import Path

from schemas.generate import JSON_DIR, main, render_all, stale_files


def test_committed_schemas_match_models() -> None:
    stale = stale_files()
    assert stale == [], f"out of date: {stale}; regenerate with: python -m schemas.generate"


def test_generation_is_deterministic_and_well_formed() -> None:
    first, second = render_all(), render_all()
    assert first == second
    assert set(first) == {
        "event.schema.json",
        "verdict.schema.json",
        "fleet-alert.schema.json",
        "loop-detection-config.schema.json",
    }
    for text in first.values():
        assert text.endswith("}\n") and not text.endswith("\n\n")
        assert text == json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def test_check_mode_reports_drift(tmp_path: Path, capsys: object) -> None:
    assert main(["--check", "--out", str(tmp_path)]) == 1  # nothing there yet
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--check", "--out", str(tmp_path)]) == 0
    (tmp_path / "verdict.schema.json").write_text("{}\n", encoding="utf-8")
    assert main(["--check", "--out", str(tmp_path)]) == 1
    assert JSON_DIR.is_dir()
