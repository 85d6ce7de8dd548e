"""deploy/kubernetes: the manifests against the Kubernetes API's schema (kubernetes-validate) and the ServiceMonitor
against its CRD's, the kustomize base rendered by kubectl, and the DaemonSet in step with what gputop export takes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from gputop.cli import build_parser
from gputop.export import DEFAULT_PORT
from gputop.export.server import READY_PATH

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "deploy" / "kubernetes"
CRD = ROOT / "tests" / "data" / "kubernetes" / "servicemonitors.crd.yaml"
KUBERNETES = "1.30.0"
"""The oldest Kubernetes still supported upstream when the kit was written; every field used is older."""


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def manifests() -> list[dict[str, Any]]:
    """Every resource the kit applies, in the kustomization's order."""
    listed = documents(KIT / "kustomization.yaml")[0]["resources"]
    return [doc for name in listed for doc in documents(KIT / name)]


def one(kind: str) -> dict[str, Any]:
    [found] = [doc for doc in manifests() if doc["kind"] == kind]
    return found


def servicemonitor_schema() -> dict[str, Any]:
    [version] = documents(CRD)[0]["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def container() -> dict[str, Any]:
    [gputop] = one("DaemonSet")["spec"]["template"]["spec"]["containers"]
    return gputop


@pytest.mark.fast
def test_the_kustomization_lists_every_manifest_of_the_kit():
    listed = documents(KIT / "kustomization.yaml")[0]["resources"]

    assert sorted(listed) == sorted(p.name for p in KIT.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.fast
@pytest.mark.parametrize("kind", ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Service"])
def test_each_core_manifest_is_valid_against_the_kubernetes_schema(kind):
    assert kubernetes_validate.validate(one(kind), KUBERNETES, strict=True) == KUBERNETES[:4]


@pytest.mark.fast
def test_the_kubernetes_schema_refuses_a_field_the_api_does_not_have():
    daemonset = one("DaemonSet")
    daemonset["spec"]["template"]["spec"]["hostPid"] = True  # hostPID, misspelt

    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, KUBERNETES, strict=True)


@pytest.mark.fast
def test_the_servicemonitor_is_valid_against_the_prometheus_operators_crd():
    jsonschema.validate(one("ServiceMonitor"), servicemonitor_schema())


@pytest.mark.fast
def test_the_crd_schema_refuses_a_malformed_servicemonitor():
    monitor = one("ServiceMonitor")
    monitor["spec"]["endpoints"][0]["interval"] = 15  # a duration is a string such as "15s"

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, servicemonitor_schema())


@pytest.mark.fast
def test_the_servicemonitor_scrapes_the_services_metrics_port_of_the_daemonsets_pods():
    service, monitor = one("Service"), one("ServiceMonitor")
    pod_labels = one("DaemonSet")["spec"]["template"]["metadata"]["labels"]

    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    [port] = service["spec"]["ports"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]] == ["metrics"]
    assert [p["containerPort"] for p in container()["ports"] if p["name"] == port["targetPort"]] == [DEFAULT_PORT]


@pytest.mark.fast
def test_the_daemonset_runs_gputop_export_with_options_gputop_takes():
    gputop = container()

    args = build_parser().parse_args(gputop["args"])

    assert args.command == "export"
    assert args.listen == f"0.0.0.0:{DEFAULT_PORT}"
    assert args.per_process and args.dcgm_labels


@pytest.mark.fast
def test_the_daemonset_is_ready_on_the_exporters_ready_path_and_bounded():
    gputop = container()

    assert gputop["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": "metrics"}
    assert {"cpu", "memory"} <= gputop["resources"]["requests"].keys()
    assert "memory" in gputop["resources"]["limits"]


@pytest.mark.fast
def test_the_daemonset_takes_from_the_node_only_what_it_states():
    pod = one("DaemonSet")["spec"]["template"]["spec"]
    gputop = container()

    assert pod["hostPID"] is True
    assert not {"hostNetwork", "hostIPC"} & pod.keys()
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert gputop["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert [m for m in gputop["volumeMounts"] if not m.get("readOnly")] == []
    assert "nvidia.com/gpu" not in gputop["resources"].get("limits", {})  # a monitor takes no GPU from the jobs
    env = {e["name"]: e for e in gputop["env"]}
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"


@pytest.mark.fast
def test_the_service_account_may_only_list_pods_as_docs_kubernetes_says():
    role, binding, account = one("ClusterRole"), one("ClusterRoleBinding"), one("ServiceAccount")
    docs = (ROOT / "docs" / "kubernetes.md").read_text()

    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert [s["name"] for s in binding["subjects"]] == [account["metadata"]["name"]]
    assert one("DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    assert 'verbs: ["list"]' in docs and f"name: {role['metadata']['name']}" in docs


@pytest.mark.fast
def test_the_image_definition_installs_gputop_with_pip_and_runs_it_unprivileged():
    lines = [line.split(maxsplit=1) for line in (KIT / "Containerfile").read_text().splitlines()]
    instructions = [(words[0], words[1] if len(words) > 1 else "") for words in lines if words and words[0] != "#"]

    runs = [arg for op, arg in instructions if op == "RUN"]
    assert any(arg.startswith("pip install") and "/src" in arg for arg in runs)
    [user] = [arg for op, arg in instructions if op == "USER"]
    assert not user.startswith(("0", "root"))
    assert ("EXPOSE", str(DEFAULT_PORT)) in instructions
    assert ("ENTRYPOINT", '["gputop"]') in instructions


@pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl is absent: install Debian's kubernetes-client (scripts/test does)"
)
def test_kubectl_renders_the_kustomize_base_into_the_namespace_it_names():
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(KIT)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]

    assert sorted(d["kind"] for d in docs) == sorted(d["kind"] for d in manifests())
    namespaced = [d for d in docs if not d["kind"].startswith("Cluster")]
    assert {d["metadata"]["namespace"] for d in namespaced} == {"monitoring"}
    [binding] = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"][0]["namespace"] == "monitoring"
    [daemonset] = [d for d in docs if d["kind"] == "DaemonSet"]
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == "gputop:latest"
    for doc in docs:
        if doc["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
