"""The out-of-service taint the user asks for, against the real API server and the real
kube-controller-manager (docs/stalls.md): on a Machine being deleted whose Node is not Ready, the
taint node.kubernetes.io/out-of-service goes on its Node with a Warning Event naming who asked,
and kube-controller-manager's pod garbage collector then removes the Pods stuck Terminating there and
its attach/detach controller detaches a volume still mounted there - while the preTerminate gate still
holds the Node. A Ready Node is never tainted; check mode and a task that does not ask taint nothing.

The last tests prove it whoever carries out the deletion: beside the real Cluster API manager (the Machine in the
management cluster, its Node in the workload one) and the real OpenShift machine controller, the controller drains
and holds the Machine at its preTerminate gate while machine_delete follows it; the taint goes on, the controller's
Pods stuck on the dead Node are removed, and a Node that dies only while the task follows is tainted in a later round."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import cluster as cluster_tool
import controllers
import pytest
import realctl
from conftest import read_audit_log, run_module_with
from khelpers import drained_status, stop_process, wait_for
from test_machine_drain import get_pod, machine_path, make_pods

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

TAINT_KEY = "node.kubernetes.io/out-of-service"
REASON = "INC-4711: the host lost power for good; confirmed by the datacenter team"
HOOK = ("keep-node", "test")
PRE_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
# The pod garbage collector looks every 20 s; a Pod it removes is gone within two of its looks.
GC_WAIT = 60
V1BETA2_ONLY = pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)


@contextlib.contextmanager
def controller_manager(kubeconfig: str | Path, log_dir: Path) -> Iterator[Path]:
    """kube-controller-manager's pod garbage collector, taint eviction and attach/detach controller against the
    control plane of ``kubeconfig`` (its components' kubeconfig when it has one), beside its own controller-manager
    (which runs none of them); stopped on leaving, pass or fail. Its log's path."""
    state_dir = Path(kubeconfig).parent
    components = state_dir / "components.kubeconfig"
    argv = [
        str(cluster_tool.build_tools() / "kube-controller-manager"),
        f"--kubeconfig={components if components.exists() else kubeconfig}",
        "--controllers=pod-garbage-collector-controller,taint-eviction-controller,persistentvolume-attach-detach-controller",
        "--leader-elect=false",
        "--secure-port=0",
        "--v=2",
    ]
    log_path = log_dir / "kube-controller-manager.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(2)
        assert proc.poll() is None, f"kube-controller-manager (pod GC) stopped at once:\n{log_path.read_text()[-3000:]}"
        yield log_path
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def pod_gc(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory):
    """The controllers of ``controller_manager`` against this module's control plane, stopped after its last test."""
    with controller_manager(kubeconfig, tmp_path_factory.mktemp("kube-controller-manager")) as log_path:
        yield log_path


def make_dead_node(kube: KubeApi, name: str, provider_id: str | None = None) -> None:
    """A Node no kubelet (kwok) manages whose Ready condition is Unknown, as when its instance is powered off."""
    body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}
    if provider_id:
        body["spec"] = {"providerID": provider_id}
    kube.create("/api/v1/nodes", body)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    kube.patch(f"/api/v1/nodes/{name}", {"status": {"conditions": [condition]}}, subresource_status=True)


@pytest.fixture
def dead_node(kube: KubeApi):
    """A Node no kubelet (kwok) manages whose Ready condition is Unknown, as when its instance is powered off."""
    name = f"lm-dead-{uuid.uuid4().hex[:6]}"
    make_dead_node(kube, name)
    yield name
    for pod in kube.list("/api/v1/pods", field_selector=f"spec.nodeName={name}"):
        meta = pod["metadata"]
        kube.request("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", query={"gracePeriodSeconds": 0})
    kube.delete(f"/api/v1/nodes/{name}")


