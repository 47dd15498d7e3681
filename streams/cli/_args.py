"""Argparse types for the commands' numeric, topic, bootstrap and path flags, so a nonsensical value is refused
where it is typed.

Each raises :class:`argparse.ArgumentTypeError`, which the command line turns into its one-line error naming the
flag (streams/cli/__init__.py); no command has to check its numbers again after parsing. The text is parsed as
the worker's flags and variables are (:mod:`streams.worker.options`), so the messages read alike.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Final

from streams.errors import CommandError, StdoutError, file_reason
from streams.kafka.security import FILE_VARIABLES, SECURITY_FLAGS
from streams.topics import partition_count_problem, topic_name_problem
from streams.worker import options
from streams.worker.options import flag_value, integer, number
from streams.worker.settings import environ


def any_int(text: str) -> int:
    """Any integer, negative ones too, in the words of every integer setting (``streams.worker.options``)."""
    return flag_value(integer, text)


def _float(text: str) -> float:
    return flag_value(number, text)


def positive_int(text: str) -> int:
    value = any_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return value


def partition_count(text: str) -> int:
    """A topic's partition count (:func:`streams.topics.partition_count_problem`)."""
    value = any_int(text)
    problem = partition_count_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return value


def non_negative_int(text: str) -> int:
    value = any_int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError("must be a positive number")
    return value


def fraction(text: str) -> float:
    value = _float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


def port(text: str) -> int:
    """A TCP port, 0 included (0: the system picks a free one)."""
    value = any_int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("must be a port number from 0 to 65535")
    return value


def topic_name(text: str) -> str:
    """A topic name Kafka accepts, by the one rule of :func:`streams.topics.topic_name_problem`: the embedded
    broker creates names Kafka refuses, so without this a typo became a topic no real cluster could have."""
    problem = topic_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def bootstrap(text: str) -> str:
    """A ``--bootstrap`` list, by the worker's rule (:func:`streams.worker.options.bootstrap`)."""
    return flag_value(options.bootstrap, text)


def bootstrap_setting(args: argparse.Namespace, command: str) -> str:
    """``--bootstrap``, else ``LOOPWATCH_BOOTSTRAP``, else the default, for a command that shares the worker's
    flag and variable (tail, publish, and replay and whatif with --topic): a bad variable is named as the worker
    names it, not taken for a flag."""
    option = options.option_of("bootstrap")
    assert option is not None
    try:
        return str(options.setting(option, args, environ()))
    except options.VariableError as exc:
        raise CommandError(exc.what, option.flag, f"see 'loopwatch {command} --help'") from None


#: Every flag that takes a file's path, whichever command has it (a positional by its name); and --data-dir.
_FILE_FLAGS: Final = (
    *("file", "--events", "--config", "--candidate", "--profiles", "--html", "--out", "--log-file"),
    *("--cert", "--key", "--client-ca"),
    *FILE_VARIABLES,
)
PATH_FLAGS: Final[dict[str, str]] = {**dict.fromkeys(_FILE_FLAGS, "file"), "--data-dir": "directory"}


def _non_empty(convert: Callable[[str], Any], kind: str) -> Callable[[str], Any]:
    def check(text: str) -> Any:
        if text == "":
            raise argparse.ArgumentTypeError(f"must be a {kind} path, not an empty string")
        return convert(text)

    check.__name__ = getattr(convert, "__name__", kind)  # argparse names the type in some messages
    return check


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s commands by name (none for a command without subcommands)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def refuse_empty_paths(parser: argparse.ArgumentParser) -> None:
    """Refuse an empty value for every flag of :data:`PATH_FLAGS` in ``parser`` and its commands, where it is
    typed: ``Path("")`` is ``.``, so ``--html ""`` failed as "(.): Is a directory", and ``worker --config ""``
    ran with no config file at all. Flags declared outside streams/cli (security, profiles, worker) included."""
    for command in {id(p): p for p in subcommands(parser).values()}.values():  # aliases share a parser
        refuse_empty_paths(command)
    for action in parser._actions:
        kind = next((PATH_FLAGS[name] for name in (*action.option_strings, action.dest) if name in PATH_FLAGS), None)
        if kind is not None and (action.type is None or callable(action.type)):
            action.type = _non_empty(action.type or str, kind)


#: What to do about a missing events file: every command that reads one also reads stdin.
_NO_EVENTS_FILE: Final = (
    "check the path, or give '-' to read stdin ('loopwatch simulate --out FILE' writes sample events)"
)
#: What to do about '-' when there is no stdin to read.
_STDIN_CLOSED: Final = "standard input is closed; pipe or redirect the events into it (< FILE), or give the file's path"


