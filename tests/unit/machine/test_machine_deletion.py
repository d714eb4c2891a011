"""Cluster API's decisions about the Node of a Machine being deleted (pure, and
the nodeRef found by providerID against the in-memory stand-in): the drain and
the volume wait end for good once the preTerminate wait started or the
InfraMachine is gone or going; a Machine without a nodeRef gets the one Node
that carries its providerID."""

from __future__ import annotations

import datetime as dt

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import NO_NODE_REF, DeletionRecorder, find_node_ref, node_steps_skip_reason
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import (
    GONE,
    ObjectState,
    node_with_provider_id,
    node_work_over,
    object_state,
    provider_id,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, PRE_TERMINATE, flavour_for

PRESENT = ObjectState(exists=True)
NS = "shop"
DELETED_AT = "2026-01-01T00:00:00Z"
CAPI_V2 = "cluster.x-k8s.io/v1beta2"
OPENSHIFT_V = "machine.openshift.io/v1beta1"
INFRA_V1 = "infrastructure.cluster.x-k8s.io/v1beta1"
INFRA = f"/apis/{INFRA_V1}/namespaces/{NS}/fakemachines/m1"


def machine_path(api_version: str = CAPI_V2) -> str:
    return f"/apis/{api_version}/namespaces/{NS}/machines/m1"


def add_node(fake: FakeKube, name: str) -> None:
    fake.put(f"/api/v1/nodes/{name}", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {}})


def capi_machine(fake: FakeKube, *, cluster_deleting: bool = False) -> dict:
    """A v1beta2 worker Machine of Cluster c1 being deleted, with its Node n1, its
    InfraMachine and one active control-plane Machine."""
    cluster_meta = {"name": "c1", "namespace": NS, **({"deletionTimestamp": DELETED_AT} if cluster_deleting else {})}
    fake.put(f"/apis/{CAPI_V2}/namespaces/{NS}/clusters/c1", {"apiVersion": CAPI_V2, "kind": "Cluster", "metadata": cluster_meta})
    labels = {"cluster.x-k8s.io/cluster-name": "c1"}
    cp_meta = {"name": "cp-0", "namespace": NS, "labels": {**labels, "cluster.x-k8s.io/control-plane": ""}}
    fake.put(f"/apis/{CAPI_V2}/namespaces/{NS}/machines/cp-0", {"apiVersion": CAPI_V2, "kind": "Machine", "metadata": cp_meta})
    fake.discovery.serve(INFRA_V1, {"name": "fakemachines", "kind": "FakeMachine", "namespaced": True})
    fake.put(INFRA, {"apiVersion": INFRA_V1, "kind": "FakeMachine", "metadata": {"name": "m1", "namespace": NS}, "spec": {}})
    machine = v1beta2_machine({"nodeRef": {"name": "n1"}})
    machine["metadata"].update({"labels": labels, "finalizers": ["machine.cluster.x-k8s.io"]})
    return fake.put(machine_path(), machine)


def openshift_machine(fake: FakeKube) -> dict:
    meta = {"name": "m1", "namespace": NS, "deletionTimestamp": DELETED_AT, "finalizers": ["machine.machine.openshift.io"]}
    fake.discovery.serve(OPENSHIFT_V)
    return fake.put(machine_path(OPENSHIFT_V), {"apiVersion": OPENSHIFT_V, "kind": "Machine", "metadata": meta, "spec": {}, "status": {}})


def v1beta2_machine(status: dict | None = None, infrastructure: bool = True) -> dict:
    spec = {"clusterName": "c1"}
    if infrastructure:
        spec["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": "m1"}
    return {
        "apiVersion": CAPI_V2,
        "kind": "Machine",
        "metadata": {"name": "m1", "namespace": NS, "deletionTimestamp": DELETED_AT},
        "spec": spec,
        "status": status or {},
    }


def node(name: str, provider: str | None) -> dict:
    return {"metadata": {"name": name, "uid": f"uid-{name}"}, "spec": {"providerID": provider} if provider else {}}


# -- when the Node work is over (pure) --------------------------------------------


def test_node_work_goes_on_while_the_infra_machine_is_there_and_no_pre_terminate_wait_started() -> None:
    machine = v1beta2_machine()
    assert node_work_over(flavour_for(machine), machine, PRESENT) is None
    assert node_work_over(flavour_for(machine), machine, None) is None, "not read: only the recorded time counts"


def test_the_pre_terminate_wait_ends_the_node_work_for_good() -> None:
    machine = v1beta2_machine({"deletion": {"waitForPreTerminateHookStartTime": "2026-01-01T00:05:00Z"}})
    reason = node_work_over(flavour_for(machine), machine, PRESENT)
    assert reason == "the wait for preTerminate hooks started at 2026-01-01T00:05:00Z, so the Node is neither drained nor waited for again"


@pytest.mark.parametrize(
    ("state", "said"),
    [(GONE, "FakeMachine shop/m1 is gone"), (ObjectState(exists=True, deleting=True), "FakeMachine shop/m1 is being deleted")],
)
def test_an_infra_machine_gone_or_going_ends_the_node_work(state: ObjectState, said: str) -> None:
    machine = v1beta2_machine()
    assert node_work_over(flavour_for(machine), machine, state) == f"{said}, so its Node is neither drained nor waited for"


def test_no_infrastructure_ref_means_no_node_work() -> None:
    machine = v1beta2_machine(infrastructure=False)
    assert "no infrastructureRef" in node_work_over(flavour_for(machine), machine, None)