def stuck_pods(kube: KubeApi, namespace: str, node: str) -> None:
    """db-0 being deleted with an hour's grace (no kubelet will ever confirm it), web-0 running."""
    make_pods(kube, namespace, node, {"db-0": {"grace": 3600}, "web-0": {"grace": 30}}, wait_ready=False)
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/db-0", query={"gracePeriodSeconds": 3600})


def taints(kube: KubeApi, node: str) -> list[dict]:
    return [t for t in (kube.get(f"/api/v1/nodes/{node}") or {}).get("spec", {}).get("taints") or [] if t["key"] == TAINT_KEY]


def out_of_service_events(kube: KubeApi, namespace: str, machine: str) -> list[dict]:
    events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={machine}")
    return [e for e in events if e["reason"] == "NodeOutOfService"]


def remove_hook(kube: KubeApi, flavour: str, namespace: str, machine: str) -> None:
    path = machine_path(flavour, namespace, machine)
    if flavour == "openshift":
        kube.patch(path, {"spec": {"lifecycleHooks": {"preTerminate": None}}})
    else:
        kube.patch(path, {"metadata": {"annotations": {f"{PRE_TERMINATE}/{HOOK[0]}": None}}})


def test_a_confirmed_dead_nodes_pods_are_released_while_the_node_is_held(
    *, flavour, kube, namespace, dead_node, make_machine, capi_cluster, run_module, pod_gc, audit_events
) -> None:
    node = dead_node
    capi_cluster(namespace)
    machine = make_machine(namespace, node=node, hooks={"preTerminate": [HOOK]})["metadata"]["name"]
    key = f"{namespace}/{machine}"
    stuck_pods(kube, namespace, node)
    out_of_service = [{"machine": key, "reason": REASON}]
    params = {"machines": [{"name": machine, "namespace": namespace}], "out_of_service": out_of_service, "wait_sleep": 1}
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=run_module("machine_delete", {**params, "drain_timeout": 300, "terminate_timeout": 300})))
    thread.start()
    try:
        wait_for(lambda: taints(kube, node), timeout=60, what="the out-of-service taint")
        [event] = wait_for(lambda: out_of_service_events(kube, namespace, machine), timeout=30, what="the NodeOutOfService Event")
        assert event["type"] == "Warning" and f"Tainted Node {node}" in event["message"] and REASON in event["message"]
        [taint] = taints(kube, node)
        assert (taint["value"], taint["effect"]) == ("nodeshutdown", "NoExecute")
        # The pod garbage collector force-deletes them: the one an hour from its grace's end, and the one the drain evicted.
        wait_for(lambda: get_pod(kube, namespace, "db-0") is None and get_pod(kube, namespace, "web-0") is None, timeout=GC_WAIT, what="the Pods gone")
        assert kube.get(f"/api/v1/nodes/{node}") is not None, "the Node stays while the preTerminate gate holds"
        deleted_by = {e["objectRef"]["name"]: e.get("userAgent", "") for e in audit_events(namespace=namespace, resource="pods", verb="delete")}
        assert all(deleted_by.get(pod, "").startswith("kube-controller-manager") for pod in ("db-0", "web-0")), deleted_by

        # Asked again (machine_terminate, which takes the same option): the taint is there, nothing changes.
        again = run_module("machine_terminate", {"machine": machine, "namespace": namespace, "out_of_service": out_of_service})
        assert again["out_of_service"]["state"] == "already tainted" and again["out_of_service"]["applied"] is False, again
        assert len(taints(kube, node)) == 1 and len(out_of_service_events(kube, namespace, machine)) == 1
    finally:
        remove_hook(kube, flavour, namespace, machine)
        thread.join(timeout=300)
    result = box["result"]
    assert not result.get("failed"), result.get("msg")
    [entry] = result["machines"]
    assert entry["status"] == ("awaiting_instance_termination" if flavour == "openshift" else "done"), entry
    done = entry["out_of_service"]
    assert (done["state"], done["applied"], done["dry_run"], done["node"], done["reason"]) == ("tainted", True, False, node, REASON)
    assert result["changed"] is True


