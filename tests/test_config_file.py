"""OpenClaw config files (JSON5) and ``loopwatch config check``."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.cli import main
from streams.config_2026_9 import document_position
from streams.config_file import (
    ENTRIES_IGNORED,
    MAX_NESTING,
    ConfigFileError,
    LoadedConfig,
    format_value,
    format_warning,
    json_numbers,
    load_openclaw_config,
    nesting_depth,
    parse_json5,
)
from streams.detection.canonical import js_number
from streams.detection.config import resolve_loop_config
from streams.detection.types import PROFILE_2026_9, LoopConfig

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
    assert [w.path for w in loaded.warnings] == [  # in document order
        "tools.loopDetection",
        "agents.list[0]",
        "agents.list[1].id",
        "agents.list[3].id",
        "agents.list[4].tools",
    ]
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
    assert capsys.readouterr().err.endswith("cannot read: No such file or directory; check the path\n")
    # a directory and an unreadable file are no wrong path: each says what the file must be
    assert main(["config", "check", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith("cannot read: Is a directory; give the path of a file in it\n")
    denied = write(tmp_path, "{}")
    with patch("builtins.open", side_effect=PermissionError(13, "Permission denied")):
        assert main(["config", "check", str(denied)]) == 2
    assert capsys.readouterr().err.endswith("cannot read: Permission denied; the file must be readable\n")
    # the profiles file by the same rule
    events = tmp_path / "events.jsonl"
    events.write_text("", encoding="utf-8")
    assert main(["replay", "--events", str(events), "--profiles", str(tmp_path)]) == 2
    assert capsys.readouterr().err.endswith(f"(--profiles {tmp_path}): cannot read: Is a directory; give the path of a "
                                            "file in it\n")  # fmt: skip


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


# --- QA pass: non-object entries, document order, agents.entries under 2026.7, JavaScript numbers ------------


def test_a_non_object_agent_entry_is_one_warning_in_document_order() -> None:
    """Was silently skipped; and structural warnings (ids) came before block warnings of earlier entries."""
    doc = {
        "agents": {
            "list": [
                {"id": "a"},
                {"id": "a"},
                {"id": "b", "tools": {"loopDetection": {"warningThreshold": 0}}},
                {"tools": {"loopDetection": {}}},
                "str",
                3,
                None,
            ]
        }
    }
    assert [format_warning(w) for w in LoadedConfig.from_document(doc).warnings] == [
        "warning: agents.list[1].id: duplicate of agents.list[0] (agent 'a'); OpenClaw uses the first entry",
        "warning: agents.list[2].tools.loopDetection.warningThreshold: 0 is not a positive integer; the default "
        "applies (using 10)",
        "warning: agents.list[3].id: missing or not a string (OpenClaw's config schema requires a string id); "
        "this entry's tools.loopDetection is ignored",
        'warning: agents.list[4]: "str" is not an object; ignored',
        "warning: agents.list[5]: 3 is not an object; ignored",
        "warning: agents.list[6]: null is not an object; ignored",
    ]
    gen9 = LoadedConfig.from_document(doc).warnings_for(PROFILE_2026_9)
    # 2026.9's load does not convert this list: one warning where it stops (the repeated id), before the block's.
    assert [w.path for w in gen9] == ["agents.list[1].id", "agents.list[2].tools.loopDetection.warningThreshold"]


def test_document_position_follows_keys_indexes_and_dotted_ids() -> None:
    doc = {"agents": {"entries": {"a.b": {"tools": {}}, "a": 1}}, "tools": {"loopDetection": {"x": 1, "y": 2}}}
    assert document_position(doc, "tools.loopDetection.y") == (1, 0, 1)
    assert document_position(doc, "tools.loopDetection.missing") == (1, 0, 2)  # after what is there
    assert document_position(doc, "agents.entries.a.b.tools.loopDetection") == (0, 0, 0, 0, 0)
    assert document_position(doc, "agents.entries.a") == (0, 0, 1)
    assert document_position({"l": [0, {"k": 1}]}, "l[1].k") == (0, 1, 0)
    assert document_position({"l": [0]}, "l[5].k") == (0, 1)
    assert document_position([1], "(root)") == (1,)


def test_agents_before_tools_are_reported_first() -> None:
    doc = {"agents": {"list": [7]}, "tools": {"loopDetection": {"bogus": 1}}}
    assert [w.path for w in LoadedConfig.from_document(doc).warnings] == [
        "agents.list[0]",
        "tools.loopDetection.bogus",
    ]


def test_agents_entries_under_2026_7_is_reported() -> None:
    """A config in the 2026.8+ layout passed the 2026.7 gate (exit 0) while its override was never read."""
    doc = {"agents": {"entries": {"ops": {"tools": {"loopDetection": {"enabled": False}}}}}}
    loaded = LoadedConfig.from_document(doc)
    assert [format_warning(w) for w in loaded.warnings] == [
        "warning: agents.entries: read only by openclaw-2026.9; under openclaw-2026.7 it is ignored"
    ]
    assert loaded.warnings[0].message == ENTRIES_IGNORED
    assert loaded.warnings_for(PROFILE_2026_9) == ()  # 2026.9 reads it
    assert LoadedConfig.from_document({"agents": {"entries": None}}).warnings == ()
    both = {"agents": {"list": [{"id": "ops"}], "entries": {}}}
    assert [format_warning(w) for w in LoadedConfig.from_document(both).warnings_for(PROFILE_2026_9)] == [
        "warning: agents.list: read only by openclaw-2026.7 when agents.entries is set; under openclaw-2026.9 it is "
        "ignored"
    ]


def _js_resolve(values: dict[str, int | float]) -> tuple[int, int, int]:
    """OpenClaw 2026.7.35's resolveLoopDetectionConfig thresholds, in doubles as JavaScript computes them."""

    def positive(key: str, fallback: float) -> float:
        raw = values.get(key)
        if raw is None:
            return fallback
        try:
            number = float(raw)
        except OverflowError:
            return fallback  # JSON.parse gives Infinity: not an integer
        return number if number.is_integer() and number > 0 else fallback

    warning = positive("warningThreshold", 10.0)
    critical = positive("criticalThreshold", 20.0)
    global_ = positive("globalCircuitBreakerThreshold", 30.0)
    if critical <= warning:
        critical = warning + 1.0
    if global_ <= critical:
        global_ = critical + 1.0
    return int(warning), int(critical), int(global_)


