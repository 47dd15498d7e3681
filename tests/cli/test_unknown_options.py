"""An unknown option is named first, and no option is taken for a prefix of another.

argparse checks what is required before it looks at what is left over: ``replay --bogus`` said that --events or
--topic was required, ``publish --bogus`` that ``file`` was, sending the operator after the wrong problem. And it
took ``replay --event f`` for --events and ``simulate --gate 2`` for --gateways, silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import lw


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["replay", "--bogus"], "loopwatch replay"),
        (["publish", "--bogus"], "loopwatch publish"),
        (["whatif", "--bogus"], "loopwatch whatif"),
        (["config", "check", "--bogus"], "loopwatch config check"),
        (["replay", "--events", "w.jsonl", "--bogus"], "loopwatch replay"),  # the required one given: was right
        (["--bogus"], "loopwatch"),
    ],
    ids=["replay", "publish", "whatif", "config-check", "replay-with-events", "top-level"],
)
def test_an_unknown_option_is_named_before_a_missing_argument(empty: Path, argv: list[str], name: str) -> None:
    result = lw(empty, *argv)
    assert (result.code, result.err) == (2, f"{name}: unrecognized option --bogus: see '{name} --help'\n")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["replay"], "one of the arguments --events --topic is required"),
        (["publish"], "the following arguments are required: file"),
        (["config"], "the following arguments are required: SUBCOMMAND"),
    ],
)
def test_a_missing_argument_is_still_named_when_nothing_else_is_wrong(empty: Path, argv: list[str], said: str) -> None:
    result = lw(empty, *argv)
    name = f"loopwatch {argv[0]}"
    assert (result.code, result.err) == (2, f"{name}: {said}: see '{name} --help'\n")


@pytest.mark.parametrize(
    ("argv", "prefix"),
    [
        (["replay", "--event", "w.jsonl"], "--event"),
        (["simulate", "--gate", "2"], "--gate"),
        (["whatif", "--cand", "c.json5", "--events", "w.jsonl"], "--cand"),
        (["--vers"], "--vers"),
    ],
    ids=["replay", "simulate", "whatif", "top-level"],
)
def test_a_prefix_of_an_option_is_not_taken_for_it(empty: Path, argv: list[str], prefix: str) -> None:
    name = f"loopwatch {argv[0]}" if not argv[0].startswith("-") else "loopwatch"
    result = lw(empty, *argv)
    assert (result.code, result.err, result.out) == (
        2,
        f"{name}: unrecognized option {prefix}: see '{name} --help'\n",
        "",
    )
