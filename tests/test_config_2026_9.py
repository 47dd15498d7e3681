"""An OpenClaw config file read the 2026.9 way (``loopwatch config check --profile openclaw-2026.9``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection.config import BLANK_ID, MISSING_ID
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
    assert "read only by openclaw-2026.7 (retired in OpenClaw 2026.8" in done.stderr
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
            "read only by openclaw-2026.7 (retired in OpenClaw 2026.8, openclaw doctor removes it); under "
            "openclaw-2026.9 it is ignored: the built-in value applies",
        ),
        ("agents.entries.b", '"off" is not an object; ignored'),
    ]
    assert gen9.for_agent("c").enabled and not gen9.for_agent("b").enabled


def test_retired_keys_name_the_2026_7_line_and_what_2026_9_does_instead() -> None:
    """They said "retired since OpenClaw 2026.8", not that 2026.7 reads them, nor which built-in value applies."""
    block = {"criticalThreshold": 5, "detectors": {}, "postCompactionGuard": {"windowSize": 5}, "windowSize": 5}
    gen9 = LoadedConfig.from_document({"tools": {"loopDetection": block}}).gen9
    retired = "(retired in OpenClaw 2026.8, openclaw doctor removes it); under openclaw-2026.9 it is ignored"
    guard = "the post-compaction guard (window 3) follows enabled, on unless it is false"
    assert [(w.path, w.message, w.value_used) for w in gen9.warnings] == [
        (
            "tools.loopDetection.criticalThreshold",
            f"read only by openclaw-2026.7 {retired}: the built-in value applies",
            20,
        ),
        (
            "tools.loopDetection.detectors",
            f"read only by openclaw-2026.7 {retired}: every detector runs when enabled is true",
            None,
        ),
        ("tools.loopDetection.postCompactionGuard", f"read only by openclaw-2026.7 {retired}: {guard}", None),
        (  # not a 2026.7 key where it is: that line reads it nested
            "tools.loopDetection.windowSize",
            "retired in OpenClaw 2026.8, openclaw doctor removes it; openclaw-2026.7 reads it only as "
            f"postCompactionGuard.windowSize, under openclaw-2026.9 it is ignored: {guard}",
            3,
        ),
    ]


def test_a_list_entry_without_an_id_is_warned_about_under_2026_9_too() -> None:
    """2026.9 skips an entry without a string id as 2026.7 does, but said nothing while 2026.7 warned. A blank
    id is agent main in both lines' lookup (it was skipped: main then judged with the global block)."""
    doc = {
        "agents": {
            "list": [
                {"tools": {"loopDetection": {"enabled": False}}},
                {"id": " ", "tools": {"loopDetection": {"enabled": False}}},
                {"id": 7, "name": "no block: nothing to ignore"},
                {"id": "ops"},
            ]
        }
    }
    loaded = LoadedConfig.from_document(doc)
    assert [(w.path, w.message) for w in loaded.gen9.warnings] == [
        ("agents.list", "moved to keyed agents.entries in 2026.8+; still read"),
        ("agents.list[0].id", MISSING_ID),
        ("agents.list[1].id", BLANK_ID),
    ]
    assert [w for w in loaded.gen9.warnings if w.path.endswith(".id")] == list(loaded.warnings)  # one rule, both
    assert loaded.gen9.agent_ids == ("main", "ops") and not loaded.gen9.for_agent("main").enabled
    assert loaded.agent_ids == ("main", "ops") and not loaded.for_agent("main").enabled
    # With agents.entries set 2026.9 never reads agents.list: its one warning says so, no per-entry ones.
    beside = LoadedConfig.from_document({"agents": {**doc["agents"], "entries": {}}}).gen9
    assert [w.path for w in beside.warnings] == ["agents.list"]


# --- per-agent lookup: duplicate ids, a tools that is not an object, blank agents.entries keys ------------------
# Read in openclaw@2026.9.6: agent-scope-config-*.mjs (resolveAgentEntry, the first match wins) and
# tool-loop-detection-config-*.mjs (entry.tools?.loopDetection); 2026.7.35 resolves agents.list the same way.

NOT_READ = "this entry's tools.loopDetection is ignored"


