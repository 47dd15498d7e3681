"""A standard stream the shell closed (``>&-``, ``<&-``, ``2>&-``): one line and its status, never a traceback.

Python starts with ``sys.stdout`` (``sys.stdin``, ``sys.stderr``) None when the descriptor is closed; each command's
first write was ``AttributeError: 'NoneType' object has no attribute 'buffer'`` and status 1. A closed stdout is an
output that cannot be written (2), as ``> /dev/full`` is; a command that writes only to files still runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import CONFIG, LOOPWATCH, Result, clean_env, lw
from tests.support.procs import free_port

STDOUT_CLOSED = (
    "cannot write the output (stdout): standard output is closed; redirect it to a file or to /dev/null instead of "
    "closing it (>&-)"
)
STDIN_CLOSED = (
    "cannot read the events file (stdin): standard input is closed; pipe or redirect the events into it (< FILE), "
    "or give the file's path"
)


def closed(cwd: Path, redirections: str, *args: str) -> Result:
    """``loopwatch ARGS REDIRECTIONS`` as a shell runs it (``exec``: the command itself, not a child of sh)."""
    done = subprocess.run(
        ["sh", "-c", f'exec "$0" "$@" {redirections}', LOOPWATCH, *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    result = Result(done.returncode, done.stdout, done.stderr, 0.0)
    assert "Traceback" not in result.out + result.err, result.err
    return result


@pytest.fixture
def home(empty: Path) -> Path:
    """An empty directory with a config and sample events, as an operator makes them."""
    (empty / "c.json5").write_text(CONFIG, encoding="utf-8")
    assert lw(empty, "simulate", "--duration", "20", "--out", "w.jsonl").code == 0
    return empty


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["replay", "--events", "w.jsonl"], "loopwatch replay"),
        (["whatif", "--candidate", "c.json5", "--events", "w.jsonl"], "loopwatch whatif"),
        (["config", "check", "c.json5"], "loopwatch config check"),
        (["simulate", "--duration", "2"], "loopwatch simulate"),
        # refused before it sends anything (it sent every event, then failed): no broker is reached
        (["publish", "w.jsonl", "--bootstrap", "127.0.0.1:1"], "loopwatch publish"),
        (["--help"], "loopwatch"),
    ],
    ids=["replay", "whatif", "config-check", "simulate", "publish", "help"],
)
def test_a_closed_stdout_is_an_output_that_cannot_be_written(home: Path, argv: list[str], name: str) -> None:
    result = closed(home, ">&-", *argv)
    assert (result.code, result.err) == (2, f"{name}: {STDOUT_CLOSED}\n")


def test_a_closed_stdout_stops_nothing_that_writes_to_a_file(home: Path) -> None:
    result = closed(home, ">&-", "simulate", "--duration", "2", "--out", "o.jsonl")
    assert (result.code, result.err) == (0, "")
    assert (home / "o.jsonl").read_bytes() == lw(home, "simulate", "--duration", "2").out.encode()


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--events", "-"],
        ["whatif", "--candidate", "c.json5", "--events", "-"],
        ["publish", "-", "--bootstrap", "127.0.0.1:{port}"],
    ],
    ids=["replay", "whatif", "publish"],
)
def test_a_closed_stdin_given_as_the_events_is_one_line_naming_it(home: Path, argv: list[str]) -> None:
    argv = [a.format(port=free_port()) for a in argv]  # publish: refused before any connection
    result = closed(home, "<&-", *argv)
    assert (result.code, result.err, result.out) == (2, f"loopwatch {argv[0]}: {STDIN_CLOSED}\n", "")


def test_a_closed_stderr_keeps_the_status_and_out_of_stdout(home: Path) -> None:
    """``print(file=sys.stderr)`` with stderr None writes to stdout: the error line went into the output."""
    missing = closed(home, "2>&-", "replay", "--events", "nope.jsonl")
    assert (missing.code, missing.out) == (2, "")
    both = closed(home, ">&- 2>&-", "replay", "--events", "w.jsonl")
    assert both.code == 2  # was 1: a traceback nobody saw
    ran = closed(home, "2>&-", "replay", "--events", "w.jsonl")
    assert ran.code == lw(home, "replay", "--events", "w.jsonl").code
    assert ran.out == lw(home, "replay", "--events", "w.jsonl").out


def test_a_stdout_the_caller_replaced_is_not_the_shell_s_closed_one(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """publish refuses a stdout the shell closed before it sends anything. A process started without fd 1 whose
    caller put its own stream in ``sys.stdout`` writes there, so publish goes on (here to a broker that is not
    listening: status 3, not 2). Deciding by ``sys.__stdout__`` refused it."""
    import io

    from streams.cli import main

    monkeypatch.chdir(home)
    monkeypatch.setattr(sys, "__stdout__", None)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert main(["publish", "w.jsonl", "--bootstrap", "127.0.0.1:1"]) == 3
    assert "cannot connect to Kafka" in capsys.readouterr().err