#: Why stdout cannot be written when the shell closed it (``>&-``), and what to do.
STDOUT_CLOSED: Final = "standard output is closed; redirect it to a file or to /dev/null instead of closing it (>&-)"


_stdout_closed = False


def note_stdout_closed(closed: bool) -> None:
    """What ``main`` found: stdout closed by the shell (it then guards a stream whose every write fails), or
    not (open, or a stream the caller put there)."""
    global _stdout_closed
    _stdout_closed = closed


def require_stdout() -> None:
    """Refuse a stdout the shell closed (``>&-``) before a command does what cannot be undone (``publish``
    sending its events), rather than at its first write."""
    if _stdout_closed:
        raise StdoutError("cannot write the output", STDOUT_CLOSED)


def open_events(path: Path) -> IO[bytes]:
    """The events file of replay, whatif and publish (stdin for ``-``), or the one error line saying why not."""
    if str(path) == "-":
        if sys.stdin is None:  # the shell closed it (<&-): Python leaves None, and reading was a traceback
            raise CommandError("cannot read the events file", "stdin", _STDIN_CLOSED)
        return sys.stdin.buffer
    try:
        return path.open("rb")
    except OSError as exc:
        reason = file_reason(exc, path)
        if isinstance(exc, FileNotFoundError):
            reason = f"{reason}; {_NO_EVENTS_FILE}"
        raise CommandError("cannot read the events file", str(path), reason) from None


def _given(args: argparse.Namespace, name: str) -> bool:
    """Whether a flag was given: its value is None (or False, or an empty list for a repeatable flag) unless it
    was; the security flags are None unless given (``--no-ssl-check-hostname`` stores False)."""
    value = getattr(args, name, None)
    if name in _SECURITY_NAMES:
        return value is not None
    return value is not None and value is not False and value != []


_SECURITY_NAMES: Final = frozenset(name for _, name in SECURITY_FLAGS)


def refuse_topic_only(args: argparse.Namespace, flags: tuple[tuple[str, str], ...], command: str) -> None:
    """Refuse ``flags`` ((option, attribute) pairs) and the Kafka security flags where a command reads
    ``--events`` from a file: they mean something only with ``--topic``, and a flag that is silently ignored lets
    an operator believe it was applied."""
    given = [flag for flag, name in (*flags, *SECURITY_FLAGS) if _given(args, name)]
    if given:
        raise CommandError(
            "flags that need --topic given with --events", ", ".join(given), f"see 'loopwatch {command} --help'"
        )


def refuse_without(
    args: argparse.Namespace, needs: tuple[str, str], flags: tuple[tuple[str, str], ...], command: str
) -> None:
    """Refuse ``flags`` ((option, attribute) pairs) that only act together with the flag ``needs`` when it is
    not given: ignored, they would let an operator believe they had been applied."""
    flag, name = needs
    given = [option for option, attribute in flags if _given(args, attribute)]
    if given and not _given(args, name):
        raise CommandError(
            f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} nothing without {flag}",
            hint=f"add {flag}, or leave {'it' if len(given) == 1 else 'them'} out; see 'loopwatch {command} --help'",
        )


def refuse_together(args: argparse.Namespace, flags: tuple[tuple[str, str], ...], why: str, command: str) -> None:
    """Refuse two or more of ``flags`` given together (``why`` says what each means alone)."""
    given = [option for option, attribute in flags if _given(args, attribute)]
    if len(given) > 1:
        raise CommandError(f"{' and '.join(given)} given together", hint=f"{why}; see 'loopwatch {command} --help'")


def refuse_overwriting_inputs(
    output: Path | None, flag: str, inputs: tuple[tuple[str, object], ...], command: str
) -> None:
    """Refuse an output file that is one of the command's input files (``inputs``: (flag, path or None) pairs):
    the report would replace the events or the config it was made from, and nothing could bring them back."""
    if output is None or str(output) == "-":
        return
    for input_flag, value in inputs:
        if value is None or str(value) == "-":
            continue
        try:
            same = os.path.samefile(output, str(value))
        except OSError:  # either is missing: nothing to overwrite, or the command names the missing input
            continue
        if same:
            raise CommandError(
                f"{flag} names the file given to {input_flag}: writing it would destroy that input",
                str(output),
                f"write the report to another file; see 'loopwatch {command} --help'",
            )


class Once(argparse.Action):
    """A flag that may be given once: argparse keeps the last of repeated values, silently dropping the others."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        if getattr(namespace, self.dest, None) is not None:
            raise argparse.ArgumentError(self, "given twice: it takes one value")
        setattr(namespace, self.dest, values)
