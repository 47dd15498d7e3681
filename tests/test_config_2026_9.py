"""An OpenClaw config file read the 2026.9 way (``loopwatch config check --profile openclaw-2026.9``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from streams.config_file import LoadedConfig, load_openclaw_config
from streams.detection.config import BLANK_ID, MISSING_ID
from streams.detection.gen9_roster import CONVERTED, KEY_INVALID, REFUSED, doctor_ids, list_problem
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
        ("agents.entries.b", f'"off" is not an object; {REFUSED}'),
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


def test_a_list_the_load_cannot_convert_is_one_warning_on_its_first_offending_entry() -> None:
    """2026.9 does not convert a list with an entry without a string id (its schema then refuses the config): one
    warning says so where the conversion stops, with the id doctor gives that entry. A gateway that starts has
    rewritten the list as doctor does, so 2026.9 reads doctor's ids (a missing or blank id is 'agent', then
    'agent-2', ...) and main keeps the global block; 2026.7's lookup makes a blank id main."""
    doc = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {
            "list": [
                {"tools": {"loopDetection": {"enabled": False}}},
                {"id": " ", "tools": {"loopDetection": {"enabled": False}}},
                {"id": 7, "name": "no block: nothing to ignore"},
                {"id": "ops"},
            ]
        },
    }
    loaded = LoadedConfig.from_document(doc)
    [warning] = loaded.gen9.warnings
    assert warning.path == "agents.list[0]" and warning.value_used is None
    assert warning.message.startswith("no id (doctor makes it agents.entries.agent): OpenClaw 2026.9 converts")
    assert "this list stays, and the 2026.9 schema refuses a config with agents.list" in warning.message
    assert [(w.path, w.message) for w in loaded.warnings] == [
        ("agents.list[0].id", MISSING_ID),
        ("agents.list[1].id", BLANK_ID),
    ]
    assert loaded.gen9.agent_ids == ("agent", "agent-2", "agent-3", "ops")
    assert not loaded.gen9.for_agent("agent").enabled and not loaded.gen9.for_agent("agent-2").enabled
    assert loaded.gen9.for_agent("main").enabled and loaded.gen9.for_agent("agent-3").enabled
    assert loaded.agent_ids == ("main", "ops") and not loaded.for_agent("main").enabled
    # With agents.entries set 2026.9 never reads agents.list: its one warning says so, no per-entry ones.
    beside = LoadedConfig.from_document({"agents": {**doc["agents"], "entries": {}}}).gen9
    assert [w.path for w in beside.warnings] == ["agents.list"]


# --- per-agent lookup: duplicate ids, a tools that is not an object, blank agents.entries keys ------------------
# Read in openclaw@2026.9.6: agent-scope-config-*.mjs (resolveAgentEntry, the first match wins) and
# tool-loop-detection-config-*.mjs (entry.tools?.loopDetection); 2026.7.35 resolves agents.list the same way.

NOT_READ = "this entry's tools.loopDetection is ignored"


def test_a_duplicate_list_id_is_warned_about_under_2026_7_and_refused_under_2026_9() -> None:
    """Both generations' lookup takes the first entry of an id; 2026.9's load does not convert such a list."""
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
    [refusal] = loaded.gen9.warnings  # 2026.9: the load stops at " OPS " (not trimmed); one warning
    assert (refusal.path, refusal.value_used) == ("agents.list[1].id", None)
    assert refusal.message.startswith('id " OPS " has whitespace around it (doctor makes it agents.entries.ops-2): ')
    assert not loaded.for_agent("ops").enabled and not loaded.gen9.for_agent("ops").enabled  # the first one
    # 2026.9: a gateway that starts has rewritten the list as doctor does: each entry its own agent
    assert loaded.gen9.agent_ids == ("ops", "ops-2", "ops-3")
    assert loaded.gen9.for_agent("ops-2").enabled and loaded.gen9.for_agent("ops-3").enabled


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
        ("agents.entries.ops", f"resolves to agent 'ops' like agents.entries.Ops; {REFUSED}")
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
    refused = [(path, f"not an object; {REFUSED}") for path, _ in expected]  # the 2026.9 entry schema
    assert [(w.path, w.message) for w in loaded.gen9.warnings] == [("agents.list", CONVERTED), *refused]
    assert loaded.gen9.for_agent("a") == loaded.gen9.default_config == loaded.gen9.for_agent("b")
    keyed = {"agents": {"entries": {"a": {"tools": 3}, "b": {"tools": None}}}}
    gen9 = LoadedConfig.from_document(keyed).gen9
    # null too: AgentToolsSchema is object(...).optional(), which takes a missing key, not null (a 2026.9.6
    # gateway stops with "agents.entries.b.tools: Invalid input: expected object, received null")
    assert [(w.path, w.message) for w in gen9.warnings] == [
        ("agents.entries.a.tools", f"not an object; {REFUSED}"),
        ("agents.entries.b.tools", f"not an object; {REFUSED}"),
    ]
    assert gen9.agent_ids == ("a", "b") and gen9.for_agent("a") == gen9.default_config


