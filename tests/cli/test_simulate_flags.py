"""``loopwatch simulate`` flags a QA pass found accepted for nothing, run through the real executable.

Each mistake is one line on stderr with exit status 2 and no output: a Kafka flag without ``--bootstrap``,
``--oversized`` without malformed records, a flag shaping valid events when every record is malformed, more
records than a run may have, a duration past the timestamps' range, a seed that is not an integer. Settings that
give no record run and say so; a huge fleet with few events costs what its events cost.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.kafka.security import SECURITY_FLAGS
from tests.support.cli import Result, lw
from tests.support.procs import free_port

HELP = "see 'loopwatch simulate --help'"


def refused(result: Result, line: str) -> None:
    assert (result.code, result.out, result.err) == (2, "", f"loopwatch simulate: {line}\n")


@pytest.mark.parametrize(
    "flag",
    [["--topic", "foo"], ["--realtime"], ["--security-protocol", "SSL"], ["--kafka-config", "client.properties"],
     ["--sasl-mechanism", "PLAIN"], ["--sasl-username", "u"], ["--ssl-cafile", "ca.pem"], ["--ssl-certfile", "c.pem"],
     ["--ssl-keyfile", "k.pem"], ["--no-ssl-check-hostname"]],
    ids=lambda flag: flag[0],
)  # fmt: skip
def test_a_kafka_flag_without_bootstrap_is_refused(empty: Path, flag: list[str]) -> None:
    """Each wrote the records to stdout with exit 0 as if it had been applied."""
    refused(
        lw(empty, "simulate", "--duration", "2", *flag),
        f"{flag[0]} does nothing without --bootstrap: add --bootstrap, or leave it out; {HELP}",
    )


def test_kafka_flags_without_bootstrap_are_named_together(empty: Path) -> None:
    assert [flag for flag, _ in SECURITY_FLAGS][:2] == ["--kafka-config", "--security-protocol"]
    refused(
        lw(empty, "simulate", "--security-protocol", "SSL", "--topic", "foo", "--out", "x.jsonl"),
        f"--topic and --security-protocol do nothing without --bootstrap: add --bootstrap, or leave them out; {HELP}",
    )
    assert list(empty.iterdir()) == []  # refused before the output file is made


def test_topic_with_bootstrap_goes_on_to_kafka(empty: Path) -> None:
    """The refusal is only for a missing --bootstrap: with it, the flags are used (here: no broker, exit 3)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    result = lw(empty, "simulate", "--duration", "1", "--topic", "foo", "--bootstrap", bootstrap)
    assert result.code == 3 and bootstrap in result.err and len(result.err.splitlines()) == 1, result.err


@pytest.mark.parametrize("malformed", [[], ["--malformed", "0"]], ids=["absent", "zero"])
def test_oversized_without_malformed_records_is_refused(empty: Path, malformed: list[str]) -> None:
    """--oversized only makes some of the malformed records big: without them its output was the default's."""
    refused(
        lw(empty, "simulate", "--duration", "1", "--oversized", *malformed),
        "flag that needs a --malformed fraction above 0 given without it (--oversized): it makes some of the "
        "malformed records over 1 MiB; add --malformed F or drop it",
    )


def test_oversized_with_malformed_records_makes_big_ones(empty: Path) -> None:
    args = ("--rate", "20", "--duration", "1", "--malformed", "1", "--oversized", "--out", "bad.jsonl")
    result = lw(empty, "simulate", *args)
    lines = (empty / "bad.jsonl").read_bytes().splitlines()  # some are not UTF-8, as asked
    assert (result.code, result.out, result.err, len(lines)) == (0, "", "", 20)
    assert any(len(line) > 1_048_576 for line in lines)


def test_flags_shaping_valid_events_are_refused_when_every_record_is_malformed(empty: Path) -> None:
    """With --malformed 1 no valid event is left: --hashed and --usage changed no byte."""
    refused(
        lw(empty, "simulate", "--duration", "1", "--malformed", "1", "--hashed"),
        "flag that shapes valid events given with --malformed 1 (--hashed): every record is malformed; lower "
        "--malformed or drop it",
    )
    refused(
        lw(empty, "simulate", "--duration", "1", "--malformed", "1", "--usage", "--hashed"),
        "flags that shape valid events given with --malformed 1 (--hashed, --usage): every record is malformed; "
        "lower --malformed or drop them",
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["--rate", "1e12"], "rate x duration is 6e+13 events, above the 100,000,000 a run may have "
         "(--rate, --duration): lower either"),
        (["--rate", "1e308", "--duration", "1e9"], "rate x duration is inf events, above the 100,000,000 a run may "
         "have (--rate, --duration): lower either"),
        (["--duration", "1e12"], f"must be at most 1,000,000,000 seconds (about 31 years) (--duration): {HELP}"),
        (["--rate", "1e-300", "--duration", "3e300"], "must be at most 1,000,000,000 seconds (about 31 years) "
         f"(--duration): {HELP}"),
        (["--seed", "x"], f"'x' is not an integer (--seed): {HELP}"),
        (["--seed", "1.5"], f"'1.5' is not an integer (--seed): {HELP}"),
    ],
    ids=["rate", "overflow", "duration", "timestamps", "seed", "seed-float"],
)  # fmt: skip
def test_numbers_that_ran_forever_or_crashed_are_refused(empty: Path, argv: list[str], line: str) -> None:
    """--rate 1e12 and --duration 1e12 ran without end; 1e308 x 1e308 and a 1e300 s duration crashed."""
    refused(lw(empty, "simulate", *argv, timeout=30), line)


def test_the_largest_run_is_allowed_and_a_negative_seed_still_works(empty: Path) -> None:
    """The bound is on records, not on time: a long, slow run is fine (here 100 records over 31 years)."""
    result = lw(empty, "simulate", "--rate", "1e-7", "--duration", "1e9", "--seed", "-3")
    events = [json.loads(line) for line in result.out.splitlines()]
    assert (result.code, result.err, len(events)) == (0, "", 100)
    assert events[-1]["ts"] - events[0]["ts"] == 990_000_000_000


@pytest.mark.parametrize(
    ("argv", "shown"),
    [(["--duration", "0.001"], "60/s x 0.001 s = 0.06"), (["--rate", "0.001"], "0.001/s x 60 s = 0.06")],
    ids=["duration", "rate"],
)
def test_no_record_at_all_is_said_on_one_line(empty: Path, argv: list[str], shown: str) -> None:
    """Valid settings that give no record ran silently with exit 0: still exit 0 (nothing went wrong), with why."""
    result = lw(empty, "simulate", *argv)
    assert (result.code, result.out) == (0, "")
    assert result.err == (
        f"loopwatch simulate: note: no event falls in rate x duration ({shown}, below 1): raise --rate or "
        "--duration to get records\n"
    )


@pytest.mark.parametrize(
    ("gateways", "rate", "records"),
    [("1000000000", "1", 1), ("1000000", "60", 60), ("100000", "1", 1), ("20000", "1", 1)],
)
def test_a_huge_fleet_with_few_events_finishes_with_small_output(
    empty: Path, gateways: str, rate: str, records: int
) -> None:
    """20,000 gateways and one record took 21 s and 1.7 GB; 100,000 ran past a minute. The subprocess timeout,
    not a timing assertion, is the bound: it must finish with its few records."""
    result = lw(empty, "simulate", "--gateways", gateways, "--rate", rate, "--duration", "1", timeout=30)
    events = [json.loads(line) for line in result.out.splitlines()]
    assert (result.code, result.err, len(events)) == (0, "", records)
    assert len(result.out) < 2000 * records
