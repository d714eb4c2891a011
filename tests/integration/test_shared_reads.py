"""What the Machines of one machine_delete task share of a whole cluster (plugins/module_utils/_k8s/cache.py:
the Namespaces, PodDisruptionBudgets, VolumeAttachments, PersistentVolumes and MachineDrainRules, listed once
and watched; the Nodes, InfraMachines and bootstrap configs each Machine's termination follows, the InfraMachine its drain too), against the real
API server: a budget two Machines' Pods share is never let go further than the eviction API allows, a change the
watch delivers (a VolumeAttachment going, an InfraMachine's finalizer removed) ends a wait at once, and a Node held
by a finalizer counts as being deleted by the answer to its DELETE.
The request counts are measured by benchmarks/delete_machines.py."""

from __future__ import annotations

import time

import pytest
from khelpers import FAKE_MACHINES, pod_is_ready, put_fake_object, wait_for
from test_machine_drain import GRACE, create_pdb, evictions, in_background

V1BETA2 = pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
VOLUME_ATTACHMENTS = "/apis/storage.k8s.io/v1/volumeattachments"


def spread_deployment(name: str, replicas: int, pool: dict) -> dict:
    """``replicas`` Pods labelled ``app: <name>`` on the pool's Nodes, never two on one Node."""
    labels = {"app": name}
    apart = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}
    container = {"name": name, "image": f"registry.invalid/{name}:1"}
    template = {
        "metadata": {"labels": labels},
        "spec": {"terminationGracePeriodSeconds": GRACE, "nodeSelector": pool, "affinity": affinity, "containers": [container]},
    }
    spec = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": spec}


def ready_on(kube, namespace: str) -> dict[str, str]:
    """Node -> the Ready web Pod on it."""
    pods = kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector="app=web")
    return {pod["spec"].get("nodeName"): pod["metadata"]["name"] for pod in pods if pod_is_ready(pod)}


@V1BETA2
def test_two_machines_under_one_budget_go_one_at_a_time_as_the_eviction_api_allows(
    *, flavour, kube, namespace, make_node, make_machine, capi_cluster, run_module, audit_events
) -> None:
    capi_cluster(namespace)
    pool = {"lm-pool": namespace}
    nodes = [make_node(labels=pool) for _index in range(3)]
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", spread_deployment("web", 3, pool))
    placed = wait_for(lambda: (found := ready_on(kube, namespace)) and len(found) == 3 and found, what="a web Pod Ready on each of 3 Nodes")
    make_node(labels=pool)  # room for one replacement
    # Three healthy, two needed: one disruption at a time, for both Machines' Pods together.
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=2, healthy=3)
    machines = [make_machine(namespace, node=node)["metadata"]["name"] for node in nodes[:2]]

    result = run_module(
        "machine_delete",
        {"machines": [{"name": name, "namespace": namespace} for name in machines], "machine_controller": "absent", "drain_timeout": 180, "wait_sleep": 1},
    )

    assert not result.get("failed"), result.get("msg")
    assert result["completed"] and [m["status"] for m in result["machines"]] == ["done", "done"], result["machines"]
    codes = evictions(audit_events, namespace)
    # Each Machine's Pod was evicted once; whatever else was asked, the API server refused (429).
    allowed = sorted(name for name, answers in codes.items() for code in answers if code == 201)
    assert allowed == sorted(placed[node] for node in nodes[:2]), codes
    assert all(code in (201, 429) for answers in codes.values() for code in answers), codes


@V1BETA2
def test_a_volume_attachment_going_ends_the_volume_wait_as_the_watch_delivers_it(*, flavour, kube, namespace, machine_node, run_module) -> None:
    machine, node = machine_node()
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": f"va-{node}"},
        "spec": {"attacher": "csi.example.com", "nodeName": node, "source": {"persistentVolumeName": f"pv-{node}"}},
    }
    kube.create(VOLUME_ATTACHMENTS, attachment)
    try:
        kube.request("PATCH", f"{VOLUME_ATTACHMENTS}/va-{node}/status", body={"status": {"attached": True}}, content_type="application/merge-patch+json")
        params = {"machines": [{"name": machine, "namespace": namespace}], "machine_controller": "absent", "terminate_timeout": 120, "wait_sleep": 1}
        thread, box = in_background(run_module, "machine_delete", params)
        path = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{machine}"
        wait_for(lambda: ((kube.get(path) or {}).get("status") or {}).get("deletion", {}).get("waitForNodeVolumeDetachStartTime"), what="the volume wait")
        assert kube.get(f"/api/v1/nodes/{node}") is not None, "the Node stays while its volume is attached"
        kube.delete(f"{VOLUME_ATTACHMENTS}/va-{node}")
        # The wait looks again every wait_sleep (1 s), its view fed by the watch: well within the 120 s.
        deleted_soon_after(time.monotonic(), thread, box, kube, node)
    finally:
        kube.delete(f"{VOLUME_ATTACHMENTS}/va-{node}")


