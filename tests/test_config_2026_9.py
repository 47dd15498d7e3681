"""An OpenClaw config file read the 2026.9 way (``loopwatch config check --profile openclaw-2026.9``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection.types import PROFILE_2026_7, PROFILE_2026_9

ENTRIES = """{
  tools: { loopDetection: { enabled: true, criticalThreshold: 12, detectors: { pingPong: false } } },
  agents: { entries: {
    Ops: { tools: { loopDetection: { enabled: false } } },
    research: { tools: { loopDetection: { windowSize: 5 } } },
  } },
}"""


def _check(path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("loopwatch")
    return subprocess.run([str(exe), "config", "check", str(path), *argv], capture_output=True, text=True, timeout=60)


def test_entries_override_and_retired_keys(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json5"
    path.write_text(ENTRIES, encoding="utf-8")
    loaded = load_openclaw_config(path)
    gen9 = loaded.gen9
    assert gen9.for_agent("ops").enabled is False and gen9.for_agent("ops").guard_enabled is False
    assert gen9.for_agent("research").enabled is True  # no enabled of its own: the global one
    assert gen9.for_agent("unlisted").enabled is True
    assert all(c.profile == PROFILE_2026_9 and c.critical_threshold == 20 for c in (gen9.for_agent("ops"),))
    paths = [w.path for w in loaded.warnings_for(PROFILE_2026_9)]
    assert paths == [
        "tools.loopDetection.criticalThreshold",
        "tools.loopDetection.detectors",
        "agents.entries.research.tools.loopDetection.windowSize",
    ]
    # The 2026.7 reading of the same file: agents.list only, so every agent gets the global block.
    assert loaded.for_agent("ops").enabled is True and loaded.for_agent("ops").critical_threshold == 12
    assert loaded.warnings_for(PROFILE_2026_7) == loaded.warnings


def test_legacy_agent_list_is_still_read_with_a_note() -> None:
    doc = {"agents": {"list": [{"id": "main", "tools": {"loopDetection": {"enabled": True}}}]}}
    gen9 = LoadedConfig.from_document(doc).gen9
    assert gen9.for_agent("main").enabled
    assert [w.path for w in gen9.warnings] == ["agents.list"]


def test_config_check_reads_either_generation(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json5"
    path.write_text(ENTRIES, encoding="utf-8")
    done = _check(path, "--profile", "openclaw-2026.9")
    assert done.returncode == 1  # warnings
    assert done.stdout.splitlines()[:4] == [
        "agent      enabled  guard  window",
        "(default)  true     true   3",
        "ops        false    false  3",
        "research   true     true   3",
    ]
    assert "retired since OpenClaw 2026.8" in done.stderr
    data = json.loads(_check(path, "--profile", "openclaw-2026.9", "--json").stdout)
    assert data["profile"] == PROFILE_2026_9 and data["agents"]["ops"]["enabled"] is False


def test_non_object_entries_are_reported_in_document_order() -> None:
    """A non-object ``agents.entries`` value was skipped without a warning, like a non-object list entry."""
    doc = {
        "agents": {
            "entries": {
                "a": {"tools": {"loopDetection": {"historySize": 5}}},
                "b": "off",
                "c": {"tools": {"loopDetection": {"enabled": True}}},
            }
        },
        "tools": {"loopDetection": {"enabled": False}},
    }
    gen9 = LoadedConfig.from_document(doc).gen9
    assert [(w.path, w.message) for w in gen9.warnings] == [
        (
            "agents.entries.a.tools.loopDetection.historySize",
            "retired since OpenClaw 2026.8 (openclaw doctor removes it); built-in value applies",
        ),
        ("agents.entries.b", '"off" is not an object; ignored'),
    ]
    assert gen9.for_agent("c").enabled and not gen9.for_agent("b").enabled
