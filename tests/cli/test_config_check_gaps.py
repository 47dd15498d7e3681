"""Gaps a QA pass of ``loopwatch config check`` (a CI gate for OpenClaw configs) and of the profiles found.

A non-object ``agents.list`` entry passed without a warning and warnings came out of document order;
``agents.entries`` (read only by 2026.9) passed the default 2026.7 gate with exit 0, and under 2026.9 a retired key
did not name 2026.7 and an agents.list entry without an id passed silently; a huge threshold resolved to exact
integers where OpenClaw computes doubles; and four error lines named the wrong source or gave no hint. The
pure parts are tested directly, the rest through the real executable from an empty directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.config_file import ConfigFileError, format_warning, load_openclaw_config
from streams.detection.gen9_roster import CONVERTED, KEY_INVALID, NOT_CONVERTED, REFUSED
from streams.profile_choice import load_profile_choice
from tests.support.cli import CONFIG, Result, lw

PROFILES = "openclaw-2026.7, openclaw-2026.9"
ROW = 'each row is {from: "2026.8.0", profile: "openclaw-2026.9"}'
HEADER = "agent      enabled  history  warn  crit  unknown  global  generic  poll  pingpong  guard  window"
DEFAULT_ROW = "(default)  true     30       10    20    10       30      true     true  true      true   3"


@pytest.fixture
def empty(empty: Path) -> Path:
    """The shared empty directory (tests/cli/conftest.py), with an empty events file for replay."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    return empty


def write(directory: Path, name: str, text: str) -> str:
    (directory / name).write_text(text, encoding="utf-8")
    return name


def one_line(result: Result, code: int, line: str) -> None:
    assert (result.code, result.out, result.err) == (code, "", line + "\n")


# --- 1. non-object agents.list entries, warnings in document order -----------------------------------------------


def test_non_object_entries_warn_in_document_order(empty: Path) -> None:
    name = write(
        empty,
        "c.json5",
        """{ tools: { loopDetection: { enabled: true } },
  agents: { list: [ {id: "a"}, {id: "a"}, {id: "b", tools: {loopDetection: {warningThreshold: 0}}},
                    {tools: {loopDetection: {}}}, "str", 3, null ] } }""",
    )
    result = lw(empty, "config", "check", name)
    assert result.code == 1
    assert result.out.splitlines()[:4] == [
        HEADER,
        DEFAULT_ROW,
        "a          true     30       10    20    10       30      true     true  true      true   3",
        "b          true     30       10    20    10       30      true     true  true      true   3",
    ]
    # the library's warnings, in document order (their exact texts: tests/test_config_file.py)
    assert result.err.splitlines() == [format_warning(w) for w in load_openclaw_config(empty / name).warnings]
    assert [line.split(":")[1].strip() for line in result.err.splitlines()] == [
        f"agents.list[{i}]{'.id' if i in (1, 3) else '.tools.loopDetection.warningThreshold' if i == 2 else ''}"
        for i in range(1, 7)
    ]


def test_a_list_of_only_non_objects_fails_the_gate(empty: Path) -> None:
    name = write(empty, "c.json5", '{tools: {loopDetection: {enabled: true}}, agents: {list: ["coder"]}}')
    result = lw(empty, "config", "check", name)
    assert (result.code, result.err) == (1, 'warning: agents.list[0]: "coder" is not an object; ignored\n')
    as9 = lw(empty, "config", "check", name, "--profile", "openclaw-2026.9")
    assert (as9.code, as9.err.splitlines()) == (
        1,
        [f'warning: agents.list[0]: "coder" is not an object (doctor drops it): {NOT_CONVERTED}'],
    )


# --- 2. a key only the other profile reads ----------------------------------------------------------------------

ENTRIES = (
    "{tools: {loopDetection: {enabled: true}}, agents: {entries: {ops: {tools: {loopDetection: {enabled: false}}}}}}"
)


def test_agents_entries_fails_the_2026_7_gate(empty: Path) -> None:
    name = write(empty, "c.json5", ENTRIES)
    result = lw(empty, "config", "check", name)
    assert (result.code, result.out.splitlines()[:2]) == (1, [HEADER, DEFAULT_ROW])
    assert result.err == "warning: agents.entries: read only by openclaw-2026.9; under openclaw-2026.7 it is ignored\n"
    as_json = lw(empty, "config", "check", name, "--json")
    assert as_json.code == 1
    assert json.loads(as_json.out)["warnings"] == [
        {
            "path": "agents.entries",
            "message": "read only by openclaw-2026.9; under openclaw-2026.7 it is ignored",
            "value_used": None,
        }
    ]
    as9 = lw(empty, "config", "check", name, "--profile", "openclaw-2026.9")
    assert (as9.code, as9.err) == (0, "")  # the generation that reads it: nothing to say
    assert as9.out.splitlines()[2] == "ops        false    false  3"


