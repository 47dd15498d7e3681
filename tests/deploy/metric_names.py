"""Metric names that the deployment relies on, and checks that a worker really exports them.

``deploy/metrics.txt`` lists every metric a loopwatch worker must export for the alert rules
(``deploy/prometheus/alerts.yml``) and the Grafana dashboard (``deploy/grafana/loopwatch-dashboard.json``)
to work. ``referenced_metric_names()`` extracts the names those files actually use;
``tests/deploy/test_metric_names.py`` keeps the two in step. Against a running worker::

    from tests.deploy.metric_names import assert_all_exported, fetch_metrics, listed_metric_names

    assert_all_exported(fetch_metrics("http://127.0.0.1:9464/metrics"), listed_metric_names())

The PromQL scanning here is deliberately small: it understands the expression shapes used in deploy/
(selectors, functions, aggregations with by/without, vector matching, ranges, offsets), not all of
PromQL. Expressions are additionally checked for syntax by promtool (tests/deploy/test_dashboard.py).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
METRICS_LIST = DEPLOY / "metrics.txt"
ALERT_RULES = DEPLOY / "prometheus" / "alerts.yml"
DASHBOARD = DEPLOY / "grafana" / "loopwatch-dashboard.json"

# Series that Prometheus itself creates for every target or rule; no worker exports them.
PROMETHEUS_SYNTHETIC = frozenset(
    {
        "up",
        "scrape_duration_seconds",
        "scrape_samples_scraped",
        "scrape_samples_post_metric_relabeling",
        "scrape_series_added",
        "ALERTS",
        "ALERTS_FOR_STATE",
    }
)

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

# Closed label value sets (schemas/verdict.py, streams/decode.py, the metric contract). Label matchers in the
# rules and the dashboard may only use these values.
KNOWN_LABEL_VALUES: dict[str, frozenset[str]] = {
    "type": frozenset({"tool_call", "tool_result", "compaction_retry", "model_usage"}),
    "kind": frozenset({"signature", "agent"}),
    "decision": frozenset({"warning", "block", "abort"}),
    "detector": frozenset(
        {
            "generic_repeat",
            "known_poll_no_progress",
            "ping_pong",
            "unknown_tool_repeat",
            "global_circuit_breaker",
            "compaction_loop_persisted",
        }
    ),
    "cause": frozenset({"gap", "seek_again"}),  # streams.kafka.compat REREAD_GAP, REREAD_AGAIN
    "reason": frozenset(
        {
            "not_json",
            "not_utf8",
            "schema_invalid",
            "oversized",
            "unknown_type",
            "future_version",
            "not_object",
            "limits_exceeded",
            "key_mismatch",
            "apply_failed",
            "state_too_large",
        }
    ),
}

# Which labelled counters carry which closed label sets (for assert_labels_initialised).
LABELLED_COUNTERS: dict[str, tuple[str, ...]] = {
    "loopwatch_events_total": ("type",),
    "loopwatch_verdicts_total": ("decision", "detector"),
    "loopwatch_invalid_events_total": ("reason",),
    "loopwatch_consumer_rereads_total": ("cause",),
    "loopwatch_fleet_alerts_total": ("kind", "detector"),
    "loopwatch_loop_tokens_total": ("decision", "detector"),
    "loopwatch_loop_cost_usd_total": ("decision", "detector"),
    "loopwatch_saved_tokens_estimate_total": ("decision", "detector"),
    "loopwatch_saved_cost_usd_estimate_total": ("decision", "detector"),
}

_PROMQL_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "atan2",
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
# A whole identifier (not preceded or followed by identifier characters) that is not a call.
_IDENT = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")
_MATCHER = re.compile(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
_GRAFANA_LABEL_VALUES = re.compile(r"^\s*label_values\((?P<expr>.*),\s*[A-Za-z_]\w*\s*\)\s*$", re.S)
# Grafana's interval variables, replaced by plausible durations so promtool and Prometheus take the expressions.
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "6h"}
_GRAFANA_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})?\s+\S+")
_LABEL_PAIR = re.compile(r'([A-Za-z_]\w*)="((?:[^"\\]|\\.)*)"')


# --------------------------------------------------------------------------------------------- sources


def listed_metric_names(path: Path = METRICS_LIST) -> set[str]:
    """The names in deploy/metrics.txt (one per line; blank lines ignored)."""
    return {line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def rule_expressions(path: Path = ALERT_RULES) -> dict[str, str]:
    """``{alert or record name: expr}`` for every rule in a Prometheus rule file."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for group in doc["groups"]:
        for rule in group["rules"]:
            name = rule.get("alert") or rule["record"]
            out[name] = str(rule["expr"])
    return out