def test_a_duplicate_list_id_is_warned_about_under_2026_9_as_under_2026_7() -> None:
    """Both generations take the first entry of an id; 2026.9 said nothing about the one never read."""
    doc = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {
            "list": [
                {"id": "ops", "tools": {"loopDetection": {"enabled": False}}},
                {"id": " OPS ", "tools": {"loopDetection": {"enabled": True}}},
                {"id": "ops", "model": "no block"},
            ]
        },
    }
    loaded = LoadedConfig.from_document(doc)
    duplicates = [
        ("agents.list[1].id", f"duplicate of agents.list[0] (agent 'ops'); {NOT_READ}"),
        ("agents.list[2].id", "duplicate of agents.list[0] (agent 'ops'); OpenClaw uses the first entry"),
    ]
    assert [(w.path, w.message) for w in loaded.warnings] == duplicates
    assert [(w.path, w.message) for w in loaded.gen9.warnings][1:] == duplicates  # after the agents.list note
    assert not loaded.for_agent("ops").enabled and not loaded.gen9.for_agent("ops").enabled  # the first one
    assert loaded.gen9.agent_ids == ("ops",)


def test_duplicate_entries_keys_first_wins_and_is_warned_about() -> None:
    """``Ops`` and ``ops`` are one agent; the lookup walks the keys in order and stops at the first."""
    doc = {
        "agents": {
            "entries": {
                "Ops": {"tools": {"loopDetection": {"enabled": True}}},
                "ops": {"tools": {"loopDetection": {"enabled": False}}},
            }
        }
    }
    gen9 = LoadedConfig.from_document(doc).gen9
    assert gen9.for_agent("ops").enabled and gen9.for_agent("OPS").guard_enabled
    assert [(w.path, w.message) for w in gen9.warnings] == [
        ("agents.entries.ops", f"duplicate of agents.entries.Ops (agent 'ops'); {NOT_READ}")
    ]


def test_a_tools_that_is_not_an_object_is_warned_about_under_2026_9_too() -> None:
    """``entry.tools?.loopDetection`` of a string, array or number is undefined: the global block applies."""
    listed = {
        "tools": {"loopDetection": {"enabled": False}},
        "agents": {"list": [{"id": "a", "tools": "loopDetection"}, {"id": "b", "tools": [1]}, {"id": "c"}]},
    }
    loaded = LoadedConfig.from_document(listed)
    expected = [("agents.list[0].tools", "not an object; ignored"), ("agents.list[1].tools", "not an object; ignored")]
    assert [(w.path, w.message) for w in loaded.warnings] == expected
    assert [(w.path, w.message) for w in loaded.gen9.warnings][1:] == expected
    assert loaded.gen9.for_agent("a") == loaded.gen9.default_config == loaded.gen9.for_agent("b")
    keyed = {"agents": {"entries": {"a": {"tools": 3}, "b": {"tools": None}}}}
    gen9 = LoadedConfig.from_document(keyed).gen9
    assert [(w.path, w.message) for w in gen9.warnings] == [("agents.entries.a.tools", "not an object; ignored")]
    assert gen9.agent_ids == ("a", "b") and gen9.for_agent("a") == gen9.default_config


def test_a_blank_entries_key_is_agent_main() -> None:
    """OpenClaw normalises a blank key as any agent id, to ``main``, so it is main's entry (the first one for main
    wins); the model skipped it silently, so main got the global block instead."""
    doc = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {
            "entries": {
                "": {"tools": {"loopDetection": {"enabled": False}}},
                "ops": {},
                "  ": {"tools": {"loopDetection": {"enabled": True}}},
            }
        },
    }
    gen9 = LoadedConfig.from_document(doc).gen9
    assert not gen9.for_agent("main").enabled and not gen9.for_agent(None).guard_enabled
    assert gen9.agent_ids == ("main", "ops")
    blank = "blank key: OpenClaw reads it as agent 'main' (a blank id normalises to main); the 2026.9 schema rejects it"
    assert [(w.path, w.message) for w in gen9.warnings] == [
        ('agents.entries.""', blank),
        ('agents.entries."  "', blank),
        ('agents.entries."  "', f"duplicate of agents.entries.\"\" (agent 'main'); {NOT_READ}"),
    ]
    # A "main" key before it is the one read.
    first = {"agents": {"entries": {"main": {}, "": {"tools": {"loopDetection": {"enabled": False}}}}}}
    assert LoadedConfig.from_document(first).gen9.for_agent("main").guard_enabled
