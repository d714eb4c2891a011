"""Plain helpers for integration tests (import as ``from khelpers import ...``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest


def fake_node(name: str, labels: dict | None = None, ready: bool = True) -> dict:
    """A Node that kwok manages (annotation ``kwok.x-k8s.io/node: fake``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})},
        },
        "spec": {"taints": []},
    }


def node_ready(node: dict | None) -> bool:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


OPENSHIFT_MACHINES = "/apis/machine.openshift.io/v1beta1/namespaces/{ns}/machines"


def capi_path(version: str, plural: str, namespace: str, name: str | None = None) -> str:
    path = f"/apis/cluster.x-k8s.io/{version}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def openshift_machine(name: str, hooks: dict | None = None, *, labels: dict | None = None, annotations: dict | None = None) -> dict:
    """An OpenShift Machine API Machine as the installer would create it (no provider behind it)."""
    machine: dict = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "labels": {"machine.openshift.io/cluster-api-cluster": "lm-test", **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": ["machine.machine.openshift.io"],
        },
        "spec": {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}},
    }
    if hooks:
        machine["spec"]["lifecycleHooks"] = hooks
    return machine


def capi_machine(
    name: str,
    version: str,
    *,
    cluster: str = "lm-test",
    node: str | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
    infrastructure: str | None = None,
    bootstrap: str | None = None,
    spec: dict | None = None,
) -> dict:
    """A Cluster API Machine of ``version`` (v1beta1 or v1beta2 field layout)."""
    if version == "v1beta1":
        infra_ref = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FakeMachine", "name": infrastructure or name}
        bootstrap_ref = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "FakeBootstrapConfig", "name": bootstrap or name}
    else:
        infra_ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": infrastructure or name}
        bootstrap_ref = {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": bootstrap or name}
    return {
        "apiVersion": f"cluster.x-k8s.io/{version}",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "labels": {"cluster.x-k8s.io/cluster-name": cluster, **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": ["machine.cluster.x-k8s.io"],
        },
        "spec": {"clusterName": cluster, "bootstrap": {"configRef": bootstrap_ref}, "infrastructureRef": infra_ref, **(spec or {})},
    }
