"""The out-of-service taint the user asks for, against the real API server and the real
kube-controller-manager (docs/stalls.md): on a Machine being deleted whose Node is not Ready, the
taint node.kubernetes.io/out-of-service goes on its Node with a Warning Event naming who asked,
and kube-controller-manager's pod garbage collector then removes the Pods stuck Terminating there and
its attach/detach controller detaches a volume still mounted there - while the preTerminate gate still
holds the Node. A Ready Node is never tainted; check mode and a task that does not ask taint nothing."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from pathlib import Path

import cluster as cluster_tool
import pytest
from khelpers import drained_status, stop_process, wait_for
from test_machine_drain import get_pod, machine_path, make_pods

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

TAINT_KEY = "node.kubernetes.io/out-of-service"
REASON = "INC-4711: the host lost power for good; confirmed by the datacenter team"
HOOK = ("keep-node", "test")
PRE_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
# The pod garbage collector looks every 20 s; a Pod it removes is gone within two of its looks.
GC_WAIT = 60
V1BETA2_ONLY = pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)


@pytest.fixture(scope="module")
def pod_gc(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory):
    """kube-controller-manager's pod garbage collector, taint eviction and attach/detach controller, started for this
    module beside the control plane's own controller-manager (which runs none of them), stopped after its last test,
    pass or fail."""
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
    log_path = tmp_path_factory.mktemp("kube-controller-manager") / "kube-controller-manager.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(2)
        assert proc.poll() is None, f"kube-controller-manager (pod GC) stopped at once:\n{log_path.read_text()[-3000:]}"
        yield log_path
    finally:
        stop_process(proc)


@pytest.fixture
def dead_node(kube: KubeApi):
    """A Node no kubelet (kwok) manages whose Ready condition is Unknown, as when its instance is powered off."""
    name = f"lm-dead-{uuid.uuid4().hex[:6]}"
    kube.create("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
    condition.update(lastHeartbeatTime=stamp, lastTransitionTime=stamp)
    kube.patch(f"/api/v1/nodes/{name}", {"status": {"conditions": [condition]}}, subresource_status=True)
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