def _walk_panels(panels: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _walk_panels(panel.get("panels", []))


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, including those nested in (collapsed) rows."""
    return list(_walk_panels(dashboard.get("panels", [])))


def dashboard_expressions(path: Path = DASHBOARD) -> dict[str, str]:
    """``{where: expr}`` for every PromQL expression in a dashboard: panel targets, Prometheus
    annotations and query variables (``label_values(expr, label)`` contributes ``expr``)."""
    dashboard = json.loads(path.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for panel in dashboard_panels(dashboard):
        for target in panel.get("targets", []):
            out[f"panel {panel.get('id')} {panel.get('title')!r} target {target.get('refId')}"] = str(
                target.get("expr", "")
            )
    for annotation in dashboard.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            out[f"annotation {annotation.get('name')!r}"] = str(annotation["expr"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        match = _GRAFANA_LABEL_VALUES.match(text)
        if match:
            out[f"variable {variable.get('name')!r}"] = match.group("expr")
    return out


# --------------------------------------------------------------------------------------------- PromQL


def as_promql(expr: str) -> str:
    """A dashboard expression with Grafana variables substituted (user variables only appear inside
    label-matcher strings, where any regex will do)."""
    for variable, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, value)
    return _GRAFANA_VARIABLE.sub(".+", expr)


def metric_names_in(expr: str) -> set[str]:
    """Metric names selected by a PromQL expression (see the module docstring for the limits)."""
    text = _STRING.sub(" ", expr)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    previous = None
    while previous != text:  # grouping clauses may sit inside other parentheses
        previous, text = text, _GROUPING.sub(" ", text)
    return {name for name in _IDENT.findall(text) if name not in _PROMQL_KEYWORDS}


def label_matchers_in(expr: str) -> list[tuple[str, str, str]]:
    """``(label, operator, value)`` for every label matcher with a string value."""
    return [(label, op, value) for label, op, value in _MATCHER.findall(expr)]


def referenced_metric_names() -> set[str]:
    """Every metric name used by the alert rules and the dashboard, as written (``x_bucket`` stays)."""
    names: set[str] = set()
    for expr in [*rule_expressions().values(), *dashboard_expressions().values()]:
        names |= metric_names_in(expr)
    return names


def unlisted_metric_names(referenced: Iterable[str], listed: Iterable[str]) -> set[str]:
    """Referenced names that ``listed`` does not cover (a histogram's ``_bucket``/``_sum``/``_count``
    are covered by its base name; Prometheus' own series need no listing)."""
    listed_set = set(listed)
    missing: set[str] = set()
    for name in referenced:
        if name in listed_set or name in PROMETHEUS_SYNTHETIC or name.startswith("loopwatch:"):
            continue
        base = _histogram_base(name)
        if base is not None and base in listed_set:
            continue
        missing.add(name)
    return missing


def _histogram_base(name: str) -> str | None:
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return None


# --------------------------------------------------------------------------------------------- scrape


def fetch_metrics(url: str, timeout: float = 5.0) -> str:
    """GET a /metrics page (Prometheus text format) and return it as text."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
    return body.decode("utf-8")


def exported_metric_names(metrics_text: str) -> set[str]:
    """Names a /metrics page exports: every sample name, plus every family announced by ``# TYPE``
    (a labelled metric with no child yet has a TYPE line but no sample). Handles both the classic
    text format (counter families named ``x_total``) and OpenMetrics (families named ``x``)."""
    names: set[str] = set()
    for raw in metrics_text.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split()
            if len(parts) >= 4 and parts[1] == "TYPE":
                family, kind = parts[2], parts[3]
                names.add(family)
                if kind == "counter" and not family.endswith("_total"):
                    names.add(f"{family}_total")
                if kind in ("histogram", "gaugehistogram", "summary"):
                    names.update(f"{family}{suffix}" for suffix in HISTOGRAM_SUFFIXES)
            continue
        match = _SAMPLE.match(line)
        if match:
            names.add(match.group("name"))
    return names


def assert_all_exported(metrics_text: str, names: set[str]) -> None:
    """Fail with the list of missing names unless every name in ``names`` is exported.

    A histogram may be named by its base name or by any of its series names."""
    exported = exported_metric_names(metrics_text)
    missing = sorted(
        name
        for name in names
        if name not in exported
        and name not in PROMETHEUS_SYNTHETIC
        and not all(f"{name}{suffix}" in exported for suffix in HISTOGRAM_SUFFIXES)
    )
    if missing:
        raise AssertionError("metrics relied on by deploy/ (alerts, dashboard) but not exported: " + ", ".join(missing))


def exported_label_values(metrics_text: str, metric: str, label: str) -> set[str]:
    """Values of ``label`` over the samples of ``metric`` on a /metrics page."""
    values: set[str] = set()
    for raw in metrics_text.splitlines():
        match = _SAMPLE.match(raw.strip())
        if not match or match.group("name") != metric or not match.group("labels"):
            continue
        for key, value in _LABEL_PAIR.findall(match.group("labels")):
            if key == label:
                values.add(value)
    return values


def assert_labels_initialised(metrics_text: str) -> None:
    """Fail unless every value of the closed label sets already has a sample (at 0 if need be).

    The alert rules use increase()/rate(); a series that first appears with value 1 shows no
    increase, so an uninitialised counter hides the first abort or fleet alert after a restart."""
    problems: list[str] = []
    for metric, labels in LABELLED_COUNTERS.items():
        for label in labels:
            missing = KNOWN_LABEL_VALUES[label] - exported_label_values(metrics_text, metric, label)
            if missing:
                problems.append(f"{metric}{{{label}}} lacks {', '.join(sorted(missing))}")
    if problems:
        raise AssertionError("labelled counters not pre-initialised: " + "; ".join(problems))
