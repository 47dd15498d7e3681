"""The ``loopwatch`` command line: one sub-command per module under streams/cli/.

Every command prints expected failures as one line (see streams/errors.py) and never a traceback; :func:`main`
also handles, once for all of them, stdout write failures, a reader of stdout that went away, Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
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

from streams.cli._args import refuse_empty_paths
from streams.cli._signals import sigterm_raises
from streams.errors import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, CommandError, exit_code_table, report

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


class Parser(argparse.ArgumentParser):
    """argparse with loopwatch's one-line errors: ``loopwatch <command>: <problem> (<flag>): see … --help``."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """An unknown option is named before a missing command (argparse said ``loopwatch --bogus`` lacked a
        command), and by the parser that did not know it: ``loopwatch worker --bogus`` points to the worker's
        ``--help``, not to ``loopwatch --help``."""
        commands = [a for a in self._actions if isinstance(a, argparse._SubParsersAction) and a.required]
        for action in commands:
            action.required = False
        try:
            parsed, extras = super().parse_known_args(args, namespace)
        finally:
            for action in commands:
                action.required = True
        if extras:
            first = extras[0]
            if first.startswith("-") and first != "-":
                self.error(f"unrecognized option {first.split('=', 1)[0]}")
            self.error(f"unexpected argument {first!r}")
        missing = [str(a.metavar or a.dest) for a in commands if getattr(parsed, a.dest, None) is None]
        if missing:
            self.error(f"the following arguments are required: {', '.join(missing)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
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
    any other ``OSError`` (a socket, an output file) and report them once for every command."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.failure: OSError | None = None  # the first write error, also when a library swallowed it

    def check(self) -> None:
        """Raise the write error that happened, if any: argparse, for one, ignores its own (--help > /dev/full)."""
        if self.failure is not None:
            raise self.failure

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Any) -> int | None:
        view = memoryview(data).cast("B")
        written = 0
        try:
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


def _guard_stdout() -> tuple[TextIO, _GuardedStdout] | None:
    """Route ``sys.stdout`` (text and ``.buffer``) through :class:`_GuardedStdout`; returns the stream it replaced
    and the guard.

    Only the process's own stdout is guarded: a caller that replaced ``sys.stdout`` (a test capturing output, the
    demo) keeps its stream."""
    out = sys.stdout
    if out is None or out is not sys.__stdout__ or not isinstance(out, io.TextIOWrapper):
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


def _drop_stdout() -> None:
    """Point fd 1 at /dev/null so that what is still buffered (and the interpreter's flush at exit) goes nowhere
    instead of failing a second time (which Python reports with a traceback and status 120)."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        sys.stdout.flush()


def _unguard_stdout(guard: tuple[TextIO, _GuardedStdout] | None) -> None:
    if guard is None:
        return
    guarded, sys.stdout = sys.stdout, guard[0]
    with contextlib.suppress(OSError, ValueError):
        guarded.flush()  # flushed already unless an error left data behind (then fd 1 is /dev/null)
        if isinstance(guarded, io.TextIOWrapper):
            below = guarded.detach()  # keep fd 1 open: it is the process's
            if isinstance(below, io.BufferedWriter):
                below.detach()


def _stdout_failure(command: str, exc: OSError) -> int:
    """The output could not be written: one line, the status of an output file that cannot be written."""
    _drop_stdout()
    name = f" {command}" if command else ""
    error = CommandError("cannot write the output", "stdout", exc.strerror or str(exc))
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


def _dispatch(args: argparse.Namespace, command: str) -> int:
    try:
        with _command_context(command):
            code: int = args.func(args)
            sys.stdout.flush()  # here, not at exit: a failure is still reported as one line
            return code
    except CommandError as exc:
        return report(command, exc)
    except KeyboardInterrupt:
        print(f"loopwatch {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def main(argv: Sequence[str] | None = None, *, record_source: RecordSource | None = None) -> int:
    """Run one command. ``record_source`` replaces the broker the audits (replay, whatif) read topics from.

    Output errors are handled here once for every command: the reader of stdout gone ends the command quietly
    with 141 (as a shell reports a filter stopped by SIGPIPE, so ``set -o pipefail`` scripts see it), any other
    write error (a full disk) is one line and status 2, as for an output file given with ``--out``/``--html``.
    """
    guard = _guard_stdout()
    command = ""
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # --help, --version or a usage error: argparse printed it
            sys.stdout.flush()
            if guard is not None:
                guard[1].check()
            raise
        command = command_name(args)
        args.record_source = record_source
        code = _dispatch(args, command)
        if guard is not None:
            guard[1].check()
        return code
    except BrokenPipeError:
        _drop_stdout()
        return EXIT_BROKEN_PIPE
    except StdoutFailed as exc:
        return _stdout_failure(command, exc)
    finally:
        _unguard_stdout(guard)


__all__ = [
    "StdoutFailed",
    "StdoutGone",
    "build_parser",
    "main",
]
