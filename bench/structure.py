"""How the code base is laid out, measured: ``python -m bench.structure`` (``--json`` for a machine-readable copy).

Prints three things, so a layout change can be judged by figures instead of by taste:

* modules and lines per package of ``streams/`` and ``schemas/``;
* the longest functions (lines from ``def`` to the last line of the body);
* the module hops of one audit: ``replay --topic --with-state --run`` runs in-process over a small simulated
  topic and a changelog written by the worker's own batch code, the Kafka reads served from memory. A hop is a
  call from one module into another, counted from the command's ``run`` on (argument parsing left out) and
  without the detection core; the figures are the distinct entry points used per module (its functions called
  from another module) and the distinct caller -> callee module edges, so they do not grow with the events.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("streams", "schemas")
TOPIC = "structure.events"
GROUP = "structure"
COMMAND = "streams.cli.replay"


def modules_per_package() -> dict[str, tuple[int, int]]:
    """Package (dotted) -> (modules directly in it, their lines)."""
    out: dict[str, tuple[int, int]] = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            package = ".".join(path.parent.relative_to(ROOT).parts)
            modules, lines = out.get(package, (0, 0))
            out[package] = (modules + 1, lines + len(path.read_text(encoding="utf-8").splitlines()))
    return out


def longest_functions(limit: int) -> list[tuple[int, str]]:
    """The ``limit`` longest functions and methods as (lines, ``module:qualname``)."""
    found: list[tuple[int, str]] = []
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, node in _functions(tree, ""):
                assert node.end_lineno is not None
                found.append((node.end_lineno - node.lineno + 1, f"{module}:{name}"))
    found.sort(key=lambda item: (-item[0], item[1]))
    return found[:limit]


def _functions(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + child.name, child
            yield from _functions(child, prefix + child.name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, prefix + child.name + ".")


# --- the audit path -----------------------------------------------------------------------------------------


def _topic_and_changelog() -> tuple[list[Any], list[Any], str, int]:
    """A simulated events topic (one partition), the changelog the worker's batch code writes for it, the
    busiest run and an offset in the middle of it (so the audit needs the stored state and a warm-up)."""
    from streams.config_file import LoadedConfig
    from streams.kafka import reader
    from streams.simulate import simulate
    from streams.worker.processing import InputRecord, RunProcessor, plan_batch

    records = [
        reader.TopicRecord(0, offset, 0, key, value)
        for offset, (key, value) in enumerate(simulate(gateways=2, rate=60.0, duration=2.0, seed=7))
    ]
    processor = RunProcessor(LoadedConfig.default())
    table: dict[bytes, bytes] = {}
    changelog: list[Any] = []
    for start in range(0, len(records), 10):
        chunk = [InputRecord(TOPIC, 0, r.offset, r.key, r.value) for r in records[start : start + 10]]
        for group in plan_batch(chunk, 0).groups.values():
            value = processor.process(group, chunk, table.get(group.key), 1).value
            assert value is not None
            table[group.key] = value
            changelog.append(reader.TopicRecord(0, len(changelog), 0, group.key, value))
    keys = Counter(r.key for r in records if r.key is not None)
    run = max(keys, key=lambda k: (keys[k], k))
    offsets = [r.offset for r in records if r.key == run]
    return records, changelog, run.decode(), offsets[len(offsets) // 2]


def audit_hops() -> dict[str, Any]:
    """Trace ``replay --topic --with-state --run`` and count its cross-module calls inside the packages."""
    from streams.cli import main
    from streams.topics import changelog_topic
    from tests.support.audit import ListSource

    records, changelog, run, start = _topic_and_changelog()
    topics = {TOPIC: records, changelog_topic(GROUP): changelog}

    served = ListSource(topics)  # the topics are served from memory: no broker to check

    argv = ["replay", "--topic", TOPIC, "--bootstrap", "127.0.0.1:1", "--from", str(start)]
    argv += ["--run", run, "--with-state", "--group", GROUP]
    entries: dict[str, set[str]] = defaultdict(set)
    edges: set[tuple[str, str]] = set()
    running = False  # argument parsing (every command's flags) is not part of the path

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal running
        if event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        if not running:
            running = callee == COMMAND and frame.f_code.co_name == "run"
            if not running:
                return
        caller = frame.f_back.f_globals.get("__name__", "")
        if callee != caller and _ours(callee) and _ours(caller) and not frame.f_code.co_name.startswith("<"):
            entries[callee].add(frame.f_code.co_qualname)
            edges.add((caller, callee))

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        sys.setprofile(profile)
        try:
            status = main(argv, record_source=served)
        finally:
            sys.setprofile(None)
    if status != 0:
        raise SystemExit(f"the traced audit failed ({status}): {err.getvalue().strip()}")
    return {
        "command": "loopwatch " + " ".join(argv),
        "modules": len(entries),
        "edges": len(edges),
        "entry_points": {module: len(names) for module, names in sorted(entries.items())},
    }


def _ours(module: str) -> bool:
    return module.split(".", 1)[0] in PACKAGES and not module.startswith("streams.detection")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.structure", description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--longest", type=int, default=12, help="how many of the longest functions to list")
    args = parser.parse_args(argv)
    packages = modules_per_package()
    longest = longest_functions(args.longest)
    hops = audit_hops()
    if args.json:
        doc = {"packages": packages, "longest": longest, "audit_path": hops}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(f"{'package':<22} {'modules':>7} {'lines':>6}")
    for package, (modules, lines) in packages.items():
        print(f"{package:<22} {modules:>7} {lines:>6}")
    print("\nlongest functions (lines, streams/ and schemas/):")
    for lines, name in longest:
        print(f"{lines:>5}  {name}")
    print(f"\naudit path: {hops['command']}")
    print(f"  {hops['modules']} modules entered, {hops['edges']} distinct caller -> callee module edges")
    print("  distinct entry points per module (the detection core not counted):")
    for module, count in hops["entry_points"].items():
        print(f"{count:>5}  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
