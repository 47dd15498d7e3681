"""The ``loopwatch`` command line: one sub-command per module under streams/cli/.

Every command prints expected failures as one line (see streams/errors.py) and never a traceback; :func:`main`
also handles, once for all of them, stdout write failures, a reader of stdout that went away, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import errno
import importlib
import io
import logging
import os
import re
import sys
import textwrap
from collections.abc import Iterator, Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from streams.cli._args import STDOUT_CLOSED, note_stdout_closed, refuse_empty_paths, subcommands
from streams.cli._signals import restored, sigterm_raises
from streams.errors import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    CommandError,
    StdoutError,
    exit_code_table,
    report,
    stdout_reason,
)

if TYPE_CHECKING:
    from streams.kafka.reader import RecordSource

# Each module exposes ``register(subparsers)`` which adds its parser and sets ``func=run``
# where ``run(args: argparse.Namespace) -> int``.
_COMMAND_MODULES = (
    "streams.cli.replay",
    "streams.cli.config_check",
    "streams.cli.broker",
    "streams.cli.worker",
    "streams.cli.publish",
    "streams.cli.tail",
    "streams.cli.whatif",
    "streams.cli.simulate",
)

DESCRIPTION = (
    "Detect AI agents stuck in repetitive tool-call loops, fleet-wide: a streaming worker on Kafka, the embedded "
    "broker for local use, and offline audits (replay, explain, what-if) that decide exactly what the worker "
    "decides. Run 'loopwatch COMMAND --help' for a command's flags."
)


class _Held(Exception):
    """An error argparse found while :class:`Parser` holds its errors back (see ``parse_known_args``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@contextlib.contextmanager
def _nothing_required(parser: argparse.ArgumentParser) -> Iterator[None]:
    """For a moment, no argument or group of ``parser`` is required (argparse's own trick for intermixed parsing)."""
    required: list[argparse.Action | argparse._MutuallyExclusiveGroup] = [
        *(action for action in parser._actions if action.required),
        *(group for group in parser._mutually_exclusive_groups if group.required),
    ]
    for item in required:
        item.required = False
    try:
        yield
    finally:
        for item in required:
            item.required = True


class Parser(argparse.ArgumentParser):
    """argparse with loopwatch's one-line errors: ``loopwatch <command>: <problem> (<flag>): see … --help``.

    Every parser of the command line is one (sub-commands too: argparse makes them of the parser's class), so the
    rules below hold for all of them, here only."""

    _holding = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # No abbreviations: ``replay --event f`` was taken for --events, ``simulate --gate 2`` for --gateways,
        # silently; a flag added later could make a prefix that scripts rely on ambiguous.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """An unknown option is named before anything missing (argparse checks what is required first: it said
        ``loopwatch --bogus`` lacked a command, ``loopwatch replay --bogus`` lacked --events or --topic), and by the
        parser that did not know it: ``loopwatch worker --bogus`` points to the worker's ``--help``, not to
        ``loopwatch --help``.

        On an error, the arguments are parsed again with nothing required, only to look for an unknown option;
        an error that is not about something missing comes back the same the second time, and is printed then."""
        argv = list(sys.argv[1:] if args is None else args)
        try:
            self._holding = True
            try:
                parsed, extras = super().parse_known_args(argv, namespace)
            finally:
                self._holding = False
        except _Held as held:
            with _nothing_required(self):
                _, extras = super().parse_known_args(argv, copy.copy(namespace))
            self._refuse_extras(extras)
            self.error(held.message)
        self._refuse_extras(extras)
        return parsed, extras

    def _refuse_extras(self, extras: list[str]) -> None:
        if extras:
            first = extras[0]
            if first.startswith("-") and first != "-":
                self.error(f"unrecognized option {first.split('=', 1)[0]}")
            self.error(f"unexpected argument {first!r}")

    def error(self, message: str) -> NoReturn:
        if self._holding:
            raise _Held(message)
        match = re.fullmatch(r"argument ([^:]+): (.*)", message, flags=re.DOTALL)
        what, where = (match.group(2), match.group(1)) if match else (message, None)
        error = CommandError(what, where, f"see '{self.prog} --help'")
        print(f"{self.prog}: {error.text()}", file=sys.stderr)
        sys.exit(error.code)


def version() -> str:
    try:
        return metadata.version("loopwatch")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="loopwatch",
        description=textwrap.fill(DESCRIPTION, 79),
        epilog=f"exit status:\n{exit_code_table()}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"loopwatch {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    refuse_empty_paths(parser)
    return parser


def command_name(args: argparse.Namespace) -> str:
    """``worker``, ``config check``: how error lines name the command."""
    sub = getattr(args, "config_command", None)
    return f"{args.command} {sub}" if sub else str(args.command)


class StdoutFailed(OSError):
    """Writing to stdout failed for another reason than a reader gone (a full disk, an I/O error)."""


class StdoutGone(BrokenPipeError):
    """The reader of stdout went away (``loopwatch ... | head``)."""


class _GuardedStdout(io.RawIOBase):
    """File descriptor 1 whose write errors say that they are stdout's, so that ``main`` can tell them apart from
    any other ``OSError`` (a socket, an output file) and report them once for every command.

    ``fd`` None stands for a stdout the shell closed: Python then leaves ``sys.stdout`` None, and each command's
    first write was an ``AttributeError`` traceback; here it is a write error like any other."""

    def __init__(self, fd: int | None) -> None:
        super().__init__()
        self._fd = fd
        self._dropped = False
        self.failure: OSError | None = None  # the first write error, also when a library swallowed it

    def drop(self) -> None:
        """Discard what is still buffered and written later: the failure was reported once, and a second one
        (the text wrapper's flush when it is closed) would be printed as "Exception ignored"."""
        self._dropped = True

    def reported(self) -> None:
        """The command reported the failure in its own words (``publish``: what it sent): not again."""
        self.failure = None
        self.drop()

    def check(self) -> None:
        """Raise the write error that happened, if any: argparse, for one, ignores its own (--help > /dev/full)."""
        if self.failure is not None:
            raise self.failure

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        if self._fd is None:
            raise io.UnsupportedOperation("standard output is closed")
        return self._fd

    def isatty(self) -> bool:
        return self._fd is not None and os.isatty(self._fd)

    def write(self, data: Any) -> int | None:
        view = memoryview(data).cast("B")
        if self._dropped:
            return len(view)
        written = 0
        try:
            if self._fd is None:
                raise OSError(errno.EBADF, STDOUT_CLOSED)
            while written < len(view):  # all of it: unbuffered (python -u), nothing above retries a short write
                written += os.write(self._fd, view[written:])
            return written
        except BlockingIOError:
            return written or None  # as FileIO: the buffered writer above retries the rest
        except BrokenPipeError as exc:
            self.failure = self.failure or StdoutGone(exc.errno, exc.strerror)
        except OSError as exc:
            self.failure = self.failure or StdoutFailed(exc.errno, exc.strerror)
        raise self.failure


def _guard_stdout() -> tuple[TextIO | None, _GuardedStdout] | None:
    """Route ``sys.stdout`` (text and ``.buffer``) through :class:`_GuardedStdout`; returns the stream it replaced
    and the guard.

    Only the process's own stdout is guarded: a caller that replaced ``sys.stdout`` (a test capturing output, the
    demo) keeps its stream. A closed stdout (None) gets a guard whose every write fails."""
    out = sys.stdout
    note_stdout_closed(out is None)
    if out is None:
        raw = _GuardedStdout(None)
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", newline="\n")
        return None, raw
    if out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
        return None
    try:
        fd = out.fileno()
        out.flush()
    except (OSError, ValueError):
        return None
    raw = _GuardedStdout(fd)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw) if isinstance(out.buffer, io.BufferedWriter) else raw,  # unbuffered (-u) stays so
        encoding=out.encoding,
        errors=out.errors,
        newline="\n",
        line_buffering=out.line_buffering,
        write_through=out.write_through,
    )
    return out, raw


