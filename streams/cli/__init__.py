"""The ``loopwatch`` command line: one sub-command per module under streams/cli/.

Every command prints expected failures as one line (see streams/errors.py) and never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import textwrap
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, NoReturn

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
    return parser


def command_name(args: argparse.Namespace) -> str:
    """``worker``, ``config check``: how error lines name the command."""
    sub = getattr(args, "config_command", None)
    return f"{args.command} {sub}" if sub else str(args.command)


def main(argv: Sequence[str] | None = None, *, record_source: RecordSource | None = None) -> int:
    """Run one command. ``record_source`` replaces the broker the audits (replay, whatif) read topics from."""
    args = build_parser().parse_args(argv)
    args.record_source = record_source
    try:
        code: int = args.func(args)
    except CommandError as exc:
        return report(command_name(args), exc)
    except KeyboardInterrupt:
        print(f"loopwatch {command_name(args)}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``loopwatch replay ... | head``): stop quietly, like any Unix filter.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return code


__all__ = [
    "build_parser",
    "main",
]
