"""Shared hashing test vectors: what the Python core computes, for the OpenClaw bridge plugin to check.

The bridge plugin (``deploy/openclaw-plugin``) hashes arguments and outcomes on the gateway
(``hashOnGateway``) in JavaScript, and loopwatch trusts those hashes, so the two implementations must agree
byte for byte. This module lists deterministic inputs covering every canonicalisation and outcome rule,
runs them through the Python core and writes the results; a Node test recomputes them in JavaScript and a
Python test (``tests/openclaw/test_vectors.py``) fails when the committed file no longer matches the core.

    python -m tests.support.vectors --out deploy/openclaw-plugin/test/vectors.json
    python -m tests.support.vectors --check deploy/openclaw-plugin/test/vectors.json

File conventions (also written into the file's ``_meta``):

* The file is pure ASCII: every non-ASCII character is a JSON ``\\uXXXX`` escape, so lone surrogates (which
  UTF-8 cannot hold) survive. ``JSON.parse`` and Python's ``json.loads`` both turn ``"\\ud800"`` into a string
  holding that lone UTF-16 unit.
* Inputs JSON cannot express are tagged objects with the single key ``"$js"``: ``{"$js": "undefined"}``,
  ``{"$js": "NaN"}``, ``{"$js": "Infinity"}``, ``{"$js": "-Infinity"}`` and
  ``{"$js": "Uint8Array", "base64": "..."}``. No plain input object has a ``"$js"`` key.
* Numbers are written as Python writes them (``1000.0``, ``1e+21``, ``-0.0``, huge integers in full);
  ``JSON.parse`` reads them as the same doubles (huge integers round, beyond 1.8e308 they become Infinity),
  which is exactly what the core assumes a gateway sent.
* Expected strings (``canonical``, hashes, names) are plain JSON strings.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from streams.decode import scope_key_of
from streams.detection import (
    MISSING,
    Outcome,
    args_hash,
    canonical,
    digest,
    hash_outcome,
    js_trim,
    unknown_tool_name,
)
from streams.detection.gen9_outcome import Hashed
from streams.detection.gen9_outcome import hash_outcome as hash_outcome_2026_9
from streams.detection.gen9_outcome import hash_result as hash_result_2026_9
from streams.detection.outcome import hash_result
from streams.detection.sends import PROVIDER_SEND_TOOLS

FORMAT_VERSION: Final = 1
DEFAULT_OUT: Final = Path("deploy/openclaw-plugin/test/vectors.json")
_TAG: Final = "$js"


# ---------------------------------------------------------------------------------------------------------
# Encoding of inputs that plain JSON cannot carry.


def encode_input(value: Any) -> Any:
    """The JSON form of an input value under the ``$js`` tag convention (see the module docstring)."""
    if value is MISSING:
        return {_TAG: "undefined"}
    if isinstance(value, float) and not math.isfinite(value):
        if value != value:
            return {_TAG: "NaN"}
        return {_TAG: "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, bytes | bytearray):
        return {_TAG: "Uint8Array", "base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        if _TAG in value:
            raise ValueError(f"input objects must not use the reserved key {_TAG!r}")
        return {key: encode_input(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode_input(item) for item in value]
    return value


# ---------------------------------------------------------------------------------------------------------
# A tiny deterministic generator (sha256 counter mode): the vectors must not depend on `random`'s algorithm.


class _Stream:
    def __init__(self, seed: str) -> None:
        self._seed = seed.encode()
        self._counter = 0
        self._pool = b""

    def _bytes(self, n: int) -> bytes:
        while len(self._pool) < n:
            self._pool += hashlib.sha256(self._seed + self._counter.to_bytes(8, "big")).digest()
            self._counter += 1
        out, self._pool = self._pool[:n], self._pool[n:]
        return out

    def below(self, n: int) -> int:
        return int.from_bytes(self._bytes(8), "big") % n

    def choice(self, items: list[Any] | tuple[Any, ...] | str) -> Any:
        return items[self.below(len(items))]

    def double(self) -> float:
        """A finite double from 64 random bits (any exponent), for number-formatting coverage."""
        import struct

        value: float = struct.unpack(">d", self._bytes(8))[0]
        return value if math.isfinite(value) else float(self.below(10**9)) / 7.0


_ALPHABET: Final = 'ab"\\\n\x00\x1f\x7f é\u2028\uffff\ue000\U0001f600\ud800\udc00\ud83d\ude00\u0085\u3000'
_KEYS: Final = ("a", "B", "_", "é", "\uffff", "\U0001f600", "\ue000", "10", "2", "k\ud800", "__proto__")


def _random_value(rng: _Stream, depth: int = 0) -> Any:
    pick = rng.below(9 if depth < 3 else 6)
    if pick == 0:
        return rng.double()
    if pick == 1:
        return rng.choice([rng.below(2 * 10**6) - 10**6, rng.below(2**71) - 2**70, 10**400, 2**53 + 1, -(2**53) - 3])
    if pick == 2:
        return rng.choice(
            [
                (rng.below(10**9) + 1) / 10 ** rng.below(30),
                (rng.below(10**9) + 1) * 10.0 ** rng.below(30),
                (rng.below(99) + 1) / 10.0,
                1e21,
                1e-7,
                -0.0,
            ]
        )
    if pick == 3:
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.below(9)))
    if pick == 4:
        return rng.choice([None, True, False])
    if pick == 5:
        return rng.choice(["", "x", "\U0001f600", "\uffff", " pad ", "tool"])
    if pick in (6, 7):
        return {rng.choice(_KEYS) + rng.choice(["", "x"]): _random_value(rng, depth + 1) for _ in range(rng.below(6))}
    return [_random_value(rng, depth + 1) for _ in range(rng.below(5))]


# ---------------------------------------------------------------------------------------------------------
# Inputs.

_NUMBERS: Final[list[Any]] = [
    0,
    -0.0,
    0.0,
    1000.0,
    1e21,
    1e20,
    1e-7,
    1.5e-7,
    1e-6,
    1.234e-6,
    0.1,
    0.30000000000000004,
    -1.5,
    123.456,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    2.0**53,
    2**53,
    2**53 + 1,
    -(2**53) - 3,
    123456789012345680000,
    1.2345678901234568e20,
    1.2345678901234568e21,
    4.35,
    123e-20,
    -1e-7,
    1e300,
    10**400,
    -(10**400),
    math.nan,
    math.inf,
    -math.inf,
    7,
    -7,
    9.007199254740993e15,
    0.000001,
    100.0,
    1.1e-6,
    25.0e-7,
]

_STRINGS: Final[list[str]] = [
    "",
    '"\\',
    "\b\f\n\r\t",
    "\x00\x01\x1f\x7f",
    "\x7f é \u2028 \u2029 😀 /",
    "a\ud800b",
    "\udc00x\udbff",
    "\ud83d\ude00",
    "\ud800\ud800\udc00",
    "\udc00\udc00",
    "\ud83d",
    "\ude00",
    "x\ud83d\ude00\ude00y",
    "\u0085 \u00a0 \ufeff",
    "</script>",
    "\u2028",
    "日本語のテキスト",
]

_STRUCTURES: Final[list[tuple[str, Any]]] = [
    ("null", None),
    ("true", True),
    ("false", False),
    ("undefined", MISSING),
    ("object with undefined", {"a": MISSING}),
    ("object with null", {"a": None}),
    ("empty object", {}),
    ("empty array", []),
    ("array undefined null", [MISSING, None]),
    ("utf16 key order astral", {"\uffff": 1, "\U0001f600": 2}),
    ("utf16 key order private use", {"\ue000": 1, "\U0001f600": 2, "\ud7ff": 3}),
    ("ascii key order", {"b": 1, "a": 2, "A": 3, "_": 4}),
    ("non-ascii key order", {"é": 1, "z": 2}),
    ("integer-like keys sort as strings", {"10": 1, "2": 2, "1": 3, "b": 4}),
    ("lone surrogate key", {"k\udfff": 1}),
    ("keys differing only by a lone surrogate", {"a\ud800": 1, "a": 2}),
    ("__proto__ key", {"__proto__": {"x": 1}, "a": 0}),
    ("nesting", {"z": [1, {"b": 2.0, "a": [True, None]}], "a": "x"}),
    ("deep", [[[[[{"k": [[[]]]}]]]]]),
    ("non-finite inside", {"n": [math.nan, math.inf, -math.inf]}),
    ("Uint8Array", b"\x00\x01"),
    ("Uint8Array empty", b""),
    ("Uint8Array in object", {"buf": b"hello\xff"}),
    (
        "typical exec params",
        {"command": "ls -la /tmp", "workdir": "/home/user", "timeout": 30, "background": False},
    ),
]


def _canonical_inputs() -> Iterator[tuple[str, Any]]:
    for number in _NUMBERS:
        yield f"number {number!r}", number
    for text in _STRINGS:
        yield f"string {text!r}", text
    yield from _STRUCTURES
    rng = _Stream("loopwatch-canonical-vectors-1")
    for index in range(250):
        yield f"random {index}", _random_value(rng)


_ARGS: Final[list[tuple[str, Any]]] = [
    ("exec", {"command": "ls -la"}),
    ("exec", {"command": "sleep 1", "background": True, "timeout": 30.0}),
    ("process", {"action": "poll", "sessionId": "sess-1"}),
    ("process", {"sessionId": "sess-1", "action": "log", "offset": 0, "limit": 200}),
    ("read", {"path": "/tmp/x.txt"}),
    ("web_search", {"query": "caf\u00e9 \U0001f600", "count": 5}),
    ("message", {"action": "send", "to": "user:42", "text": "hi"}),
    ("command_status", {"id": "cmd-9"}),
    ("noargs", {}),
    ("nullargs", None),
    ("undefinedargs", MISSING),
    ("arrayargs", [1, "two", {"three": 3}]),
    ("Exec", {"command": "ls -la"}),
    ("with.dots-and_underscores", {"a": {"b": {"c": [1.5, -0.0, 1e21]}}}),
    ("lone", {"text": "bad \ud800 surrogate"}),
    ("numbers", {"big": 2**64, "small": 5e-324, "neg0": -0.0}),
]


def _text(text: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": text}]


def _result(text: str | None = None, details: Any = MISSING, **extra: Any) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if text is not None:
        result["content"] = _text(text)
    if details is not MISSING:
        result["details"] = details
    result.update(extra)
    return result


# (name, tool, args, result or MISSING, error or None)
_OUTCOMES: Final[list[tuple[str, str, Any, Any, str | None]]] = [
    # Errors (hashed by their message) and unknown-tool name extraction.
    ("error plain", "exec", {"command": "false"}, MISSING, "Command failed: exit 1"),
    ("error empty message", "exec", {}, MISSING, ""),
    ("error non-ascii", "read", {}, MISSING, "\u00e9chec \U0001f600 \u2028"),
    ("error lone surrogate", "read", {}, MISSING, "bad \ud800 end"),
    ("error wins over result", "read", {}, _result("ok", {"a": 1}), "boom"),
    ("unknown tool colon", "tool_call", {}, MISSING, "Unknown tool: foo_bar"),
    ("unknown tool spaces quotes", "tool_call", {}, MISSING, "unknown tool   'Web.Search' requested"),
    ("unknown tool tab", "tool_call", {}, MISSING, "Unknown tool:\tbar-2 please"),
    ("unknown tool js whitespace", "tool_call", {}, MISSING, "UNKNOWN TOOL\u3000Baz"),
    ("unknown tool not-js-whitespace", "tool_call", {}, MISSING, "unknown tool\u0085baz"),
    ("tool not found double quotes", "browser_call", {}, MISSING, 'Tool "browser" not found'),
    ("tool is not available backticks", "x", {}, MISSING, "tool `X-1` is not available"),
    ("tool not found js whitespace", "x", {}, MISSING, "TOOL\u00a0foo\u2003not found"),
    ("tool not found nbsp-less", "x", {}, MISSING, "tool\u0085foo not found"),
    ("tool name with long s", "x", {}, MISSING, "Tool \u017fearch not found"),
    ("tool name kelvin sign", "x", {}, MISSING, "unknown tool: \u212a"),
    ("unknown tool first pattern wins", "x", {}, MISSING, "tool a not found; unknown tool: b"),
    ("tool word without match", "x", {}, MISSING, "the tool crashed"),
    ("unknown tool mixed case name", "x", {}, MISSING, "Unknown Tool: MyTool.V2"),
    ("unknown tool name at the length bound", "x", {}, MISSING, "unknown tool: " + "n" * 128),
    ("unknown tool name beyond the length bound", "x", {}, MISSING, "unknown tool: " + "N" * 129),
    # Non-object results.
    ("result undefined", "read", {}, MISSING, None),
    ("result null", "read", {}, None, None),
    ("result string", "read", {}, "plain text", None),
    ("result number", "read", {}, 42, None),
    ("result array", "read", {}, [1, {"b": 2, "a": 1}], None),
    ("result boolean", "read", {}, True, None),
    # The default {details, text} shape.
    ("default", "read", {"path": "/x"}, _result("  hello  \n", {"size": 3, "path": "/x"}), None),
    ("default no details", "read", {}, _result("hello"), None),
    ("default details array", "read", {}, _result("hello", [1, 2]), None),
    ("default details string", "read", {}, _result("hello", "str"), None),
    ("default details null", "read", {}, _result("hello", None), None),
    ("default no content", "read", {}, {"details": {"a": 1}}, None),
    ("default empty object", "read", {}, {}, None),
    (
        "default multi-part content",
        "read",
        {},
        {
            "content": [
                {"type": "text", "text": " one "},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "text", "text": 5},
                {"text": "no type"},
                {"type": 7, "text": "numeric type"},
                "not an object",
                None,
                {"type": "text", "text": "two\u3000"},
            ],
            "details": {},
        },
        None,
    ),
    ("default content not a list", "read", {}, {"content": "text", "details": {}}, None),
    ("default js trim", "read", {}, _result("\ufeff\u00a0x\u0085\u2029", {}), None),
    ("default extra top-level keys ignored", "read", {}, _result("t", {"a": 1}, isError=True), None),
    ("default undefined-free nested", "read", {}, _result("t", {"z": {"b": [1, 2.5, None]}}), None),
    # The loop detector's own veto vs other vetoes.
    (
        "loop veto",
        "exec",
        {"command": "ls"},
        _result("CRITICAL: blocked", {"status": "blocked", "deniedReason": "tool-loop", "reason": "x"}),
        None,
    ),
    (
        "loop veto on any tool",
        "read",
        {},
        _result(None, {"status": "blocked", "deniedReason": "tool-loop"}),
        None,
    ),
    (
        "plugin veto hashes",
        "exec",
        {"command": "ls"},
        _result(
            "blocked by plugin",
            {"status": "blocked", "deniedReason": "plugin-before-tool-call", "reason": "no"},
        ),
        None,
    ),
    (
        "approval veto hashes",
        "exec",
        {"command": "ls"},
        _result("denied", {"status": "blocked", "deniedReason": "plugin-approval"}),
        None,
    ),
    (
        "blocked without tool-loop reason",
        "read",
        {},
        _result("x", {"status": "blocked"}),
        None,
    ),
    # exec.
    (
        "exec running",
        "exec",
        {"command": "sleep 100"},
        _result("Command still running (pid 4242)", {"status": "running", "tail": "line 9", "pid": 4242}),
        None,
    ),
    (
        "exec running other pid same hash",
        "exec",
        {"command": "sleep 100"},
        _result(
            "Command still running (pid 5151)",
            {"status": "running", "tail": "line 9", "pid": 5151, "sessionId": "s2", "startedAt": 1},
        ),
        None,
    ),
    ("exec running tail not string", "exec", {}, _result("x", {"status": "running", "tail": 5}), None),
    ("exec running no tail", "exec", {}, _result("x", {"status": "running"}), None),
    (
        "exec completed",
        "exec",
        {"command": "ls"},
        _result(
            "ignored",
            {"status": "completed", "exitCode": 0, "aggregated": "  a\nb  \n", "durationMs": 12, "pid": 1},
        ),
        None,
    ),
    (
        "exec completed empty aggregated uses text",
        "exec",
        {"command": "ls"},
        _result("  from text \n", {"status": "completed", "exitCode": 0, "aggregated": " \n "}),
        None,
    ),
    (
        "exec completed no aggregated",
        "exec",
        {},
        _result("text out", {"status": "completed", "exitCode": 0.0}),
        None,
    ),
    (
        "exec failed timed out",
        "exec",
        {},
        _result("", {"status": "failed", "exitCode": 124, "timedOut": True, "aggregated": "slow"}),
        None,
    ),
    (
        "exec failed timedOut truthy not true",
        "exec",
        {},
        _result("", {"status": "failed", "exitCode": "1", "timedOut": "yes", "aggregated": 7}),
        None,
    ),
    (
        "exec failed exitCode null",
        "exec",
        {},
        _result("err", {"status": "failed", "exitCode": None, "timedOut": False}),
        None,
    ),
    (
        "exec failed exitCode boolean",
        "exec",
        {},
        _result("err", {"status": "failed", "exitCode": True}),
        None,
    ),
    (
        "exec approval pending",
        "exec",
        {"command": "rm -rf x"},
        _result(
            "needs approval",
            {
                "status": "approval-pending",
                "reason": "dangerous",
                "host": "gateway",
                "command": "rm -rf x",
                "warningText": "careful",
                "approvalId": "ap-1",
            },
        ),
        None,
    ),
    (
        "exec approval unavailable non-strings",
        "exec",
        {},
        _result("x", {"status": "approval-unavailable", "reason": 5, "host": None, "warningText": 1}),
        None,
    ),
    ("exec other status", "exec", {}, _result("x", {"status": "queued", "pid": 3}), None),
    ("exec no status", "exec", {}, _result("x", {"pid": 3}), None),
    ("exec non-string status", "exec", {}, _result("x", {"status": 5}), None),
    ("exec blocked by plugin", "exec", {}, _result("x", {"status": "blocked"}), None),
    # process poll/log.
    (
        "process poll",
        "process",
        {"action": "poll", "sessionId": "s1"},
        _result(
            "still running",
            {"status": "running", "aggregated": "out", "exitCode": None, "pid": 77, "durationMs": 5},
        ),
        None,
    ),
    (
        "process poll other pid same hash",
        "process",
        {"action": "poll", "sessionId": "s1"},
        _result(
            "still running",
            {"status": "running", "aggregated": "out", "exitCode": None, "pid": 78, "durationMs": 9},
        ),
        None,
    ),
    ("process poll status missing", "process", {"action": "poll"}, _result("t", {"exitCode": 1}), None),
    ("process poll status null", "process", {"action": "poll"}, _result("t", {"status": None}), None),
    ("process poll no details", "process", {"action": "poll"}, _result("t"), None),
    (
        "process poll exited",
        "process",
        {"action": "poll"},
        _result("done", {"status": "exited", "exitCode": 0, "exitSignal": "SIGTERM", "aggregated": ""}),
        None,
    ),
    (
        "process log",
        "process",
        {"action": "log", "sessionId": "s1"},
        _result(
            "l1\nl2",
            {
                "status": "running",
                "totalLines": 2,
                "totalChars": 5,
                "truncated": False,
                "exitCode": None,
                "pid": 3,
            },
        ),
        None,
    ),
    ("process log missing fields", "process", {"action": "log"}, _result("l", {}), None),
    ("process other action", "process", {"action": "list"}, _result("l", {"status": "x"}), None),
    ("process action not string", "process", {"action": 1}, _result("l", {"status": "x"}), None),
    ("process args not object", "process", ["poll"], _result("l", {"status": "x"}), None),
    ("process args undefined", "process", MISSING, _result("l", {"status": "x"}), None),
    ("Process case-sensitive", "Process", {"action": "poll"}, _result("l", {"status": "x"}), None),
    ("command_status default", "command_status", {"id": "c"}, _result("t", {"status": "running"}), None),
    # Sends.
    (
        "sessions_send strips ids",
        "sessions_send",
        {"sessionKey": "k", "message": "hi"},
        _result(
            "sent message 123",
            {
                "ok": True,
                "messageId": "m1",
                "runId": "r1",
                "ts": 5,
                "route": {"id": "route-1", "createdAt": 9},
                "items": [{"message_id": "x", "keep": 1}, [{"fileId": "f", "v": 2}]],
            },
        ),
        None,
    ),
    (
        "sessions_send other ids same hash",
        "sessions_send",
        {"sessionKey": "k", "message": "hi again"},
        _result(
            "sent message 456",
            {
                "ok": True,
                "messageId": "m2",
                "runId": "r2",
                "ts": 6,
                "route": {"id": "route-1", "createdAt": 10},
                "items": [{"message_id": "y", "keep": 1}, [{"fileId": "g", "v": 2}]],
            },
        ),
        None,
    ),
    (
        "message send delivery object drops id",
        "message",
        {"action": "send", "to": "u", "text": "hi"},
        _result(
            "ok",
            {
                "delivery": {"id": "d1", "text": "hi", "direction": "outbound"},
                "receipt": {"x": 1},
                "platformMessageIds": ["p"],
            },
        ),
        None,
    ),
    (
        "message send delivery via conversation object",
        "message",
        {"action": "reply"},
        _result("ok", {"id": "d2", "text": "hi", "conversation": {"id": "c1"}}),
        None,
    ),
    (
        "message send delivery via senderId and accountId",
        "message",
        {"action": "thread-reply"},
        _result(
            "ok",
            {"m": [{"id": "a", "text": "t", "senderId": "s"}, {"id": "b", "text": "t", "accountId": "x"}]},
        ),
        None,
    ),
    (
        "message send object without markers keeps id",
        "message",
        {"action": "broadcast"},
        _result("ok", {"id": "route-9", "text": "hi", "direction": 5, "conversation": "c"}),
        None,
    ),
    (
        "message send id not string keeps id",
        "message",
        {"action": "sendWithEffect"},
        _result("ok", {"id": 9, "text": "hi", "direction": "out"}),
        None,
    ),
    (
        "message send all volatile keys",
        "message",
        {"action": "sendAttachment"},
        _result(
            "ok",
            {
                "messageId": 1,
                "message_id": 2,
                "messageIds": [3],
                "platformMessageId": 4,
                "platformMessageIds": [5],
                "fileId": 6,
                "file_id": 7,
                "fileKey": 8,
                "pollId": 9,
                "poll_id": 10,
                "receipt": 11,
                "runId": 12,
                "idempotencyKey": 13,
                "ts": 14,
                "timestamp": 15,
                "sentAt": 16,
                "deliveredAt": 17,
                "createdAt": 18,
                "kept": 19,
                "updatedAt": 20,
                "ID": 21,
            },
        ),
        None,
    ),
    ("message upload-file", "message", {"action": "upload-file"}, _result("x", {"fileKey": "k"}), None),
    ("message sticker", "message", {"action": "sticker"}, _result("x", {"stickerId": "s", "ts": 1}), None),
    ("message poll", "message", {"action": "poll"}, _result("x", {"pollId": "p", "q": "?"}), None),
    ("message read is not a send", "message", {"action": "read"}, _result("x", {"messageId": "m"}), None),
    ("message action padded", "message", {"action": " send"}, _result("x", {"messageId": "m"}), None),
    ("message action case", "message", {"action": "Send"}, _result("x", {"messageId": "m"}), None),
    ("message args not object", "message", "send", _result("x", {"messageId": "m"}), None),
    ("message send details not object", "message", {"action": "send"}, _result("x", [1]), None),
    ("telegram with to", "telegram", {"to": "123", "text": "hi"}, _result("x", {"messageId": 5}), None),
    ("telegram empty to", "telegram", {"to": "", "text": "hi"}, _result("x", {"messageId": 5}), None),
    ("telegram no to", "telegram", {"text": "hi"}, _result("x", {"messageId": 5}), None),
    ("telegram to not string", "telegram", {"to": 123}, _result("x", {"messageId": 5}), None),
    ("Telegram case-sensitive", "Telegram", {"to": "1"}, _result("x", {"messageId": 5}), None),
    ("nostr with to", "nostr", {"to": "npub1"}, _result("x", {"ts": 1, "eventId": "e"}), None),
    ("irc with to", "irc", {"to": "#chan"}, _result("x", {"sentAt": 1}), None),
    ("slack args undefined", "slack", MISSING, _result("x", {"messageId": 5}), None),
    (
        "send __proto__ key kept and stripped inside",
        "sessions_send",
        {},
        _result("x", {"__proto__": {"messageId": 1, "k": 2}, "ok": True}),
        None,
    ),
    ("send result not object", "sessions_send", {}, "sent", None),
    (
        "send loop veto",
        "sessions_send",
        {},
        _result("x", {"status": "blocked", "deniedReason": "tool-loop"}),
        None,
    ),
    ("send error", "sessions_send", {}, MISSING, "Unknown tool: sessions_send"),
    ("error backtick-quoted unknown tool", "exec", {}, MISSING, "Unknown tool: `grep`"),
    ("error backtick-quoted missing tool", "exec", {}, MISSING, "tool `grep` not found"),
]

_PROVIDER_TOOLS: Final = tuple(sorted(PROVIDER_SEND_TOOLS))

_TRIMS: Final[list[str]] = [
    "",
    "   ",
    " run-1 ",
    "\t\n\v\f\r run \u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeff",
    "\u0085run\u001c",
    "\u200brun\u200b",
    "\u180erun",
    "a b",
]

_SCOPES: Final[list[tuple[str | None, str]]] = [
    ("run-1", "sess-1"),
    (" run-1 ", "sess-1"),
    ("", "sess-1"),
    ("   ", "sess-1"),
    ("\u3000\ufeff", "sess-1"),
    (None, "sess-1"),
    ("\u0085", "sess-1"),
    ("r\u00a0", "s"),
]


_W_OPEN = '<<<EXTERNAL_UNTRUSTED_CONTENT id="{0}">>>'
_W_CLOSE = '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{0}">>>'


def _wrapped(body: str, start: str, end: str | None = None) -> str:
    return _W_OPEN.format(start) + body + _W_CLOSE.format(end or start)


def _exec_failed(output: str, code: Any = 1, **extra: Any) -> dict[str, Any]:
    return _result(output, {"status": "failed", "exitCode": code, "aggregated": output, **extra})


# 2026.9 outcome rules on top of every 2026.7 case: wrapper ids, exec failure identity, unchanged writes.
_OUTCOMES_2026_9: Final[list[tuple[str, str, Any, Any, str | None]]] = [
    ("wrapper id", "web_fetch", {}, _result(_wrapped("page", "0123456789abcdef")), None),
    ("wrapper other id", "web_fetch", {}, _result(_wrapped("page", "fedcba9876543210")), None),
    ("wrapper ids differ", "web_fetch", {}, _result(_wrapped("page", "0123456789abcdef", "fedcba9876543210")), None),
    ("wrapper in details key", "web_fetch", {}, _result("x", {_wrapped("k", "00000000000000ab"): 1}), None),
    (
        "wrapper escaped once",
        "web_search",
        {},
        _result(json.dumps({"b": _wrapped('say "hi"', "aaaaaaaaaaaaaaaa")})),
        None,
    ),
    (
        "wrapper escaped unevenly",
        "web_search",
        {},
        _result(json.dumps({"b": _wrapped("x", "aaaaaaaaaaaaaaaa")})[:-3] + '"x"}'),
        None,
    ),
    ("wrapper in error", "web_fetch", {}, MISSING, "failed: " + _wrapped("boom", "1234567890abcdef")),
    (
        "exec failure volatile",
        "exec",
        {"command": "x"},
        _exec_failed("2026-11-30T10:00:01Z boom 12ms attempt 3 pid 7"),
        None,
    ),
    (
        "exec failure other time",
        "exec",
        {"command": "x"},
        _exec_failed("2026-12-01 11:22:33 boom 9.5 s attempt=4 pid=8"),
        None,
    ),
    ("exec failure clock", "exec", {}, _exec_failed("at 9:05:01.5 retry #2 took 3 minutes, ppid 55"), None),
    ("exec failure unicode s", "exec", {}, _exec_failed("took 5\u017f and 2 HOURS"), None),
    ("exec failure timed out", "exec", {}, _exec_failed("boom", 1, timedOut=True), None),
    ("exec failure code text", "exec", {}, _exec_failed("(Command exited with code 2)", 2), None),
    ("exec failure float code", "exec", {}, _exec_failed("bad", 1.5), None),
    ("exec success", "exec", {}, _result("ok", {"status": "completed", "exitCode": 0, "aggregated": "ok"}), None),
    ("exec approval no command", "exec", {}, _result("", {"status": "approval-pending", "reason": "r"}), None),
    ("write unchanged", "write", {"path": "/a"}, _result("no change", {"changed": False}), None),
    ("write changed", "write", {"path": "/a"}, _result("wrote", {"changed": True}), None),
    ("loop veto", "read", {}, _result("blocked", {"status": "blocked", "deniedReason": "tool-loop"}), None),
]


def gateway_outcome_2026_9(tool: str, args: Any, result: Any, error: str | None) -> dict[str, Any]:
    """What a 2026.8+ gateway computes for a finished call under the 2026.9 rules."""
    if error is not None:
        hashed = hash_outcome_2026_9(tool, args, Outcome(error=error))
    elif result is MISSING:
        hashed = Hashed()
    else:
        hashed = hash_result_2026_9(tool, args, result)
    return {
        "result_hash": hashed.result,
        "unknown_tool_name": hashed.unknown,
        "failure_hash": hashed.failure,
        "no_progress": hashed.no_progress,
        "veto": hashed.veto,
    }


# ---------------------------------------------------------------------------------------------------------
# after_tool_call payloads: what the bridge is given for a finished call, and what the detector hashed.
#
# OpenClaw 2026.7.35 hashes a thrown error by its message and a returned result by the normal rules, even a
# result that looks like a failure; its after_tool_call payload then carries an ``error`` that it derives
# itself (the first line of the failure's text, at most 400 characters). A thrown error reaches the hook as
# the result its tool adapter builds around the message (``{status: "error", tool, error}`` as JSON text and
# details), or as the agent runtime's error result (the message as the only text part, empty details).


def _first_line(text: str) -> str:
    """OpenClaw's ``normalizeToolErrorText`` for the ASCII texts used here."""
    line = js_trim(js_trim(text).replace("\r\n", "\n").split("\n")[0])
    return line if len(line) <= 400 else line[:400] + "\u2026"