@V1BETA2_ONLY
def test_check_mode_and_a_task_that_does_not_ask_taint_nothing(*, flavour, kube, namespace, dead_node, make_machine, capi_cluster, run_module, pod_gc) -> None:
    node = dead_node
    capi_cluster(namespace)
    machine = make_machine(namespace, node=node, hooks={"preTerminate": [HOOK]})["metadata"]["name"]
    stuck_pods(kube, namespace, node)
    machines = [{"name": machine, "namespace": namespace}]

    preview = run_module("machine_delete", {"machines": machines, "out_of_service": [{"machine": f"{namespace}/{machine}", "reason": REASON}]}, check=True)

    assert not preview.get("failed"), preview.get("msg")
    planned = preview["machines"][0]["out_of_service"]
    assert (planned["state"], planned["applied"], planned["dry_run"]) == ("tainted", True, True)
    assert taints(kube, node) == [] and out_of_service_events(kube, namespace, machine) == []
    assert not kube.get(machine_path(flavour, namespace, machine))["metadata"].get("deletionTimestamp")

    # Not asked: the drain waits on db-0 past a look of the pod garbage collector, and nothing is tainted.
    started = time.monotonic()
    result = run_module("machine_delete", {"machines": machines, "drain_timeout": 25, "wait_sleep": 1})
    assert time.monotonic() - started >= 25
    assert result["machines"][0]["status"] == "failed" and "out_of_service" not in result["machines"][0], result["machines"][0]
    assert taints(kube, node) == [] and out_of_service_events(kube, namespace, machine) == []
    assert get_pod(kube, namespace, "db-0") is not None, "nothing releases a Pod on a dead Node without the taint"


@V1BETA2_ONLY
def test_a_ready_node_is_never_tainted(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node(hooks={"preTerminate": [HOOK]})
    path = machine_path(flavour, namespace, machine)
    kube.delete(path)
    kube.patch(path, {"status": drained_status(flavour)}, subresource_status=True)
    out_of_service = [{"machine": f"{namespace}/{machine}", "reason": REASON}]

    result = run_module("machine_terminate", {"machine": machine, "namespace": namespace, "out_of_service": out_of_service})

    assert not result.get("failed"), result.get("msg")
    entry = result["out_of_service"]
    assert (entry["state"], entry["applied"]) == ("node ready", False)
    assert "evidently not gone" in entry["message"]
    assert taints(kube, node) == [] and out_of_service_events(kube, namespace, machine) == []
    remove_hook(kube, flavour, namespace, machine)


def test_an_entry_that_cannot_be_acted_on_is_refused_before_anything_is_touched(*, kube, namespace, run_module) -> None:
    machines = [{"name": "worker-1", "namespace": namespace}]
    for bad, said in (
        ({"machine": f"{namespace}/worker-2", "reason": REASON}, f"{namespace}/worker-2 is not a Machine of this task"),
        ({"machine": f"{namespace}/worker-1", "reason": " "}, "out_of_service[0].reason must say who confirmed"),
    ):
        result = run_module("machine_delete", {"machines": machines, "out_of_service": [bad]})
        assert result.get("failed") and said in result["msg"] and "nothing was changed" in result["msg"], result.get("msg")
    result = run_module("machine_delete", {"machines": machines, "out_of_service": [{"machine": f"{namespace}/worker-1", "reason": REASON, "node": "x"}]})
    assert result.get("failed") and "node" in result["msg"], result.get("msg")
    result = run_module(
        "machine_terminate", {"machine": "worker-1", "namespace": namespace, "out_of_service": [{"machine": f"{namespace}/other", "reason": REASON}]}
    )
    assert result.get("failed") and f"{namespace}/other is not a Machine of this task" in result["msg"], result.get("msg")


DRIVER = "lm.test.csi"


def attached_volume(kube: KubeApi, namespace: str, node: str) -> tuple[str, str]:
    """A CSI volume the attach/detach controller attached to ``node`` for Pod db-0 (its VolumeAttachment marked attached,
    as a CSI attacher would) and the Node reports mounted (status.volumesInUse, as its kubelet did before it died).
    (the VolumeAttachment's name, the PersistentVolume's)."""
    kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}}})
    handle = f"vol-{uuid.uuid4().hex[:6]}"
    pv = f"pv-{handle}"
    claim = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": pv, "storageClassName": ""}
    claims = f"/api/v1/namespaces/{namespace}/persistentvolumeclaims"
    uid = kube.create(claims, {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}, "spec": claim})["metadata"]["uid"]
    kube.patch(f"{claims}/data", {"status": {"phase": "Bound"}}, subresource_status=True)
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": DRIVER, "volumeHandle": handle},
        "claimRef": {"namespace": namespace, "name": "data", "uid": uid},
    }
    kube.create("/api/v1/persistentvolumes", {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv}, "spec": spec})
    kube.patch(f"/api/v1/persistentvolumes/{pv}", {"status": {"phase": "Bound"}}, subresource_status=True)
    time.sleep(1)  # the controller reads the claim and the volume from its caches when the Pod comes
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "db-0"},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 3600,
            "containers": [{"name": "db", "image": "db", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        },
    }
    kube.create(f"/api/v1/namespaces/{namespace}/pods", body)
    attachments = "/apis/storage.k8s.io/v1/volumeattachments"
    [attachment] = wait_for(
        lambda: [a for a in kube.list(attachments) if a["spec"]["nodeName"] == node], timeout=60, what="the attach/detach controller's VolumeAttachment"
    )
    name = attachment["metadata"]["name"]
    kube.patch(f"{attachments}/{name}", {"status": {"attached": True}}, subresource_status=True)
    kube.patch(f"/api/v1/nodes/{node}", {"status": {"volumesInUse": [f"kubernetes.io/csi/{DRIVER}^{handle}"]}}, subresource_status=True)
    wait_for(
        lambda: any(v["name"].endswith(handle) for v in kube.get(f"/api/v1/nodes/{node}")["status"].get("volumesAttached") or []),
        timeout=60,
        what="the volume reported attached",
    )
    kube.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/db-0", query={"gracePeriodSeconds": 3600})
    return name, pv