def test_openshift_machines_follow_none_of_it() -> None:
    fake = FakeKube()
    machine = openshift_machine(fake)
    assert node_work_over(flavour_for(machine), machine, GONE) is None
    assert provider_id(flavour_for(machine), {**machine, "spec": {"providerID": "aws:///i-1"}}, None) is None


def test_object_state() -> None:
    assert object_state(None) == GONE
    held = {"metadata": {"deletionTimestamp": DELETED_AT, "finalizers": ["a/b"]}}
    assert object_state(held) == ObjectState(exists=True, deleting=True, finalizers=("a/b",))


# -- the providerID a Node is found by (pure) -------------------------------------


def test_the_machines_own_provider_id_wins_over_the_infra_machines() -> None:
    machine = v1beta2_machine()
    flavour = flavour_for(machine)
    infra = {"spec": {"providerID": "fake:///infra"}}
    assert provider_id(flavour, machine, infra) == "fake:///infra"
    machine["spec"]["providerID"] = "fake:///own"
    assert provider_id(flavour, machine, infra) == "fake:///own"
    assert provider_id(flavour, v1beta2_machine(), None) is None


def test_exactly_one_node_must_carry_the_provider_id() -> None:
    nodes = [node("a", "fake:///1"), node("b", "fake:///2"), node("c", None)]
    assert node_with_provider_id(nodes, "fake:///2")["metadata"]["name"] == "b"
    assert node_with_provider_id(nodes, "fake:///3") is None
    assert node_with_provider_id([*nodes, node("d", "fake:///2")], "fake:///2") is None, "two Nodes: Cluster API finds none"


# -- the nodeRef found by providerID (the stand-in) -----------------------------------


def machine_without_node(fake: FakeKube, *, infra_provider: str | None = "fake:///w-1", **kwargs) -> dict:
    capi_machine(fake, **kwargs)
    stored = fake.objects[machine_path()]
    stored["status"] = {}
    if infra_provider and INFRA in fake.objects:
        fake.objects[INFRA]["spec"] = {"providerID": infra_provider}
    return stored


def test_a_node_carrying_the_infra_machines_provider_id_becomes_the_node_ref() -> None:
    fake = FakeKube()
    add_node(fake, "w-1")
    fake.objects["/api/v1/nodes/w-1"]["spec"] = {"providerID": "fake:///w-1"}
    add_node(fake, "other")
    machine = machine_without_node(fake)
    flavour = flavour_for(machine)
    assert node_steps_skip_reason(fake, machine, flavour) == NO_NODE_REF
    found = find_node_ref(fake, machine, flavour, lambda: fake)
    assert found["status"]["nodeRef"] == {"name": "w-1"}
    assert fake.objects[machine_path()]["status"]["nodeRef"] == {"name": "w-1"}, "written, so later runs see it"
    assert node_steps_skip_reason(fake, found, flavour) is None


def test_no_node_with_the_provider_id_leaves_the_machine_as_it_is() -> None:
    fake = FakeKube()
    add_node(fake, "w-2")
    machine = machine_without_node(fake)
    before = len(fake.changes)
    assert find_node_ref(fake, machine, flavour_for(machine), lambda: fake) is machine
    assert len(fake.changes) == before


def test_a_cluster_being_deleted_is_not_searched() -> None:
    fake = FakeKube()
    add_node(fake, "w-1")
    fake.objects["/api/v1/nodes/w-1"]["spec"] = {"providerID": "fake:///w-1"}
    machine = machine_without_node(fake, cluster_deleting=True)
    assert find_node_ref(fake, machine, flavour_for(machine), lambda: fake) is machine
    assert not any(path.startswith("/api/v1/nodes") for _method, path in fake.requests)


def test_a_dry_run_writes_nothing_but_shows_the_node() -> None:
    fake = FakeKube()
    add_node(fake, "w-1")
    fake.objects["/api/v1/nodes/w-1"]["spec"] = {"providerID": "fake:///w-1"}
    machine = machine_without_node(fake)
    found = find_node_ref(fake, machine, flavour_for(machine), lambda: fake, dry_run=True)
    assert found["status"]["nodeRef"] == {"name": "w-1"}
    assert "nodeRef" not in fake.objects[machine_path()]["status"]


# -- the hook waits' start times ------------------------------------------------------


@pytest.mark.parametrize(("point", "field"), [(PRE_DRAIN, "waitForPreDrainHookStartTime"), (PRE_TERMINATE, "waitForPreTerminateHookStartTime")])
def test_the_start_of_a_hook_wait_is_recorded_once(point: str, field: str) -> None:
    fake = FakeKube()
    machine = capi_machine(fake)
    recorder = DeletionRecorder(fake, machine, flavour_for(machine))
    recorder.hook_wait_start(point)
    first = fake.objects[machine_path()]["status"]["deletion"][field]
    assert recorder.changed and dt.datetime.fromisoformat(first.replace("Z", "+00:00"))
    again = DeletionRecorder(fake, recorder.machine, flavour_for(machine))
    again.hook_wait_start(point)
    assert not again.changed and fake.objects[machine_path()]["status"]["deletion"][field] == first


def test_openshift_keeps_no_hook_wait_start() -> None:
    fake = FakeKube()
    machine = openshift_machine(fake)
    recorder = DeletionRecorder(fake, machine, flavour_for(machine))
    before = len(fake.changes)
    recorder.hook_wait_start(PRE_DRAIN)
    assert not recorder.changed and len(fake.changes) == before