def _thrown(tool: str, message: str) -> tuple[dict[str, Any], Outcome]:
    payload = {"status": "error", "tool": tool, "error": message}
    result = {"content": _text(json.dumps(payload, indent=2, ensure_ascii=False)), "details": payload}
    return {"result": result, "error": _first_line(message)}, Outcome(error=message)


def _thrown_by_runtime(message: str) -> tuple[dict[str, Any], Outcome]:
    hook = {"result": {"content": _text(message), "details": {}}, "error": _first_line(message)}
    return hook, Outcome(error=message)


def _returned(result: dict[str, Any], error: str | None) -> tuple[dict[str, Any], Outcome]:
    hook: dict[str, Any] = {"result": result}
    if error is not None:
        hook["error"] = error
    return hook, Outcome(result=result)


def _failed_exec(output: str, exit_code: int = 1) -> dict[str, Any]:
    details = {"status": "failed" if exit_code else "completed", "exitCode": exit_code, "aggregated": output}
    return _result(output, {**details, "durationMs": 12, "pid": 4242})


_LONG_LINE: Final = "E" * 450
# (name, tool, args, (hook payload, the outcome OpenClaw's detector hashed))
_HOOK_OUTCOMES: Final[list[tuple[str, str, Any, tuple[dict[str, Any], Outcome]]]] = [
    ("thrown one line", "read", {"path": "/x"}, _thrown("read", "ENOENT: no such file or directory, open '/x'")),
    ("thrown multi-line keeps every line", "read", {}, _thrown("read", "boom: first line\n    at step two\n  3")),
    ("thrown CRLF", "read", {}, _thrown("read", "first\r\nsecond")),
    ("thrown first line over 400 characters", "read", {}, _thrown("read", _LONG_LINE + "\nrest")),
    (
        "thrown unknown tool",
        "e2e_browser_open",
        {"url": "u"},
        _thrown("e2e_browser_open", "Unknown tool: browser.open"),
    ),
    ("thrown tool not found", "exec", {}, _thrown("exec", "Tool grep_all not found")),
    ("thrown, the runtime's error result", "read", {}, _thrown_by_runtime("Unknown tool: x.y\nsecond line")),
    (
        "returned error status naming another tool",
        "web_fetch",
        {},
        _returned(_result("{}", {"status": "error", "tool": "exec", "error": "HTTP 500"}), "HTTP 500"),
    ),
    (
        "thrown through the tool-search path",
        "web_fetch",
        {},
        (
            {
                "result": {"details": {"status": "error", "error": "fetch failed\ncause: ECONNREFUSED"}},
                "error": "fetch failed",
            },
            Outcome(error="fetch failed\ncause: ECONNREFUSED"),
        ),
    ),
    (
        "returned exec failure",
        "exec",
        {"command": "git status"},
        _returned(_failed_exec("fatal: not a git repository\nhint: run git init"), "fatal: not a git repository"),
    ),
    (
        "returned exec failure, other output, same first line",
        "exec",
        {"command": "git status"},
        _returned(_failed_exec("fatal: not a git repository\nhint: attempt 2"), "fatal: not a git repository"),
    ),
    (
        "returned exec failure, other exit code",
        "exec",
        {"command": "git status"},
        _returned(_failed_exec("fatal: not a git repository\nhint: run git init", 128), "fatal: not a git repository"),
    ),
    (
        "returned exec printing an unknown-tool message",
        "exec",
        {"command": "x"},
        _returned(_failed_exec("Unknown tool: grep"), "Unknown tool: grep"),
    ),
    (
        "returned exec success printing an unknown-tool message",
        "exec",
        {"command": "x"},
        _returned(_failed_exec("Unknown tool: grep", 0), None),
    ),
    (
        "returned error status with content",
        "web_fetch",
        {},
        _returned(_result("request failed", {"status": "error", "error": "HTTP 500"}), "HTTP 500"),
    ),
    (
        "returned ok:false with empty details text",
        "write",
        {},
        _returned(_result("not written", {"ok": False}), "not written"),
    ),
    (
        "returned process poll failure",
        "process",
        {"action": "poll", "sessionId": "bg"},
        _returned(_result("exited 2", {"status": "failed", "exitCode": 2, "aggregated": "oops"}), "oops"),
    ),
    ("returned empty details without error", "read", {}, _returned(_result("plain", {}), None)),
    (
        "plugin block",
        "exec",
        {},
        _returned(
            _result("policy", {"status": "blocked", "deniedReason": "plugin-before-tool-call", "reason": "policy"}),
            "policy",
        ),
    ),
]


