"""What a QA pass from an empty directory found unclear, run through the real ``loopwatch`` executable.

Each mistake is one line on stderr saying what is wrong and what to do, with README's exit status: a config file
that is not JSON5 (and a NUL in it), a bad bootstrap list from LOOPWATCH_BOOTSTRAP, a log file under a regular
file, an unknown option before the command, security flags where no Kafka is read, a publish line without its
file, and a log level the flag and its variable took differently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streams.kafka.security import SECURITY_FLAGS
from tests.support.cli import Result, lw, repeated_reads
from tests.support.procs import free_port

JSON5 = "the file must be JSON5 (json5.org)"
NOT_A_LIST = "is not HOST:PORT[,HOST:PORT] (--bootstrap)"


def one_line(result: Result, code: int, line: str) -> None:
    assert (result.code, result.out, result.err) == (code, "", line + "\n")


# --- 1. a config file that is not JSON5 -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["config", "check", "c.json5"], ["replay", "--events", "-", "--config", "c.json5"]]
)
def test_a_config_file_that_does_not_parse_says_what_it_must_be(empty: Path, command: list[str]) -> None:
    """It said only ``Unexpected end of input``: now also what the file must be and how to check it."""
    (empty / "c.json5").write_text("{ tools: { loopDetection: { enabled: true } }", encoding="utf-8")
    name = " ".join(command[:2]) if command[0] == "config" else command[0]
    one_line(
        lw(empty, *command, stdin=""),
        2,
        f"loopwatch {name}: cannot use the config file (c.json5:1:46): Unexpected end of input; {JSON5}: fix it "
        "there, then check it with 'loopwatch config check c.json5'",
    )


@pytest.mark.parametrize(
    ("text", "where", "character"),
    [
        ("{\n  tools: {},\n  \x00\n}\n", "3:3", "control character U+0000"),  # json5 reported 3:4, a space
        ("{ tools: {} }\x00\x00\x00", "1:14", "control character U+0000"),  # a file padded with NULs
        ("{ tools: \x07{} }", "1:10", "control character U+0007"),
        ("{ tools: \u200b{} }", "1:10", "invisible character U+200B"),
    ],
    ids=["nul-in-a-key", "trailing-nuls", "bell", "zero-width-space"],
)
def test_a_character_that_does_not_show_is_named_by_its_code_point(
    empty: Path, text: str, where: str, character: str
) -> None:
    """It printed the raw character (``Unexpected ""``), at the column after it when it stood where a key goes."""
    (empty / "c.json5").write_text(text, encoding="utf-8")
    one_line(
        lw(empty, "config", "check", "c.json5"),
        2,
        f"loopwatch config check: cannot use the config file (c.json5:{where}): Unexpected {character}; {JSON5}: "
        "fix it there, then check it with 'loopwatch config check c.json5'",
    )


# --- 2. bootstrap lists, from the flag or LOOPWATCH_BOOTSTRAP ---------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["worker"], ["tail"], ["publish", "events.jsonl"]],
    ids=lambda argv: argv[0],
)
def test_a_bad_bootstrap_variable_is_named(empty: Path, argv: list[str]) -> None:
    """``LOOPWATCH_BOOTSTRAP=nohost`` was "bad bootstrap address (nohost)", which did not say where it came from."""
    for value, problem in (("nohost", ""), ("127.0.0.1:9092,nohost", ", at 'nohost'")):
        result = lw(empty, *argv, env={"LOOPWATCH_BOOTSTRAP": value})
        line = f"LOOPWATCH_BOOTSTRAP={value!r} is not HOST:PORT[,HOST:PORT]{problem} (--bootstrap)"
        one_line(result, 2, f"loopwatch {argv[0]}: {line}: see 'loopwatch {argv[0]} --help'")
    assert list(empty.iterdir()) == []  # refused before the worker makes its data directory


@pytest.mark.parametrize(
    "argv",
    [
        ["worker"],
        ["tail"],
        ["publish", "events.jsonl"],
        ["replay", "--topic", "t"],
        ["simulate"],
        ["whatif", "--topic", "t", "--candidate", "c.json5"],
    ],
    ids=lambda argv: argv[0],
)
def test_every_bootstrap_flag_refuses_a_bad_list_by_one_rule(empty: Path, argv: list[str]) -> None:
    """The flag is refused where it is typed, as its variable is: a flag beats a bad variable, never the reverse."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    one_line(
        lw(empty, *argv, "--bootstrap", "nohost"),
        2,
        f"loopwatch {argv[0]}: 'nohost' {NOT_A_LIST}: see 'loopwatch {argv[0]} --help'",
    )
    # a URL went to DNS and failed as "cannot resolve the Kafka host" (exit 3), as if Kafka were down
    one_line(
        lw(empty, *argv, "--bootstrap", "http://127.0.0.1:9092"),
        2,
        f"loopwatch {argv[0]}: 'http://127.0.0.1:9092' is not HOST:PORT[,HOST:PORT]: Kafka addresses take no scheme, "
        f"drop 'http://' (--bootstrap): see 'loopwatch {argv[0]} --help'",
    )
    if argv[0] in ("tail", "publish"):  # the flag wins: the bad variable is not read
        result = lw(empty, *argv, "--bootstrap", f"127.0.0.1:{free_port()}", env={"LOOPWATCH_BOOTSTRAP": "nohost"})
        assert result.code == 3 and "cannot connect to Kafka" in result.err, result.err


