"""The real OpenClaw the e2e tests run against: its version, the switch that runs them, and its install."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import REPO_ROOT

HERE = Path(__file__).resolve().parent
PLUGIN_DIR = REPO_ROOT / "deploy" / "openclaw-plugin"
OPENCLAW_VERSION = os.environ.get("LOOPWATCH_OPENCLAW_VERSION", "2026.7.35")
E2E_MARKS = [
    pytest.mark.integration,
    pytest.mark.skipif(
        os.environ.get("LOOPWATCH_OPENCLAW_E2E") != "1",
        reason="real-gateway e2e: run with `make test-openclaw` (LOOPWATCH_OPENCLAW_E2E=1)",
    ),
]


@dataclass
class Tools:
    node: str
    openclaw: str


def ensure_tools() -> Tools:
    """Node 24 and openclaw under .tools/ (``ensure-openclaw.sh``, once), and the plugin's own dependencies."""
    done = subprocess.run(
        [str(HERE / "ensure-openclaw.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "LOOPWATCH_OPENCLAW_VERSION": OPENCLAW_VERSION},
    )
    assert done.returncode == 0, f"ensure-openclaw.sh failed:\n{done.stdout}\n{done.stderr}"
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    done = subprocess.run(
        [str(PLUGIN_DIR / "scripts" / "ensure-deps.sh")], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"ensure-deps.sh failed:\n{done.stdout}\n{done.stderr}"
    return Tools(node=values["NODE"], openclaw=values["OPENCLAW"])


#: JavaScript for a driver: ``await loopDetection(dist)``, the exports of the dist's tool-loop-detection module
#: by their own names (the bundle exports them under one-letter aliases).
LOOP_DETECTION_EXPORTS = r"""
import { readdirSync as listDist, readFileSync as readDist } from "node:fs";
import { join as joinDist } from "node:path";
async function loopDetection(dist) {
  for (const file of listDist(dist).filter((f) => /^tool-loop-detection-.*\.m?js$/.test(f)).sort()) {
    const text = readDist(joinDist(dist, file), "utf8");
    if (!text.includes("function detectToolCallLoop(")) continue;
    const pairs = /export \{([^}]*)\}/.exec(text)[1].split(",").map((p) => p.trim().split(/\s+as\s+/));
    const module = await import(joinDist(dist, file));
    return Object.fromEntries(pairs.map(([name, alias]) => [name, module[alias ?? name]]));
  }
  throw new Error("no tool-loop-detection module in " + dist);
}
"""


def run_on_dist(driver: str, inputs: object, workdir: Path) -> Any:
    """Runs the Node script ``driver`` as ``node driver.mjs DIST INPUTS.json`` against the installed package's
    ``dist/`` and returns the JSON it prints: how the tests call OpenClaw's own functions on their inputs."""
    tools = ensure_tools()
    package = Path(tools.openclaw).parent
    assert package.name == "openclaw" and package.parent.name == "node_modules", package
    (workdir / "inputs.json").write_text(json.dumps(inputs), encoding="utf-8")
    (workdir / "driver.mjs").write_text(driver, encoding="utf-8")
    done = subprocess.run(
        [tools.node, str(workdir / "driver.mjs"), str(package / "dist"), str(workdir / "inputs.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