@V1BETA2_ONLY
def test_a_confirmed_dead_nodes_volume_is_detached(*, flavour, kube, namespace, dead_node, make_machine, capi_cluster, run_module, pod_gc) -> None:
    """Mounted on a Node that is not Ready, a volume its Pod no longer wants is detached only after the attach/detach
    controller's 6 minutes without the taint; with it, at once - while the preTerminate gate holds the Node."""
    node = dead_node
    capi_cluster(namespace)
    machine = make_machine(namespace, node=node, hooks={"preTerminate": [HOOK]})["metadata"]["name"]
    attachment, pv = attached_volume(kube, namespace, node)
    path = f"/apis/storage.k8s.io/v1/volumeattachments/{attachment}"
    # db-0 is being deleted, so its volume is no longer wanted there; mounted, it stays attached (for 6 minutes).
    time.sleep(5)
    assert kube.get(path) is not None, "a volume mounted on a Node without the taint is detached only after 6 minutes"
    params = {"machines": [{"name": machine, "namespace": namespace}], "wait_sleep": 1, "drain_timeout": 300, "terminate_timeout": 300}
    params["out_of_service"] = [{"machine": f"{namespace}/{machine}", "reason": REASON}]
    box: dict = {}
    thread = threading.Thread(target=lambda: box.update(result=run_module("machine_delete", params)))
    thread.start()
    try:
        wait_for(lambda: taints(kube, node), timeout=60, what="the out-of-service taint")
        wait_for(lambda: get_pod(kube, namespace, "db-0") is None, timeout=GC_WAIT, what="db-0 gone")
        wait_for(lambda: kube.get(path) is None, timeout=60, what="the VolumeAttachment gone")
        assert kube.get(f"/api/v1/nodes/{node}") is not None, "the Node stays while the preTerminate gate holds"
    finally:
        remove_hook(kube, flavour, namespace, machine)
        thread.join(timeout=300)
        kube.delete(path)
        kube.delete(f"/api/v1/persistentvolumes/{pv}")
    assert not box["result"].get("failed"), box["result"].get("msg")


