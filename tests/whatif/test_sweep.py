"""Sweep parsing, where a swept value goes in the config, and sanity of a sweep over simulated traffic."""

from __future__ import annotations

import subprocess
import sys
from itertools import pairwise

import pytest

from streams.config_file import LoadedConfig
from streams.decode import decode_event
from streams.simulate import simulate
from streams.whatif import IndexedEvent, SweepError, parse_sweep, run_sweep, with_value


def test_parse_ranges_steps_and_lists() -> None:
    assert parse_sweep("warningThreshold=5..8").values == (5, 6, 7, 8)
    assert parse_sweep("criticalThreshold=10..20:5").values == (10, 15, 20)
    assert parse_sweep("historySize = 30,10,20,10").values == (10, 20, 30)
    spec = parse_sweep("postCompactionGuard.windowSize=1..3")
    assert (spec.key, spec.values) == ("postCompactionGuard.windowSize", (1, 2, 3))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("warningThreshold", "expected KEY="),
        ("enabled=1..2", "cannot sweep 'enabled'"),
        ("warningThreshold=9..5", "empty range"),
        ("warningThreshold=0..5", "positive"),
        ("warningThreshold=-5..3", "values must be positive"),  # was "expected a..b", though it is a range
        ("warningThreshold=-1,3", "values must be positive"),
        ("warningThreshold=5..8:-1", "step must be a positive"),
        ("warningThreshold=1..5:0", "step"),
        ("warningThreshold=a..b", "expected a..b"),
        ("warningThreshold=1..1000", "at most"),
        # counted before it is built (it filled 12 GB), and numbers Python will not even convert refused in words
        ("warningThreshold=1..1000000000", "1000000000 values; at most 200"),
        ("warningThreshold=1.." + "9" * 5000, "too large; at most 9007199254740992"),
        ("warningThreshold=" + "9" * 5000, "too large"),
        ("warningThreshold=3,9007199254740993", "too large"),
    ],
)
def test_bad_sweeps_are_rejected(text: str, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_sweep(text)


def _config() -> LoadedConfig:
    return LoadedConfig.from_document(
        {
            "tools": {"loopDetection": {"enabled": True, "warningThreshold": 15}},
            "agents": {
                "list": [
                    {"id": "main", "tools": {"loopDetection": {"criticalThreshold": 12}}},
                    {"id": "ops", "tools": {"loopDetection": {"postCompactionGuard": {"windowSize": 4}}}},
                    {"id": "quiet", "tools": {"loopDetection": {"enabled": False}}},
                ]
            },
        }
    )


def test_value_goes_to_the_global_block_and_to_agents_that_set_the_key() -> None:
    config = _config()
    # As loaded: main merges 15 + 12 and is clamped to 15/16 (per-agent merge, then clamping); ops inherits 15
    # and has window 4.
    assert config.for_agent("main").critical_threshold == 16
    swept = with_value(config, "criticalThreshold", 18)
    main, ops, quiet = (swept.for_agent(a) for a in ("main", "ops", "quiet"))
    assert (main.warning_threshold, main.critical_threshold) == (15, 18)  # main's own override replaced
    assert (ops.warning_threshold, ops.critical_threshold) == (15, 18)  # inherited from the global block
    assert not quiet.enabled and quiet.critical_threshold == 18  # other keys of an agent are kept
    swept = with_value(config, "warningThreshold", 5)
    assert (swept.for_agent("main").warning_threshold, swept.for_agent("main").critical_threshold) == (5, 12)
    swept = with_value(config, "postCompactionGuard.windowSize", 7)
    assert swept.for_agent("ops").guard_window_size == 7 and swept.for_agent("main").guard_window_size == 7
    assert config.for_agent("ops").guard_window_size == 4  # the original config is untouched
    assert config.global_block == {"enabled": True, "warningThreshold": 15}


def test_sweeping_a_config_without_a_block_creates_one() -> None:
    swept = with_value(LoadedConfig.default(), "warningThreshold", 7)
    assert swept.global_block == {"warningThreshold": 7}
    assert swept.for_agent("main").warning_threshold == 7 and not swept.for_agent("main").enabled


def test_raising_warning_threshold_never_warns_more_runs() -> None:
    events = [
        IndexedEvent(i, decode_event(v))
        for i, (_, v) in enumerate(simulate(gateways=4, rate=100, duration=25, seed=21))
    ]
    config = LoadedConfig.from_document({"tools": {"loopDetection": {"enabled": True}}})
    result = run_sweep(events, config, parse_sweep("warningThreshold=5..20"))
    warned = [p.tally.runs["warning"] for p in result.points]
    assert warned[0] > warned[-1] > 0
    assert all(a >= b for a, b in pairwise(warned)), warned
    # Every decision counted: warned calls shrink too as the threshold rises.
    every = run_sweep(events, config, parse_sweep("warningThreshold=5..20:5"), include_all=True)
    calls = [p.tally.calls["warning"] for p in every.points]
    assert all(a >= b for a, b in pairwise(calls)), calls
    assert [p.value for p in every.points] == [5, 10, 15, 20]


def test_sweep_chart_x_ticks_are_evenly_spaced() -> None:
    """``4..20:2`` has 9 points; 6 ticks at rounded positions were 4, 8, 10, 14, 16, 20 (uneven)."""
    import re

    from streams.whatif.charts import Series, line_chart

    x = [float(v) for v in range(4, 21, 2)]
    svg = line_chart(
        css_class="c", title="t", x=x, series=[Series("s", "s", [1.0] * len(x), "#000")], x_label="x", y_label="y"
    )
    ticks = [int(t) for t in re.findall(r'text-anchor="middle">(\d+)</text>', svg)]
    assert ticks == [4, 8, 12, 16, 20]


def test_a_huge_range_is_counted_before_it_is_built() -> None:
    """``1..10**12`` built the whole tuple before the 200-value check (12 GB in 23 s, then the OOM killer).
    Under a 1 GiB address-space limit, building it fails at once with MemoryError; counting first refuses it."""
    code = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
        "from streams.whatif.sweep import SweepError, parse_sweep\n"
        "try:\n"
        "    parse_sweep('warningThreshold=1..1000000000000')\n"
        "except SweepError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "1000000000000 values; at most 200 (use a step)\n"), done.stderr
