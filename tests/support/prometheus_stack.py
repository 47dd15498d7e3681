"""A real Prometheus server and Alertmanager for tests, and the local webhook receivers they notify.

The binaries come from Debian's packages (:func:`tests.deploy.tools.ensure_prometheus_stack`). Everything binds
to 127.0.0.1 on free ports, runs from a scratch directory and is stopped by pid (:mod:`tests.support.procs`).
The shipped files are used as they are except for what a test cannot wait for: rule ``for:`` durations and the
Alertmanager's group timers are shortened in rendered copies (:func:`compressed_rules`,
:func:`local_alertmanager_config`); receiver URLs point at the local receivers.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.support.procs import free_port, start_process, stop_process, wait_until

#: Prometheus' external labels in the test; the Alertmanager groups and inhibits on ``deployment``.
EXTERNAL_LABELS = {"deployment": "loopwatch-test"}


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that keeps every Alertmanager webhook notification it is POSTed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.notifications: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    receiver.notifications.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/{name}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"webhook-{name}", daemon=True)
        self._thread.start()

    def alerts(self) -> list[dict[str, Any]]:
        """Every alert of every notification so far (an alert appears once per notification that carried it)."""
        with self._lock:
            return [alert for note in self.notifications for alert in note["alerts"]]

    def alertnames(self, status: str = "firing") -> set[str]:
        return {a["labels"]["alertname"] for a in self.alerts() if a["status"] == status}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


def compressed_rules(source: Path, dest: Path, factor: int = 60) -> Path:
    """A copy of the rule file whose every ``for:`` is ``factor`` times shorter (so ``10m`` -> ``10s`` at 60);
    expressions, ranges and labels unchanged."""
    units = {"s": 1, "m": 60, "h": 3600}
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    for group in doc["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                match = re.fullmatch(r"(\d+)([smh])", str(rule["for"]))
                assert match, f"{rule['alert']}: for: {rule['for']!r} is not a plain duration"
                rule["for"] = f"{max(1, int(match.group(1)) * units[match.group(2)] // factor)}s"
    dest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return dest


def local_alertmanager_config(source: Path, dest: Path, receivers: dict[str, WebhookReceiver]) -> Path:
    """A copy of the shipped routing with receiver URLs on the local receivers and second-scale group timers."""
    doc = yaml.safe_load(source.read_text(encoding="utf-8"))
    doc["route"].update({"group_wait": "1s", "group_interval": "2s", "repeat_interval": "1h"})
    for receiver in doc["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            webhook["url"] = receivers[receiver["name"]].url
    dest.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return dest


class _Server:
    """A server process with an HTTP API on 127.0.0.1."""

    name = "server"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{self.name}.log"
        self.proc: Any = None

    def _start(self, cmd: Sequence[str], timeout: float = 60.0) -> None:
        self.proc = start_process(cmd, log_path=self.log_path, cwd=self.workdir)

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited early:\n{self.log()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/-/ready", timeout=2) as response:
                    return bool(response.status == 200)
            except OSError:
                return False

        wait_until(ready, timeout, 0.2, message=f"{self.name} ready")

    def get(self, path: str, **params: Any) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.base}{path}{query}", timeout=10) as response:
            return json.loads(response.read())

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, 10.0)


class Alertmanager(_Server):
    name = "alertmanager"

    def start(self, binary: Path, config: Path) -> Alertmanager:
        self._start(
            [
                str(binary),
                f"--config.file={config}",
                f"--storage.path={self.workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",  # no gossip port: a single instance
                "--log.level=warn",
            ]
        )
        return self

    def alerts(self) -> list[dict[str, Any]]:
        """``GET /api/v2/alerts``: active, silenced and inhibited alerts with their status."""
        result: list[dict[str, Any]] = self.get("/api/v2/alerts")
        return result


class Prometheus(_Server):
    name = "prometheus"

    def start(
        self,
        binary: Path,
        *,
        targets: Sequence[str],
        rules: Path,
        alertmanager: Alertmanager,
        interval: str = "1s",
    ) -> Prometheus:
        config = {
            "global": {
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "evaluation_interval": interval,
                "external_labels": EXTERNAL_LABELS,
            },
            "rule_files": [str(rules)],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager.port}"]}]}]},
            "scrape_configs": [{"job_name": "loopwatch", "static_configs": [{"targets": list(targets)}]}],
        }
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        self._start(
            [
                str(binary),
                f"--config.file={path}",
                f"--storage.tsdb.path={self.workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ]
        )
        return self

    def api(self, path: str, **params: Any) -> Any:
        """``/api/v1/<path>``'s ``data``, failing on an error status."""
        body = self.get(f"/api/v1/{path}", **params)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("query", query=expr)
        assert data["resultType"] in ("vector", "scalar"), data
        return data["result"] if data["resultType"] == "vector" else [{"metric": {}, "value": data["result"]}]

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts (``/api/v1/alerts``)."""
        result: list[dict[str, Any]] = self.api("alerts")["alerts"]
        return result

    def alert_states(self, start: float, end: float) -> dict[tuple[str, str], set[str]]:
        """``{(alertname, alertstate): detectors}`` that the ``ALERTS`` series held at any second in [start, end]."""
        data = self.api("query_range", query="ALERTS", start=start, end=end, step="1s")
        out: dict[tuple[str, str], set[str]] = {}
        for series in data["result"]:
            labels = series["metric"]
            out.setdefault((labels["alertname"], labels["alertstate"]), set()).add(labels.get("detector", ""))
        return out