# --- 3. a log file under a regular file -------------------------------------------------------------------------


def test_a_log_file_under_a_regular_file_names_that_file(empty: Path) -> None:
    """It said "File exists", of no file named."""
    (empty / "f").write_text("", encoding="utf-8")
    for log in ("f/x.log", "f/a/b/x.log"):
        one_line(
            lw(empty, "broker", "--port", "0", "--log-file", log),
            2,
            f"loopwatch broker: cannot write the log file ({log}): f is not a directory",
        )


def test_a_data_directory_under_a_regular_file_names_that_file(empty: Path) -> None:
    """The worker said "Not a directory" of the whole path; the file in the way is named, by the broker's rule."""
    (empty / "f").write_text("", encoding="utf-8")
    one_line(
        lw(empty, "worker", "--data-dir", "f/d", "--bootstrap", f"127.0.0.1:{free_port()}", "--kafka-wait", "0"),
        2,
        f"loopwatch worker: cannot create the data directory ({empty}/f/d): {empty}/f is not a directory; "
        "choose another --data-dir",
    )


# --- 4. an unknown option before the command ---------------------------------------------------------------------


def test_an_unknown_option_is_named_before_a_missing_command(empty: Path) -> None:
    """``loopwatch --bogus`` said a command was required; an unknown option after a command pointed to
    ``loopwatch --help`` instead of the command's."""
    one_line(lw(empty, "--bogus"), 2, "loopwatch: unrecognized option --bogus: see 'loopwatch --help'")
    one_line(lw(empty, "--bogus=1", "tail"), 2, "loopwatch: unrecognized option --bogus: see 'loopwatch --help'")
    one_line(
        lw(empty, "worker", "--bogus"),
        2,
        "loopwatch worker: unrecognized option --bogus: see 'loopwatch worker --help'",
    )
    one_line(
        lw(empty, "config", "check", "c.json5", "--bogus"),
        2,
        "loopwatch config check: unrecognized option --bogus: see 'loopwatch config check --help'",
    )
    one_line(
        lw(empty, "replay", "--events", "e.jsonl", "extra"),
        2,
        "loopwatch replay: unexpected argument 'extra': see 'loopwatch replay --help'",
    )
    one_line(lw(empty), 2, "loopwatch: the following arguments are required: COMMAND: see 'loopwatch --help'")


# --- 5. Kafka security flags where no Kafka is read ----------------------------------------------------------------

_SECURITY_ARGV = {
    "--kafka-config": ["client.properties"],
    "--security-protocol": ["SSL"],
    "--sasl-mechanism": ["PLAIN"],
    "--sasl-username": ["u"],
    "--ssl-cafile": ["ca.pem"],
    "--ssl-certfile": ["cert.pem"],
    "--ssl-keyfile": ["key.pem"],
    "--no-ssl-check-hostname": [],
}