_THRESHOLD = st.one_of(
    st.integers(min_value=-5, max_value=200),
    st.integers(min_value=-4, max_value=4).flatmap(
        lambda d: st.sampled_from([2**52, 2**53, 2**54, 10**20, 2**64, 2**1023]).map(lambda b: b + d)
    ),
    st.integers(min_value=1, max_value=2**1100),
    st.floats(min_value=1, max_value=1e300).map(float.__floor__).map(float),
)


@given(
    st.dictionaries(
        st.sampled_from(["warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold"]), _THRESHOLD
    )
)
def test_thresholds_resolve_as_javascript_doubles(values: dict[str, int | float]) -> None:
    cfg = LoadedConfig.from_document({"tools": {"loopDetection": values}}).default_config
    got = (cfg.warning_threshold, cfg.critical_threshold, cfg.global_circuit_breaker_threshold)
    assert got == _js_resolve(values)
    assert all(type(v) is int for v in got)
    if all(isinstance(v, int) and abs(v) <= 2**52 for v in values.values()):  # normal values: unchanged
        assert cfg == resolve_loop_config(values, None)[0]


def test_a_huge_threshold_is_a_double_and_is_reported() -> None:
    """``99999999999999999999`` resolved to exact integers ending ...001; OpenClaw's doubles give 1e20 for all."""
    doc = {"tools": {"loopDetection": {"enabled": True, "warningThreshold": 99999999999999999999}}}
    loaded = LoadedConfig.from_document(doc)
    big = 10**20
    assert loaded.resolved()["default"]["warningThreshold"] == big
    cfg = loaded.default_config
    assert (cfg.warning_threshold, cfg.critical_threshold, cfg.global_circuit_breaker_threshold) == (big, big, big)
    assert [format_warning(w) for w in loaded.warnings] == [
        "warning: tools.loopDetection.warningThreshold: 99999999999999999999 is beyond JavaScript's exact integers "
        "(2**53); OpenClaw reads the nearest double (using 100000000000000000000)",
        "warning: tools.loopDetection.criticalThreshold: criticalThreshold 20 (default) is not above warningThreshold "
        "100000000000000000000 (from tools.loopDetection.warningThreshold); raised to warningThreshold + 1 (using "
        "100000000000000000000)",
        "warning: tools.loopDetection.globalCircuitBreakerThreshold: globalCircuitBreakerThreshold 30 (default) is "
        "not above criticalThreshold 100000000000000000000; raised to criticalThreshold + 1 (using "
        "100000000000000000000)",
    ]
    assert all(type(w.value_used) is int for w in loaded.warnings)
    beyond = LoadedConfig.from_document({"tools": {"loopDetection": {"historySize": 10**400}}})
    assert beyond.default_config.history_size == 30  # Infinity in JavaScript: not an integer
    assert [w.message for w in beyond.warnings] == ["Infinity is not a positive integer; the default applies"]
    elsewhere = {"gateway": {"port": 2**64 + 1}, "tools": {"loopDetection": {"warningThreshold": 15}}}
    assert LoadedConfig.from_document(elsewhere).warnings == ()  # only numbers loop detection reads are reported


