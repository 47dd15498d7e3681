"""deploy/alertmanager/alertmanager.yml: amtool accepts it, and every alert of alerts.yml routes by severity
(critical pages, warning goes to chat, info notifies nobody). tests/integration/test_live_alerts.py runs it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.metric_names import ALERT_RULES, DEPLOY

ALERTMANAGER_CONFIG = DEPLOY / "alertmanager" / "alertmanager.yml"
RECEIVER_OF_SEVERITY = {"critical": "pager", "warning": "chat", "info": "null"}


def _amtool(amtool: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(amtool), *args], capture_output=True, text=True, timeout=60, check=False)


def _alerts() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERT_RULES.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def _route(amtool: Path, labels: dict[str, str]) -> str:
    pairs = [f"{key}={value}" for key, value in sorted(labels.items())]
    proc = _amtool(amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}", *pairs)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_amtool_check_config(amtool: Path) -> None:
    proc = _amtool(amtool, "check-config", str(ALERTMANAGER_CONFIG))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "2 inhibit rules" in proc.stdout and "3 receivers" in proc.stdout


def test_every_alert_routes_to_the_receiver_of_its_severity(amtool: Path) -> None:
    for rule in _alerts():
        labels = {"alertname": rule["alert"], "deployment": "prod", **rule["labels"]}
        assert _route(amtool, labels) == RECEIVER_OF_SEVERITY[rule["labels"]["severity"]], rule["alert"]


@pytest.mark.parametrize(("severity", "receiver"), sorted(RECEIVER_OF_SEVERITY.items()))
def test_routes_verify_receivers(amtool: Path, severity: str, receiver: str) -> None:
    # --verify.receivers makes amtool itself fail on a mismatch: the check above cannot pass by misparsing.
    base = ["config", "routes", "test", f"--config.file={ALERTMANAGER_CONFIG}"]
    labels = ["service=loopwatch", f"severity={severity}"]
    assert _amtool(amtool, *base, f"--verify.receivers={receiver}", *labels).returncode == 0
    wrong = "pager" if receiver != "pager" else "chat"
    assert _amtool(amtool, *base, f"--verify.receivers={wrong}", *labels).returncode != 0


def test_grouping_and_inhibition_follow_the_labels_the_alerts_carry() -> None:
    config = yaml.safe_load(ALERTMANAGER_CONFIG.read_text(encoding="utf-8"))
    assert config["route"]["group_by"] == ["alertname", "deployment", "service"]
    names = {rule["alert"]: rule for rule in _alerts()}
    for inhibit in config["inhibit_rules"]:
        # Every alert name an inhibition mentions exists, and the `equal` labels are ones both sides carry
        # (deployment is Prometheus' external label; detector is kept by the storm and spike rules' `by`).
        mentioned = {
            name
            for matcher in inhibit["source_matchers"] + inhibit["target_matchers"]
            if matcher.startswith("alertname")
            for name in matcher.split('"')[1].split("|")
        }
        assert mentioned and mentioned <= set(names), mentioned - set(names)
        if "detector" in inhibit["equal"]:
            for name in mentioned:
                assert "by (detector)" in str(names[name]["expr"]), name
