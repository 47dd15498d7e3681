"""OpenClaw config files (JSON5) and ``loopwatch config check``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.cli import main
from streams.config_file import ConfigFileError, LoadedConfig, load_openclaw_config
from streams.detection.types import LoopConfig

CONFIG = """\
// OpenClaw gateway config
{
  tools: {
    loopDetection: {
      enabled: true,
      warningThreshold: 15,   // trailing commas and comments are fine
      detectors: { genericRepeat: false, },
    },
  },
  agents: {
    list: [
      { id: "main" },
      { id: " Ops ", tools: { loopDetection: { criticalThreshold: 12, detectors: { pingPong: false } } } },
      { id: "quiet", tools: { loopDetection: { enabled: false } } },
    ],
  },
}
"""


def write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_json5_agents_and_merge(tmp_path: Path) -> None:
    loaded = load_openclaw_config(write(tmp_path, CONFIG))
    assert loaded.agent_ids == ("main", "ops", "quiet")
    main_cfg = loaded.for_agent("main")
    assert (main_cfg.enabled, main_cfg.warning_threshold, main_cfg.critical_threshold) == (True, 15, 20)
    assert not main_cfg.generic_repeat
    ops = loaded.for_agent("OPS")
    assert (ops.critical_threshold, ops.generic_repeat, ops.ping_pong) == (16, False, False)
    assert loaded.for_agent(" ops\t") is ops
    quiet = loaded.for_agent("quiet")
    assert not quiet.enabled and not quiet.guard_enabled
    assert loaded.for_agent("someone-else") == loaded.default_config == loaded.for_agent(None)
    assert loaded.for_agent(None) is loaded.for_agent(None)
    assert [(w.path, w.value_used) for w in loaded.warnings] == [
        ("agents.list[1].tools.loopDetection.criticalThreshold", 16)
    ]


def test_missing_agent_id_means_main(tmp_path: Path) -> None:
    text = """{tools: {loopDetection: {enabled: false}},
               agents: {list: [{id: "MAIN", tools: {loopDetection: {enabled: true}}}]}}"""
    loaded = load_openclaw_config(write(tmp_path, text))
    assert loaded.for_agent(None).enabled
    assert loaded.for_agent("").enabled
    assert not loaded.for_agent("other").enabled


def test_warnings_are_deduplicated_across_agents(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "tools": {"loopDetection": {"warningThreshold": 25, "bogus": 1}},
            "agents": {"list": [{"id": f"a{i}", "tools": {"loopDetection": {"historySize": 40}}} for i in range(3)]},
        }
    )
    loaded = load_openclaw_config(write(tmp_path, text))
    assert [(w.path, w.value_used) for w in loaded.warnings] == [
        ("tools.loopDetection.bogus", None),
        ("tools.loopDetection.criticalThreshold", 26),
    ]


def test_odd_documents_give_warnings_not_errors(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "tools": {"loopDetection": "on"},
            "agents": {
                "list": [
                    "not an entry",
                    {"tools": {"loopDetection": {"enabled": True}}},
                    {"id": "x", "tools": {"loopDetection": {"enabled": True}}},
                    {"id": "X", "tools": {"loopDetection": {"enabled": False}}},
                    {"id": "y", "tools": 3},
                ]
            },
        }
    )
    loaded = load_openclaw_config(write(tmp_path, text))
    assert loaded.default_config == LoopConfig()
    assert loaded.for_agent("x").enabled  # the first entry with an id wins
    assert {w.path for w in loaded.warnings} == {
        "tools.loopDetection",
        "agents.list[1].id",
        "agents.list[3].id",
        "agents.list[4].tools",
    }
    assert LoadedConfig.from_document([1, 2]).warnings[0].path == "(root)"


def test_config_hash_is_stable_and_tracks_resolution(tmp_path: Path) -> None:
    a = load_openclaw_config(write(tmp_path, CONFIG, "a.json5"))
    b = load_openclaw_config(write(tmp_path, CONFIG.replace("// OpenClaw gateway config", ""), "b.json5"))
    assert a.config_hash == b.config_hash and len(a.config_hash) == 64
    c = load_openclaw_config(write(tmp_path, CONFIG.replace("warningThreshold: 15", "warningThreshold: 14"), "c.json5"))
    assert c.config_hash != a.config_hash
    default = LoadedConfig.default()
    assert default.config_hash == LoadedConfig.from_document({}).config_hash
    assert default.warnings == () and default.for_agent("any") == LoopConfig()


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("{\n  tools: {\n    loopDetection: { enabled: true warningThreshold: 5 }\n  }\n}\n", 3, 36),
        ("{a: 1", 1, 6),
        ("", 1, 1),
    ],
)
def test_unparseable_file_has_line_and_column(tmp_path: Path, text: str, line: int, column: int) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as info:
        load_openclaw_config(path)
    assert (info.value.line, info.value.column) == (line, column)
    assert str(info.value).startswith(f"{path}:{line}:{column}: ")


def test_not_utf8_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json5"
    path.write_bytes(b'{\n  a: "\xff"}')
    with pytest.raises(ConfigFileError) as info:
        load_openclaw_config(path)
    assert (info.value.line, info.value.column) == (2, 7)
    with pytest.raises(ConfigFileError, match="cannot read"):
        load_openclaw_config(tmp_path / "nope.json5")


# --- loopwatch config check ---------------------------------------------------------------------------------


def test_check_clean_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "{tools: {loopDetection: {enabled: true}}, agents: {list: [{id: 'ops'}]}}")
    assert main(["config", "check", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["agent", "enabled", "history"]
    assert lines[1].split()[:2] == ["(default)", "true"] and lines[2].split()[0] == "ops"


def test_check_adjusted_file_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(write(tmp_path, CONFIG))]) == 1
    _, err = capsys.readouterr()
    assert err.splitlines() == [
        "warning: agents.list[1].tools.loopDetection.criticalThreshold: criticalThreshold 12 (from "
        "agents.list[1].tools.loopDetection.criticalThreshold) is not above warningThreshold 15 (from "
        "tools.loopDetection.warningThreshold); raised to warningThreshold + 1 (using 16)"
    ]


def test_check_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "{tools: {loopDetection: {enabled: 1, extra: true}}}")
    assert main(["config", "check", "--json", str(path)]) == 1
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["default"]["enabled"] is True and doc["default"]["postCompactionGuard"] == {
        "enabled": True,
        "windowSize": 3,
    }
    assert doc["agents"] == {} and len(doc["config_hash"]) == 64
    assert [w["path"] for w in doc["warnings"]] == [
        "tools.loopDetection.enabled",
        "tools.loopDetection.extra",
    ]
    assert "warning: tools.loopDetection.extra: unknown key (not in the tools.loopDetection schema); ignored\n" in err
    assert "warning: tools.loopDetection.enabled: 1 is not a boolean" in err and "(using true)" in err


def test_check_unparseable_or_unreadable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(write(tmp_path, "{\n tools: ]\n}"))]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("loopwatch config check: cannot use the config file (") and ":2:9): " in err
    assert main(["config", "check", str(tmp_path / "missing.json5")]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("document", "detects"),
    [
        ({}, False),
        ({"tools": {"loopDetection": {"enabled": False}}}, False),
        ({"tools": {"loopDetection": {"enabled": True}}}, True),
        ({"agents": {"list": [{"id": "coder", "tools": {"loopDetection": {"enabled": True}}}]}}, True),
        # only the 2026.9 reading knows agents.entries: events of that line are judged with it
        ({"agents": {"entries": {"coder": {"tools": {"loopDetection": {"enabled": True}}}}}}, True),
    ],
)
def test_every_config_covers_each_agent_read_either_way(document: dict[str, object], detects: bool) -> None:
    configs = LoadedConfig.from_document(document).every_config()
    assert any(c.enabled for c in configs) is detects