# ---------------------------------------------------------------------------------------------------------
# The vectors.


def gateway_outcome_hash(tool: str, args: Any, result: Any, error: str | None) -> tuple[str | None, str | None]:
    """The outcome hash a gateway computes for a finished call (OpenClaw ``hashToolOutcome`` semantics).

    ``error`` wins; an absent result (``MISSING``) has no hash; any other result - JSON ``null`` included,
    which on the wire would mean "no outcome" - is hashed by the result rules (``streams/detection/outcome.py``).
    """
    if error is not None:
        return hash_outcome(tool, args, Outcome(error=error))
    if result is MISSING:
        return None, None
    return hash_result(tool, args, result), None


def _usage_count(value: Any) -> int:
    """JavaScript's ``Number.isSafeInteger(value) && value >= 0``, else 0."""
    number = type(value) in (int, float) and math.isfinite(value) and float(value).is_integer()
    return int(value) if number and 0 <= value <= 2**53 - 1 else 0


def gateway_usage_fields(usage: Any) -> dict[str, Any]:
    """The ``model_usage`` record fields the bridge makes of an OpenClaw assistant message's ``usage``: counts
    that are not safe non-negative integers become 0; a total cost of 0 is no price unless provider-billed."""
    usage = usage if isinstance(usage, dict) else {}
    cost: dict[str, Any] = usage["cost"] if isinstance(usage.get("cost"), dict) else {}
    total: Any = cost.get("total")
    number = type(total) in (int, float) and math.isfinite(total) and total >= 0
    priced = number and (total > 0 or cost.get("totalOrigin") == "provider-billed")
    return {
        "input_tokens": _usage_count(usage.get("input")),
        "output_tokens": _usage_count(usage.get("output")),
        "cache_read_tokens": _usage_count(usage.get("cacheRead")),
        "cache_write_tokens": _usage_count(usage.get("cacheWrite")),
        "cost_usd": total if priced else None,
    }


