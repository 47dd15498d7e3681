"""Canonical JSON must equal JavaScript's ``stableStringify`` byte for byte."""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import random
import shutil
import struct
import subprocess
from typing import Any

import pytest

from streams.detection import MISSING, canonical, digest, js_number, js_trim


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000.0, "1000"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (1.234e-6, "0.000001234"),
        (0.1, "0.1"),
        (-1.5, "-1.5"),
        (123.456, "123.456"),
        (5e-324, "5e-324"),
        (-0.0, "0"),
        (0.0, "0"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (2.0**53, "9007199254740992"),
        (1.2345678901234568e20, "123456789012345680000"),
        (1.2345678901234568e21, "1.2345678901234568e+21"),
        (4.35, "4.35"),
        (-1e-7, "-1e-7"),
        (123e-20, "1.23e-18"),
    ],
)
def test_js_number_formatting(value: float, text: str) -> None:
    assert js_number(value) == text
    assert canonical(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (123456789012345680000, "123456789012345680000"),
        (2**53 + 1, "9007199254740992"),  # a JS double cannot hold 2**53 + 1
        (2**53, "9007199254740992"),
        (-(2**53) - 3, "-9007199254740996"),
        (10**400, '"Infinity"'),
        (-(10**400), '"-Infinity"'),
        (0, "0"),
        (-7, "-7"),
    ],
)
def test_integers_are_doubles(value: int, text: str) -> None:
    assert canonical(value) == text


def test_non_finite_numbers_are_quoted_strings() -> None:
    assert canonical(math.nan) == '"NaN"'
    assert canonical(math.inf) == '"Infinity"'
    assert canonical(-math.inf) == '"-Infinity"'
    assert canonical([math.nan]) == canonical(["NaN"])


def test_literals_and_undefined() -> None:
    assert canonical(None) == "null"
    assert canonical(True) == "true"
    assert canonical(False) == "false"
    assert canonical(MISSING) == "undefined"
    assert canonical({"a": MISSING}) == "{a:undefined}".replace("a", '"a"')
    assert canonical({"a": MISSING}) != canonical({"a": None})
    assert canonical({"a": None}) != canonical({})
    assert canonical([MISSING, None]) == "[undefined,null]"


def test_strings_are_escaped_like_json_stringify() -> None:
    assert canonical('"\\') == '"\\"\\\\"'
    assert canonical("\b\f\n\r\t") == '"\\b\\f\\n\\r\\t"'
    assert canonical("\x00\x01\x1f") == '"\\u0000\\u0001\\u001f"'
    assert canonical("\x7f é \u2028 😀 /") == '"\x7f é \u2028 😀 /"'  # raw, no \\uXXXX, no escaped slash


def test_lone_surrogates_are_escaped_as_json_stringify_writes_them() -> None:
    # OpenClaw's stableStringify quotes with JSON.stringify, which writes an unpaired half as \udxxx.
    assert canonical("a\ud800b") == '"a\\ud800b"'
    assert canonical("\udc00x\udbff") == '"\\udc00x\\udbff"'
    assert canonical("\ud83d\ude00") == '"😀"'  # a pair held as two code points is one JS character
    assert canonical({"k\udfff": 1}) == '{"k\\udfff":1}'
    assert digest("a\ud800b") != digest("ab")
    assert canonical('é\ud800"') == '"é\\ud800\\""'


