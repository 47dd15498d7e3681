"""``loopwatch broker``'s note when its memory storage starts to cost (the watch is pure: no waiting here)."""

from __future__ import annotations

from streams.cli.broker import BusyWatch


def test_a_busy_minute_is_told_once() -> None:
    watch = BusyWatch(window=60.0, share=0.5)
    assert watch.sample(0.0, 10.0) is None  # the first sample only starts the window
    assert watch.sample(30.0, 40.0) is None  # a full core, but half a window
    assert watch.sample(60.0, 20.0 + 10.0) is None  # 20 s of CPU in 60 s: a third of a core
    assert watch.sample(120.0, 30.0 + 36.0) == 0.6  # 36 s in the next 60 s
    assert watch.told
    assert watch.sample(180.0, 66.0 + 60.0) is None  # once is enough


def test_no_reading_or_a_restarted_process_starts_the_window_again() -> None:
    watch = BusyWatch(window=60.0, share=0.5)
    assert watch.sample(0.0, None) is None  # no /proc: never a note
    assert watch.sample(1.0, 50.0) is None
    assert watch.sample(30.0, 5.0) is None  # the CPU went down: another process, start over
    assert watch.sample(61.0, 35.0) is None  # 30 s over 31 s, but not a full window yet
    assert watch.sample(90.0, 50.0) == 0.75