# ---------------------------------------------------------------------------
# Beside the real Cluster API manager: it carries out the deletion, machine_delete follows it


def capi_worker_on_a_dead_node(kube: KubeApi, workload: KubeApi, workload_kubeconfig: Path, *, namespace: str, worker: str, apps: str) -> str:
    """Management side: the workload cluster's kubeconfig Secret, the Cluster, an active control-plane Machine and
    the worker Machine with a preTerminate hook. Workload side: the worker's Node, whose kubelet stopped posting (no
    kwok: Ready Unknown, as when its instance is powered off), with db-0 stuck Terminating and web-0 on it. Returns
    the worker's path once Cluster API has set its ``status.nodeRef``."""
    provider_id = f"fake://{namespace}/{worker}"
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{worker}"
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"
    realctl.create_namespace(kube, namespace)
    for body in controllers.capi_cluster_objects("real", namespace, controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)):
        realctl.create(kube, body)
    annotations = {f"{PRE_TERMINATE}/{HOOK[0]}": realctl.HOOK_OWNER}
    for body in controllers.capi_machine_objects(worker, namespace, "real", annotations=annotations, provider_id=provider_id):
        realctl.create(kube, body)
    for name in ("real-control-plane-0", worker):
        kube.patch(f"{fake_machines}/{name}", controllers.FAKE_MACHINE_PROVISIONED, subresource_status=True)
    make_dead_node(workload, worker, provider_id)
    realctl.create_namespace(workload, apps)
    stuck_pods(workload, apps, worker)
    wait_for(lambda: (((kube.get(path) or {}).get("status") or {}).get("nodeRef") or {}).get("name") == worker, timeout=120, what="status.nodeRef")
    return path


def node_writes(audit: Path, node: str, agent: str, since: str, *, refused: bool = False) -> list[str]:
    """The verbs of the writes a user agent holding ``agent`` sent to Node ``node`` from ``since`` on that the API
    server accepted (``refused``: those it refused, with their codes - a patch that lost a race with another writer
    is answered 409 and changes nothing)."""
    found = []
    for event in read_audit_log(audit, resource="nodes"):
        if (
            event["objectRef"].get("name") != node
            or agent not in event.get("userAgent", "")
            or event["verb"] in ("get", "list", "watch")
            or event.get("requestReceivedTimestamp", "") < since
        ):
            continue
        code = (event.get("responseStatus") or {}).get("code") or 0
        if (code >= 400) != refused:
            continue
        verb = event["verb"] + (f"/{event['objectRef']['subresource']}" if event["objectRef"].get("subresource") else "")
        found.append(f"{verb} {code}" if refused else verb)
    return found


class Followed:
    """One Machine a real controller deletes while machine_delete, asked to taint its dead Node, follows it: the
    Machines' side (``kube``), the Node's side (``nodes``, its API server's ``audit`` log and ``kubeconfig``), the
    controller's user agent and its own word that it holds the Machine at the preTerminate gate."""

    def __init__(self, *, kube: KubeApi, kubeconfig: Path, nodes: KubeApi, nodes_kubeconfig: Path, agent: str, namespace: str, worker: str, path: str):
        self.kube, self.kubeconfig, self.nodes, self.nodes_kubeconfig = kube, kubeconfig, nodes, nodes_kubeconfig
        self.agent, self.namespace, self.worker, self.path = agent, namespace, worker, path
        self.audit = nodes_kubeconfig.parent / "audit.log"

    def held(self) -> bool:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