def test_keys_sort_by_utf16_code_units() -> None:
    # U+1F600 is the pair D83D DE00 in UTF-16, which sorts before U+FFFF (code point order says the opposite).
    assert canonical({"\uffff": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\uffff":1}'
    assert canonical({"b": 1, "a": 2, "A": 3, "_": 4}) == '{"A":3,"_":4,"a":2,"b":1}'
    assert canonical({"é": 1, "z": 2}) == '{"z":2,"é":1}'


def test_nesting_and_key_order() -> None:
    value = {"z": [1, {"b": 2.0, "a": [True, None]}], "a": "x"}
    assert canonical(value) == '{"a":"x","z":[1,{"a":[true,null],"b":2}]}'
    assert canonical((1, 2)) == "[1,2]"
    assert canonical(b"\x00\x01") == '{"data":"AAE=","type":"Uint8Array"}'
    with pytest.raises(TypeError):
        canonical(object())


def test_key_layouts_are_memoised_per_insertion_order_and_bounded() -> None:
    mod = importlib.import_module("streams.detection.canonical")

    forward = {"b": 1, "\U0001f600": 2, "\uffff": 3, "a": 4}
    backward = dict(reversed(forward.items()))
    expected = '{"a":4,"b":1,"\U0001f600":2,"\uffff":3}'
    assert canonical(forward) == canonical(forward) == canonical(backward) == expected
    wide = {f"k{i:03d}": i for i in reversed(range(mod._LAYOUT_KEYS + 5))}  # past the memo's key limit
    assert canonical(wide) == "{" + ",".join(f'"k{i:03d}":{i}' for i in range(mod._LAYOUT_KEYS + 5)) + "}"
    assert tuple(wide) not in mod._LAYOUTS
    for i in range(mod._LAYOUTS_MAX + 10):  # hostile traffic: a new key set per object
        assert canonical({f"x{i}": i, "a": 0}) == f'{{"a":0,"x{i}":{i}}}'
        assert len(mod._LAYOUTS) <= mod._LAYOUTS_MAX


def test_digest_is_sha256_of_the_canonical_text() -> None:
    assert digest({"b": 1, "a": "é"}) == hashlib.sha256('{"a":"é","b":1}'.encode()).hexdigest()
    assert digest(MISSING) == hashlib.sha256(b"undefined").hexdigest()


def test_js_trim_uses_javascript_whitespace() -> None:
    assert js_trim(" \t\u00a0\ufeff\u2028\u3000x y\u2003\n") == "x y"
    assert js_trim("\x85x\x1c") == "\x85x\x1c"  # Python's str.strip() would remove both


# ---------------------------------------------------------------------------------------------------------
# Cross-check against a real JavaScript engine when one is installed.

_JS = r"""
const crypto = require("crypto");
const q = (s) => JSON.stringify(s);
function stable(v) {
  if (v === null) return "null";
  if (typeof v === "number") return Number.isFinite(v) ? String(v) : q(String(v));
  if (typeof v === "boolean") return v ? "true" : "false";
  if (typeof v === "string") return q(v);
  if (Array.isArray(v)) return "[" + v.map(stable).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => q(k) + ":" + stable(v[k])).join(",") + "}";
}
const values = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(values.map((v) => {
  const text = stable(v);
  return [text, crypto.createHash("sha256").update(text, "utf8").digest("hex")];
})));
"""


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.randrange(9 if depth < 3 else 6)
    if pick == 0:
        bits = rng.getrandbits(64)
        value = struct.unpack("<d", struct.pack("<Q", bits))[0]
        return value if math.isfinite(value) else rng.random()
    if pick == 1:
        return rng.choice([rng.randint(-(10**6), 10**6), rng.randint(-(2**70), 2**70), 10**400, 2**53 + 1])
    if pick == 2:
        return rng.choice([rng.random() * 10 ** rng.randint(-30, 30), rng.randint(1, 99) / 10.0, 1e21, 1e-7])
    if pick == 3:
        alphabet = 'ab"\\\n\x00\x1f\x7f é\u2028\uffff\ue000\U0001f600\ud800\udc00\ud83d\ude00'
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))
    if pick == 4:
        return rng.choice([None, True, False])
    if pick == 5:
        return rng.choice(["", "x", "\U0001f600", "\uffff"])
    if pick in (6, 7):
        keys = ["a", "B", "_", "é", "\uffff", "\U0001f600", "\ue000", "10", "2", "k\ud800"]
        return {
            rng.choice(keys) + rng.choice(["", "x"]): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 5))
        }
    return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_matches_a_real_javascript_engine() -> None:
    rng = random.Random(20260501)
    values = [_random_value(rng) for _ in range(3000)]
    payload = json.dumps(values)  # ASCII-only: lone surrogates travel as \\udXXX escapes
    done = subprocess.run(["node", "-e", _JS], input=payload, capture_output=True, text=True, timeout=60, check=True)
    js = json.loads(done.stdout)
    for value, (text, sha) in zip(values, js, strict=True):
        assert canonical(value) == text, value
        assert digest(value) == sha