def test_agents_list_next_to_entries_fails_the_2026_9_gate(empty: Path) -> None:
    name = write(empty, "c.json5", '{agents: {entries: {}, list: [{id: "ops"}]}}')
    result = lw(empty, "config", "check", name, "--profile", "openclaw-2026.9")
    assert (result.code, result.err) == (
        1,
        "warning: agents.list: read only by openclaw-2026.7 when agents.entries is set; under openclaw-2026.9 it is "
        "ignored\n",
    )


def test_replay_reports_agents_entries_under_the_default_profile(empty: Path) -> None:
    name = write(empty, "c.json5", ENTRIES)
    result = lw(empty, "replay", "--events", "events.jsonl", "--config", name)
    assert result.code == 0
    assert result.err.splitlines()[0] == (
        "loopwatch replay: warning: agents.entries: read only by openclaw-2026.9; under openclaw-2026.7 it is ignored"
    )


def test_2026_9_names_2026_7_keys_and_warns_about_an_entry_without_an_id(empty: Path) -> None:
    """Under 2026.9 a threshold key did not say 2026.7 reads it, and an id-less entry's block was dropped silently."""
    name = write(
        empty,
        "c.json5",
        "{tools: {loopDetection: {enabled: true, criticalThreshold: 15}},\n"
        ' agents: {list: [{id: "ops"}, {tools: {loopDetection: {enabled: false}}}]}}',
    )
    ignored = (
        "warning: agents.list[1].id: missing or not a string (OpenClaw's config schema requires a string id); this "
        "entry's tools.loopDetection is ignored"
    )
    as9 = lw(empty, "config", "check", name, "--profile", "openclaw-2026.9")
    assert (as9.code, as9.out.splitlines()[:3]) == (
        1,
        ["agent      enabled  guard  window", "(default)  true     true   3", "ops        true     true   3"],
    )
    assert as9.err.splitlines() == [
        "warning: tools.loopDetection.criticalThreshold: read only by openclaw-2026.7 (retired in OpenClaw 2026.8, "
        "openclaw doctor removes it); under openclaw-2026.9 it is ignored: the built-in value applies (using 20)",
        f"warning: agents.list[1]: no id (doctor makes it agents.entries.agent): {NOT_CONVERTED}",
    ]
    as7 = lw(empty, "config", "check", name)  # the line that reads the threshold: the same entry warning
    assert (as7.code, as7.out.splitlines()[1].split()[4], as7.err) == (1, "15", ignored + "\n")


def test_2026_9_warns_about_duplicate_ids_non_object_tools_and_blank_entries_keys(empty: Path) -> None:
    """Three settings OpenClaw never reads passed the 2026.9 gate silently (2026.7 warned about the first two), and
    a blank ``agents.entries`` key, which OpenClaw reads as agent main, was dropped."""
    listed = write(
        empty,
        "list.json5",
        "{tools: {loopDetection: {enabled: true}}, agents: {list: [\n"
        '  {id: "ops", tools: {loopDetection: {enabled: false}}},\n'
        '  {id: "Ops", tools: {loopDetection: {enabled: true}}},\n'
        '  {id: "qa", tools: "off"}]}}',
    )
    as9 = lw(empty, "config", "check", listed, "--profile", "openclaw-2026.9")
    assert (as9.code, as9.out.splitlines()[2:5]) == (  # the gateway that starts has doctor's ids: Ops is ops-2
        1,
        ["ops        false    false  3", "ops-2      true     true   3", "qa         true     true   3"],
    )
    assert as9.err.splitlines() == [
        'warning: agents.list[1].id: id "Ops" is not canonical (would be ops) (doctor makes it agents.entries.ops-2): '
        f"{NOT_CONVERTED}",
        f"warning: agents.list[2].tools: not an object; {REFUSED}",
    ]
    as7 = lw(empty, "config", "check", listed)
    assert (as7.code, as7.err.splitlines()) == (
        1,
        [
            "warning: agents.list[1].id: duplicate of agents.list[0] (agent 'ops'); this entry's tools.loopDetection "
            "is ignored",
            "warning: agents.list[2].tools: not an object; ignored",
        ],
    )
    keyed = write(
        empty,
        "entries.json5",
        '{tools: {loopDetection: {enabled: true}}, agents: {entries: {"": {tools: {loopDetection: {enabled: false}}},'
        " ops: {tools: []}}}}",
    )
    result = lw(empty, "config", "check", keyed, "--profile", "openclaw-2026.9")
    assert (result.code, result.out.splitlines()[2:4]) == (
        1,
        ["main       false    false  3", "ops        true     true   3"],
    )
    assert result.err.splitlines() == [
        f'warning: agents.entries."": {KEY_INVALID}; {REFUSED}',
        f"warning: agents.entries.ops.tools: not an object; {REFUSED}",
    ]