class CapiFollowed(Followed):
    def held(self) -> bool:
        return realctl.v1beta2_condition(self.kube.get(self.path), "Deleting").get("reason") == "WaitingForPreTerminateHook"

    def release(self) -> None:
        self.kube.patch(self.path, {"metadata": {"annotations": {f"{PRE_TERMINATE}/{HOOK[0]}": None}}})


class MapiFollowed(Followed):
    def held(self) -> bool:
        return realctl.v1beta2_condition(self.kube.get(self.path), "Terminable").get("status") == "False"

    def release(self) -> None:
        self.kube.patch(self.path, {"spec": {"lifecycleHooks": {"preTerminate": None}}})


def taint_while_followed(world: Followed, apps: str, log_dir: Path) -> str:
    """machine_delete (machine_controller auto) with out_of_service follows the controller, which drains the dead
    Node (giving up on its Pods after a second) and holds the Machine at its preTerminate gate; the taint goes on the
    Node, the Event on the Machine, kube-controller-manager removes the Pods stuck there while the gate holds; once
    the hook is removed the controller deletes the Node and the Machine. Checks it all; the figures."""
    started = time.monotonic()
    out_of_service = [{"machine": f"{world.namespace}/{world.worker}", "reason": REASON}]
    params = {"machines": [{"name": world.worker, "namespace": world.namespace}], "out_of_service": out_of_service}
    params.update(machine_controller="auto", wait_sleep=1, drain_timeout=240, terminate_timeout=240)
    since = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    box: dict = {}
    node_path = f"/api/v1/nodes/{world.worker}"
    with controller_manager(world.nodes_kubeconfig, log_dir):
        thread = threading.Thread(target=lambda: box.update(result=run_module_with(str(world.kubeconfig), "machine_delete", params)))
        thread.start()
        try:
            wait_for(lambda: taints(world.nodes, world.worker), timeout=60, what="the out-of-service taint on the Node")
            tainted = time.monotonic()
            [event] = wait_for(lambda: out_of_service_events(world.kube, world.namespace, world.worker), timeout=30, what="the NodeOutOfService Event")
            assert event["type"] == "Warning" and f"Tainted Node {world.worker}" in event["message"] and REASON in event["message"], event
            [taint] = taints(world.nodes, world.worker)
            assert (taint["value"], taint["effect"]) == ("nodeshutdown", "NoExecute")
            # The controller itself holds the Machine at the preTerminate gate, its drain behind it.
            wait_for(world.held, timeout=60, what="the controller at the preTerminate gate")
            wait_for(
                lambda: get_pod(world.nodes, apps, "db-0") is None and get_pod(world.nodes, apps, "web-0") is None,
                timeout=GC_WAIT,
                what="the Pods stuck Terminating gone",
            )
            released = time.monotonic()
            assert world.nodes.get(node_path) is not None and world.held(), "the Node stays while the preTerminate gate holds"
            pod_deletions = read_audit_log(world.audit, namespace=apps, resource="pods", verb="delete")
            deleted_by = {e["objectRef"]["name"]: e.get("userAgent", "") for e in pod_deletions}
            assert all(deleted_by.get(pod, "").startswith("kube-controller-manager") for pod in ("db-0", "web-0")), deleted_by
        finally:
            world.release()
            thread.join(timeout=300)
    finished = time.monotonic()
    result = box["result"]
    assert not result.get("failed"), json.dumps(result, indent=1)
    [entry] = result["machines"]
    assert (entry["status"], entry["carried_out_by"]) == ("done", "controller"), entry
    assert entry["message"].startswith("deleted by its controller"), entry
    done = entry["out_of_service"]
    assert (done["state"], done["applied"], done["dry_run"], done["node"], done["reason"]) == ("tainted", True, False, world.worker, REASON), done
    assert world.kube.get(world.path) is None and world.nodes.get(node_path) is None
    # The collection's only write on the Node is the taint; the controller cordoned and deleted it.
    ours = node_writes(world.audit, world.worker, "lifecycle.machine", since)
    assert ours == ["patch"], ours
    # A taint patch the controller's cordon beat to the Node is refused with a 409 and sent again on the Node as read.
    lost = node_writes(world.audit, world.worker, "lifecycle.machine", since, refused=True)
    assert set(lost) <= {"patch 409"}, lost
    theirs = node_writes(world.audit, world.worker, world.agent, since)
    assert "patch" in theirs and "delete" in theirs, theirs
    return (
        f"taint on {tainted - started:.1f} s after the task started; the Pods gone {released - tainted:.1f} s later;"
        f" hook removed to done {finished - released:.1f} s"
    )