def test_agent_ids_are_matched_by_openclaw_s_normalisation_under_both_lines(tmp_path: Path) -> None:
    """OpenClaw names the agent "My Agent" my-agent (the id its runs and so its events carry), and finds that
    entry's block by the same rule; a plain trim and lower-case missed it, and judged with the global block."""
    on = "tools: { loopDetection: { enabled: true } }"
    off = "tools: { loopDetection: { enabled: false } }"
    listed = load_openclaw_config(write(tmp_path, f'{{ {on}, agents: {{ list: [ {{ id: "My Agent", {off} }} ] }} }}'))
    keyed = load_openclaw_config(write(tmp_path, f'{{ {on}, agents: {{ entries: {{ "Ops.Team": {{ {off} }} }} }} }}'))
    for line, agent in ((listed, "my-agent"), (listed.gen9, "my-agent"), (keyed.gen9, "ops-team")):
        assert not line.for_agent(agent).enabled, agent
        assert line.for_agent("someone-else").enabled


# --- nesting: a valid file nested deeply is read; beyond the parser's limit the error says so -------------------------


def _nested(levels: int, inside: str = "tools: {loopDetection: {enabled: true}}, ") -> str:
    """A config nesting ``levels`` levels in all (the top level is one), ``levels - 1`` of them in key ``a``."""
    return "{" + inside + "a: " + "[" * (levels - 1) + "]" * (levels - 1) + "}\n"


def test_a_valid_file_nested_deeply_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """About 50 levels, even in a key loop detection never reads, were "cannot use the config file (d.json5:1:1):
    nested too deeply; the file must be JSON5" (exit 2): the json5 package recursed into Python's recursion limit.
    Up to MAX_NESTING levels parse now, and the interpreter's limit is as it was afterwards."""
    limit = sys.getrecursionlimit()
    for levels in (60, 400, MAX_NESTING):
        path = write(tmp_path, _nested(levels))
        assert nesting_depth(path.read_text()) == levels
        loaded = load_openclaw_config(path)
        assert loaded.default_config.enabled and loaded.gen9.default_config.enabled and loaded.warnings == ()
        assert sys.getrecursionlimit() == limit
        for profile in ("openclaw-2026.7", "openclaw-2026.9"):
            assert main(["config", "check", str(path), "--profile", profile]) == 0
    capsys.readouterr()
    # A value that deep where a warning shows it: rendered by its start, not a crash.
    deep = "[" * (MAX_NESTING - 4) + "]" * (MAX_NESTING - 4)
    path = write(tmp_path, "{tools: {loopDetection: {enabled: " + deep + "}}}")
    for profile in ("openclaw-2026.7", "openclaw-2026.9"):
        assert main(["config", "check", str(path), "--profile", profile]) == 1
        assert "warning: tools.loopDetection.enabled: [[[[[[" in capsys.readouterr().err
    assert parse_json5("{a: " + "[" * 500 + "]" * 500 + "}") == {"a": _list_nest(500)}  # profiles files too
    # parsed in a thread of its own (the worker's, a test runner's): frames, not C stack, bound it
    found: list[object] = []
    thread = threading.Thread(target=lambda: found.append(load_openclaw_config(path).warnings))
    thread.start()
    thread.join()
    assert len(found) == 1 and found[0]