_PRICE = {"input": 0.003, "output": 0.0045, "cacheRead": 0.0, "cacheWrite": 0.0}
_USAGES: Final[tuple[tuple[str, Any], ...]] = (
    ("priced", {"input": 1000, "output": 300, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 1300,
                "cost": {**_PRICE, "total": 0.0075}}),
    ("cache tokens", {"input": 12, "output": 80, "cacheRead": 40000, "cacheWrite": 2048, "totalTokens": 42140,
                      "cost": {"input": 0.0, "output": 0.0012, "cacheRead": 0.012, "cacheWrite": 0.00768,
                               "total": 0.02088}}),
    ("no price (cost 0)", {"input": 500, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 520,
                           "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}}),
    ("provider-billed zero", {"input": 10, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 11,
                              "cost": {"total": 0, "totalOrigin": "provider-billed"}}),
    ("no cost object", {"input": 7, "output": 3, "totalTokens": 10}),
    ("counts missing", {"cost": {"total": 0.5}}),
    ("bad counts", {"input": -3, "output": 1.5, "cacheRead": "12", "cacheWrite": 2**60, "cost": {"total": -1}}),
    ("whole doubles", {"input": 2.0, "output": 1e3, "cost": {"total": 1}}),
    ("non-finite cost", {"input": 1, "output": 1, "cost": {"total": math.inf}}),
)  # fmt: skip


def build_vectors() -> dict[str, Any]:
    """Every vector group, computed by the Python core now."""
    canonical_vectors = []
    for name, value in _canonical_inputs():
        text = canonical(value)
        canonical_vectors.append(
            {"name": name, "input": encode_input(value), "canonical": text, "sha256": digest(value)}
        )
    args_vectors = [
        {
            "tool": tool,
            "args": encode_input(args),
            "args_hash": digest(args),
            "signature": args_hash(tool, args),
        }
        for tool, args in _ARGS
    ]
    outcomes = list(_OUTCOMES)
    for tool in _PROVIDER_TOOLS:
        outcomes.append((f"provider send {tool}", tool, {"to": "x"}, _result("t", {"messageId": 1, "ok": True}), None))
    outcome_vectors = []
    for name, tool, args, result, error in outcomes:
        result_hash, unknown = gateway_outcome_hash(tool, args, result, error)
        vector: dict[str, Any] = {"name": name, "tool": tool, "args": encode_input(args)}
        if result is not MISSING:
            vector["result"] = encode_input(result)
        if error is not None:
            vector["error"] = error
        vector["result_hash"] = result_hash
        vector["unknown_tool_name"] = unknown
        outcome_vectors.append(vector)
    outcome_2026_9 = []
    for name, tool, args, result, error in [*outcomes, *_OUTCOMES_2026_9]:
        vector = {"name": name, "tool": tool, "args": encode_input(args)}
        if result is not MISSING:
            vector["result"] = encode_input(result)
        if error is not None:
            vector["error"] = error
        outcome_2026_9.append({**vector, **gateway_outcome_2026_9(tool, args, result, error)})
    hook_vectors = []
    for name, tool, args, (hook, truth) in _HOOK_OUTCOMES:
        result_hash, unknown = hash_outcome(tool, args, truth)
        hook_vectors.append(
            {
                "name": name,
                "tool": tool,
                "args": encode_input(args),
                "hook": encode_input(hook),
                "result_hash": result_hash,
                "unknown_tool_name": unknown,
            }
        )
    unknown_vectors = [
        {"message": error, "name": unknown_tool_name(error)} for _, _, _, _, error in _OUTCOMES if error is not None
    ]
    return {
        "_meta": {
            "format": FORMAT_VERSION,
            "generator": "python -m tests.support.vectors --out deploy/openclaw-plugin/test/vectors.json",
            "checked_by": [
                "tests/openclaw/test_vectors.py (the committed file equals what the Python core computes)",
                "deploy/openclaw-plugin/test/vectors.test.mjs (the JavaScript port computes the same)",
            ],
            "conventions": [
                "The file is ASCII: non-ASCII characters are \\uXXXX escapes, so lone surrogates survive.",
                'Inputs JSON cannot hold are tagged: {"$js":"undefined"}, {"$js":"NaN"}, {"$js":"Infinity"}, '
                '{"$js":"-Infinity"}, {"$js":"Uint8Array","base64":"..."}.',
                "Numbers are as Python writes them; JSON.parse reads them as the doubles the core assumes.",
                "outcome: an absent 'result' key is JavaScript undefined (no hash); 'error' (a string) wins "
                "over 'result'; result_hash null means no hash.",
                "scope_key: run_id null means absent.",
                "outcome_2026_9: the same inputs (plus 2026.9-only cases) hashed by the openclaw-2026.9 rules "
                "(lib/outcome2026_9.mjs); failure_hash null and no_progress/veto false when they do not apply.",
                "hook_outcome: 'hook' is the {result, error} of an after_tool_call payload as OpenClaw 2026.7.35 "
                "delivers it; result_hash / unknown_tool_name are what its loop detector recorded for that call.",
            ],
        },
        "canonical": canonical_vectors,
        "args_hash": args_vectors,
        "outcome": outcome_vectors,
        "outcome_2026_9": outcome_2026_9,
        "hook_outcome": hook_vectors,
        "unknown_tool": unknown_vectors,
        "js_trim": [{"input": text, "trimmed": js_trim(text)} for text in _TRIMS],
        "scope_key": [
            {"run_id": run_id, "session_id": session_id, "key": scope_key_of(run_id, session_id)}
            for run_id, session_id in _SCOPES
        ],
        "model_usage": [
            {"name": name, "usage": encode_input(usage), "fields": gateway_usage_fields(usage)}
            for name, usage in _USAGES
        ],
    }


def render(vectors: dict[str, Any]) -> str:
    """The file text: ASCII JSON, one vector per line inside each group, newline-terminated."""
    lines = ["{"]
    groups = list(vectors.items())
    for index, (group, value) in enumerate(groups):
        comma = "," if index < len(groups) - 1 else ""
        if isinstance(value, list):
            lines.append(f"  {json.dumps(group)}: [")
            for item_index, item in enumerate(value):
                item_comma = "," if item_index < len(value) - 1 else ""
                lines.append("    " + json.dumps(item, ensure_ascii=True, allow_nan=False) + item_comma)
            lines.append("  ]" + comma)
        else:
            body = json.dumps(value, ensure_ascii=True, allow_nan=False, indent=2).replace("\n", "\n  ")
            lines.append(f"  {json.dumps(group)}: {body}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.vectors", description=__doc__.split("\n")[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--out", type=Path, help=f"write the vectors file (e.g. {DEFAULT_OUT})")
    group.add_argument("--check", type=Path, help="exit 1 when this file differs from what the core computes")
    args = parser.parse_args(argv)
    text = render(build_vectors())
    if args.check is not None:
        try:
            current = args.check.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"cannot read {args.check}: {exc}", file=sys.stderr)
            return 1
        if current != text:
            print(
                f"{args.check} is stale: regenerate with python -m tests.support.vectors --out {args.check}",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.out is None:
        sys.stdout.write(text)
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="ascii")
    return 0


if __name__ == "__main__":
    sys.exit(main())