@pytest.mark.parametrize("flag", [flag for flag, _ in SECURITY_FLAGS])
def test_replay_events_refuses_every_kafka_security_flag(empty: Path, flag: str) -> None:
    """``replay --events`` reads a file and never Kafka: the security flags were silently ignored."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    one_line(
        lw(empty, "replay", "--events", "events.jsonl", flag, *_SECURITY_ARGV[flag]),
        2,
        f"loopwatch replay: flags that need --topic given with --events ({flag}): see 'loopwatch replay --help'",
    )


def test_whatif_events_refuses_the_kafka_flags_by_the_same_rule(empty: Path) -> None:
    """``whatif --events`` took --bootstrap and the security flags and ignored them, as replay did."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    argv = ["--events", "events.jsonl", "--sweep", "warningThreshold=5..6", "--bootstrap", "127.0.0.1:9092"]
    one_line(
        lw(empty, "whatif", *argv, "--security-protocol", "SSL"),
        2,
        "loopwatch whatif: flags that need --topic given with --events (--bootstrap, --security-protocol): "
        "see 'loopwatch whatif --help'",
    )


def test_replay_and_whatif_read_a_topic_from_the_bootstrap_variable(empty: Path) -> None:
    """They demanded --bootstrap with --topic, though their connection errors point at LOOPWATCH_BOOTSTRAP; now
    they take it, as tail and publish do, and fall back to the default like every other Kafka command."""
    bootstrap = f"127.0.0.1:{free_port()}"
    env = {"LOOPWATCH_BOOTSTRAP": bootstrap}
    unreachable = f"cannot connect to Kafka ({bootstrap}): nothing listens there"
    for command, extra in (("replay", []), ("whatif", ["--sweep", "warningThreshold=5..6"])):
        result = lw(empty, command, "--topic", "loopwatch.events", *extra, env=env)
        assert result.code == 3 and result.out == "", result.err
        assert result.err.splitlines()[-1].startswith(f"loopwatch {command}: {unreachable}"), result.err


@pytest.mark.parametrize(
    ("flags", "line"),
    [
        (["--verdicts-topic", "v"], "--verdicts-topic does nothing without --compare-verdicts (or --run with "
         "--with-state): add --compare-verdicts (or --run with --with-state), or leave it out"),
        (["--group", "g", "--state-topic", "s"], "--group and --state-topic do nothing without --with-state: add "
         "--with-state, or leave them out"),
        (["--with-state", "--group", "g", "--state-topic", "s"], "--group and --state-topic given together: each "
         "names the stored state's topic"),
        (["--run", "r", "--compare-verdicts"], "--run and --compare-verdicts given together: --run explains one run, "
         "--compare-verdicts checks the whole range"),
        (["--run", "r", "--all"], "--run and --all given together: --run shows every decision of its run already"),
        (["--compare-verdicts", "--all"], "--compare-verdicts and --all given together: --compare-verdicts compares "
         "published verdicts only, --all adds decisions never published"),
        (["--json"], "--json does nothing without --run or --compare-verdicts: add --run or --compare-verdicts, or "
         "leave it out"),  # a sixth QA pass, with --strict and --skip-invalid below (--strict won)
        (["--strict", "--skip-invalid"], "--strict and --skip-invalid given together: --strict fails on a bad record, "
         "--skip-invalid goes on past it"),
    ],
)  # fmt: skip
def test_replay_refuses_flags_that_would_do_nothing(empty: Path, flags: list[str], line: str) -> None:
    """Each was accepted and ignored (a QA pass): the operator believed a comparison or a state topic applied."""
    result = lw(empty, "replay", "--topic", "loopwatch.events", "--bootstrap", f"127.0.0.1:{free_port()}", *flags)
    one_line(result, 2, f"loopwatch replay: {line}; see 'loopwatch replay --help'")


