"""Smoke tests with the real machine controllers the collection imitates.

The Cluster API core manager and OpenShift's machine controller (built from the
Go module proxy by hack/build-controllers.sh, run by hack/controllers.py beside
control planes of their own) delete a Machine that carries a pre-drain and a
pre-terminate hook; each test proves the controller holds at each gate until the
collection's ``machine_hook`` module (run through ``ansible``) removes the hook,
and that the controller itself drains the Node, deletes the infrastructure and
the Node and lets the Machine go.

Both are in the fixed subset of real-controller tests that ``make test`` (and so
CI) runs: its integration step builds the controllers when they are missing and
sets LIFECYCLE_MACHINE_REAL_CONTROLLERS=1, which runs the tests marked
``real_controllers_subset``. ``make conformance`` runs every real-controller test
(LIFECYCLE_MACHINE_CONFORMANCE=1). Run otherwise, they skip unless this file is
named on pytest's command line; without the binaries they skip, naming the
command that builds them.
"""

from __future__ import annotations

import time
from pathlib import Path

import controllers
import pytest
import realctl
from khelpers import wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]


@pytest.mark.real_controllers_subset
def test_real_cluster_api_holds_at_each_hook_until_machine_hook_removes_it(capi_plane: dict) -> None:
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig = state_dir / "kubeconfig"
    workload_kubeconfig = Path(capi_plane["workload_kubeconfig"])
    kube = api_from_kubeconfig(str(management_kubeconfig))
    workload = api_from_kubeconfig(str(workload_kubeconfig))
    namespace, cluster, worker, apps = "real-capi", "real", "worker-0", "apps"
    machines = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machines"
    fake_machines = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{namespace}/fakemachines"

    hooks = {"preDrain": "drain-gate", "preTerminate": "terminate-gate"}
    realctl.capi_worker_with_hooks(kube, workload, workload_kubeconfig, namespace=namespace, cluster=cluster, worker=worker, hooks=hooks, pod_namespace=apps)

    def deleting_reason() -> str:
        return realctl.v1beta2_condition(kube.get(f"{machines}/{worker}"), "Deleting").get("reason", "")

    def pod_state() -> str:
        pod = workload.get(f"/api/v1/namespaces/{apps}/pods/app-0")
        return "gone" if pod is None else ("terminating" if pod["metadata"].get("deletionTimestamp") else "running")

    def node_cordoned() -> bool:
        return bool((workload.get(f"/api/v1/nodes/{worker}") or {}).get("spec", {}).get("unschedulable"))

    deleted_at = time.monotonic()
    kube.delete(f"{machines}/{worker}")

    # Gate 1: pre-drain. Nothing is cordoned or evicted while the hook is there.
    wait_for(lambda: deleting_reason() == "WaitingForPreDrainHook", timeout=60, what="Deleting reason WaitingForPreDrainHook")

    def before_drain() -> str | None:
        if deleting_reason() != "WaitingForPreDrainHook":
            return f"Deleting reason {deleting_reason()!r}"
        if node_cordoned():
            return "the Node is cordoned"
        return None if pod_state() == "running" else f"the Pod is {pod_state()}"

    realctl.hold(before_drain)
    machine = kube.get(f"{machines}/{worker}")
    assert machine["status"]["deletion"].get("waitForPreDrainHookStartTime")
    assert not machine["status"]["deletion"].get("nodeDrainStartTime")
    realctl.remove_hook(management_kubeconfig, namespace, worker, "preDrain", hooks["preDrain"])

    # Cluster API drains (cordon, evict, re-check every 20 s), then stops at gate 2.
    seen = set()

    def at_pre_terminate() -> bool:
        seen.add(deleting_reason())
        return deleting_reason() == "WaitingForPreTerminateHook"

    wait_for(at_pre_terminate, timeout=120, interval=0.2, what="Deleting reason WaitingForPreTerminateHook")
    machine = kube.get(f"{machines}/{worker}")
    assert machine["status"]["deletion"].get("nodeDrainStartTime"), machine["status"]
    assert realctl.v1beta1_condition(machine, "DrainingSucceeded").get("status") == "True", machine["status"]
    assert node_cordoned()
    assert pod_state() == "gone"

    def before_terminate() -> str | None:
        if deleting_reason() != "WaitingForPreTerminateHook":
            return f"Deleting reason {deleting_reason()!r}"
        if kube.get(f"{fake_machines}/{worker}") is None:
            return "the FakeMachine is gone"
        return None if workload.get(f"/api/v1/nodes/{worker}") is not None else "the Node is gone"

    realctl.hold(before_terminate)
    realctl.remove_hook(management_kubeconfig, namespace, worker, "preTerminate", hooks["preTerminate"])

    # Cluster API deletes the infrastructure, then the Node, then lets the Machine go.
    wait_for(lambda: kube.get(f"{machines}/{worker}") is None, timeout=90, what="the Machine to be gone")
    took = time.monotonic() - deleted_at
    assert kube.get(f"{fake_machines}/{worker}") is None
    assert workload.get(f"/api/v1/nodes/{worker}") is None

    # The workload cluster's audit log: the eviction and the Node deletion are Cluster API's.
    realctl.assert_the_controller_acted(workload_kubeconfig.parent / "audit.log", apps, "app-0", worker, "cluster-api-controller-manager")
    print(f"Cluster API deleted the Machine in {took:.1f} s; Deleting reasons seen after the pre-drain hook went: {sorted(seen)}")