@pytest.mark.real_controllers
@pytest.mark.real_controllers_subset
@pytest.mark.slow
def test_the_taint_while_the_real_cluster_api_controller_carries_out_the_deletion(capi_plane: dict, tmp_path: Path) -> None:
    """Beside the real Cluster API manager, the Machine in the management cluster, its Node in the workload one."""
    started = time.monotonic()
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube, workload = api_from_kubeconfig(str(management_kubeconfig)), api_from_kubeconfig(str(workload_kubeconfig))
    namespace, worker, apps = "oos-capi", "worker-0", "apps"
    path = capi_worker_on_a_dead_node(kube, workload, workload_kubeconfig, namespace=namespace, worker=worker, apps=apps)
    world = CapiFollowed(
        kube=kube,
        kubeconfig=management_kubeconfig,
        nodes=workload,
        nodes_kubeconfig=workload_kubeconfig,
        agent="cluster-api-controller-manager",
        namespace=namespace,
        worker=worker,
        path=path,
    )
    figures = taint_while_followed(world, apps, tmp_path)
    print(f"Cluster API carried out the deletion, followed: {figures}; {time.monotonic() - started:.1f} s in all")


@pytest.mark.real_controllers
@pytest.mark.slow
def test_the_taint_while_the_real_openshift_controller_carries_out_the_deletion(mapi_plane: dict, tmp_path: Path) -> None:
    """Beside the real OpenShift machine controller (and its nodelink controller), Machines and Nodes in one cluster."""
    started = time.monotonic()
    kubeconfig = Path(mapi_plane["state_dir"]) / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "oos-mapi", "worker-0"
    path = f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machines/{worker}"
    realctl.create_namespace(kube, namespace)
    realctl.create(kube, controllers.mapi_machine(worker, namespace, hooks={"preTerminate": [{"name": HOOK[0], "owner": realctl.HOOK_OWNER}]}))
    provider_id = wait_for(lambda: ((kube.get(path) or {}).get("spec") or {}).get("providerID"), timeout=60, what="spec.providerID")
    make_dead_node(kube, worker, provider_id)
    stuck_pods(kube, namespace, worker)
    wait_for(lambda: (((kube.get(path) or {}).get("status") or {}).get("nodeRef") or {}).get("name") == worker, timeout=90, what="status.nodeRef")
    world = MapiFollowed(
        kube=kube, kubeconfig=kubeconfig, nodes=kube, nodes_kubeconfig=kubeconfig, agent="mapi-controller", namespace=namespace, worker=worker, path=path
    )
    figures = taint_while_followed(world, namespace, tmp_path)
    print(f"OpenShift's machine controller carried out the deletion, followed: {figures}; {time.monotonic() - started:.1f} s in all")


def power_off(kube: KubeApi, node: str) -> None:
    """The Node's instance goes down for good: kwok (its kubelet) stops managing it and its Ready condition turns
    Unknown, as kube-controller-manager's node lifecycle controller would write it."""
    kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    kube.patch(f"/api/v1/nodes/{node}", {"status": {"conditions": [condition]}}, subresource_status=True)