def test_whatif_replay_and_broker_refuse_what_would_do_nothing_or_name_no_place(empty: Path) -> None:
    """A second --sweep replaced the first, --buckets without --html changed nothing, the broker's security
    flags without --topic connected nothing, and a topic given twice got the last count (a QA pass)."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    (empty / "c.json5").write_text("{tools: {loopDetection: {enabled: true}}}", encoding="utf-8")
    sweep = ["--events", "events.jsonl", "--sweep", "warningThreshold=5..6"]
    for argv, line in (
        (["whatif", *sweep, "--sweep", "criticalThreshold=5..6"],
         "loopwatch whatif: given twice: it takes one value (--sweep): see 'loopwatch whatif --help'"),
        (["whatif", *sweep, "--buckets", "5"],
         "loopwatch whatif: --buckets does nothing without --html: add --html, or leave it out; see 'loopwatch "
         "whatif --help'"),
        (["whatif", *sweep, "--limit", "3"],  # a fifth QA pass: --limit shortens the changed runs a candidate has
         "loopwatch whatif: --limit does nothing without --candidate or --candidate-profile: a sweep alone lists no "
         "changed runs; add one, or leave --limit out"),
        (["whatif", *sweep, "--candidate", "c.json5", "--format", "json", "--limit", "3"],
         "loopwatch whatif: --limit does nothing with --format json: the JSON lists every changed run; leave it out"),
        (["whatif", "--events", "events.jsonl"],
         "loopwatch whatif: nothing to compare (--candidate): give --candidate FILE and/or --sweep KEY=a..b, or "
         "--candidate-profile NAME"),
        (["replay", "--events", "events.jsonl", "--run", "r1"],  # the place read, as every error line names one
         "loopwatch replay: no event of run 'r1' (events.jsonl): give a run id or scope key as it appears in the "
         "events"),
        (["broker", "--port", "0", "--security-protocol", "SSL"],
         "loopwatch broker: --security-protocol does nothing without --topic: add --topic, or leave it out; see "
         "'loopwatch broker --help'"),
        (["broker", "--port", "0", "--topic", "t:2", "--topic", "t:3"],
         "loopwatch broker: topic t given with 2 and 3 partitions (--topic): give each topic once"),
    ):  # fmt: skip
        one_line(lw(empty, *argv), 1 if "no event of run" in line else 2, line)


def test_the_broker_refuses_topic_creation_over_a_protocol_it_does_not_serve(empty: Path) -> None:
    """--topic over SSL on its own plaintext listener waited 15 s, then blamed the broker (no answer in time)."""
    one_line(
        lw(empty, "broker", "--port", "0", "--topic", "t:2", "--security-protocol", "SSL"),
        2,
        "loopwatch broker: --topic over SSL, but this broker serves plaintext: give --cert and --key to serve TLS, "
        "or leave the security settings out: see 'loopwatch broker --help'",
    )
    sasl = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "u"]
    one_line(
        lw(empty, "broker", "--port", "0", "--topic", "t:2", *sasl, env={"LOOPWATCH_KAFKA_SASL_PASSWORD": "p"}),
        2,
        "loopwatch broker: --topic over SASL_PLAINTEXT: the embedded broker has no SASL: see 'loopwatch broker --help'",
    )


def test_whatif_names_the_flag_of_a_config_file_it_cannot_read(empty: Path) -> None:
    """It said only "check the path": whatif takes two config files, so the flag says which."""
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    unreadable = "cannot use the config file (nope.json5): cannot read: No such file or directory; check the path"
    for argv, flag in ((["--candidate", "nope.json5"], "--candidate"),
                       (["--config", "nope.json5", "--candidate-profile", "openclaw-2026.9"], "--config")):  # fmt: skip
        one_line(lw(empty, "whatif", "--events", "events.jsonl", *argv), 2,
                 f"loopwatch whatif: {unreadable} given to {flag}")  # fmt: skip


# --- 6. publish names the file of a bad line -----------------------------------------------------------------------


def test_publish_names_a_bad_line_by_file_and_line_as_replay_does(empty: Path) -> None:
    """It said ``line 4:`` only; now ``FILE:LINE:`` as replay and whatif name a bad line (``<stdin>`` for -)."""
    text = "\n".join([*(json.dumps(e) for e in repeated_reads("pub", 3)), '{"x": 1}']) + "\n"
    (empty / "events.jsonl").write_text(text, encoding="utf-8")
    bootstrap = f"127.0.0.1:{free_port()}"
    for argv, name in ((["events.jsonl"], "events.jsonl"), (["-"], "<stdin>")):
        result = lw(empty, "publish", *argv, "--bootstrap", bootstrap, stdin=text)
        assert (result.code, result.out) == (3, "")  # the lines are checked before Kafka is
        assert result.err.splitlines() == [
            f"{name}:4: invalid event (unknown_type): missing 'type'; not sent",
            f"loopwatch publish: cannot connect to Kafka ({bootstrap}): nothing listens there; start a broker "
            "(loopwatch broker) or point --bootstrap / LOOPWATCH_BOOTSTRAP at one",
        ]
    replayed = lw(empty, "replay", "--events", "-", stdin=text)
    assert replayed.code == 2 and replayed.err.startswith("<stdin>:4: invalid event (unknown_type): missing 'type'\n")
    assert replayed.err.splitlines()[-1] == (
        "loopwatch replay: the replay stopped at the first line of <stdin> that is not an event (each is named "
        "above): fix the file, or pass --skip-invalid to report such lines and go on"
    )


def test_a_file_without_one_event_is_one_line_naming_what_to_give(empty: Path) -> None:
    """A verdicts dump given as events printed one invalid-event line per verdict, and then "no event of run ..."
    (--run) or, with --skip-invalid, nothing at all and status 0; as for a topic of another kind, it is one line."""
    verdict = {"verdict_id": "v1", "decision": "warning", "run_id": "r1", "session_id": "r1"}
    (empty / "verdicts.jsonl").write_text("\n".join(json.dumps(verdict) for _ in range(3)) + "\n", encoding="utf-8")
    what = (
        "verdicts.jsonl holds no events: none of its 3 lines is an event (verdicts.jsonl:1: invalid event "
        "(unknown_type): missing 'type'): give --events a file of events, one JSON object per line "
        "('loopwatch tail --topic loopwatch.events --from-beginning --json --timeout S' writes one)"
    )
    for argv in (["replay"], ["replay", "--skip-invalid"], ["replay", "--run", "r1"],
                 ["whatif", "--candidate-profile", "openclaw-2026.9", "--skip-invalid"]):  # fmt: skip
        result = lw(empty, *argv, "--events", "verdicts.jsonl")
        assert (result.code, result.out) == (2, ""), result.err
        assert result.err.splitlines()[-1] == f"loopwatch {argv[0]}: {what}", result.err
        assert "invalid event" not in "".join(result.err.splitlines()[:-1]), result.err


# --- 7. the log level: one rule for the flag and its variable --------------------------------------------------------

LEVELS = "debug, info, warn, error, crit (or warning, critical, fatal)"


def test_the_log_level_flag_and_variable_take_the_same_values(empty: Path) -> None:
    """The variable took ``warning`` that the flag's listed choices did not show, and the two refused with
    different texts; both now go through one check, listing every value taken."""
    one_line(
        lw(empty, "worker", "--log-level", "verbose"),
        2,
        f"loopwatch worker: 'verbose' is not one of {LEVELS} (--log-level): see 'loopwatch worker --help'",
    )
    one_line(
        lw(empty, "worker", env={"LOOPWATCH_LOG_LEVEL": "verbose"}),
        2,
        f"loopwatch worker: LOOPWATCH_LOG_LEVEL='verbose' is not one of {LEVELS} (--log-level): see 'loopwatch "
        "worker --help'",
    )
    group = "loopwatch worker: must not be empty (--group): it is the consumer group and the Faust app id, and names "
    for level in ("warning", "WARN", "critical"):  # taken: the next setting checked is the one refused
        for result in (
            lw(empty, "worker", "--group", "", "--log-level", level),
            lw(empty, "worker", "--group", "", env={"LOOPWATCH_LOG_LEVEL": level}),
        ):
            assert result.code == 2 and result.err.startswith(group), (level, result.err)
    assert list(empty.iterdir()) == []
    help_text = " ".join(lw(empty, "worker", "--help").out.split())
    assert "(env LOOPWATCH_LOG_LEVEL; default info; warning, critical, fatal also accepted)" in help_text


# --- 8. every command's --help -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["", "replay", "config", "config check", "broker", "worker", "publish", "tail", "whatif", "simulate"],
)
def test_every_command_help_works(empty: Path, command: str) -> None:
    result = lw(empty, *command.split(), "--help")
    assert (result.code, result.err) == (0, "")
    assert result.out.startswith(f"usage: loopwatch {command} ".replace("  ", " ")), result.out[:200]
    assert list(empty.iterdir()) == []
