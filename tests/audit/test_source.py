"""``streams.audit.source``: JSON Lines decoded as the worker decodes, and a file of no events told in one line."""

from __future__ import annotations

import json

import pytest

from streams.audit import source
from streams.errors import CommandError
from tests.support.scenarios import wire_events
from tests.whatif.support import SCENARIOS

STICKY = "generic_warning_then_block_sticky"


def test_bad_lines_before_the_first_event_are_held_and_bounded(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held until an event shows the file is an events file (then reported, the first ones line by line and the
    rest counted, so a long prefix of bad lines is not kept whole in memory)."""
    monkeypatch.setattr(source, "_HELD", 2)
    event = json.dumps(wire_events(SCENARIOS[STICKY])[0]).encode()
    decoded = list(source.decode_lines([b"{}", b"x", b"", b"[1]", b"2", b"3", event, b"4"], "f"))
    assert [index for index, e in decoded if e is not None] == [6]
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("f:1: invalid event") and err[1].startswith("f:2: invalid event")
    assert err[2] == "f: 3 more invalid lines before the first event"
    assert err[3].startswith("f:8: invalid event") and len(err) == 4


def test_no_event_at_all_is_one_error_with_the_count_of_every_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "_HELD", 2)
    with pytest.raises(CommandError, match=r"^f holds no events: none of its 5 lines is an event \(f:1: "):
        list(source.decode_lines([b"{}", b"x", b"[1]", b"2", b"3"], "f"))
    assert capsys.readouterr().err == ""
