"""The Grafana dashboard (deploy/grafana/loopwatch-dashboard.json) and its provisioning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.metric_names import DASHBOARD, DEPLOY, as_promql, dashboard_expressions, dashboard_panels
from tests.deploy.tools import run_promtool

PROVISIONING = DEPLOY / "grafana" / "provisioning"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}


def _dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def _variables() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in _dashboard()["templating"]["list"]}


def test_dashboard_identity() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "loopwatch-overview"
    assert dashboard["title"]
    assert dashboard["schemaVersion"] >= 36
    assert "id" not in dashboard or dashboard["id"] is None, "exported with an instance-specific id"


def test_prometheus_datasource_variable() -> None:
    variable = _variables()["datasource"]
    assert variable["type"] == "datasource"
    assert variable["query"] == "prometheus"
    (datasource,) = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert variable["current"]["value"] == datasource["uid"]


def test_every_panel_and_query_uses_the_datasource_variable() -> None:
    for panel in dashboard_panels(_dashboard()):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE_REF, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE_REF, panel["title"]
    for variable in _variables().values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE_REF, variable["name"]


def test_panel_ids_are_unique() -> None:
    ids = [panel["id"] for panel in dashboard_panels(_dashboard())]
    assert len(ids) == len(set(ids))


def test_every_target_has_an_expression_and_a_unique_ref_id() -> None:
    for panel in dashboard_panels(_dashboard()):
        if panel["type"] == "row":
            continue
        targets = panel.get("targets", [])
        assert targets, f"panel {panel['title']!r} has no query"
        assert all(str(t.get("expr", "")).strip() for t in targets), panel["title"]
        ref_ids = [t["refId"] for t in targets]
        assert len(ref_ids) == len(set(ref_ids)), panel["title"]


def test_panels_fit_the_grid_without_overlapping() -> None:
    occupied: dict[tuple[int, int], str] = {}
    for panel in dashboard_panels(_dashboard()):
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["w"] > 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in occupied, f"{panel['title']!r} overlaps {occupied[(x, y)]!r}"
                occupied[(x, y)] = panel["title"]


def test_required_views_are_present() -> None:
    expressions = "\n".join(dashboard_expressions().values())
    for needle in (
        "sum by (type) (rate(loopwatch_events_total",
        "sum by (decision) (rate(loopwatch_verdicts_total",
        "sum by (detector, decision) (rate(loopwatch_verdicts_total",
        'decision="block"',
        'decision="abort"',
        "sum by (reason) (rate(loopwatch_invalid_events_total",
        "histogram_quantile(0.5, ",
        "histogram_quantile(0.99, ",
        "loopwatch_active_runs",
        "loopwatch_state_bytes",
        "loopwatch_consumer_lag",
        "loopwatch_fleet_alerts_total",
    ):
        assert needle in expressions, needle


def test_every_expression_parses(promtool: Path, tmp_path: Path) -> None:
    """promtool parses each expression as a recording rule (one run for all of them)."""
    expressions = dashboard_expressions()
    rules = [
        {"record": f"loopwatch_dashboard_check_{index}", "expr": as_promql(expr)}
        for index, expr in enumerate(expressions.values())
    ]
    rules_file = tmp_path / "dashboard_rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    proc = run_promtool(promtool, "check", "rules", str(rules_file))
    where = "\n".join(f"loopwatch_dashboard_check_{i}: {w}" for i, w in enumerate(expressions))
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{where}"


def test_promtool_rejects_a_broken_expression(promtool: Path, tmp_path: Path) -> None:
    # Guards the check above: promtool really parses recording-rule expressions.
    rules_file = tmp_path / "broken.yml"
    broken = {"record": "loopwatch_dashboard_check_0", "expr": "sum(rate(loopwatch_events_total[5m])"}
    rules_file.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [broken]}]}), encoding="utf-8")
    assert run_promtool(promtool, "check", "rules", str(rules_file)).returncode != 0


def test_dashboard_provider_points_at_a_directory() -> None:
    (provider,) = yaml.safe_load((PROVISIONING / "dashboards" / "loopwatch.yml").read_text())["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"].startswith("/")
    assert not provider["options"]["path"].endswith(".json")
