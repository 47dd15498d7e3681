"""What :func:`streams.cli._signals.settle` leaves in place: a finished command's status survives one late Ctrl-C or
SIGTERM, a second one still stops it, and an in-process caller gets its own handlers back.

The real executable's side (a publish interrupted right after its summary) is in test_sigterm.py; these pin the
handler bookkeeping that a race there can only sometimes show (a review found the handlers put back, for a moment,
before the console script's exit).
"""

from __future__ import annotations

import os
import signal

from streams.cli._signals import restored, settle, sigterm_raises


def _handlers() -> list[object]:
    return [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)]


def test_a_settled_command_keeps_its_handlers_through_the_end_of_its_sigterm_block() -> None:
    before = _handlers()
    with restored(exiting=False):
        with sigterm_raises(KeyboardInterrupt):
            settle()
        after_block = _handlers()
    assert after_block[0] is after_block[1]  # both the swallowing handler, not SIGTERM's default put back
    assert after_block[1] not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler)
    assert _handlers() == before  # in-process: the caller's own handlers again


def test_the_console_script_leaves_a_settled_command_ignoring_both_signals_and_others_as_they_were() -> None:
    before = _handlers()
    try:
        with restored(exiting=True):
            settle()
        assert _handlers() == [signal.SIG_IGN, signal.SIG_IGN]
    finally:
        signal.signal(signal.SIGINT, before[0])  # type: ignore[arg-type]
        signal.signal(signal.SIGTERM, before[1])  # type: ignore[arg-type]
    with restored(exiting=True):
        pass  # not settled: nothing kept ignored
    assert _handlers() == before


def test_the_first_late_signal_is_swallowed_and_a_second_would_end_the_process() -> None:
    before = _handlers()
    with restored(exiting=False):
        settle()
        os.kill(os.getpid(), signal.SIGINT)  # handled at the next bytecode: no KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
    assert _handlers() == before
