"""Kubernetes manifests (deploy/k8s): schema validation for Kubernetes 1.30 with the schemas that the
PyPI package kubernetes-validate ships (offline), plus the consistency checks a schema cannot make."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import json5
import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.deploy.metric_names import DEPLOY
from tests.deploy.topics import assert_creates_worker_topics, assert_default_names

K8S = DEPLOY / "k8s"
KUBERNETES_VERSION = "1.30.0"
NAMESPACE = "loopwatch"
CONFIG_FILE = DEPLOY / "config" / "openclaw.json5"
PROMETHEUS_K8S_CONFIG = DEPLOY / "prometheus" / "prometheus-kubernetes.yml"
METRICS_PORT = 9464


def _manifest_files() -> list[Path]:
    return sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def _documents() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for path in _manifest_files():
        for index, doc in enumerate(yaml.safe_load_all(path.read_text(encoding="utf-8"))):
            if doc:
                out.append((f"{path.name}#{index}", doc))
    return out


def _one(kind: str) -> dict[str, Any]:
    found = [doc for _, doc in _documents() if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _worker_container() -> dict[str, Any]:
    containers = _one("StatefulSet")["spec"]["template"]["spec"]["containers"]
    (worker,) = (c for c in containers if c["name"] == "worker")
    assert isinstance(worker, dict)
    return worker


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


# ------------------------------------------------------------------------------------------- schemas


@pytest.mark.parametrize(("where", "doc"), _documents(), ids=[w for w, _ in _documents()])
def test_manifest_is_valid_for_kubernetes_1_30(where: str, doc: dict[str, Any]) -> None:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{where}: {doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}", pytrace=False)
    except kubernetes_validate.SchemaNotFoundError as exc:
        pytest.fail(f"{where}: {exc.message} (API removed or misspelt?)", pytrace=False)


def test_kustomization_lists_exactly_the_manifests() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    assert kustomization["namespace"] == NAMESPACE
    resources = kustomization["resources"]
    assert len(resources) == len(set(resources))
    assert sorted(resources) == sorted(p.name for p in _manifest_files())
    images = {image["name"] for image in kustomization.get("images", [])}
    assert _worker_container()["image"].split(":")[0] in images


def test_everything_lives_in_the_namespace() -> None:
    namespace = _one("Namespace")
    assert namespace["metadata"]["name"] == NAMESPACE
    for where, doc in _documents():
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == NAMESPACE, where


def test_images_are_pinned() -> None:
    for where, doc in _documents():
        spec = doc.get("spec", {})
        template = spec.get("template", {}).get("spec", {})
        for container in template.get("containers", []) + template.get("initContainers", []):
            image = container["image"]
            name, _, tag = image.rpartition(":")
            assert name and tag and tag != "latest" and re.search(r"\d", tag), f"{where}: unpinned {image}"


# ------------------------------------------------------------------------------------------- workers


def test_statefulset_governing_service_is_headless_and_matches() -> None:
    sts = _one("StatefulSet")
    service = _one("Service")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (port,) = service["spec"]["ports"]
    assert port["port"] == METRICS_PORT
    assert port["targetPort"] in ("metrics", METRICS_PORT)
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert sts["spec"]["template"]["spec"]["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]


def test_worker_command_env_and_rocksdb_volume() -> None:
    sts = _one("StatefulSet")
    worker = _worker_container()
    assert worker["command"] == ["loopwatch"]
    args = worker["args"]
    assert args[0] == "worker"
    options = dict(zip(args[1::2], args[2::2], strict=True))
    assert options == {
        "--bootstrap": "$(LOOPWATCH_BOOTSTRAP)",
        "--store": "rocksdb",
        "--data-dir": "/data",
        "--metrics-port": str(METRICS_PORT),
    }
    env = _env(worker)
    assert env["LOOPWATCH_BOOTSTRAP"]
    assert env["LOOPWATCH_STORE"] == "rocksdb"
    assert env["LOOPWATCH_DATA_DIR"] == "/data"
    assert env["LOOPWATCH_METRICS_PORT"] == str(METRICS_PORT)
    # --data-dir is a volume from the claim template: one PersistentVolume per worker.
    mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
    claims = {t["metadata"]["name"]: t for t in sts["spec"]["volumeClaimTemplates"]}
    assert mounts["/data"] in claims
    claim = claims[mounts["/data"]]["spec"]
    assert claim["accessModes"] == ["ReadWriteOnce"]
    assert claim["resources"]["requests"]["storage"]
    pod_volumes = {v["name"] for v in sts["spec"]["template"]["spec"].get("volumes", [])}
    assert set(mounts.values()) <= pod_volumes | set(claims)


def test_worker_config_comes_from_the_configmap() -> None:
    sts = _one("StatefulSet")
    worker = _worker_container()
    config_path = _env(worker)["LOOPWATCH_CONFIG"]
    directory, _, filename = config_path.rpartition("/")
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    mount = mounts[directory]
    assert mount.get("readOnly") is True
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    source = volumes[mount["name"]]["configMap"]
    configmap = _one("ConfigMap")
    assert source["name"] == configmap["metadata"]["name"]
    keys = {item["key"]: item["path"] for item in source.get("items", [])} or {k: k for k in configmap["data"]}
    assert filename in keys.values()
    key = next(k for k, p in keys.items() if p == filename)
    assert key in configmap["data"]


def test_worker_probes_resources_and_security() -> None:
    worker = _worker_container()
    ports = {p["name"]: p["containerPort"] for p in worker["ports"]}
    assert ports == {"metrics": METRICS_PORT}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = worker[probe]["httpGet"]
        assert get["path"] == "/metrics", probe
        assert ports.get(get["port"], get["port"]) == METRICS_PORT, probe
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(worker["resources"][kind]), kind
    pod = _one("StatefulSet")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert worker["securityContext"]["allowPrivilegeEscalation"] is False
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True


def test_scrape_annotations_point_at_the_metrics_port() -> None:
    annotations = _one("StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(METRICS_PORT)
    assert annotations["prometheus.io/path"] == "/metrics"


# ------------------------------------------------------------------------------------------- config


def test_configmap_matches_the_compose_config_file() -> None:
    assert _one("ConfigMap")["data"]["openclaw.json5"] == CONFIG_FILE.read_text(encoding="utf-8")


def test_openclaw_config_is_valid_json5_with_consistent_thresholds() -> None:
    config = json5.loads(CONFIG_FILE.read_text(encoding="utf-8"))
    loop = config["tools"]["loopDetection"]
    assert loop["enabled"] is True
    numeric = ("historySize", "warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold")
    for key in (*numeric, "unknownToolThreshold"):
        assert isinstance(loop[key], int) and loop[key] > 0, key
    # OpenClaw's config schema rejects a warning threshold at or above critical, or critical at or above global.
    assert loop["warningThreshold"] < loop["criticalThreshold"] < loop["globalCircuitBreakerThreshold"]
    assert set(loop["detectors"]) <= {"genericRepeat", "knownPollNoProgress", "pingPong"}
    assert set(loop.get("postCompactionGuard", {})) <= {"windowSize"}
    assert isinstance(config["agents"]["list"], list)


def test_partition_count_and_topics_agree() -> None:
    job = _one("Job")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    job_env = _env(container)
    assert _env(_worker_container())["LOOPWATCH_PARTITIONS"] == job_env["PARTITIONS"]
    script = "\n".join(container["args"])
    assert _env(_worker_container())["LOOPWATCH_BOOTSTRAP"] == job_env["BOOTSTRAP"]
    worker_env = _env(_worker_container())
    assert job_env["STORM_WINDOW"] == worker_env["LOOPWATCH_STORM_WINDOW"]  # the storm changelog keeps two windows
    assert job_env["REPLICATION_FACTOR"] == worker_env["LOOPWATCH_REPLICATION_FACTOR"]  # whoever creates a topic
    assert_default_names(worker_env)
    window = float(worker_env["LOOPWATCH_STORM_WINDOW"])
    assert_creates_worker_topics(script, job_env, int(job_env["PARTITIONS"]), "$PARTITIONS", window)


# ------------------------------------------------------------------------------------------- scraping


def _relabel(labels: dict[str, str], configs: list[dict[str, Any]]) -> dict[str, str] | None:
    """Apply Prometheus relabel_configs (actions replace and keep, as used in deploy/) to one target."""
    labels = dict(labels)
    for config in configs:
        action = config.get("action", "replace")
        value = config.get("separator", ";").join(labels.get(s, "") for s in config.get("source_labels", []))
        match = re.fullmatch(config.get("regex", "(.*)"), value)
        if action == "keep":
            if not match:
                return None
        elif action == "replace":
            if match:
                template = re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", config.get("replacement", "$1"))
                result = match.expand(template)
                if result:
                    labels[config["target_label"]] = result
                else:
                    labels.pop(config["target_label"], None)
        else:  # pragma: no cover - not used in deploy/
            raise AssertionError(f"relabel action {action} not simulated")
    return labels


def _sanitize(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def _pod_targets(pod_name: str, template: dict[str, Any], ip: str) -> list[dict[str, str]]:
    """The targets Prometheus' Kubernetes pod discovery produces for one pod (one per container port)."""
    meta = template["metadata"]
    common = {
        "__meta_kubernetes_namespace": NAMESPACE,
        "__meta_kubernetes_pod_name": pod_name,
        "__metrics_path__": "/metrics",
        "__scheme__": "http",
        **{f"__meta_kubernetes_pod_label_{_sanitize(k)}": v for k, v in meta.get("labels", {}).items()},
        **{f"__meta_kubernetes_pod_annotation_{_sanitize(k)}": v for k, v in meta.get("annotations", {}).items()},
    }
    targets = []
    for container in template["spec"]["containers"]:
        for port in container.get("ports", []):
            targets.append({**common, "__address__": f"{ip}:{port['containerPort']}"})
    return targets