# --- 3. numbers as JavaScript's doubles ----------------------------------------------------------------------------


def test_a_huge_threshold_resolves_as_openclaw_doubles(empty: Path) -> None:
    name = write(empty, "c.json5", "{tools: {loopDetection: {enabled: true, warningThreshold: 99999999999999999999}}}")
    result = lw(empty, "config", "check", name)
    big = "100000000000000000000"
    assert result.code == 1
    assert result.out.splitlines()[1].split() == ["(default)", "true", "30", big, big, "10", big, *["true"] * 4, "3"]
    assert result.err.splitlines() == [
        "warning: tools.loopDetection.warningThreshold: 99999999999999999999 is beyond JavaScript's exact integers "
        f"(2**53); OpenClaw reads the nearest double (using {big})",
        "warning: tools.loopDetection.criticalThreshold: criticalThreshold 20 (default) is not above warningThreshold "
        f"{big} (from tools.loopDetection.warningThreshold); raised to warningThreshold + 1 (using {big})",
        "warning: tools.loopDetection.globalCircuitBreakerThreshold: globalCircuitBreakerThreshold 30 (default) is "
        f"not above criticalThreshold {big}; raised to criticalThreshold + 1 (using {big})",
    ]
    resolved = json.loads(lw(empty, "config", "check", name, "--json").out)["default"]
    assert [resolved[k] for k in ("warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold")] == [
        10**20
    ] * 3


def test_normal_thresholds_are_unchanged(empty: Path) -> None:
    name = write(empty, "c.json5", "{tools: {loopDetection: {enabled: true, warningThreshold: 4503599627370496}}}")
    result = lw(empty, "config", "check", name)  # 2**52: every + 1 is exact
    assert result.out.splitlines()[1].split()[3:7] == ["4503599627370496", "4503599627370497", "10", "4503599627370498"]


# --- 4. error lines that name their source and say what to do ------------------------------------------------------


def test_bad_default_profile_variable_is_named(empty: Path) -> None:
    result = lw(empty, "replay", "--events", "events.jsonl", env={"LOOPWATCH_DEFAULT_PROFILE": "bogus"})
    one_line(
        result,
        2,
        "loopwatch replay: LOOPWATCH_DEFAULT_PROFILE='bogus' is not a known profile (--default-profile): use one of "
        + PROFILES,
    )
    config = write(empty, "on.json5", CONFIG)
    flag_wins = lw(
        empty,
        "replay",
        "--events",
        "events.jsonl",
        "--config",
        config,
        "--default-profile",
        "openclaw-2026.9",
        env={"LOOPWATCH_DEFAULT_PROFILE": "bogus"},
    )
    assert (flag_wins.code, flag_wins.err) == (0, "")


def test_profiles_variable_is_named(empty: Path) -> None:
    result = lw(empty, "replay", "--events", "events.jsonl", env={"LOOPWATCH_PROFILES": "missing.json5"})
    one_line(
        result,
        2,
        "loopwatch replay: cannot use the profiles file (LOOPWATCH_PROFILES=missing.json5): cannot read: No such "
        "file or directory; check the path given to LOOPWATCH_PROFILES",
    )
    flag = lw(empty, "replay", "--events", "events.jsonl", "--profiles", "missing.json5")
    one_line(
        flag,
        2,
        "loopwatch replay: cannot use the profiles file (--profiles missing.json5): cannot read: No such file or "
        "directory; check the path given to --profiles",
    )


