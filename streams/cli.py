"""The ``loopwatch`` command line: one sub-command per module under :mod:`streams.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# Each module exposes ``register(subparsers)`` which adds its parser and sets ``func=run``
# where ``run(args: argparse.Namespace) -> int``.
_COMMAND_MODULES = (
    "streams.commands.replay",
    "streams.commands.config_check",
    "streams.commands.broker",
    "streams.commands.worker",
    "streams.commands.publish",
    "streams.commands.tail",
    "streams.commands.whatif",
    "streams.commands.simulate",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loopwatch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # The reader went away (``loopwatch replay ... | head``): stop quietly, like any Unix filter.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