def deleted_soon_after(since: float, thread, box: dict, kube, node: str) -> None:
    """The background machine_delete completed, its Node gone, within 30 s of ``since`` (what held it went)."""
    thread.join(timeout=120)
    assert not thread.is_alive()
    result = box["result"]
    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    assert kube.get(f"/api/v1/nodes/{node}") is None
    assert time.monotonic() - since < 30


HOLD = "example.com/hold"


@V1BETA2
def test_an_infra_machine_held_by_a_finalizer_holds_the_node_until_the_watch_says_it_went(
    *, flavour, kube, namespace, machine_node, run_module, audit_events
) -> None:
    """The termination follows the InfraMachine through the task's shared feed (no GET per look, no watch
    of its own): its deletion is waited for, the Node stays meanwhile, and the wait ends as the feed hears it went."""
    machine, node = machine_node()
    infrastructure = put_fake_object(kube, FAKE_MACHINES.format(ns=namespace), machine, finalizers=(HOLD,))
    params = {"machines": [{"name": machine, "namespace": namespace}], "machine_controller": "absent", "terminate_timeout": 120, "wait_sleep": 1}
    thread, box = in_background(run_module, "machine_delete", params)
    try:
        wait_for(lambda: ((kube.get(infrastructure) or {}).get("metadata") or {}).get("deletionTimestamp"), what="the InfraMachine's deletion")
        time.sleep(2)
        assert kube.get(f"/api/v1/nodes/{node}") is not None, "the Node stays while its InfraMachine is being deleted"
        assert thread.is_alive(), "the deletion waits for the InfraMachine"
    finally:
        kube.patch(infrastructure, {"metadata": {"finalizers": None}})
    deleted_soon_after(time.monotonic(), thread, box, kube, node)
    # The InfraMachine was deleted once, and the Node only after it went.
    deletes = [e for e in audit_events(namespace=namespace, resource="fakemachines", verb="delete") if e["objectRef"].get("name") == machine]
    assert len([e for e in deletes if (e.get("userAgent") or "").startswith("lifecycle.machine")]) == 1
    node_deleted = [e for e in audit_events(resource="nodes", verb="delete") if e["objectRef"].get("name") == node]
    assert node_deleted and all(e["requestReceivedTimestamp"] >= deletes[-1]["requestReceivedTimestamp"] for e in node_deleted)


@V1BETA2
def test_a_node_held_by_a_finalizer_is_being_deleted_by_the_answer_to_its_deletion(*, flavour, kube, namespace, machine_node, run_module) -> None:
    """The answer to the Node's DELETE (the Node, held by its finalizer) says it is being deleted: the Machine is
    released as before, when a GET after the DELETE said so."""
    machine, node = machine_node()
    path = f"/api/v1/nodes/{node}"
    kube.patch(path, {"metadata": {"finalizers": [HOLD]}})
    try:
        params = {"machines": [{"name": machine, "namespace": namespace}], "machine_controller": "absent", "terminate_timeout": 60, "wait_sleep": 1}
        result = run_module("machine_delete", params)
        assert not result.get("failed"), result.get("msg")
        assert result["completed"], result["progress"]
        held = kube.get(path)
        assert held is not None and held["metadata"].get("deletionTimestamp")
        assert kube.get(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines/{machine}") is None
    finally:
        kube.patch(path, {"metadata": {"finalizers": None}})


@V1BETA2
def test_an_infra_machine_being_deleted_skips_the_drain_by_the_shared_feeds_word(*, flavour, kube, namespace, machine_node, run_module) -> None:
    """The drain looks at the InfraMachine before each pass through the task's shared feed of its kind (as the
    termination does; no GET of its own): one being deleted (held by a finalizer) skips the drain as before."""
    machine, _node = machine_node()
    infrastructure = put_fake_object(kube, FAKE_MACHINES.format(ns=namespace), machine, finalizers=(HOLD,))
    kube.delete(infrastructure)
    try:
        params = {"machines": [{"name": machine, "namespace": namespace}], "machine_controller": "absent", "terminate_timeout": 5, "wait_sleep": 1}
        result = run_module("machine_delete", params)
        drain = result["machines"][0]["drain"]
        assert (
            drain["skipped_reason"]
            == f"Machine {namespace}/{machine}: FakeMachine {namespace}/{machine} is being deleted, so its Node is neither drained nor waited for"
        )
        assert kube.get(infrastructure) is not None, "held by its finalizer all along"
    finally:
        kube.patch(infrastructure, {"metadata": {"finalizers": None}})