def _drop_stdout(guard: tuple[TextIO | None, _GuardedStdout] | None) -> None:
    """Point fd 1 at /dev/null so that what is still buffered (and the interpreter's flush at exit) goes nowhere
    instead of failing a second time (which Python reports with a traceback and status 120)."""
    if guard is not None:
        guard[1].drop()
    with contextlib.suppress(OSError, ValueError):
        fd = sys.stdout.fileno()  # first: a closed stdout has none, and nothing is opened for it
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
        sys.stdout.flush()


def _open_stderr() -> None:
    """Give a closed stderr (``2>&-``; Python leaves ``sys.stderr`` None) a sink: ``print(file=sys.stderr)`` with
    None writes to stdout, which mixed the error line into the output. The exit status still says what failed."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's stderr, for its life


def _unguard_stdout(guard: tuple[TextIO | None, _GuardedStdout] | None) -> None:
    if guard is None:
        return
    guarded, sys.stdout = sys.stdout, guard[0]
    with contextlib.suppress(OSError, ValueError):
        guarded.flush()  # flushed already unless an error left data behind (then fd 1 is /dev/null)
        if isinstance(guarded, io.TextIOWrapper):
            below = guarded.detach()  # keep fd 1 open: it is the process's
            if isinstance(below, io.BufferedWriter):
                below.detach()


def _stdout_failure(command: str, exc: OSError, guard: tuple[TextIO | None, _GuardedStdout] | None) -> int:
    """The output could not be written: one line, the status of an output file that cannot be written."""
    _drop_stdout(guard)
    name = f" {command}" if command else ""
    error = CommandError("cannot write the output", "stdout", stdout_reason(exc))
    print(f"loopwatch{name}: {error.text()}", file=sys.stderr, flush=True)
    return error.code


#: Commands that handle SIGTERM themselves (Faust's worker, the broker that must stop its child).
_OWN_SIGNALS = frozenset({"worker", "broker"})
_LIBRARIES = ("aiokafka", "kafka")  # loggers whose records reach the user (critical only)


@contextlib.contextmanager
def _command_context(command: str) -> Iterator[None]:
    """What every command but the worker and the broker shares: SIGTERM stops it as Ctrl-C does (a follow command
    then ends with 0, any other with 130), and the Kafka client's own log lines are kept back: each command names
    a Kafka failure in its one line (the pre-flight check, tail's :class:`Lifeline`, ``kafka_failure``), and
    aiokafka's retries (about 40 lines a second while a broker is away) only came before it. What it logs as
    critical still shows, with the command's name, each repeated message at most every 30 s
    (the worker's :class:`RepeatLimiter`)."""
    if command.split()[0] in _OWN_SIGNALS:
        yield
        return
    from streams.worker.startup import RepeatLimiter

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(f"loopwatch {command}: kafka client: %(message)s"))
    handler.addFilter(RepeatLimiter())
    loggers = [logging.getLogger(name) for name in _LIBRARIES]
    saved = [(logger, logger.level, logger.propagate) for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False
    try:
        with sigterm_raises(KeyboardInterrupt):
            yield
    finally:
        for logger, level, propagate in saved:
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate


def _dispatch(args: argparse.Namespace, command: str, guard: tuple[TextIO | None, _GuardedStdout] | None) -> int:
    try:
        with _command_context(command):
            code: int = args.func(args)
            sys.stdout.flush()  # here, not at exit: a failure is still reported as one line
            return code
    except CommandError as exc:
        if isinstance(exc, StdoutError) and guard is not None:
            _drop_stdout(guard)
            guard[1].reported()
        return report(command, exc)
    except KeyboardInterrupt:
        print(f"loopwatch {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None, *, record_source: RecordSource | None = None, exiting: bool = False) -> int:
    """Run one command. ``record_source`` replaces the broker the audits (replay, whatif) read topics from;
    ``exiting``: the caller exits with the status next (the console script, :mod:`streams.console`).

    Output errors are handled here once for every command: the reader of stdout gone ends the command quietly
    with 141 (as a shell reports a filter stopped by SIGPIPE, so ``set -o pipefail`` scripts see it), any other
    write error (a full disk) is one line and status 2, as for an output file given with ``--out``/``--html``.
    """
    with restored(exiting=exiting):
        return _main(argv, record_source)


def _typed_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The command words of an ``argv`` that argparse ended (``worker --help``): what an error line names."""
    words: list[str] = []
    for word in (w for w in argv if not w.startswith("-")):
        choices = subcommands(parser)
        if word not in choices:
            break
        words.append(word)
        parser = choices[word]
    return " ".join(words)


def _main(argv: Sequence[str] | None, record_source: RecordSource | None) -> int:
    _open_stderr()
    guard = _guard_stdout()
    command = ""
    try:
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit:  # --help, --version or a usage error: argparse printed it
            command = _typed_command(parser, sys.argv[1:] if argv is None else argv)
            sys.stdout.flush()
            if guard is not None:
                guard[1].check()
            raise
        command = command_name(args)
        args.record_source = record_source
        code = _dispatch(args, command, guard)
        if guard is not None:
            guard[1].check()
        return code
    except BrokenPipeError:
        _drop_stdout(guard)
        return EXIT_BROKEN_PIPE
    except StdoutFailed as exc:
        return _stdout_failure(command, exc, guard)
    except KeyboardInterrupt:  # while the parser is built (its imports take a while), or as the command returns
        print(f"loopwatch{f' {command}' if command else ''}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        _unguard_stdout(guard)


__all__ = [
    "StdoutFailed",
    "StdoutGone",
    "build_parser",
    "main",
]