def test_a_blank_entries_key_is_agent_main() -> None:
    """The 2026.9 schema refuses a blank key; the best-effort reading normalises it as any agent id, to ``main``
    (the first one for main wins)."""
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
    assert [(w.path, w.message) for w in gen9.warnings] == [
        ('agents.entries.""', f"{KEY_INVALID}; {REFUSED}"),
        ('agents.entries."  "', f"{KEY_INVALID}; {REFUSED}"),
    ]
    # A "main" key before it is the one read.
    first = {"agents": {"entries": {"main": {}, "": {"tools": {"loopDetection": {"enabled": False}}}}}}
    assert LoadedConfig.from_document(first).gen9.for_agent("main").guard_enabled


# --- where OpenClaw 2026.9.6 refuses the roster: legacy.roster-*.mjs (parseLegacyAgentRoster,
# projectLegacyAgentRosterEntries) and AgentsSchema in zod-schema-*.mjs ----------------------------------------


def test_a_list_the_load_converts_is_read_with_one_note() -> None:
    doc = {"agents": {"list": [{"id": "ops", "tools": {"loopDetection": {"enabled": False}}}, {"id": "_b"}]}}
    gen9 = LoadedConfig.from_document(doc).gen9
    assert [(w.path, w.message) for w in gen9.warnings] == [("agents.list", CONVERTED)]
    assert CONVERTED == (
        "moved to keyed agents.entries in 2026.8+; OpenClaw 2026.9 converts it to agents.entries (same ids) when it "
        "loads the config; still read"
    )
    assert gen9.agent_ids == ("ops", "_b") and not gen9.for_agent("ops").guard_enabled


def test_why_the_load_does_not_convert_a_list_and_what_doctor_makes_of_it() -> None:
    cases: list[tuple[list[object], tuple[int, str, str] | None]] = [
        ([{"id": "a"}, {"id": "b-2"}], None),
        ([], None),
        ([{"id": "a"}, 3], (1, "agents.list[1]", "3 is not an object")),
        ([{"name": "x"}], (0, "agents.list[0]", "no id")),
        ([{"id": None}], (0, "agents.list[0].id", "id null is not a string")),
        ([{"id": ""}], (0, "agents.list[0].id", 'blank id ""')),
        ([{"id": " a"}], (0, "agents.list[0].id", 'id " a" has whitespace around it')),
        ([{"id": "My Agent"}], (0, "agents.list[0].id", 'id "My Agent" is not canonical (would be my-agent)')),
        ([{"id": "a"}, {"id": "b"}, {"id": "a"}], (2, "agents.list[2].id", 'id "a" repeats agents.list[0]')),
    ]
    for agent_list, expected in cases:
        assert list_problem(agent_list) == expected, agent_list
    assert doctor_ids([{"id": "ops"}, "x", {"id": " OPS "}, {}, {"id": " "}, {"id": "ops"}, {"id": "My Agent"}]) == [
        "ops",
        None,
        "ops-2",
        "agent",
        "agent-2",
        "ops-3",
        "my-agent",
    ]
    gen9 = LoadedConfig.from_document({"agents": {"list": [{"id": "a"}, {"id": "My Agent"}]}}).gen9
    [warning] = gen9.warnings
    assert (warning.path, warning.value_used) == ("agents.list[1].id", None)
    assert warning.message == (
        'id "My Agent" is not canonical (would be my-agent) (doctor makes it agents.entries.my-agent): OpenClaw '
        "2026.9 converts agents.list to agents.entries when loading only if every entry is an object whose id is a "
        "string in canonical form and unique; this list stays, and the 2026.9 schema refuses a config with "
        "agents.list. Gateway startup rewrites a single-file config as `openclaw doctor --fix` does (entries that "
        "are not objects dropped, a missing or blank id becomes 'agent', ids trimmed and normalised, a repeated id "
        "gets -2, -3, ...) and then starts; a config with $include, Nix-managed or written by a newer OpenClaw is "
        "not rewritten and the gateway does not start"
    )
    assert gen9.agent_ids == ("a", "my-agent")  # the best-effort reading is unchanged
    dropped = LoadedConfig.from_document({"agents": {"list": ["x"]}}).gen9.warnings[0]
    assert dropped.message.startswith('"x" is not an object (doctor drops it): ') and dropped.value_used is None


