"""Path flags and the files they name, run through the real ``loopwatch`` executable from an empty directory.

An empty path was read as ``.`` ("(.): Is a directory"), or ignored (``worker --config ""`` ran without a
config); a missing or unusable events file or output file gave the system's words and no hint.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from streams.cli import build_parser
from streams.cli._args import PATH_FLAGS
from tests.support.cli import CONFIG, Result, lw, repeated_reads

NO_EVENTS = "check the path, or give '-' to read stdin ('loopwatch simulate --out FILE' writes sample events)"


def one_line(result: Result, code: int, line: str) -> None:
    assert (result.code, result.out, result.err) == (code, "", line + "\n")


def _path_flags(parser: argparse.ArgumentParser, command: tuple[str, ...] = ()) -> set[tuple[str, str, str]]:
    """(command, flag as the error line names it, what it names) for every path-taking argument."""
    found: set[tuple[str, str, str]] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _path_flags(sub, (*command, name))
        names = [*action.option_strings, action.dest]
        kind = next((PATH_FLAGS[n] for n in names if n in PATH_FLAGS), None)
        looks_like_a_path = action.type is Path or action.metavar in ("FILE", "PEM")
        if kind is not None or looks_like_a_path:
            shown = action.option_strings[0] if action.option_strings else str(action.metavar or action.dest)
            found.add((" ".join(command), shown, kind or "none"))
    return found


#: Every path flag of every command, and what its value names: the table the CLI's rule must cover.
_FILES = {
    "replay": ("--events", "--config", "--profiles"),
    "whatif": ("--events", "--config", "--candidate", "--html", "--profiles"),
    "publish": ("file",),
    "simulate": ("--out",),
    "tail": (),
    "broker": ("--log-file", "--cert", "--key", "--client-ca"),
    "worker": ("--config", "--profiles"),
    "config check": ("FILE",),
}
_SECURITY = ("--kafka-config", "--ssl-cafile", "--ssl-certfile", "--ssl-keyfile")
EXPECTED = {
    *((command, flag, "file") for command, flags in _FILES.items() for flag in flags),
    *((command, flag, "file") for command in _FILES if command != "config check" for flag in _SECURITY),
    ("worker", "--data-dir", "directory"),
}


def test_every_path_flag_is_under_the_empty_path_rule() -> None:
    """A flag that takes a path (type Path, metavar FILE or PEM) but is missing from PATH_FLAGS shows as 'none'."""
    assert _path_flags(build_parser()) == EXPECTED


@pytest.mark.parametrize(
    ("command", "flag", "kind"), sorted(EXPECTED), ids=lambda value: value if isinstance(value, str) else None
)
def test_an_empty_path_is_refused_naming_its_flag(empty: Path, command: str, flag: str, kind: str) -> None:
    """``--html ""`` said "(.): Is a directory"; ``worker --config ""`` ran with no config and ``--data-dir ""``
    in the current directory; ``--kafka-config ""`` was ignored. Refused where typed, before anything runs."""
    argv = [*command.split(), ""] if not flag.startswith("--") else [*command.split(), flag, ""]
    one_line(
        lw(empty, *argv),
        2,
        f"loopwatch {command}: must be a {kind} path, not an empty string ({flag}): see 'loopwatch {command} --help'",
    )
    assert list(empty.iterdir()) == []


def test_whatif_html_empty_in_a_real_command_line(empty: Path) -> None:
    """The QA case: a whole command line, with ``--html ""`` and ``--html=`` (an unset shell variable)."""
    (empty / "on.json5").write_text(CONFIG, encoding="utf-8")
    (empty / "events.jsonl").write_text("", encoding="utf-8")
    for html in (["--html", ""], ["--html="]):
        one_line(
            lw(empty, "whatif", "--events", "events.jsonl", "--candidate", "on.json5", *html),
            2,
            "loopwatch whatif: must be a file path, not an empty string (--html): see 'loopwatch whatif --help'",
        )


@pytest.mark.parametrize(
    "argv",
    [["replay", "--events"], ["whatif", "--candidate", "on.json5", "--events"], ["publish"]],
    ids=lambda argv: argv[0],
)
def test_a_missing_events_file_says_how_to_get_one(empty: Path, argv: list[str]) -> None:
    """It said only "No such file or directory"; one wording for the three commands that read an events file."""
    (empty / "on.json5").write_text(CONFIG, encoding="utf-8")
    one_line(
        lw(empty, *argv, "missing.jsonl"),
        2,
        f"loopwatch {argv[0]}: cannot read the events file (missing.jsonl): No such file or directory; {NO_EVENTS}",
    )
    (empty / "logs").mkdir()
    (empty / "f").write_text("", encoding="utf-8")
    for path, reason in (
        ("logs", "Is a directory; give the path of a file in it"),
        ("f/e.jsonl", "f is not a directory"),
    ):
        one_line(lw(empty, *argv, path), 2, f"loopwatch {argv[0]}: cannot read the events file ({path}): {reason}")


def test_the_hinted_way_to_make_an_events_file_works(empty: Path) -> None:
    """The hint names a real command: what it writes replays."""
    assert lw(empty, "simulate", "--duration", "1", "--out", "events.jsonl").code == 0
    assert lw(empty, "replay", "--events", "events.jsonl").code == 0


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["whatif", "--events", "events.jsonl", "--candidate", "on.json5", "--html"], "the HTML report"),
        (["simulate", "--duration", "1", "--out"], "the output file"),
    ],
    ids=["whatif-html", "simulate-out"],
)
def test_an_output_file_that_cannot_be_written_says_why(empty: Path, argv: list[str], what: str) -> None:
    """It said "No such file or directory" for a missing directory and "Is a directory" for a directory."""
    (empty / "on.json5").write_text(CONFIG, encoding="utf-8")
    (empty / "events.jsonl").write_text("\n".join(json.dumps(e) for e in repeated_reads("out", 12)) + "\n")
    (empty / "reports").mkdir()
    (empty / "f").write_text("", encoding="utf-8")
    command = argv[0]
    for path, reason in (
        ("out/r.html", "the directory out does not exist; create it first, or give a path in an existing, writable "
         "directory"),
        ("reports", "Is a directory; give the path of a file in it"),
        ("f/r.html", "f is not a directory"),
    ):  # fmt: skip
        result = lw(empty, *argv, path)
        assert (result.code, result.err) == (2, f"loopwatch {command}: cannot write {what} ({path}): {reason}\n")
    assert sorted(p.name for p in empty.iterdir()) == ["events.jsonl", "f", "on.json5", "reports"]
    assert list((empty / "reports").iterdir()) == []


def test_a_report_over_one_of_its_own_inputs_is_refused_and_the_input_kept(empty: Path) -> None:
    """``whatif --html`` over the events (or a config) it reads replaced them with HTML, status 0: the recorded
    events were gone. Any spelling of the same file is refused, before anything is read or written."""
    (empty / "on.json5").write_text(CONFIG, encoding="utf-8")
    (empty / "cur.json5").write_text("{}", encoding="utf-8")
    (empty / "profiles.json5").write_text("{}", encoding="utf-8")
    (empty / "sub").mkdir()
    events = "\n".join(json.dumps(e) for e in repeated_reads("own", 12)) + "\n"
    (empty / "events.jsonl").write_text(events, encoding="utf-8")
    base = ["whatif", "--events", "events.jsonl", "--config", "cur.json5", "--candidate", "on.json5"]
    for html, flag in (
        ("events.jsonl", "--events"),
        ("sub/../events.jsonl", "--events"),
        (str(empty / "cur.json5"), "--config"),
        ("on.json5", "--candidate"),
        ("profiles.json5", "--profiles"),
    ):
        result = lw(empty, *base, "--profiles", "profiles.json5", "--html", html)
        assert (result.code, result.out) == (2, ""), result
        assert result.err == (
            f"loopwatch whatif: --html names the file given to {flag}: writing it would destroy that input ({html}): "
            "write the report to another file; see 'loopwatch whatif --help'\n"
        )
    assert (empty / "events.jsonl").read_text(encoding="utf-8") == events
    assert (empty / "on.json5").read_text(encoding="utf-8") == CONFIG
    assert [(empty / n).read_text(encoding="utf-8") for n in ("cur.json5", "profiles.json5")] == ["{}", "{}"]
    (empty / "client.properties").write_text("security.protocol=SSL\n", encoding="utf-8")
    topic = ["whatif", "--topic", "t", "--candidate", "on.json5", "--kafka-config", "client.properties"]
    result = lw(empty, *topic, "--html", "client.properties")  # the Kafka client's files are inputs too
    assert (result.code, result.err.split(":")[1]) == (2, " --html names the file given to --kafka-config"), result
    assert (empty / "client.properties").read_text(encoding="utf-8") == "security.protocol=SSL\n"
    # Files named by variables are inputs too, and the line names the variable (it said --profiles).
    (empty / "ca.pem").write_text("not a PEM", encoding="utf-8")
    for variable, flag, path, argv in (
        ("LOOPWATCH_PROFILES", "--profiles", "profiles.json5", base),
        ("LOOPWATCH_KAFKA_CONFIG", "--kafka-config", "client.properties", topic[:-2]),
        ("LOOPWATCH_KAFKA_SSL_CA_LOCATION", "--ssl-cafile", "ca.pem", topic[:-2]),
    ):
        result = lw(empty, *argv, "--html", path, env={variable: path})
        assert (result.code, result.err.split(":")[1]) == (2, f" --html names the file given to {flag} via {variable}")
    # And the files only a variable or the properties file names: a password file, the TLS files in it.
    (empty / "pw.txt").write_text("secret\n", encoding="utf-8")
    (empty / "tls.properties").write_text("security.protocol=SSL\nssl.ca.location=ca.pem\n", encoding="utf-8")
    for env, path, where in (
        ({"LOOPWATCH_KAFKA_SASL_PASSWORD_FILE": "pw.txt"}, "pw.txt", "LOOPWATCH_KAFKA_SASL_PASSWORD_FILE"),
        ({"LOOPWATCH_KAFKA_CONFIG": "tls.properties"}, "ca.pem", "ssl.ca.location in the Kafka client properties file"),
    ):
        result = lw(empty, *topic[:-2], "--html", path, env=env)
        assert (result.code, result.err.split(":")[1]) == (2, f" --html names the file given to {where}"), result
    assert [(empty / n).read_text(encoding="utf-8") for n in ("profiles.json5", "ca.pem", "pw.txt")] == [
        "{}",
        "not a PEM",
        "secret\n",
    ]
    assert lw(empty, *base, "--html", "report.html").code == 0  # another file: written
    assert (empty / "report.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
