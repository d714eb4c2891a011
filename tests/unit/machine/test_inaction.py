"""Live controllers that will never act (_machine/inaction.py): Cluster API v1.14.2 stops before its deletion path
while a Machine's owning MachineSet or that MachineSet's MachineDeployment is gone."""

from __future__ import annotations

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.inaction import (
    authority_controller_blocker,
    gone_owner,
    owner_gone_blocker,
    owner_machine_deployment,
    owner_machine_set,
    paused_controller_blocker,
    reported_deletion,
)


def machine(owners: list[dict], deleting: str | None = None) -> dict:
    meta = {"name": "w-1", "namespace": "shop", "ownerReferences": owners, "deletionTimestamp": deleting}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "metadata": meta}


def test_the_owner_is_any_machineset_of_the_group_whatever_its_version() -> None:
    m = machine([{"apiVersion": "apps/v1", "kind": "MachineSet", "name": "no"}, {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "name": "ms"}])
    assert owner_machine_set(m, flavour_for(m)) == "ms"
    assert owner_machine_set(machine([]), flavour_for(m)) is None
    owner = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "name": "ms"}
    mapi = {"apiVersion": "machine.openshift.io/v1beta1", "metadata": {"ownerReferences": [owner]}}
    assert owner_machine_set(mapi, flavour_for(mapi)) is None


def test_a_missing_machineset_or_machinedeployment_is_named() -> None:
    m = machine([])
    machine_set = {"metadata": {"labels": {"cluster.x-k8s.io/deployment-name": "md"}}}
    assert owner_machine_deployment(machine_set) == "md" and owner_machine_deployment(None) is None
    assert gone_owner(m, "ms", None, None, None) == "MachineSet shop/ms"
    assert gone_owner(m, "ms", machine_set, "md", None) == "MachineDeployment shop/md"
    assert gone_owner(m, "ms", machine_set, "md", {"metadata": {}}) is None
    assert gone_owner(m, None, None, None, None) is None


def test_the_controller_reports_a_deletion_with_its_deleting_condition() -> None:
    m = machine([])
    m["status"] = {"conditions": [{"type": "Deleting", "status": "False", "reason": "NotDeleting"}]}
    assert not reported_deletion(m, flavour_for(m))
    m["status"]["conditions"][0].update(status="True", reason="DrainingNode")
    assert reported_deletion(m, flavour_for(m))
    v1 = {"apiVersion": "cluster.x-k8s.io/v1beta1", "status": {"v1beta2": {"conditions": [{"type": "Deleting", "status": "True"}]}}}
    assert reported_deletion(v1, flavour_for(v1))


def test_the_blockers_name_the_controller_and_why() -> None:
    blocker = owner_gone_blocker("controller capi-manager", "MachineSet shop/ms", "2026-11-27T08:00:00Z")
    assert (blocker.phase, blocker.kind, blocker.object) == ("controller", "controller will not act", "controller capi-manager")
    assert blocker.verdict == "can never clear as things stand"
    assert "owner MachineSet shop/ms is gone (fixed in v1.14.3)" in blocker.reason and "machine_controller: absent" in blocker.reason
    assert blocker.since == "2026-11-27T08:00:00Z" and blocker.evidence["owner_gone"] == "MachineSet shop/ms"
    paused = paused_controller_blocker("controller capi-manager", "Cluster spec.paused is set to true", None)
    assert paused.verdict == "needs someone to act" and "(Cluster spec.paused is set to true)" in paused.reason


def test_a_followed_openshift_controller_another_api_became_authoritative_for() -> None:
    blocker = authority_controller_blocker("controller machine-controller", "Migrating", None)
    assert (blocker.kind, blocker.verdict, blocker.evidence["authoritative_api"]) == ("controller will not act", "needs someone to act", "Migrating")
    assert "The AuthoritativeAPI status is set to 'Migrating'" in blocker.reason