def test_entries_the_schema_refuses() -> None:
    doc = {
        "tools": {"loopDetection": {"enabled": True}},
        "agents": {
            "entries": {
                "My Agent": {"tools": {"loopDetection": {"enabled": False}}},
                "-x": {},
                "_ok": {},
                "my-agent": {"tools": {"loopDetection": {"enabled": True}}},
                "a" * 65: {},
            }
        },
    }
    gen9 = LoadedConfig.from_document(doc).gen9
    assert [(w.path, w.message) for w in gen9.warnings] == [
        ("agents.entries.My Agent", f"{KEY_INVALID}; {REFUSED}"),
        ("agents.entries.-x", f"{KEY_INVALID}; {REFUSED}"),
        ("agents.entries.my-agent", f"resolves to agent 'my-agent' like agents.entries.My Agent; {REFUSED}"),
        (f"agents.entries.{'a' * 65}", f"{KEY_INVALID}; {REFUSED}"),
    ]
    assert not gen9.for_agent("my-agent").enabled  # best effort: the first key of an id, as before
    explicit = {"ownership": "explicit", "entries": {}}
    assert [(w.path, w.message) for w in LoadedConfig.from_document({"agents": explicit}).gen9.warnings] == [
        ("agents.entries", f'empty while agents.ownership is "explicit"; {REFUSED}')
    ]
    listed = {"ownership": "explicit", "list": []}
    assert [(w.path, w.message) for w in LoadedConfig.from_document({"agents": listed}).gen9.warnings] == [
        ("agents.list", f'empty while agents.ownership is "explicit"; {REFUSED}')
    ]
    # Without explicit ownership the load adds agent main to an empty roster: nothing to report.
    assert LoadedConfig.from_document({"agents": {"entries": {}}}).gen9.warnings == ()
    for agents, path in (("x", "agents"), ({"entries": []}, "agents.entries"), ({"list": {}}, "agents.list")):
        [warning] = LoadedConfig.from_document({"agents": agents}).gen9.warnings
        assert warning.path == path and warning.message.endswith(REFUSED), agents


def test_what_the_strict_2026_9_block_refuses_and_what_startup_strips() -> None:
    """The 2026.9 block's schema is strict: an unknown key, or an enabled that is not a boolean (null included),
    refuses the config; a retired 2026.7 knob is stripped at startup, so it is only ignored."""
    from streams.detection.gen9_config import block_warnings
    from streams.detection.gen9_roster import REFUSED

    warnings = {w.path: w.message for w in block_warnings({"enabled": "yes", "foo": 1, "criticalThreshold": 5}, "b")}
    assert warnings["b.enabled"].startswith('"yes" is not a boolean (read anyway: detection off')
    assert warnings["b.foo"] == f"unknown key (not in the 2026.9 tools.loopDetection schema); {REFUSED}"
    assert REFUSED not in warnings["b.criticalThreshold"] and "ignored" in warnings["b.criticalThreshold"]
    assert all(m.endswith(REFUSED) for m in (warnings["b.enabled"], warnings["b.foo"]))
    [null] = block_warnings({"enabled": None}, "b")
    assert null.message.startswith("null is not a boolean") and null.message.endswith(REFUSED)


# --- a config, tools or loopDetection that is not an object: ignored by 2026.7's reading, refused by 2026.9's ---------

