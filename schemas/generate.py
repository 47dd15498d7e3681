"""Write the JSON Schema files of the wire records and the config: ``python -m schemas.generate [--check]``.

The files are committed so that gateway authors can validate against them without Python; ``--check``
(and a test) fail when the models change without regenerating them. Output is deterministic: sorted keys,
2-space indent, trailing newline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from schemas.config import LoopDetectionConfig
from schemas.events import EVENT_ADAPTER
from schemas.fleet_alert import FleetAlert
from schemas.verdict import Verdict

JSON_DIR = Path(__file__).resolve().parent / "json"
_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _event_schema() -> dict[str, Any]:
    schema = EVENT_ADAPTER.json_schema()
    schema["title"] = "loopwatch event"
    schema["description"] = "One record on loopwatch.events, discriminated by type."
    return schema


def _verdict_schema() -> dict[str, Any]:
    schema = Verdict.model_json_schema()
    schema["title"] = "loopwatch verdict"
    return schema


def _config_schema() -> dict[str, Any]:
    schema = LoopDetectionConfig.model_json_schema()
    schema["title"] = "OpenClaw tools.loopDetection"
    return schema


def _fleet_alert_schema() -> dict[str, Any]:
    schema = FleetAlert.model_json_schema()
    schema["title"] = "loopwatch fleet alert"
    return schema


SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "event.schema.json": _event_schema,
    "verdict.schema.json": _verdict_schema,
    "fleet-alert.schema.json": _fleet_alert_schema,
    "loop-detection-config.schema.json": _config_schema,
}


def render_all() -> dict[str, str]:
    """File name → exact file content."""
    out = {}
    for name, build in SCHEMAS.items():
        schema = {"$schema": _DRAFT, **build()}
        out[name] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def stale_files(directory: Path = JSON_DIR) -> list[str]:
    """Names of files that are missing or differ from what the models generate."""
    stale = []
    for name, text in render_all().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m schemas.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs; write nothing")
    parser.add_argument("--out", type=Path, default=JSON_DIR, help="output directory (default: schemas/json)")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files(args.out)
        for name in stale:
            print(f"{args.out / name} is out of date; run: python -m schemas.generate", file=sys.stderr)
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (args.out / name).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
