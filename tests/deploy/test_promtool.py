"""Prometheus configuration and alert rules: promtool checks and unit tests, plus rule hygiene."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.metric_names import ALERT_RULES, DEPLOY, metric_names_in, rule_expressions
from tests.deploy.tools import run_promtool

PROMETHEUS_DIR = DEPLOY / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS_DIR / "prometheus.yml"
PROMETHEUS_K8S_CONFIG = PROMETHEUS_DIR / "prometheus-kubernetes.yml"
ALERT_TESTS = PROMETHEUS_DIR / "alerts_test.yml"
RUNBOOK = DEPLOY / "RUNBOOK.md"
SEVERITIES = {"critical", "warning", "info"}


def _load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _alerts() -> list[dict[str, Any]]:
    return [rule for group in _load(ALERT_RULES)["groups"] for rule in group["rules"] if "alert" in rule]


def _output(proc: Any) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


# ------------------------------------------------------------------------------------------- promtool


def test_promtool_check_rules(promtool: Path) -> None:
    proc = run_promtool(promtool, "check", "rules", str(ALERT_RULES))
    assert proc.returncode == 0, _output(proc)


def test_promtool_check_config(promtool: Path) -> None:
    # Also checks the rule files the config names (alerts.yml, relative to the config file).
    proc = run_promtool(promtool, "check", "config", str(PROMETHEUS_CONFIG))
    assert proc.returncode == 0, _output(proc)
    assert "1 rule files found" in proc.stdout, _output(proc)


def test_promtool_test_rules(promtool: Path) -> None:
    proc = run_promtool(promtool, "test", "rules", ALERT_TESTS.name, cwd=PROMETHEUS_DIR)
    assert proc.returncode == 0, _output(proc)
    assert "SUCCESS" in proc.stdout, _output(proc)


def test_promtool_check_kubernetes_config(promtool: Path, tmp_path: Path) -> None:
    """prometheus-kubernetes.yml minus its kubernetes_sd block passes promtool (Debian's build of
    Prometheus 2.42 leaves out Kubernetes discovery); the discovery block is checked by hand."""
    config = _load(PROMETHEUS_K8S_CONFIG)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["loopwatch"]
    assert job["kubernetes_sd_configs"] == [{"role": "pod", "namespaces": {"names": ["loopwatch"]}}]
    job.pop("kubernetes_sd_configs")
    job["static_configs"] = [{"targets": ["loopwatch-worker-0.loopwatch-worker.loopwatch.svc:9464"]}]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    shutil.copy(ALERT_RULES, tmp_path / "alerts.yml")
    proc = run_promtool(promtool, "check", "config", str(tmp_path / "prometheus.yml"))
    assert proc.returncode == 0, _output(proc)


# ------------------------------------------------------------------------------------------- hygiene


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in _load(ALERT_TESTS)["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names - fires == set(), "alerts never tested firing"
    assert names - quiet == set(), "alerts never tested not firing"
    assert (fires | quiet) - names == set(), "tests name alerts that do not exist"


def test_alert_names_are_unique() -> None:
    names = [rule["alert"] for rule in _alerts()]
    assert len(names) == len(set(names))


def test_alerts_have_severity_annotations_and_runbook_section() -> None:
    runbook_anchors = {
        re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
        for line in RUNBOOK.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    }
    for rule in _alerts():
        name = rule["alert"]
        assert rule["labels"]["severity"] in SEVERITIES, name
        assert rule["labels"]["service"] == "loopwatch", name
        annotations = rule["annotations"]
        assert annotations.get("summary") and annotations.get("description"), name
        runbook = annotations["runbook_url"]
        assert runbook == f"deploy/RUNBOOK.md#{name.lower()}", name
        assert name.lower() in runbook_anchors, f"no '## {name}' section in {RUNBOOK}"


def test_every_loopwatch_selector_is_scoped_to_the_job() -> None:
    selector = re.compile(r"\b(loopwatch_\w+|up)\s*(\{[^}]*\})?")
    for name, expr in rule_expressions().items():
        for metric, matchers in selector.findall(expr):
            assert 'job="loopwatch"' in matchers, f'{name}: {metric} is not scoped to job="loopwatch"'


def test_rules_select_only_named_metrics() -> None:
    # Guard for the PromQL scanner: every rule uses at least one metric.
    for name, expr in rule_expressions().items():
        assert metric_names_in(expr), name


def test_scrape_config_targets_the_loopwatch_job() -> None:
    config = _load(PROMETHEUS_CONFIG)
    assert config["rule_files"] == ["alerts.yml"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    job = jobs["loopwatch"]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    targets = [t for sc in job["static_configs"] for t in sc["targets"]]
    assert targets and all(t.endswith(":9464") for t in targets)
    assert _load(PROMETHEUS_K8S_CONFIG)["rule_files"] == ["alerts.yml"]