@pytest.mark.parametrize(
    ("versions", "reason"),
    [
        ('[{from: "2026.8.0"}]', f"versions[0] lacks profile; {ROW}"),
        (
            '[{from: "2026.8.0", profile: "openclaw-2026.9"}, {profile: "openclaw-2026.7"}]',
            f"versions[1] lacks from; {ROW}",
        ),
        ('["openclaw-2026.9"]', f"versions[0] is not an object; {ROW}"),
        ('[{from: "2026.8.0", profile: null}]', f"versions[0].profile: null is not a profile name (known: {PROFILES})"),
    ],
)
def test_versions_row_mistakes_are_named(empty: Path, versions: str, reason: str) -> None:
    name = write(empty, "p.json5", f"{{versions: {versions}}}")
    with pytest.raises(ConfigFileError) as info:
        load_profile_choice(empty / name)
    assert info.value.reason == reason
    result = lw(empty, "replay", "--events", "events.jsonl", "--profiles", name)
    one_line(result, 2, f"loopwatch replay: cannot use the profiles file (--profiles p.json5): {reason}")


def test_unreadable_config_says_what_to_check(empty: Path) -> None:
    missing = "cannot use the config file (missing.json5): cannot read: No such file or directory"
    one_line(lw(empty, "config", "check", "missing.json5"), 2, f"loopwatch config check: {missing}; check the path")
    replay = lw(empty, "replay", "--events", "events.jsonl", "--config", "missing.json5")
    one_line(replay, 2, f"loopwatch replay: {missing}; check the path given to --config")
    worker = lw(empty, "worker", env={"LOOPWATCH_CONFIG": "missing.json5"})
    one_line(worker, 2, f"loopwatch worker: {missing}; check the path in LOOPWATCH_CONFIG")
    write(empty, "on.json5", CONFIG)
    worker_flag = lw(empty, "worker", "--config", "missing.json5", env={"LOOPWATCH_CONFIG": "on.json5"})
    one_line(worker_flag, 2, f"loopwatch worker: {missing}; check the path given to --config")


def test_2026_9_says_where_openclaw_refuses_the_roster(empty: Path) -> None:
    """A list the 2026.9 load converts is read with one note (exit 1, like any warning); a list it does not convert,
    and ``agents.entries`` keys its schema refuses, are one warning each, naming the refusal; the reading stays."""
    converted = write(
        empty, "converted.json5", '{agents: {list: [{id: "ops", tools: {loopDetection: {enabled: true}}}]}}'
    )
    result = lw(empty, "config", "check", converted, "--profile", "openclaw-2026.9")
    assert (result.code, result.err, result.out.splitlines()[2]) == (
        1,
        f"warning: agents.list: {CONVERTED}\n",
        "ops        true     true   3",
    )
    refused = write(
        empty,
        "refused.json5",
        '{agents: {ownership: "explicit", entries: {"My Agent": {tools: {loopDetection: {enabled: true}}},'
        ' "my-agent": {}}}}',
    )
    result = lw(empty, "config", "check", refused, "--profile", "openclaw-2026.9", "--json")
    assert result.code == 1
    document = json.loads(result.out)
    assert document["warnings"] == [
        {"path": "agents.entries.My Agent", "message": f"{KEY_INVALID}; {REFUSED}", "value_used": None},
        {
            "path": "agents.entries.my-agent",
            "message": f"resolves to agent 'my-agent' like agents.entries.My Agent; {REFUSED}",
            "value_used": None,
        },
    ]
    assert document["agents"]["my-agent"]["enabled"] is True  # best effort: the first key of the id


# --- 4. what a 2026.9 gateway refuses, deep nesting, numbers as JavaScript prints them ------------------------------


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[1,2]", "(root): the config is not an object"),
        ("null", "(root): the config is not an object"),
        ("{tools:5}", "tools: not an object"),
        ("{tools:{loopDetection:null}}", "tools.loopDetection: null is not an object"),
    ],
)
def test_2026_9_refuses_a_config_or_tools_that_is_not_an_object(empty: Path, text: str, line: str) -> None:
    """These exited 0 under 2026.9; a 2026.9.6 gateway stops with "Invalid config" on each."""
    name = write(empty, "a.json5", text)
    result = lw(empty, "config", "check", name, "--profile", "openclaw-2026.9")
    assert (result.code, result.err) == (1, f"warning: {line}; {REFUSED}\n")


def test_a_deeply_nested_config_is_read_and_a_deeper_one_named(empty: Path) -> None:
    """60 levels in an unrelated key were "nested too deeply; the file must be JSON5" at 1:1, exit 2."""
    body = "{tools: {loopDetection: {enabled: true}}, a: %s}"
    name = write(empty, "d.json5", body % ("[" * 59 + "]" * 59))
    result = lw(empty, "config", "check", name)
    assert (result.code, result.err, result.out.splitlines()[:2]) == (0, "", [HEADER, DEFAULT_ROW])
    name = write(empty, "e.json5", body % ("[" * 1000 + "]" * 1000))
    column = len("{tools: {loopDetection: {enabled: true}}, a: ") + 1000  # the bracket opening level 1,001
    one_line(
        lw(empty, "config", "check", name),
        2,
        f"loopwatch config check: cannot use the config file (e.json5:1:{column}): nested deeper than 1000 levels "
        "(the limit of loopwatch's JSON5 parser); nest it less deeply",
    )


