"""The committed hashing vectors (deploy/openclaw-plugin/test/vectors.json) equal what the core computes now.

The Node test of the bridge plugin recomputes the same vectors in JavaScript; together the two tests keep
the gateway-side hashing (``hashOnGateway``) byte-identical to the Python core.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from streams.detection import MISSING
from tests.support import vectors

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "deploy" / "openclaw-plugin" / "test" / "vectors.json"


def test_committed_vectors_match_the_core() -> None:
    expected = vectors.render(vectors.build_vectors())
    current = VECTORS.read_text(encoding="ascii")
    assert current == expected, (
        "deploy/openclaw-plugin/test/vectors.json is stale; regenerate with "
        "`python -m tests.support.vectors --out deploy/openclaw-plugin/test/vectors.json` and re-run the Node tests"
    )


def test_generation_is_deterministic() -> None:
    assert vectors.render(vectors.build_vectors()) == vectors.render(vectors.build_vectors())


def test_file_is_ascii_json_and_round_trips_lone_surrogates() -> None:
    data = json.loads(VECTORS.read_text(encoding="ascii"))
    by_name = {v["name"]: v for v in data["canonical"]}
    assert by_name["string 'a\\ud800b'"]["input"] == "a\ud800b"
    assert by_name["string 'a\\ud800b'"]["canonical"] == '"a\\ud800b"'  # as JSON.stringify writes it
    assert by_name["undefined"]["input"] == {"$js": "undefined"}


def test_every_outcome_rule_is_covered() -> None:
    data = json.loads(VECTORS.read_text(encoding="ascii"))
    names = " ".join(v["name"] for v in data["outcome"])
    for needle in (
        "error",
        "unknown tool",
        "not found",
        "is not available",
        "exec running",
        "exec completed",
        "exec failed",
        "exec approval pending",
        "exec approval unavailable",
        "process poll",
        "process log",
        "command_status",
        "sessions_send",
        "delivery object",
        "telegram with to",
        "telegram no to",
        "loop veto",
        "plugin veto",
        "default",
    ):
        assert needle in names, needle
    hashes = {v["name"]: v["result_hash"] for v in data["outcome"]}
    assert hashes["loop veto"] is None
    assert hashes["result undefined"] is None
    assert hashes["plugin veto hashes"] is not None
    # Volatile fields really are ignored: pairs that differ only in them hash equal.
    assert hashes["exec running"] == hashes["exec running other pid same hash"]
    assert hashes["process poll"] == hashes["process poll other pid same hash"]
    assert hashes["sessions_send strips ids"] == hashes["sessions_send other ids same hash"]
    tools = {v["tool"] for v in data["outcome"] if v["name"].startswith("provider send ")}
    assert len(tools) == 18


def test_encode_input_tags() -> None:
    assert vectors.encode_input(MISSING) == {"$js": "undefined"}
    assert vectors.encode_input([math.nan, math.inf, -math.inf]) == [
        {"$js": "NaN"},
        {"$js": "Infinity"},
        {"$js": "-Infinity"},
    ]
    assert vectors.encode_input(b"\x00\x01") == {"$js": "Uint8Array", "base64": "AAE="}


def test_check_mode(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    assert vectors.main(["--out", str(out)]) == 0
    assert vectors.main(["--check", str(out)]) == 0
    out.write_text(out.read_text(encoding="ascii").replace('"canonical"', '"canonicaL"', 1), encoding="ascii")
    assert vectors.main(["--check", str(out)]) == 1


def test_model_usage_vectors_are_valid_records() -> None:
    """Every usage conversion the bridge must reproduce yields fields a worker accepts."""
    from schemas import ModelUsageEvent

    data = json.loads(VECTORS.read_text(encoding="ascii"))
    cases = data["model_usage"]
    assert {"priced", "no price (cost 0)", "provider-billed zero", "bad counts"} <= {c["name"] for c in cases}
    base = {"type": "model_usage", "event_id": "e", "gateway_id": "g", "session_id": "s", "ts": 0}
    for case in cases:
        event = ModelUsageEvent.model_validate({**base, **case["fields"]})
        assert event.tokens == sum(v for k, v in case["fields"].items() if k.endswith("_tokens")), case["name"]
    priced = {c["name"]: c["fields"]["cost_usd"] for c in cases}
    assert priced["no price (cost 0)"] is None and priced["provider-billed zero"] == 0