def test_kubernetes_scrape_config_selects_the_worker_pods() -> None:
    config = yaml.safe_load(PROMETHEUS_K8S_CONFIG.read_text(encoding="utf-8"))
    (job,) = (j for j in config["scrape_configs"] if j["job_name"] == "loopwatch")
    template = _one("StatefulSet")["spec"]["template"]
    (target,) = _pod_targets("loopwatch-worker-0", template, "10.1.2.3")
    kept = _relabel(target, job["relabel_configs"])
    assert kept is not None, "the worker pod is dropped by the scrape config"
    assert kept["__address__"] == f"10.1.2.3:{METRICS_PORT}"
    assert kept["__metrics_path__"] == "/metrics"
    assert kept["instance"] == kept["pod"] == "loopwatch-worker-0"

    # A pod that opted out, or another app's pod, is not scraped.
    opted_out = {**template, "metadata": {**template["metadata"], "annotations": {}}}
    assert all(_relabel(t, job["relabel_configs"]) is None for t in _pod_targets("x-0", opted_out, "10.1.2.4"))
    other = {**template, "metadata": {**template["metadata"], "labels": {"app.kubernetes.io/name": "other"}}}
    assert all(_relabel(t, job["relabel_configs"]) is None for t in _pod_targets("y-0", other, "10.1.2.5"))


def test_pods_meet_the_restricted_pod_security_standard() -> None:
    """The namespace enforces `restricted`: a pod that misses one of these is rejected at admission."""
    labels = _one("Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for where, doc in _documents():
        template = doc.get("spec", {}).get("template")
        if not template:
            continue
        pod = template["spec"]
        pod_security = pod.get("securityContext", {})
        for container in pod["containers"] + pod.get("initContainers", []):
            security = {**pod_security, **container.get("securityContext", {})}
            name = f"{where} {container['name']}"
            assert security.get("runAsNonRoot") is True, name
            assert security.get("runAsUser", 1) != 0, name
            assert security.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost"), name
            assert security.get("allowPrivilegeEscalation") is False, name
            assert security.get("capabilities", {}).get("drop") == ["ALL"], name
            assert not security.get("capabilities", {}).get("add"), name
            assert not security.get("privileged"), name
        assert not any("hostPath" in volume for volume in pod.get("volumes", [])), where
