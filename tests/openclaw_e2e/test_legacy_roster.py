"""loopwatch's "does the 2026.9 load convert this agents.list" rule and the id doctor gives each entry, against
the real OpenClaw's own functions (run with ``make test-openclaw``; 2026.8+ only, 2026.7 has no conversion).

Lists go through the installed package's ``parseLegacyAgentRoster`` and ``projectLegacyAgentRosterEntries``
(legacy.roster-*.mjs) under Node and through :func:`streams.detection.gen9_roster.list_problem` and
:func:`~streams.detection.gen9_roster.doctor_ids`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.detection.gen9_roster import doctor_ids, list_problem
from tests.openclaw_e2e.install import E2E_MARKS, OPENCLAW_VERSION, run_on_dist

pytestmark = [
    *E2E_MARKS,
    pytest.mark.skipif(
        tuple(int(p) for p in OPENCLAW_VERSION.split(".")[:2]) < (2026, 8),
        reason=f"openclaw@{OPENCLAW_VERSION} has no agents.entries conversion",
    ),
]

# Finds the module of the installed dist that defines both functions and calls them on every list.
_DRIVER = r"""
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
const [dist, inputsPath] = process.argv.slice(2);
const wanted = ["parseLegacyAgentRoster", "projectLegacyAgentRosterEntries"];
let found = null;
for (const file of readdirSync(dist).filter((f) => /\.m?js$/.test(f)).sort()) {
  const text = readFileSync(join(dist, file), "utf8");
  if (!wanted.every((name) => text.includes(`function ${name}(`))) continue;
  const exported = /export \{([^}]*)\}/.exec(text);
  const pairs = exported?.[1].split(",").map((p) => p.trim().split(/\s+as\s+/)) ?? [];
  const aliases = wanted.map((name) => pairs.find(([n]) => n === name));
  if (aliases.every(Boolean)) {
    const module = await import(join(dist, file));
    found = aliases.map(([n, alias]) => module[alias ?? n]);
    break;
  }
}
if (!found) throw new Error("legacy roster functions not found in " + dist);
const [parse, project] = found;
const inputs = JSON.parse(readFileSync(inputsPath, "utf8"));
process.stdout.write(JSON.stringify(inputs.map((list) => {
  const projected = project(list).entries;
  return [parse(list) !== undefined, list.map((_, i) => projected.find((e) => e.sourceIndex === i)?.id ?? null)];
})));
"""
_LISTS: list[list[object]] = [
    [],
    [{"id": "main"}],
    [{"id": "ops"}, {"id": "_b"}, {"id": "a-b_c"}],
    [{"id": "a" * 64}],
    [{"id": "a" * 65}],
    [{"id": "My Agent"}],
    [{"id": "Ops"}],
    [{"id": " ops"}],
    [{"id": ""}],
    [{"id": " "}],
    [{"id": "\u3000"}],
    [{"id": 7}],
    [{"id": None}],
    [{"name": "no id"}],
    [{"id": "ops"}, {"id": "ops"}],
    [{"id": "ops"}, {"id": " OPS "}, {"id": "ops"}, {}, {"id": " "}, {"id": "My Agent"}],
    [{"id": "ops"}, "x", 3, None, [1]],
    [{"id": "!!!"}],
    [{"id": "main"}, {"id": "!!!"}],
    [{"id": "-a-"}],
    [{"id": "\u212a"}],
    [{"id": "agent"}, {}, {"id": "agent-2"}],
]


def test_the_load_time_conversion_and_doctor_ids_agree_with_openclaw(tmp_path: Path) -> None:
    theirs = run_on_dist(_DRIVER, _LISTS, tmp_path)
    ours = [[list_problem(agent_list) is None, doctor_ids(agent_list)] for agent_list in _LISTS]
    differ = [
        (agent_list, mine, their) for agent_list, mine, their in zip(_LISTS, ours, theirs, strict=True) if mine != their
    ]
    assert not differ, f"{len(differ)} of {len(_LISTS)} lists differ from openclaw@{OPENCLAW_VERSION}: {differ[:5]}"
    assert {converted for converted, _ in theirs} == {True, False}
