"""One error model for every command, and one table of exit statuses.

An expected failure (a bad flag, an unreadable file, a broker that is not there, a port in use, a TLS mismatch,
a locked data directory) is one line on stderr, ``loopwatch <command>: <what failed> (<where>): <hint>``, and a
status from :data:`EXIT_CODES`; never a traceback. Commands raise :class:`CommandError`; ``streams.cli`` prints
it, so the format lives here only.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from typing import Final

EXIT_OK: Final = 0
EXIT_FINDINGS: Final = 1
EXIT_USAGE: Final = 2
EXIT_UNAVAILABLE: Final = 3
EXIT_FATAL: Final = 70
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141

#: Every exit status a ``loopwatch`` command uses, with its meaning (``loopwatch --help`` and the README show it).
EXIT_CODES: Final[tuple[tuple[int, str], ...]] = (
    (
        EXIT_OK,
        "success (tail once it follows, the broker and a started worker stopped with Ctrl-C or SIGTERM also end "
        "with 0; a worker stopped with SIGTERM while it starts too)",
    ),
    (
        EXIT_FINDINGS,
        "the command ran and found something: config values adjusted, verdicts differ, a run not found, "
        "tail --max not reached before --timeout",
    ),
    (
        EXIT_USAGE,
        "bad flags or values, unreadable or invalid input files, an output (file or stdout) that cannot be "
        "written, topics with the wrong partition count",
    ),
    (
        EXIT_UNAVAILABLE,
        "something outside is not available: Kafka unreachable, refusing the connection (TLS, SASL) or lost "
        "(tail), the worker's topics gone from the cluster, a port in use, a data directory locked by another "
        "worker",
    ),
    (EXIT_FATAL, "the worker stopped itself after an unrecoverable processing or delivery error"),
    (
        EXIT_INTERRUPTED,
        "interrupted by Ctrl-C or SIGTERM before the command could finish (a worker: by Ctrl-C before it started, "
        "while it checks or waits for Kafka; publish and simulate --bootstrap, once they send, first say on stdout how "
        "many of their records are in Kafka)",
    ),
    (EXIT_BROKEN_PIPE, "the reader of stdout went away (loopwatch replay ... | head)"),
)


class CommandError(Exception):
    """An expected failure: what failed, where (an address, a file, a property) and what to do about it."""

    def __init__(self, what: str, where: str | None = None, hint: str | None = None, *, code: int = EXIT_USAGE):
        super().__init__(what)
        self.what = what
        self.where = where
        self.hint = hint
        self.code = code

    def text(self) -> str:
        where = f" ({self.where})" if self.where else ""
        hint = f": {self.hint}" if self.hint else ""
        return f"{self.what}{where}{hint}"

    def line(self, command: str) -> str:
        return f"loopwatch {command}: {self.text()}"


def report(command: str, error: CommandError) -> int:
    """Print ``error`` as one line on stderr; returns its exit status."""
    print(error.line(command), file=sys.stderr, flush=True)
    return error.code


class StdoutError(CommandError):
    """stdout cannot be written, reported by the command itself in its own words (``publish``: what it sent
    first); ``main`` then reports no second line for the same failure."""

    def __init__(self, what: str, reason: str, *, code: int = EXIT_USAGE) -> None:
        super().__init__(what, "stdout", reason, code=code)


def fail(command: str, what: str, where: str | None = None, hint: str | None = None, *, code: int = EXIT_USAGE) -> int:
    """Print one error line for ``command`` and return ``code`` (for commands that return their status)."""
    return report(command, CommandError(what, where, hint, code=code))


def warn(command: str, message: str) -> None:
    """A warning that does not stop the command, in the same shape: ``loopwatch <command>: warning: …``."""
    print(f"loopwatch {command}: warning: {message}", file=sys.stderr, flush=True)


def mkdir_reason(exc: OSError, directory: Path) -> str:
    """Why ``directory`` could not be made: the file in its way named (``mkdir`` says only "File exists" or
    "Not a directory", without saying which), else the system's words."""
    for path in (directory, *directory.parents):
        if path.exists() or path.is_symlink():
            if not path.is_dir():
                return f"{path} is not a directory"
            break
    return exc.strerror or str(exc)


def file_reason(exc: OSError, path: Path, *, writing: bool = False) -> str:
    """Why ``path`` could not be opened, and what to do: the system's words alone ("Is a directory", "No such
    file or directory") left the operator to guess. An output file's directory is not created for it."""
    words = exc.strerror or str(exc)
    parent = path.parent
    folder = "the current directory" if str(parent) == "." else f"the directory {parent}"
    if isinstance(exc, IsADirectoryError):
        return f"{words}; give the path of a file in it"
    if isinstance(exc, NotADirectoryError):
        return mkdir_reason(exc, parent)
    if isinstance(exc, FileNotFoundError) and writing and not parent.is_dir():
        return f"{folder} does not exist; create it first, or give a path in an existing, writable directory"
    if isinstance(exc, PermissionError):
        if writing and not path.exists():
            return f"{words}; {folder} must be writable"
        return f"{words}; the file must be {'writable' if writing else 'readable'}"
    if exc.errno == errno.ENOSPC:
        return f"{words}; free space there, or give a path on another device"
    return f"{words}; give another path" if writing else words  # a reader's caller says where to find one


def stdout_reason(exc: OSError) -> str:
    """Why stdout could not be written, and what to do when it is a full disk (the usual case)."""
    words = exc.strerror or str(exc)
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return f"{words}; free space there, or send the output elsewhere" if full else words


def exit_code_table() -> str:
    """The exit statuses as plain text, for ``--help``."""
    return "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES)
