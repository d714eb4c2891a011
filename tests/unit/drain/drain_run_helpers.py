"""Objects and scripted behaviour shared by the test_drain_run_* unit tests:
a Node with Pods, Machines of both flavours, and Pods that go away."""

from __future__ import annotations

import datetime as dt

from fake_kube import FakeKube

NS = "shop"
NODE = "n1"
NODE_PATH = f"/api/v1/nodes/{NODE}"
PODS = "/api/v1/pods"
PODS_WATCH = ("GET", f"{PODS}?watch")
OPENSHIFT_V = "machine.openshift.io/v1beta1"
CAPI_V2 = "cluster.x-k8s.io/v1beta2"
CAPI_PRE_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
DELETED_AT = "2026-01-01T00:00:00Z"
PDB = "Cannot evict pod as it would violate the pod's disruption budget."
PDB_CAUSE = "The disruption budget web needs 2 healthy pods and has 2 currently"
# Evicts web-0 and web-1 by default, db-0 (order 10) after them.
LATE_DB = {"name": "late-db", "drain": {"behavior": "Drain", "order": 10}, "pods": [{"selector": {"matchLabels": {"app": "db"}}}]}


def pod_path(name: str, namespace: str = NS) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def machine_path(name: str = "m1", api_version: str = OPENSHIFT_V, namespace: str = NS) -> str:
    return f"/apis/{api_version}/namespaces/{namespace}/machines/{name}"


def pdb_refusal() -> object:
    """What the API server answers an eviction a PodDisruptionBudget refuses."""
    return FakeKube.error(429, PDB, details={"causes": [{"reason": "DisruptionBudget", "message": PDB_CAUSE}]})


def add_node(fake: FakeKube, name: str = NODE, *, unschedulable: bool = False) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    if unschedulable:
        node["spec"] = {"unschedulable": True}
    fake.put(f"/api/v1/nodes/{name}", node)


def add_pod(fake: FakeKube, name: str, *, app: str = "web", node: str = NODE, namespace: str = NS) -> None:
    fake.put(
        pod_path(name, namespace),
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"app": app},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": app, "controller": True}],
            },
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )


def shop(fake: FakeKube, *pods: tuple[str, str]) -> None:
    """The Node n1 with the Namespace and Pods ``(name, app)`` of the shop."""
    fake.put(f"/api/v1/namespaces/{NS}", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"kubernetes.io/metadata.name": NS}}})
    add_node(fake)
    for name, app in pods or (("web-0", "web"), ("web-1", "web"), ("db-0", "db")):
        add_pod(fake, name, app=app)


def openshift_machine(
    fake: FakeKube, *, deleting: bool = True, hooks: list[tuple[str, str]] = (), annotations: dict | None = None, node: str | None = NODE
) -> dict:
    metadata: dict = {"name": "m1", "namespace": NS, "finalizers": ["machine.machine.openshift.io"], "annotations": dict(annotations or {})}
    if deleting:
        metadata["deletionTimestamp"] = DELETED_AT
    machine = {"apiVersion": OPENSHIFT_V, "kind": "Machine", "metadata": metadata, "spec": {}, "status": {}}
    if hooks:
        machine["spec"]["lifecycleHooks"] = {"preDrain": [{"name": name, "owner": owner} for name, owner in hooks]}
    if node:
        machine["status"]["nodeRef"] = {"kind": "Node", "name": node}
    fake.discovery.serve(OPENSHIFT_V)  # the cluster serves the Machine API asked for
    return fake.put(machine_path(), machine)


INFRA_V1 = "infrastructure.cluster.x-k8s.io/v1beta1"


def capi_machine(
    fake: FakeKube,
    *,
    deleting: bool = True,
    drain_timeout: int | None = None,
    drain_started: str | None = None,
    cluster_deleting: bool = False,
    control_plane_machines: int = 1,
    hooks: list[str] = (),
    infrastructure: str = "present",
) -> dict:
    """A v1beta2 worker Machine of Cluster c1, with ``control_plane_machines`` active control-plane Machines,
    and its InfraMachine ``present``, ``deleting`` or ``gone``."""
    fake.discovery.serve(INFRA_V1, {"name": "fakemachines", "kind": "FakeMachine", "namespaced": True})
    if infrastructure != "gone":
        infra_meta = {"name": "m1", "namespace": NS, **({"deletionTimestamp": DELETED_AT} if infrastructure == "deleting" else {})}
        fake.put(f"/apis/{INFRA_V1}/namespaces/{NS}/fakemachines/m1", {"apiVersion": INFRA_V1, "kind": "FakeMachine", "metadata": infra_meta, "spec": {}})
    cluster_meta = {"name": "c1", "namespace": NS, **({"deletionTimestamp": DELETED_AT} if cluster_deleting else {})}
    fake.put(f"/apis/{CAPI_V2}/namespaces/{NS}/clusters/c1", {"apiVersion": CAPI_V2, "kind": "Cluster", "metadata": cluster_meta})
    for index in range(control_plane_machines):
        meta = {"name": f"cp-{index}", "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/control-plane": ""}}
        fake.put(machine_path(f"cp-{index}", CAPI_V2), {"apiVersion": CAPI_V2, "kind": "Machine", "metadata": meta})
    metadata: dict = {
        "name": "m1",
        "namespace": NS,
        "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
        "finalizers": ["machine.cluster.x-k8s.io"],
        "annotations": {f"{CAPI_PRE_DRAIN}/{name}": "owner" for name in hooks},
    }
    if deleting:
        metadata["deletionTimestamp"] = DELETED_AT
    spec: dict = {"clusterName": "c1", "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": "m1"}}
    if drain_timeout is not None:
        spec["deletion"] = {"nodeDrainTimeoutSeconds": drain_timeout}
    status: dict = {"nodeRef": {"name": NODE}}
    if drain_started is not None:
        status["deletion"] = {"nodeDrainStartTime": drain_started}
    return fake.put(machine_path(api_version=CAPI_V2), {"apiVersion": CAPI_V2, "kind": "Machine", "metadata": metadata, "spec": spec, "status": status})


def finish_terminating_pods(fake: FakeKube) -> list[str]:
    """Every terminating Pod goes away (its kubelet confirmed); their paths."""
    gone = [path for path, obj in fake.objects.items() if "/pods/" in path and obj["metadata"].get("deletionTimestamp")]
    for path in gone:
        fake.finish(path)
    return gone


def pods_go_away_while_watched(fake: FakeKube) -> None:
    """Evicted Pods go away as soon as the drain starts watching the Node's Pods."""

    def on_request(method: str, path: str) -> None:
        if (method, path) == PODS_WATCH:
            finish_terminating_pods(fake)

    fake.on_request = on_request


def iso(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def writes(fake: FakeKube) -> list[tuple[str, str]]:
    """The requests that would change something (dry runs included: FakeKube records them as sent)."""
    return [(method, path) for method, path in fake.requests if method in ("POST", "PATCH", "DELETE")]
