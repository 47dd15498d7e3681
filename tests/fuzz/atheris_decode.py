"""Coverage-guided fuzzing (atheris / libFuzzer) of the event decoder and the detection core.

Manual runs, e.g. ``python tests/fuzz/atheris_decode.py -runs=100000`` or, with the seed corpus and the JSON
dictionary this script writes, ``python tests/fuzz/atheris_decode.py --write-seeds /tmp/lw -runs=100000 -seed=1
-dict=/tmp/lw/json.dict /tmp/lw/corpus``
(``--write-seeds DIR`` first writes ``DIR/corpus`` and ``DIR/json.dict``; pass
``-dict=DIR/json.dict DIR/corpus``). Any libFuzzer flag works. The property is the one the hypothesis
suites check (:func:`tests.fuzz.hostile.check_record`): the decoder raises nothing but ``InvalidEvent`` with
a reason from the closed set, and the core processes every accepted event without an exception. A crash
writes its input to ``crash-*`` in the working directory; replay it with ``python tests/fuzz/atheris_decode.py
crash-FILE``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

with atheris.instrument_imports(include=["streams", "schemas"]):
    from streams.decode import INVALID_REASONS, InvalidEvent, decode_event

from tests.fuzz.hostile import DEFAULT_CONFIG, EAGER_CONFIG, plain, record, strict_step, to_bytes

SEEDS = [
    to_bytes(record()),
    to_bytes(record(type=plain("tool_result"), call_id=plain("c1"), error=plain("unknown tool: foo"))),
    to_bytes(record(tool=plain("message"), args=plain({"action": "send", "to": "u"}), result=plain({"details": {}}))),
    to_bytes(record(tool=plain("process"), args=plain({"action": "poll"}), result=plain({"details": {"status": 1}}))),
    to_bytes(record(type=plain("compaction_retry"), tool=None, args=None)),
    to_bytes(record(args=None, args_hash=plain("0" * 64), result_hash=plain("error:" + "0" * 64))),
]
DICTIONARY = [
    '"type"',
    '"tool_call"',
    '"tool_result"',
    '"compaction_retry"',
    '"args"',
    '"result"',
    '"error"',
    '"details"',
    '"content"',
    '"status"',
    '"run_id"',
    '"\\ud800"',
    "18446744073709551616",
    "1e999",
    "[[[[[[[[",
    "{}",
]


def test_one_input(data: bytes) -> None:
    try:
        event = decode_event(data)
    except InvalidEvent as exc:
        if exc.reason not in INVALID_REASONS:
            raise AssertionError(f"reason {exc.reason!r} is not in the closed set") from None
        return
    strict_step(None, event, DEFAULT_CONFIG)
    state = None
    for at in range(3):
        again = event.model_copy(update={"event_id": f"{event.event_id}#{at}"})
        state = strict_step(state, again, EAGER_CONFIG).state


def write_seeds(directory: str) -> None:
    """``DIRECTORY/corpus/seed-*.json`` (valid records to mutate) and ``DIRECTORY/json.dict`` (tokens)."""
    os.makedirs(os.path.join(directory, "corpus"), exist_ok=True)
    for at, seed in enumerate(SEEDS):
        Path(directory, "corpus", f"seed-{at}.json").write_bytes(seed)
    lines = (f"kw{at}={_quoted(word)}\n" for at, word in enumerate(DICTIONARY))
    Path(directory, "json.dict").write_text("".join(lines), encoding="ascii")


def _quoted(word: str) -> str:
    """A libFuzzer dictionary value: double-quoted, with ``\\xNN`` escapes."""
    return '"' + "".join(c if " " <= c <= "~" and c not in '"\\' else f"\\x{ord(c):02x}" for c in word) + '"'


def main() -> None:
    args = sys.argv
    if len(args) > 2 and args[1] == "--write-seeds":
        write_seeds(args[2])
        args = [args[0], *args[3:]]
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