_NOT_OBJECTS: list[tuple[object, list[tuple[str, str]], list[tuple[str, str]]]] = [
    # (document, 2026.7 warnings, 2026.9 warnings); what a 2026.9.6 gateway says (`openclaw gateway run`) in comments
    ([1, 2], [("(root)", "the config is not an object; ignored")], [("(root)", "the config is not an object")]),
    (None, [("(root)", "the config is not an object; ignored")], [("(root)", "the config is not an object")]),
    ("str", [("(root)", "the config is not an object; ignored")], [("(root)", "the config is not an object")]),
    # <root>: Invalid input: expected object, received array / null / string
    ({"tools": 5}, [("tools", "not an object; ignored")], [("tools", "not an object")]),
    ({"tools": []}, [("tools", "not an object; ignored")], [("tools", "not an object")]),
    ({"tools": None}, [], [("tools", "not an object")]),  # tools: ... expected object, received null
    (
        {"tools": {"loopDetection": 5}},
        [("tools.loopDetection", "5 is not an object; treated as absent")],
        [("tools.loopDetection", "5 is not an object")],
    ),
    (
        {"tools": {"loopDetection": []}},
        [("tools.loopDetection", "[] is not an object; treated as absent")],
        [("tools.loopDetection", "[] is not an object")],
    ),
    ({"tools": {"loopDetection": None}}, [], [("tools.loopDetection", "null is not an object")]),
    ({"agents": None}, [], [("agents", "not an object")]),  # agents: ... expected object, received null
    ({"agents": {"entries": None}}, [], [("agents.entries", "not an object")]),  # expected record, received null
    ({"agents": {"list": None}}, [], [("agents.list", "not an array")]),  # agents: Unrecognized key: "list"
    (
        {"agents": {"entries": {"a": {"tools": {"loopDetection": None}}}}},
        [("agents.entries", "read only by openclaw-2026.9; under openclaw-2026.7 it is ignored")],
        [("agents.entries.a.tools.loopDetection", "null is not an object")],
    ),
]


def test_a_config_tools_or_block_that_is_not_an_object_is_refused_under_2026_9() -> None:
    """Under 2026.9 ``[1,2]``, ``null``, ``"str"``, ``{tools: 5}`` passed with no warning (exit 0), and a
    ``tools.loopDetection`` that is not an object was "treated as absent": OpenClaw 2026.9.6's schema refuses each
    (its root is a strict object, ``tools`` and ``loopDetection`` are ``object(...).optional()``, which takes a
    missing key but not null), so the gateway does not start. The 2026.7 reading is unchanged."""
    for document, gen7, gen9 in _NOT_OBJECTS:
        loaded = LoadedConfig.from_document(document)
        assert [(w.path, w.message) for w in loaded.warnings] == gen7, document
        assert [(w.path, w.message) for w in loaded.gen9.warnings] == [(p, f"{m}; {REFUSED}") for p, m in gen9]
        assert loaded.gen9.default_config.enabled is False and loaded.gen9.agent_ids in ((), ("a",))
    # No config file (and the blocks whatif builds) is no tools at all, not tools.loopDetection: null.
    assert LoadedConfig.default().gen9.warnings == () == LoadedConfig({"enabled": True}).gen9.warnings
    # The best-effort reading keeps what is usable next to a refused part.
    both = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True}}, "agents": {"entries": None}})
    assert both.gen9.default_config.enabled is True


def test_config_check_exits_1_on_a_config_openclaw_2026_9_refuses(tmp_path: Path) -> None:
    """The command exited 0 under ``--profile openclaw-2026.9`` for these files, where the gateway does not start."""
    for text, path in [
        ("[1,2]", "(root)"),
        ("null", "(root)"),
        ('"str"', "(root)"),
        ("{tools:5}", "tools"),
        ("{tools:{loopDetection:5}}", "tools.loopDetection"),
        ("{tools:{loopDetection:[]}}", "tools.loopDetection"),
    ]:
        file = tmp_path / "a.json5"
        file.write_text(text + "\n", encoding="utf-8")
        for profile in (PROFILE_2026_7, PROFILE_2026_9):
            done = _check(file, "--profile", profile)
            [line] = done.stderr.splitlines()
            assert done.returncode == 1 and line.startswith(f"warning: {path}: "), (text, profile, done.stderr)
            assert line.endswith(REFUSED) == (profile == PROFILE_2026_9), line
