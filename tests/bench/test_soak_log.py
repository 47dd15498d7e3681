"""What the soak reports of its worker's log."""

from __future__ import annotations

from tests.support.worker import warning_kinds

LOG = """\
loopwatch worker: starting: group loopwatch, 4 partitions
[2026-12-06 14:06:26,705] [905] [WARNING] fleet storm: signature ["signature","read","2a72f8262327db24"] in 5 runs
[2026-12-06 14:06:27,001] [905] [WARNING] events[2]: the re-read from 4996 brought offset 5003 first; seeking again
[2026-12-06 14:06:28,702] [905] [WARNING] fleet storm: signature ["signature","list","9f0e1d2c3b4a5968"] in 12 runs
[2026-12-06 14:06:28,900] [905] [WARNING] Timer loopwatch.sweep is overlapping (interval=3.0 runtime=3.0123456789)
[2026-12-06 14:06:29,000] [905] [ERROR] something else
loopwatch worker: ready: group loopwatch
"""


def test_warnings_are_counted_by_kind_most_frequent_first() -> None:
    assert warning_kinds(LOG) == [
        ("fleet storm: signature […] in N runs", 2),
        ("events[N]: the re-read from N brought offset N first; seeking again", 1),
        ("Timer loopwatch.sweep is overlapping (interval=N.N runtime=N.N)", 1),
    ]
    assert warning_kinds("no warnings here\n[2026-12-06 14:06:29,000] [905] [INFO] fine\n") == []
