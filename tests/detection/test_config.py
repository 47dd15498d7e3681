"""Config merge per agent, runtime resolution (fallbacks, clamping), guard enabling and the warnings that
explain them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import schemas.config
from schemas import schema_errors
from streams.detection.config import (
    CRITICAL_BEFORE_GLOBAL,
    WARNING_BEFORE_CRITICAL,
    ConfigWarning,
    config_root,
    first_with_id,
    is_positive_integer,
    js_trim,
    js_truthy,
    loop_block,
    normalize_agent_id,
    resolve_loop_config,
)
from streams.detection.types import LoopConfig

G = "tools.loopDetection"
A = "agents.list[3].tools.loopDetection"


def resolve(global_block: Any, agent_block: Any = None) -> tuple[LoopConfig, list[ConfigWarning]]:
    return resolve_loop_config(global_block, agent_block, agent_path=A)


def thresholds(cfg: LoopConfig) -> tuple[int, int, int]:
    return cfg.warning_threshold, cfg.critical_threshold, cfg.global_circuit_breaker_threshold


def by_path(warnings: list[ConfigWarning]) -> dict[str, ConfigWarning]:
    paths = [w.path for w in warnings]
    assert len(paths) == len(set(paths)), f"more than one warning for a path: {paths}"
    return {w.path: w for w in warnings}


def test_no_config_is_openclaw_defaults() -> None:
    cfg, warnings = resolve(None)
    assert cfg == LoopConfig()
    assert (cfg.enabled, cfg.guard_enabled, cfg.guard_window_size, cfg.history_size) == (False, True, 3, 30)
    assert warnings == []


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ({"warningThreshold": 5, "criticalThreshold": 5}, (5, 6, 30)),
        ({"warningThreshold": 25}, (25, 26, 30)),
        ({"warningThreshold": 40}, (40, 41, 42)),
        ({"criticalThreshold": 35}, (10, 35, 36)),
        ({"warningThreshold": 3, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 4}, (3, 5, 6)),
    ],
)
def test_clamping_examples(block: dict[str, Any], expected: tuple[int, int, int]) -> None:
    assert thresholds(resolve(block)[0]) == expected
    assert thresholds(resolve(None, block)[0]) == expected  # an agent block alone is used as is


def test_clamp_warnings_name_path_and_value() -> None:
    warnings = by_path(resolve({"warningThreshold": 40})[1])
    assert warnings[f"{G}.criticalThreshold"].value_used == 41
    assert warnings[f"{G}.globalCircuitBreakerThreshold"].value_used == 42
    assert "criticalThreshold 20 (default)" in warnings[f"{G}.criticalThreshold"].message
    assert len(warnings) == 2


def test_ordering_violation_within_a_block_is_one_warning_with_the_schema_message() -> None:
    warnings = resolve({"warningThreshold": 5, "criticalThreshold": 5})[1]
    assert warnings == [
        ConfigWarning(
            f"{G}.criticalThreshold",
            f"{WARNING_BEFORE_CRITICAL} (5 >= 5; raised to warningThreshold + 1)",
            6,
        )
    ]
    warnings = resolve({"warningThreshold": 3, "criticalThreshold": 5, "globalCircuitBreakerThreshold": 4})[1]
    assert [(w.path, w.value_used) for w in warnings] == [(f"{G}.globalCircuitBreakerThreshold", 6)]
    assert warnings[0].message.startswith(CRITICAL_BEFORE_GLOBAL)


def test_global_ordering_violation_value_accounts_for_clamped_critical() -> None:
    cfg, warnings = resolve({"warningThreshold": 25, "criticalThreshold": 20, "globalCircuitBreakerThreshold": 20})
    assert thresholds(cfg) == (25, 26, 27)
    found = by_path(warnings)
    assert found[f"{G}.criticalThreshold"].value_used == 26
    assert found[f"{G}.globalCircuitBreakerThreshold"].value_used == 27
    assert len(found) == 2


# --- "positive integer" is JS Number.isInteger(v) && v > 0 -----------------------------------------


@pytest.mark.parametrize(
    ("value", "used"),
    [
        (5, 5),
        (5.0, 5),
        (1, 1),
        (10**20, 10**20),
        (True, 30),
        (False, 30),
        ("5", 30),
        (2.5, 30),
        (0, 30),
        (0.0, 30),
        (-3, 30),
        (None, 30),
        (float("nan"), 30),
        (float("inf"), 30),
        ([5], 30),
    ],
)
def test_positive_integer_or_default(value: Any, used: int) -> None:
    cfg, warnings = resolve({"historySize": value})
    assert cfg.history_size == used
    if used == 30:
        assert [(w.path, w.value_used) for w in warnings] == [(f"{G}.historySize", 30)]
    else:
        assert warnings == []


def test_invalid_values_fall_back_scenario() -> None:
    block = {
        "enabled": True,
        "warningThreshold": 0,
        "criticalThreshold": -3,
        "globalCircuitBreakerThreshold": 2.5,
        "historySize": 0,
        "unknownToolThreshold": -1,
    }
    cfg, warnings = resolve(block)
    assert cfg == LoopConfig(enabled=True)
    assert {w.path: w.value_used for w in warnings} == {
        f"{G}.warningThreshold": 10,
        f"{G}.criticalThreshold": 20,
        f"{G}.globalCircuitBreakerThreshold": 30,
        f"{G}.historySize": 30,
        f"{G}.unknownToolThreshold": 10,
    }


def test_invalid_value_then_clamped_gives_two_warnings_one_per_adjustment() -> None:
    cfg, warnings = resolve({"warningThreshold": 25, "criticalThreshold": "x"})
    assert thresholds(cfg) == (25, 26, 30)
    assert [(w.path, w.value_used) for w in warnings] == [
        (f"{G}.criticalThreshold", 20),
        (f"{G}.criticalThreshold", 26),
    ]


# --- flags: value ?? default with JS truthiness ----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "enabled", "guard", "warns"),
    [
        (True, True, True, False),
        (False, False, False, False),
        (None, False, True, True),
        (1, True, True, True),
        ("yes", True, True, True),
        ({}, True, True, True),
        ([], True, True, True),
        (0, False, True, True),
        ("", False, True, True),
        (float("nan"), False, True, True),
    ],
)
def test_enabled_truthiness_and_guard(value: Any, enabled: bool, guard: bool, warns: bool) -> None:
    cfg, warnings = resolve({"enabled": value})
    assert (cfg.enabled, cfg.guard_enabled) == (enabled, guard)
    assert [(w.path, w.value_used) for w in warnings] == ([(f"{G}.enabled", enabled)] if warns else [])
    if warns and not enabled:
        assert "guard stays on" in warnings[0].message


@pytest.mark.parametrize(
    ("value", "used", "warns"),
    [(False, False, False), (True, True, False), (None, True, True), (0, False, True), ("off", True, True)],
)
def test_detector_flags(value: Any, used: bool, warns: bool) -> None:
    cfg, warnings = resolve({"detectors": {"pingPong": value}})
    assert cfg.ping_pong is used and cfg.generic_repeat and cfg.known_poll_no_progress
    assert [(w.path, w.value_used) for w in warnings] == ([(f"{G}.detectors.pingPong", used)] if warns else [])


# --- guard ----------------------------------------------------------------------------------------


def test_guard_enabling_and_window() -> None:
    assert resolve(None)[0].guard_enabled  # no block at all still has the guard
    assert resolve({})[0].guard_enabled
    assert resolve({"enabled": True})[0].guard_enabled
    assert not resolve({"enabled": False})[0].guard_enabled
    assert not resolve({"enabled": True}, {"enabled": False})[0].guard_enabled
    assert resolve({"enabled": False}, {"enabled": True})[0].guard_enabled
    # agent null overrides the global false (spread), and null !== false
    cfg = resolve({"enabled": False}, {"enabled": None})[0]
    assert (cfg.enabled, cfg.guard_enabled) == (False, True)
    assert resolve({"postCompactionGuard": {"windowSize": 5}})[0].guard_window_size == 5
    cfg, warnings = resolve({"postCompactionGuard": {"windowSize": 0}})
    assert cfg.guard_window_size == 3
    assert [(w.path, w.value_used) for w in warnings] == [(f"{G}.postCompactionGuard.windowSize", 3)]
    cfg = resolve({"postCompactionGuard": {"windowSize": 2}}, {"postCompactionGuard": {}})[0]
    assert cfg.guard_window_size == 2
    assert (
        resolve({"postCompactionGuard": {"windowSize": 2}}, {"postCompactionGuard": {"windowSize": 4}})[
            0
        ].guard_window_size
        == 4
    )


# --- merge ----------------------------------------------------------------------------------------


def test_merge_examples() -> None:
    assert resolve({"enabled": False}, {"enabled": True})[0].enabled
    assert not resolve({"enabled": True}, {"enabled": False})[0].enabled
    cfg = resolve({"enabled": True, "detectors": {"genericRepeat": False}}, {"detectors": {"pingPong": False}})[0]
    assert (cfg.generic_repeat, cfg.known_poll_no_progress, cfg.ping_pong) == (False, True, False)
    cfg = resolve({"enabled": True, "warningThreshold": 15, "historySize": 12}, {"criticalThreshold": 12})[0]
    assert (cfg.enabled, cfg.history_size, *thresholds(cfg)) == (True, 12, 15, 16, 30)
    assert resolve(None, {"enabled": True})[0].enabled  # no global: agent as is
    assert resolve({"enabled": True}, None)[0].enabled  # no agent block: global


def test_merged_clamp_is_reported_at_the_agent_path() -> None:
    _, warnings = resolve({"enabled": True, "warningThreshold": 15}, {"criticalThreshold": 12})
    assert len(warnings) == 1
    (w,) = warnings
    assert w.path == f"{A}.criticalThreshold" and w.value_used == 16
    assert "criticalThreshold 12" in w.message and "warningThreshold 15" in w.message
    assert f"{G}.warningThreshold" in w.message  # names where the merged values came from


def test_global_only_clamp_is_identical_in_agent_resolutions() -> None:
    global_block = {"warningThreshold": 25}
    from_global = resolve(global_block)[1]
    from_agent = resolve(global_block, {"historySize": 40})[1]
    assert from_global == from_agent


def test_agent_override_of_invalid_global_value() -> None:
    cfg, warnings = resolve({"criticalThreshold": 0}, {"criticalThreshold": 15})
    assert cfg.critical_threshold == 15
    # the global block's own problem is still reported (the default agent uses it)
    assert [(w.path, w.value_used) for w in warnings] == [(f"{G}.criticalThreshold", 20)]


# --- unknown keys, wrong types ---------------------------------------------------------------------


def test_unknown_keys_and_wrong_nested_types() -> None:
    block = {
        "enabled": True,
        "warnThreshold": 5,
        "detectors": {"genericRepeat": False, "pingpong": False},
        "postCompactionGuard": {"windowSize": 4, "enabled": False},
    }
    cfg, warnings = resolve(block, {"detectors": "all", "postCompactionGuard": None, "x": 1})
    assert (cfg.generic_repeat, cfg.ping_pong, cfg.guard_window_size, cfg.guard_enabled) == (
        False,
        True,
        4,
        True,
    )
    found = by_path(warnings)
    assert set(found) == {
        f"{G}.warnThreshold",
        f"{G}.detectors.pingpong",
        f"{G}.postCompactionGuard.enabled",
        f"{A}.detectors",
        f"{A}.postCompactionGuard",
        f"{A}.x",
    }
    assert all(w.value_used is None for w in warnings)


@pytest.mark.parametrize("block", ["on", 5, [1], True])
def test_block_of_wrong_type_is_absent(block: Any) -> None:
    cfg, warnings = resolve(block, None)
    assert cfg == LoopConfig()
    assert [(w.path, w.value_used) for w in warnings] == [(G, None)]
    cfg, warnings = resolve({"enabled": True}, block)
    assert cfg == LoopConfig(enabled=True)
    assert [w.path for w in warnings] == [A]


def test_warnings_cover_what_the_strict_schema_rejects() -> None:
    """Every path the zod-like schema rejects gets a warning at the same path (and nothing else does)."""
    blocks: list[dict[str, Any]] = [
        {"enabled": "yes", "historySize": 2.5, "foo": None},
        {"warningThreshold": 5, "criticalThreshold": 5},
        {"criticalThreshold": 30, "globalCircuitBreakerThreshold": 30},
        {"detectors": {"pingPong": 1, "nope": True}, "postCompactionGuard": {"windowSize": -1, "x": 1}},
        {"detectors": None, "postCompactionGuard": "big"},
        {"enabled": None, "warningThreshold": True},
        {"enabled": False, "historySize": 50, "detectors": {"genericRepeat": True}},
    ]
    for block in blocks:
        expected = {f"{G}.{path}" for path, _ in schema_errors(block)}
        got = {w.path for w in resolve(block)[1]}
        assert got == expected, block
    # the schema documents the defaults the runtime falls back to: spelling them out changes nothing
    # (``enabled`` aside: an explicit false also switches the post-compaction guard off)
    defaults = schemas.config.LoopDetectionConfig().model_dump(exclude={"enabled"})
    assert resolve(defaults) == (resolve({})[0], [])
    for value in (1, 5.0, 2.5, 0, -1, True, None, "3", float("inf"), float("nan"), 10**30):
        assert is_positive_integer(value) == schemas.config.is_positive_integer(value), value


# --- helpers ---------------------------------------------------------------------------------------


def test_normalize_agent_id() -> None:
    """OpenClaw's rule, as its dist has it (checked call for call against the real function in
    tests/openclaw_e2e/test_agent_ids.py)."""
    assert normalize_agent_id(None) == "main"
    assert normalize_agent_id("  Ops\u3000") == "ops"
    assert normalize_agent_id("\ufeffMAIN") == "main"
    assert normalize_agent_id(" \t") == "main"
    assert normalize_agent_id("a\x1c") == "a"  # not JS whitespace, so not trimmed: not an id character either
    assert normalize_agent_id("My Agent") == "my-agent"
    assert normalize_agent_id("Ops.Team/EU") == "ops-team-eu"
    assert normalize_agent_id("--ops--") == "ops"
    assert normalize_agent_id("a--b") == "a--b"  # canonical already: runs of dashes stay
    assert normalize_agent_id("_x") == "_x"
    assert normalize_agent_id("!!!") == "main"
    assert normalize_agent_id("\u212a") == "k"  # the Kelvin sign lower-cases to an ASCII k
    assert normalize_agent_id("A" * 70) == "a" * 64
    assert normalize_agent_id("a" * 64 + "!") == "a" * 64
    assert normalize_agent_id("é" + "b" * 70) == "b" * 64  # the dash goes first, then the cut


@given(st.text(max_size=90))
def test_a_normalised_agent_id_is_canonical_and_stays_as_it_is(raw: str) -> None:
    agent = normalize_agent_id(raw)
    assert agent == "main" or re.fullmatch(r"[a-z0-9_][a-z0-9_-]{0,63}", agent)
    assert normalize_agent_id(agent) == agent


def test_js_helpers() -> None:
    assert js_trim("\u00a0\u2028x\u205f\ufeff") == "x"
    assert js_trim("\x85x") == "\x85x"
    assert [js_truthy(v) for v in (0, 0.0, "", None, False, float("nan"))] == [False] * 6
    truthy: tuple[object, ...] = (1, -1, "0", "false", [], {}, True)
    assert [js_truthy(v) for v in truthy] == [True] * 7
    assert is_positive_integer(3.0) and not is_positive_integer(True) and not is_positive_integer("3")


def test_loop_block_and_first_with_id() -> None:
    """The two per-entry rules both generations share (one place, used by both readers)."""
    warnings: list[ConfigWarning] = []
    assert loop_block({"tools": {"loopDetection": {"enabled": True}}}, "e", warnings) == {"enabled": True}
    assert loop_block({"tools": None}, "e", warnings) is None and warnings == []
    for tools in ("x", [], 0, True):
        assert loop_block({"tools": tools}, "e", warnings) is None
    assert warnings == [ConfigWarning("e.tools", "not an object; ignored", None)] * 4
    warnings.clear()
    seen: dict[str, str] = {}
    assert first_with_id("a", "l[0]", "l[0].id", seen, False, warnings)
    assert first_with_id("a", "l[0]", "l[0].id", seen, False, warnings)  # asking again about the first: still first
    assert not first_with_id("a", "l[1]", "l[1].id", seen, True, warnings)
    assert not first_with_id("a", "l[2]", "l[2].id", seen, False, warnings)
    assert [(w.path, w.message) for w in warnings] == [
        ("l[1].id", "duplicate of l[0] (agent 'a'); this entry's tools.loopDetection is ignored"),
        ("l[2].id", "duplicate of l[0] (agent 'a'); OpenClaw uses the first entry"),
    ]


def test_config_root_and_loop_block_are_one_rule_for_both_readings() -> None:
    """The top level and ``tools`` are looked up by one rule; only the wording differs: ignored (2026.7) or the
    schema's refusal (2026.9, given ``refuse``), which also counts null, as its ``.optional()`` objects do."""
    refuse = "{}; refused".format
    for document in ([1], None, "x", 0):
        ignored: list[ConfigWarning] = []
        refused: list[ConfigWarning] = []
        assert config_root(document, ignored) == {} == config_root(document, refused, refuse)
        assert ignored == [ConfigWarning("(root)", "the config is not an object; ignored", None)]
        assert refused == [ConfigWarning("(root)", "the config is not an object; refused", None)]
    root = {"tools": None}
    assert config_root(root, []) is root
    for owner, path, gen7, gen9 in [
        ({"tools": 5}, "", ["tools"], ["tools"]),
        ({"tools": None}, "", [], ["tools"]),
        ({"tools": {"loopDetection": None}}, "", [], ["tools.loopDetection"]),
        ({"tools": {"loopDetection": None}}, "agents.entries.a", [], ["agents.entries.a.tools.loopDetection"]),
        ({"tools": {}}, "", [], []),
        ({}, "", [], []),
    ]:
        ignored, refused = [], []
        assert loop_block(owner, path, ignored) is None and loop_block(owner, path, refused, refuse) is None
        assert [w.path for w in ignored] == gen7 and [w.path for w in refused] == gen9, owner
        assert all(w.message.endswith("; ignored") for w in ignored)
        assert all(w.message.endswith("not an object; refused") for w in refused)
    assert loop_block({"tools": {"loopDetection": 5}}, "", [], refuse) == 5  # its type: the resolution reports it