def _list_nest(levels: int) -> list[object]:
    value: list[object] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_a_file_nested_deeper_than_the_parser_reads_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not a syntax error ("the file must be JSON5"), nor a guess at 1:1: the bracket that opens level 1001, the
    limit, and that it is the parser's."""
    text = _nested(MAX_NESTING + 1)
    path = write(tmp_path, text)
    with pytest.raises(ConfigFileError) as caught:
        load_openclaw_config(path)
    error = caught.value
    column = text.index("a: ") + 3 + MAX_NESTING  # the 1,000th "[" of key a opens level 1,001
    assert (error.line, error.column, error.syntax) == (1, column, False)
    assert error.reason == f"nested deeper than {MAX_NESTING} levels (the limit of loopwatch's JSON5 parser)"
    assert main(["config", "check", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"loopwatch config check: cannot use the config file ({path}:1:{column}): nested deeper than {MAX_NESTING} "
        "levels (the limit of loopwatch's JSON5 parser); nest it less deeply\n"
    )
    with pytest.raises(ConfigFileError, match="nested deeper than 1000 levels"):
        parse_json5("[" * 5000 + "]" * 5000)


def test_nesting_depth_skips_strings_and_comments() -> None:
    assert nesting_depth("1") == 0 and nesting_depth("{}") == 1 and nesting_depth("{a: [1, {b: []}]}") == 4
    assert nesting_depth('{a: "[[{", b: \'{{\' /* [[[ */, // {{{\n c: "\\"[["}') == 1
    assert nesting_depth('{a: "x\\\n[[", b: []}') == 2  # a line continuation in a string
    assert nesting_depth('"not closed [[[') == 0 and nesting_depth("/* not closed [[[") == 0


# --- numbers shown as OpenClaw (JavaScript) prints them ---------------------------------------------------------------


def test_numbers_beyond_2_53_print_as_javascript_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1e308 resolved to an exact Python integer and was printed with all 309 digits, in the table, the warnings
    and --json; OpenClaw (JavaScript) prints 1e+308. Below 1e21 JavaScript prints every digit, as before."""
    path = write(tmp_path, "{tools: {loopDetection: {enabled: true, warningThreshold: 1e308, historySize: 1e21}}}")
    assert main(["config", "check", str(path)]) == 1
    out, err = capsys.readouterr()
    row = out.splitlines()[1].split()
    assert row[2:6] == ["1e+21", "1e+308", "1e+308", "10"] and row[6] == "1e+308"
    assert "is not above warningThreshold 1e+308 (from tools.loopDetection.warningThreshold)" in err
    assert err.count("(using 1e+308)") == 2 and "000000000" not in out + err
    assert main(["config", "check", "--json", str(path)]) == 1
    out, _ = capsys.readouterr()
    assert '"warningThreshold": 1e+308,' in out and '"historySize": 1e+21,' in out and '"value_used": 1e+308' in out
    assert json.loads(out)["default"]["warningThreshold"] == 1e308
    # below 1e21 without an exponent (docs/semantics.md), in the shortest digits that give the double
    assert format_value(10**20) == "100000000000000000000" and format_value(2**53 + 2) == "9007199254740994"
    assert format_value(2**60) == "1152921504606847000"  # String(2 ** 60) in JavaScript
    numbers = {"a": [10**20, 2**60, 10**21, 7, True]}
    assert json.dumps(json_numbers(numbers)) == '{"a": [100000000000000000000, 1152921504606847000, 1e+21, 7, true]}'


@given(st.floats(min_value=2.0**53, max_value=1.7e308).map(float.__floor__))
def test_table_and_json_numbers_agree_with_javascript(value: int) -> None:
    """Every integer double beyond 2**53, as the readers hold it (a Python int), prints as ``String(n)`` (table,
    warnings) and as ``JSON.stringify(n)`` (--json): both are ``js_number`` for a finite double."""
    expected = js_number(float(value))
    assert format_value(value) == expected == format_value(-value).removeprefix("-")
    assert json.dumps(json_numbers(value)) == expected
