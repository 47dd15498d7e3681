"""loopwatch's agent-id rule against the real OpenClaw's, call for call (run with ``make test-openclaw``).

The per-agent config is found by the normalised id, on both sides: an id normalised differently judges an
agent with another block than its gateway does. Thousands of seeded random ids (whitespace of both languages,
case-folding oddities, punctuation, over-long ids) go through the installed package's ``normalizeAgentId``
under Node and through :func:`streams.detection.config.normalize_agent_id`.
"""

from __future__ import annotations

import random
from pathlib import Path

from streams.detection.config import normalize_agent_id
from tests.openclaw_e2e.install import E2E_MARKS, OPENCLAW_VERSION, run_on_dist

pytestmark = E2E_MARKS

# Finds the module of the installed dist that defines normalizeAgentId and calls it on every input.
_DRIVER = r"""
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
const [dist, inputsPath] = process.argv.slice(2);
let found = null;
for (const file of readdirSync(dist).filter((f) => /\.m?js$/.test(f)).sort()) {
  const text = readFileSync(join(dist, file), "utf8");
  if (!text.includes("function normalizeAgentId(")) continue;
  const exported = /export \{([^}]*)\}/.exec(text);
  const alias = exported?.[1].split(",").map((p) => p.trim().split(/\s+as\s+/)).find(([n]) => n === "normalizeAgentId");
  if (alias) { found = (await import(join(dist, file)))[alias[1] ?? alias[0]]; break; }
}
if (!found) throw new Error("normalizeAgentId not found in " + dist);
const inputs = JSON.parse(readFileSync(inputsPath, "utf8"));
process.stdout.write(JSON.stringify(inputs.map((s) => found(s))));
"""
_ALPHABET = [
    *"abzAZ09_-. !@/\\:", "\t", "\n", "\x1c", "\x85", "\u00a0", "\u2028", "\u3000", "\ufeff",
    "\u212a", "\u0130", "\u03a3", "\u00df", "\u00e9", "\u00c9", "\U0001f600",
]  # fmt: skip
_EDGES = ["", " ", "My Agent", "main", "-" * 70, "a" * 64, "a" * 65, "_a", "\u03a3\u0391\u03a3", "a--b", "!!!"]


def test_agent_ids_normalise_as_openclaw_s_own_function(tmp_path: Path) -> None:
    rng = random.Random(20261206)
    inputs = _EDGES + ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 80))) for _ in range(5000)]
    theirs = run_on_dist(_DRIVER, inputs, tmp_path)
    differ = [
        (raw, ours, their)
        for raw, their in zip(inputs, theirs, strict=True)
        if (ours := normalize_agent_id(raw)) != their
    ]
    assert not differ, f"{len(differ)} of {len(inputs)} ids differ from openclaw@{OPENCLAW_VERSION}: {differ[:5]}"
    assert len(set(theirs)) > 1000  # the inputs reach the rule's branches, not only "main"