def agent_daemonset(kube: KubeApi, namespace: str, node: str) -> str:
    """A DaemonSet's Pod running on ``node`` (a drain leaves it there); its name."""
    labels = {"app": "agent"}
    spec = {
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "agent", "image": "agent:1"}], "terminationGracePeriodSeconds": 30}},
    }
    body = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": namespace}, "spec": spec}
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", body)

    def running() -> str:
        pods = kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector="app=agent", field_selector=f"spec.nodeName={node}")
        return next((p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Running"), "")

    return wait_for(running, timeout=60, what="the DaemonSet's Pod running")


@pytest.mark.real_controllers
@pytest.mark.slow
def test_a_node_that_dies_while_the_real_controller_holds_the_machine_is_tainted_in_a_later_round(capi_plane: dict, tmp_path: Path) -> None:
    """The Node is Ready when machine_delete starts following Cluster API's deletion (progress rounds): it is not
    tainted. Its instance dies while the preTerminate hook holds the Machine, leaving the DaemonSet's Pod the drain
    left there: a later round taints it, and the Pod is released."""
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube, workload = api_from_kubeconfig(str(management_kubeconfig)), api_from_kubeconfig(str(workload_kubeconfig))
    namespace, worker, apps = "oos-capi-later", "worker-0", "apps"
    path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{worker}"
    realctl.capi_worker_with_hooks(
        kube, workload, workload_kubeconfig, namespace=namespace, cluster="real", worker=worker, hooks={"preTerminate": HOOK[0]}, pod_namespace=apps
    )
    agent = agent_daemonset(workload, apps, worker)
    params = {"machines": [{"name": worker, "namespace": namespace}], "out_of_service": [{"machine": f"{namespace}/{worker}", "reason": REASON}]}
    params.update(machine_controller="live", wait_sleep=1, drain_timeout=240, terminate_timeout=240, progress_interval=3)
    box: dict = {}

    with controller_manager(workload_kubeconfig, tmp_path):
        thread = threading.Thread(target=lambda: box.update(result=run_module_with(str(management_kubeconfig), "machine_delete", params)))
        thread.start()
        try:
            wait_for(
                lambda: realctl.v1beta2_condition(kube.get(path), "Deleting").get("reason") == "WaitingForPreTerminateHook",
                timeout=90,
                what="Deleting reason WaitingForPreTerminateHook",
            )
            assert get_pod(workload, apps, "app-0") is None, "the controller drained the Node"
            time.sleep(7)  # two rounds and more on the Ready Node
            assert taints(workload, worker) == [] and out_of_service_events(kube, namespace, worker) == [], "a Ready Node is never tainted"
            died = time.monotonic()
            power_off(workload, worker)
            wait_for(lambda: taints(workload, worker), timeout=30, what="the out-of-service taint in a later round")
            tainted = time.monotonic()
            wait_for(lambda: out_of_service_events(kube, namespace, worker), timeout=30, what="the NodeOutOfService Event")
            wait_for(lambda: get_pod(workload, apps, agent) is None, timeout=GC_WAIT, what="the DaemonSet's Pod gone")
            released = time.monotonic()
            assert workload.get(f"/api/v1/nodes/{worker}") is not None, "the Node stays while the preTerminate gate holds"
        finally:
            kube.patch(path, {"metadata": {"annotations": {f"{PRE_TERMINATE}/{HOOK[0]}": None}}})
            thread.join(timeout=300)
    result = box["result"]
    assert not result.get("failed"), json.dumps(result, indent=1)
    [entry] = result["machines"]
    assert (entry["status"], entry["carried_out_by"], entry["changed"]) == ("done", "controller", True), entry
    assert result["rounds"] > 3, result["rounds"]
    # Tainted once: one Event, and the task's entry keeps the round that put the taint on (later rounds found it on).
    assert len(out_of_service_events(kube, namespace, worker)) == 1
    assert (entry["out_of_service"]["node"], entry["out_of_service"]["state"], entry["out_of_service"]["applied"]) == (worker, "tainted", True), entry
    print(f"died to tainted {tainted - died:.1f} s; to the DaemonSet's Pod gone {released - died:.1f} s; {result.get('rounds')} rounds")
