"""The layout rules a reviewer would otherwise check by hand: declared public surfaces, and who imports whom.

* The ``__all__`` of each listed package or module is exactly the surface meant (a name added or dropped by
  accident fails here), and every listed name exists.
* No test module imports from another test module (shared helpers live in ``tests/support/``), and no
  private (``_name``) crosses a package, except that a test may use internals of the product module it tests.
* ``bench/`` uses only ``tests.support`` from the tests, and ``bench.structure`` still measures the audit path.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SURFACES: dict[str, set[str]] = {
    "schemas": {
        "CRITICAL_BEFORE_GLOBAL",
        "CURRENT_EVENT_VERSION",
        "CURRENT_FLEET_ALERT_VERSION",
        "CURRENT_VERDICT_VERSION",
        "EVENT_ADAPTER",
        "EVENT_MODELS",
        "EVENT_TYPES",
        "WARNING_BEFORE_CRITICAL",
        "CompactionRetryEvent",
        "DecisionName",
        "DetectorId",
        "DetectorsConfig",
        "Event",
        "EventBase",
        "FleetAlert",
        "LoopDetectionConfig",
        "ModelUsageEvent",
        "PostCompactionGuardConfig",
        "SampleRun",
        "SourceRef",
        "StormKind",
        "ToolCallEvent",
        "ToolResultEvent",
        "Verdict",
        "fleet_alert_id",
        "schema_errors",
        "ts_to_epoch_ms",
        "verdict_id",
    },
    "streams.audit.compare": {
        "COMPARED_FIELDS",
        "STATES_UNDER_ANOTHER_CONFIG",
        "Comparison",
        "ConfigMismatch",
        "Difference",
        "compare_verdicts",
        "config_mismatch",
        "in_range",
        "verdict_values",
    },
    "streams.audit.replay": {"replay_lines", "replay_partitions"},
    "streams.audit.source": {
        "BAD_LINES_HINT",
        "BadRecord",
        "PositionedEvent",
        "decode_lines",
        "decode_records",
        "input_name",
        "invalid_line",
        "lines",
        "read_events",
        "read_records",
    },
    "streams.cli": {"StdoutFailed", "StdoutGone", "build_parser", "main"},
    "streams.console": {"main"},
    "streams.devbroker": {
        "BrokerError",
        "BrokerFileError",
        "EmbeddedBroker",
        "PortInUseError",
        "cpu_seconds",
        "free_port",
        "terminate",
    },
    "streams.kafka.admin": {
        "EMBEDDED_CLUSTER_ID",
        "TopicError",
        "TopicMismatchError",
        "api_versions_request",
        "create_topics",
        "ensure_topics",
        "is_embedded_broker",
        "kafka_ready",
        "read_response",
    },
    "streams.kafka.reader": {
        "Bound",
        "KafkaSource",
        "NoSuchTopic",
        "OffsetBound",
        "RangeError",
        "RecordSource",
        "TimeBound",
        "TopicRead",
        "TopicRecord",
        "WrongTopic",
        "check_kind",
        "check_order",
        "merged",
        "no_such_topic_hint",
        "parse_bound",
        "past_end",
        "read_failure",
        "read_partitions",
        "resolve_offsets",
        "unknown_partitions",
    },
    "streams.kafka.client": {
        "broker_count",
        "describe_topic_configs",
        "kafka_failure",
        "kafka_problem",
        "parse_bootstrap",
        "partition_counts",
        "preflight",
        "scope_key_from_raw",
        "started",
        "stop_consumer",
    },
    "streams.decode": {
        "DEFAULT_MAX_BYTES",
        "INVALID_REASONS",
        "KEY_MISMATCH",
        "REJECT_REASONS",
        "InvalidEvent",
        "InvalidReason",
        "RejectReason",
        "Rejection",
        "accept",
        "decode_event",
        "decode_line",
        "scope_key",
        "scope_key_of",
        "to_tool_event",
    },
    "streams.runner": {
        "APPLY_FAILED",
        "STATE_TOO_LARGE",
        "Replayer",
        "StateTooLarge",
        "Step",
        "failure_detail",
        "failure_reason",
        "step",
        "to_verdict",
    },
    "streams.simulate": {
        "ARCHETYPES",
        "BASE_TS_MS",
        "DEFAULT_GATEWAYS",
        "DEFAULT_RATE",
        "EAGER_GATEWAYS",
        "MALFORMED_KINDS",
        "PROGRESSING_CALLS",
        "event_count",
        "fleet_events",
        "prehash",
        "seed_tag",
        "simulate",
        "simulate_events",
        "start_of",
    },
    "streams.integers": {"TooLarge", "parse_integer", "shown"},
    "streams.topics": {
        "DEAD_LETTER_TOPIC",
        "EVENTS_TOPIC",
        "FLEET_ALERTS_TOPIC",
        "MAX_PARTITIONS",
        "RUN_TABLE",
        "STORM_TABLE",
        "TOPIC_NAME_MAX",
        "TOPIC_NAME_RULE",
        "VERDICTS_TOPIC",
        "changelog_topic",
        "leader_topic",
        "partition_count_problem",
        "storm_signals_topic",
        "topic_configs",
        "topic_name_problem",
    },
}


@pytest.mark.parametrize("name", sorted(SURFACES))
def test_declared_public_surface(name: str) -> None:
    module = importlib.import_module(name)
    declared = list(module.__all__)
    assert len(declared) == len(set(declared)), f"{name}.__all__ lists a name twice"
    assert set(declared) == SURFACES[name]
    assert all(hasattr(module, n) for n in declared)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module imported from, names) for every ``import``/``from ... import`` in the file, at any depth."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def _package(module: str) -> str:
    return module.rsplit(".", 1)[0]


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_no_test_module_imports_another_and_no_private_crosses_a_package() -> None:
    problems: list[str] = []
    for top in ("streams", "schemas", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            here = _module_of(path)
            for source, names in _imports(path):
                if source.split(".")[-1].startswith("test_"):
                    problems.append(f"{here} imports test module {source}")
                if top == "bench" and source.startswith("tests.") and not source.startswith("tests.support"):
                    problems.append(f"{here} imports {source} (bench may use tests.support only)")
                if source.split(".")[0] not in ("streams", "schemas", "tests", "bench"):
                    continue
                if top == "tests" and not source.startswith("tests."):
                    continue  # a test may reach into the internals of the product module it tests
                for name in names:
                    if name.startswith("_") and _package(source) != _package(here):
                        problems.append(f"{here} imports private {source}.{name}")
    assert problems == []


def test_structure_measures_the_audit_path() -> None:
    from bench.structure import audit_hops

    hops = audit_hops()
    assert hops["entry_points"]["streams.cli.replay"] >= 1
    assert "streams.audit.explain" in hops["entry_points"] and "streams.runner" in hops["entry_points"]
    assert hops["edges"] >= hops["modules"] - 1
