"""Machines of both flavours in the in-memory stand-in (``fake_kube.FakeKube``),
for the unit tests of the runners that choose and write Machines."""

from __future__ import annotations

from fake_kube import FakeKube

OPENSHIFT = "machine.openshift.io/v1beta1"
CAPI = "cluster.x-k8s.io/v1beta2"
OPENSHIFT_NS = "openshift-machine-api"
CAPI_NS = "ns"


def cluster() -> FakeKube:
    """A cluster that serves Machines of both flavours."""
    fake = FakeKube()
    fake.discovery.serve(OPENSHIFT)
    fake.discovery.serve(CAPI)
    return fake


def machine_path(name: str, api_version: str = OPENSHIFT, namespace: str = OPENSHIFT_NS) -> str:
    return f"/apis/{api_version}/namespaces/{namespace}/machines/{name}"


def put_openshift(fake: FakeKube, name: str = "m-1", *, hooks: dict | None = None, labels: dict | None = None, deleting: bool = False) -> dict:
    """An OpenShift Machine; ``hooks`` maps a point to ``[(name, owner), ...]``."""
    meta: dict = {"name": name, "namespace": OPENSHIFT_NS, "labels": labels or {}}
    if deleting:
        meta["finalizers"] = ["machine.machine.openshift.io"]
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    lifecycle = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in (hooks or {}).items()}
    status = {"phase": "Running", "nodeRef": {"kind": "Node", "name": f"{name}-node"}, "conditions": []}
    body = {"apiVersion": OPENSHIFT, "kind": "Machine", "metadata": meta, "spec": {"lifecycleHooks": lifecycle}, "status": status}
    return fake.put(machine_path(name), body)


def put_capi(fake: FakeKube, name: str = "m-2", *, annotations: dict | None = None, labels: dict | None = None, deleting: bool = False) -> dict:
    """A Cluster API (v1beta2) Machine of Cluster ``c`` in namespace ``ns``."""
    meta: dict = {"name": name, "namespace": CAPI_NS, "labels": {"cluster.x-k8s.io/cluster-name": "c", **(labels or {})}, "annotations": annotations or {}}
    if deleting:
        meta["finalizers"] = ["machine.cluster.x-k8s.io"]
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body = {"apiVersion": CAPI, "kind": "Machine", "metadata": meta, "spec": {"clusterName": "c"}, "status": {"conditions": []}}
    return fake.put(machine_path(name, CAPI, CAPI_NS), body)


# Machine bodies as a reader of Machines gets them (no API: for the pure logic's tests).


def openshift(hooks: dict | None = None, conditions: list | None = None, deleting: bool = False) -> dict:
    meta = {"name": "m-1", "namespace": "openshift-machine-api", "resourceVersion": "42", "labels": {"role": "worker"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        meta["finalizers"] = ["machine.machine.openshift.io"]
    lifecycle = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in (hooks or {}).items()}
    status = {"phase": "Running", "nodeRef": {"kind": "Node", "name": "worker-1"}, "conditions": conditions or []}
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta, "spec": {"lifecycleHooks": lifecycle}, "status": status}


def capi(annotations: dict | None = None, conditions: list | None = None, deleting: bool = False) -> dict:
    meta = {"name": "m-2", "namespace": "ns", "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {
        "clusterName": "prod",
        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "m-2-infra"},
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m-2-boot"}},
    }
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": meta, "spec": spec, "status": {"conditions": conditions or []}}