def test_huge_numbers_print_as_javascript_does(empty: Path) -> None:
    """1e308 was printed with 309 digits in the table and in --json."""
    name = write(empty, "c.json5", "{tools: {loopDetection: {enabled: true, warningThreshold: 1e308}}}")
    result = lw(empty, "config", "check", name)
    assert result.code == 1
    assert result.out.splitlines()[1].split()[3:7] == ["1e+308", "1e+308", "10", "1e+308"]
    assert all(line.endswith("(using 1e+308)") for line in result.err.splitlines())
    out = lw(empty, "config", "check", name, "--json").out
    document = json.loads(out)
    assert document["default"]["warningThreshold"] == 1e308 and document["warnings"][0]["value_used"] == 1e308
    assert '"warningThreshold": 1e+308,' in out


# --- a history longer than loopwatch can store of a run ------------------------------------------------------


def test_a_history_too_long_to_store_fails_the_gate_where_it_is_set(empty: Path) -> None:
    """A run's state is stored as one Kafka record: a history of thousands of calls outgrows it whatever the
    ids, and the run's later events would be dead-lettered. Said where the size is set, inherited or not."""
    name = write(
        empty,
        "c.json5",
        """{ tools: { loopDetection: { enabled: true, historySize: 15000 } },
  agents: { list: [ {id: "a", tools: {loopDetection: {historySize: 20000}}}, {id: "b"},
                    {id: "c", tools: {loopDetection: {historySize: 100}}} ] } }""",
    )
    result = lw(empty, "config", "check", name)
    assert result.code == 1
    tail = (
        "a run's state outgrows what loopwatch can store of it (990,000 bytes) after about 15,230 calls, fewer "
        "with long ids; its later events are then dead-lettered (state_too_large) (using 20000)"
    )
    assert result.err.splitlines() == [f"warning: agents.list[0].tools.loopDetection.historySize: {tail}"]
    result = lw(empty, "config", "check", write(empty, "d.json5", "{tools: {loopDetection: {historySize: 16000}}}"))
    assert result.code == 1
    assert result.err == f"warning: tools.loopDetection.historySize: {tail.replace('20000', '16000')}\n"


@pytest.mark.parametrize("profile", ["openclaw-2026.7", "openclaw-2026.9"])
def test_an_id_openclaw_keeps_nothing_of_is_named_as_agent_main(empty: Path, profile: str) -> None:
    """Ids like "日本語" or "☃" normalise to the default agent, as a blank id does: the entry's settings then switched
    detection on for ``main`` with exit 0 and no word under 2026.7 (2026.9 named it already: such a list is not
    converted). Ids that keep something ("My Agent", "MAIN", "main!") stay quiet."""
    said = (
        "agents.list[{}].id: OpenClaw keeps nothing of it (only letters a-z, digits, '_' and inner '-' remain), so "
        "it reads this entry as agent 'main' (using main)"
    )
    if profile == "openclaw-2026.9":  # each with its own reason, all naming where the entry lands
        said = "agents.list[{}].id: id {} "
    for ident in ("日本語", " ☃ ", "--"):
        entry = {"id": ident, "tools": {"loopDetection": {"enabled": True}}}
        name = write(empty, "c.json", json.dumps({"agents": {"list": [entry]}}))
        result = lw(empty, "config", "check", name, "--profile", profile)
        assert result.code == 1, (ident, result)
        assert said.format(0, json.dumps(ident, ensure_ascii=False)) in result.err, (ident, result.err)
        assert profile == "openclaw-2026.7" or "agents.entries.main)" in result.err, result.err
        assert any(line.startswith("main ") for line in result.out.splitlines()), result.out
    for ident, shown in (("My Agent", "my-agent"), ("MAIN", "main"), ("main!", "main"), ("-Main-", "main")):
        entry = {"id": ident, "tools": {"loopDetection": {"enabled": True}}}
        name = write(empty, "c.json", json.dumps({"agents": {"list": [entry]}}))
        result = lw(empty, "config", "check", name, "--profile", profile)
        assert "keeps none" not in result.err, (ident, result.err)
        assert any(line.startswith(f"{shown} ") for line in result.out.splitlines()), result.out