# ---------------------------------------------------------------------------
# OpenShift


def _openshift_condition(machine: dict | None, kind: str) -> dict:
    return next((c for c in ((machine or {}).get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


@pytest.mark.real_controllers_subset
def test_real_openshift_machine_controller_holds_at_each_hook_until_machine_hook_removes_it(mapi_plane: dict) -> None:
    state_dir = Path(mapi_plane["state_dir"])
    kubeconfig = state_dir / "kubeconfig"
    kube = api_from_kubeconfig(str(kubeconfig))
    namespace, worker = "real-mapi", "worker-0"
    machines = f"/apis/machine.openshift.io/v1beta1/namespaces/{namespace}/machines"
    instance = f"/api/v1/namespaces/{namespace}/configmaps/{worker}-fake-instance"

    realctl.create_namespace(kube, namespace)
    hooks = {"preDrain": "drain-gate", "preTerminate": "terminate-gate"}
    body = controllers.mapi_machine(worker, namespace, hooks={point: [{"name": name, "owner": realctl.HOOK_OWNER}] for point, name in hooks.items()})
    realctl.create(kube, body)

    # The fake actuator "creates" the instance and sets the providerID; nodelink
    # links the Node of that providerID; the Machine runs.
    provider_id = wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("spec", {}).get("providerID"), timeout=60, what="spec.providerID")
    assert kube.get(instance) is not None
    realctl.kwok_node(kube, worker, provider_id)
    realctl.running_pod(kube, namespace, "app-0", worker)
    wait_for(lambda: (kube.get(f"{machines}/{worker}") or {}).get("status", {}).get("phase") == "Running", timeout=90, what="phase Running")
    assert kube.get(f"{machines}/{worker}")["status"]["nodeRef"]["name"] == worker

    def machine() -> dict | None:
        return kube.get(f"{machines}/{worker}")

    def pod_state() -> str:
        pod = kube.get(f"/api/v1/namespaces/{namespace}/pods/app-0")
        return "gone" if pod is None else ("terminating" if pod["metadata"].get("deletionTimestamp") else "running")

    def node_cordoned() -> bool:
        return bool((kube.get(f"/api/v1/nodes/{worker}") or {}).get("spec", {}).get("unschedulable"))

    def drain_events(reason: str) -> list[dict]:
        events = kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={worker}")
        return [e for e in events if e.get("reason") == reason]

    deleted_at = time.monotonic()
    kube.delete(f"{machines}/{worker}")

    # Gate 1: pre-drain (the drain controller says DrainBlocked).
    wait_for(lambda: drain_events("DrainBlocked"), timeout=60, what="Event DrainBlocked")
    assert (machine() or {}).get("status", {}).get("phase") == "Deleting"

    def before_drain() -> str | None:
        if _openshift_condition(machine(), "Drained"):
            return f"Drained condition {_openshift_condition(machine(), 'Drained')}"
        if node_cordoned():
            return "the Node is cordoned"
        return None if pod_state() == "running" else f"the Pod is {pod_state()}"

    realctl.hold(before_drain)
    assert _openshift_condition(machine(), "Drainable").get("status") == "False"
    realctl.remove_hook(kubeconfig, namespace, worker, "preDrain", hooks["preDrain"])

    # The drain (kubectl's drain library), then gate 2: pre-terminate.
    wait_for(lambda: _openshift_condition(machine(), "Drained").get("status") == "True", timeout=120, what="Drained condition True")
    assert drain_events("DrainProceeds") and drain_events("DrainSucceeded")
    assert node_cordoned()
    wait_for(lambda: pod_state() == "gone", timeout=30, what="the evicted Pod to be gone")
    wait_for(lambda: _openshift_condition(machine(), "Terminable").get("status") == "False", timeout=30, what="Terminable condition False")

    def before_terminate() -> str | None:
        if machine() is None:
            return "the Machine is gone"
        if kube.get(instance) is None:
            return "the fake instance was deleted"
        return None if kube.get(f"/api/v1/nodes/{worker}") is not None else "the Node is gone"

    realctl.hold(before_terminate)
    realctl.remove_hook(kubeconfig, namespace, worker, "preTerminate", hooks["preTerminate"])

    # The actuator deletes the instance; the controller deletes the Node, drops its finalizer.
    wait_for(lambda: machine() is None, timeout=90, what="the Machine to be gone")
    took = time.monotonic() - deleted_at
    assert kube.get(instance) is None
    assert kube.get(f"/api/v1/nodes/{worker}") is None

    realctl.assert_the_controller_acted(state_dir / "audit.log", namespace, "app-0", worker, "mapi-controller")
    print(f"the OpenShift machine controller deleted the Machine in {took:.1f} s")
