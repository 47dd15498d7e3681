"""The openclaw-2026.9 profile's decisions against the real OpenClaw 2026.9's, on random runs (``make test-openclaw``).

Seeded random runs in the conformance scenarios' format (long bursts and alternations of a few calls; reads
failing on cycling arguments; writes that change nothing; exec failures whose timestamps, attempts, durations
and pids differ; polls; wrapped external content; compactions; the switch on, off, truthy or per agent) go
through ``tests/conformance/generate-openclaw-2026.9.mjs``, which drives the installed package's own functions
as the embedded runner does, and through :func:`streams.detection.profiles.apply`. Every warning, block and
abort must agree in index, kind, detector, count and publication.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest

from streams.detection.gen9_config import resolve_loop_config
from streams.detection.profiles import apply
from streams.detection.state import RunState
from tests.detection.support import scenario_event
from tests.openclaw_e2e.install import E2E_MARKS, OPENCLAW_VERSION, ensure_tools
from tests.support.procs import REPO_ROOT

pytestmark = [
    *E2E_MARKS,
    pytest.mark.skipif(
        tuple(int(p) for p in OPENCLAW_VERSION.split(".")[:2]) < (2026, 8),
        reason=f"openclaw@{OPENCLAW_VERSION} is of the 2026.7 line (test_detector_parity.py)",
    ),
]

GENERATOR = REPO_ROOT / "tests" / "conformance" / "generate-openclaw-2026.9.mjs"


def _text(text: str, **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


def _wrapped(rng: random.Random, body: str) -> str:
    marker = "".join(rng.choice("0123456789abcdef") for _ in range(16))
    return f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{marker}">>>\n{body}\n<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{marker}">>>'


def _outcome(rng: random.Random, tool: str, i: int) -> dict[str, Any]:
    """One call's outcome: mostly the same, sometimes with what 2026.9 masks or counts changed."""
    pick = rng.random()
    if pick < 0.1:
        return {}
    if tool == "exec":
        output = rng.choice(
            [
                f"2026-12-07T01:02:{i % 60:02d}Z connect failed after {i}.5s (attempt {i}, pid {1000 + i})",
                "connect failed (attempt 1)",
                f"disk full at 10:00:{i % 60:02d}",
                "",
            ]
        )
        status = rng.choice(["failed", "failed", "completed", "running"])
        return {"result": _text(output, status=status, exitCode=rng.choice([1, 1, 0, 2]), aggregated=output)}
    if tool == "write":
        return {"result": _text(f"wrote {i % 3} bytes", changed=rng.random() < 0.2)}
    if tool == "web_fetch" and pick < 0.5:
        return {"result": _text(_wrapped(rng, rng.choice(["page", "page", "other"])))}
    if pick < 0.35:
        return {"error": rng.choice(["ENOENT: no such file or directory", "Unknown tool: grep", "boom"])}
    return {"result": _text(rng.choice(["same", "same", "same", "other"]), state="running")}


def _args(rng: random.Random, tool: str, variant: int) -> Any:
    if tool == "process":
        return {"action": rng.choice(["poll", "poll", "log"]), "sessionId": "s1"}
    if tool == "command_status":
        return {"id": "job-1"}
    return {"path": f"/file-{variant}.txt", "content": "x"} if tool == "write" else {"path": f"/f-{variant}"}


def _scenario(rng: random.Random) -> dict[str, Any]:
    tools = rng.sample(["read", "exec", "write", "process", "command_status", "web_fetch"], 3)
    events: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 5)):
        shape = rng.random()
        length = rng.randint(3, 34)
        tool = rng.choice(tools)
        variants = rng.choice([1, 1, 2, 3])
        other = rng.choice(tools)
        stable = {name: _outcome(rng, name, 0) for name in tools}  # the burst's no-progress outcome per tool
        for i in range(length):
            if shape < 0.6:  # one tool, one or a few argument variants
                call_tool, variant = tool, i % variants
            else:  # an alternation of two calls
                call_tool, variant = (tool, 0) if i % 2 == 0 else (other, 1)
            event = {"type": "tool_call", "tool": call_tool, "args": _args(rng, call_tool, variant), "run_id": "run-1"}
            events.append(event | (stable[call_tool] if rng.random() < 0.8 else _outcome(rng, call_tool, i)))
        if rng.random() < 0.2:
            events.append({"type": "compaction_retry", "run_id": "run-1"})
    config = rng.choice([{"enabled": True}] * 6 + [None, {"enabled": False}, {"enabled": "yes"}])
    agent = rng.choice([None] * 6 + [{"enabled": True}, {"enabled": False}])
    return {"config": config, "agent_override": agent, "events": events}


def _ours(scenario: dict[str, Any]) -> list[list[Any]]:
    config, _ = resolve_loop_config(scenario["config"], scenario["agent_override"])
    state: RunState | None = None
    out: list[list[Any]] = []
    for index, raw in enumerate(scenario["events"]):
        state, decisions = apply(state, scenario_event(index, raw), config)
        out.extend([index, d.decision, d.detector, d.count, d.published] for d in decisions)
    return out


def test_random_runs_decide_as_openclaw_2026_9_s_own_functions(tmp_path: Path) -> None:
    rng = random.Random(20261207)
    scenarios = [_scenario(rng) for _ in range(300)]
    (tmp_path / "scenarios.json").write_text(json.dumps(scenarios), encoding="utf-8")
    tools = ensure_tools()
    package = Path(tools.openclaw).parent
    done = subprocess.run(
        [tools.node, str(GENERATOR), str(package), str(tmp_path / "scenarios.json")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    expected = json.loads(done.stdout)
    theirs = [[[e["index"], e["decision"], e["code"], e["count"], e["published"]] for e in x] for x in expected]
    differ = [
        (i, ours, their)
        for i, (s, their) in enumerate(zip(scenarios, theirs, strict=True))
        if (ours := _ours(s)) != their
    ]
    assert not differ, f"{len(differ)} of {len(scenarios)} runs differ from openclaw@{OPENCLAW_VERSION}: {differ[:2]}"
    kinds = {(d[1], d[2]) for their in theirs for d in their}
    assert len(kinds) >= 12, kinds  # warnings, blocks and aborts of every detector
