"""A live controller that will never act, beside the real Cluster API v1.14.2 (docs/behaviour.md row 0b, "A live
controller that will never act"; docs/stalls.md).

v1.14.2's Machine controller looks up a Machine's owning MachineSet, and that MachineSet's MachineDeployment,
before anything else; when one is gone the look fails before the deletion path, every time (fixed in v1.14.3).
The test builds such a Machine under a Cluster the real manager reconciles - its MachineSet and
MachineDeployment unwatched (no watch-filter label), so the MachineSet and MachineDeployment controllers leave
them alone - lets the controller serve it (its nodeRef), then deletes the MachineDeployment. ``machine_delete``
following the controller reports a ``controller will not act`` blocker naming it and the missing owner, and
with ``on_stall: fail`` stops following at once; the controller indeed never acts (no Deleting, no cordon), and
``machine_controller: absent`` lets the collection carry the deletion out, which the controller never races.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

import controllers
import pytest
import realctl
from conftest import read_audit_log, run_module_with
from khelpers import wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

pytestmark = [pytest.mark.real_controllers, pytest.mark.slow]

NAMESPACE, CLUSTER, WORKER = "owner-gone", "watched", "w-0"
CAPI = f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{NAMESPACE}"


def _owners(kube: KubeApi) -> dict:
    """An unwatched MachineDeployment ``md`` and MachineSet ``ms`` (labelled as its MachineDeployment's); the MachineSet."""
    template = {
        "metadata": {"labels": {"pool": "w"}},
        "spec": {
            "clusterName": CLUSTER,
            "bootstrap": {"dataSecretName": "none"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": "template"},
        },
    }
    spec = {"clusterName": CLUSTER, "replicas": 0, "selector": {"matchLabels": {"pool": "w"}}, "template": template}
    kube.create(f"{CAPI}/machinedeployments", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "md"}, "spec": spec})
    labels = {"cluster.x-k8s.io/deployment-name": "md"}
    return kube.create(
        f"{CAPI}/machinesets", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "metadata": {"name": "ms", "labels": labels}, "spec": spec}
    )


def _deleting(machine: dict | None) -> dict:
    return realctl.v1beta2_condition(machine, "Deleting")


def test_v1_14_2_never_deletes_a_machine_whose_owner_is_gone_and_machine_delete_says_so(capi_plane: dict) -> None:
    state_dir = Path(capi_plane["state_dir"])
    management_kubeconfig, workload_kubeconfig = state_dir / "kubeconfig", Path(capi_plane["workload_kubeconfig"])
    kube, workload = api_from_kubeconfig(str(management_kubeconfig)), api_from_kubeconfig(str(workload_kubeconfig))
    machine_path = f"{CAPI}/machines/{WORKER}"

    realctl.create_namespace(kube, NAMESPACE)
    for body in controllers.capi_cluster_objects(CLUSTER, NAMESPACE, controllers.cluster_tool.inline_kubeconfig(workload_kubeconfig)):
        realctl.create(kube, body)
    machine_set = _owners(kube)
    owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms", "uid": machine_set["metadata"]["uid"], "controller": True}
    fake_machine, machine = controllers.capi_machine_objects(WORKER, NAMESPACE, CLUSTER)
    machine["metadata"]["ownerReferences"] = [owner]
    realctl.create(kube, fake_machine)
    realctl.create(kube, machine)
    for name in (f"{CLUSTER}-control-plane-0", WORKER):
        kube.patch(
            f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{NAMESPACE}/fakemachines/{name}",
            controllers.FAKE_MACHINE_PROVISIONED,
            subresource_status=True,
        )
    realctl.kwok_node(workload, WORKER, f"fake://{NAMESPACE}/{WORKER}")
    realctl.create_namespace(workload, "apps")
    realctl.running_pod(workload, "apps", "app-0", WORKER)
    # The controller serves the Machine while its owners exist: it records the Node.
    wait_for(lambda: ((kube.get(machine_path) or {}).get("status") or {}).get("nodeRef", {}).get("name") == WORKER, timeout=120, what="nodeRef")

    kube.delete(f"{CAPI}/machinedeployments/md")
    wait_for(lambda: kube.get(f"{CAPI}/machinedeployments/md") is None, timeout=30, what="the MachineDeployment gone")
    since = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    started = time.monotonic()
    stopped = run_module_with(
        str(management_kubeconfig),
        "machine_delete",
        {"machines": [{"name": WORKER, "namespace": NAMESPACE}], "machine_controller": "live", "on_stall": "fail", "drain_timeout": 240},
    )
    took = time.monotonic() - started
    [entry] = stopped["machines"]
    assert entry["status"] == "failed" and entry["carried_out_by"] == "controller", entry
    [blocker] = [b for b in entry["blockers"] if b["kind"] == "controller will not act"]
    assert blocker["verdict"] == "can never clear as things stand" and blocker["evidence"]["owner_gone"] == f"MachineDeployment {NAMESPACE}/md", blocker
    assert entry["message"].startswith("Stopped following the deletion: its controller") and "cannot finish the deletion as things stand" in entry["message"]
    assert took < 90, f"on_stall: fail stops at its first look, not at the end of the drain's time ({took:.0f} s)"

    # The controller indeed does nothing with it: no Deleting reported, its Node never cordoned.
    realctl.hold(lambda: "the controller reported the deletion" if _deleting(kube.get(machine_path)).get("status") == "True" else None, seconds=10)
    assert not (workload.get(f"/api/v1/nodes/{WORKER}") or {}).get("spec", {}).get("unschedulable")

    # With machine_controller: absent the collection carries it out; the controller never races it.
    done = run_module_with(
        str(management_kubeconfig),
        "machine_delete",
        {"machines": [{"name": WORKER, "namespace": NAMESPACE}], "machine_controller": "absent", "drain_timeout": 120, "terminate_timeout": 120},
    )
    [entry] = done["machines"]
    assert entry["status"] == "done" and entry["carried_out_by"] == "collection", entry
    assert kube.get(machine_path) is None and workload.get(f"/api/v1/nodes/{WORKER}") is None
    agent = "cluster-api-controller-manager"
    evicted = realctl.by_user_agent(read_audit_log(workload_kubeconfig.parent / "audit.log", namespace="apps", subresource="eviction", verb="create"))
    assert not any(agent in user_agent for user_agent in evicted), evicted
    controller_writes = [
        e["verb"]
        for e in read_audit_log(state_dir / "audit.log", namespace=NAMESPACE, resource="fakemachines")
        if e["objectRef"].get("name") == WORKER and agent in e.get("userAgent", "") and e["verb"] == "delete" and e.get("requestReceivedTimestamp", "") >= since
    ]
    assert controller_writes == [], "the controller deleted the InfraMachine of a Machine it never acts on"
