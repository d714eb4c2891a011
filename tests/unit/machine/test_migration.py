"""OpenShift's move to Cluster API (_machine/migration.py): from either side the mirror is found, only the
authoritative Machine is acted on, a hook goes only where the admission policy lets it."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.migration import (
    authority,
    cluster_api_side,
    hook_refusal,
    mirror_of,
    openshift_side,
)


def mapi(status: str | None = None, spec: str | None = None, namespace: str = "openshift-machine-api") -> dict:
    machine = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": {"name": "w-1", "namespace": namespace}, "spec": {}, "status": {}}
    if status:
        machine["status"]["authoritativeAPI"] = status
    if spec:
        machine["spec"]["authoritativeAPI"] = spec
    return machine


def capi(namespace: str = "openshift-cluster-api") -> dict:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "w-1", "namespace": namespace}}


def test_each_side_finds_its_mirror_in_the_migrations_namespaces() -> None:
    m = mapi()
    assert (mirror_of(m, flavour_for(m)).group, mirror_of(m, flavour_for(m)).namespace) == ("cluster.x-k8s.io", "openshift-cluster-api")
    c = capi()
    assert (mirror_of(c, flavour_for(c)).group, mirror_of(c, flavour_for(c)).namespace) == ("machine.openshift.io", "openshift-machine-api")
    assert mirror_of(capi("shop"), flavour_for(capi("shop"))) is None
    assert mirror_of(mapi(namespace="other"), flavour_for(mapi())) is None


@pytest.mark.parametrize(
    ("status", "spec", "expected"), [(None, None, "MachineAPI"), (None, "ClusterAPI", "ClusterAPI"), ("Migrating", "ClusterAPI", "Migrating")]
)
def test_the_authority_is_the_status_then_the_spec(status, spec, expected) -> None:
    assert authority(mapi(status, spec)) == expected


def test_a_machine_api_machine_cluster_api_is_authoritative_for_is_refused_naming_the_mirror() -> None:
    m = mapi("ClusterAPI")
    held = openshift_side(m, flavour_for(m), "cluster.x-k8s.io/v1beta2", True)
    assert held.refuse and not held.overridable
    assert held.blocker.kind == "authority elsewhere" and held.blocker.object == "Machine openshift-cluster-api/w-1 (cluster.x-k8s.io/v1beta2)"
    assert held.message.startswith("Machine openshift-machine-api/w-1 is not the authoritative one: Cluster API is authoritative for it")
    assert "The AuthoritativeAPI status is set to 'ClusterAPI'" in held.message  # OpenShift's own words, for grep
    assert "act on Machine openshift-cluster-api/w-1 (cluster.x-k8s.io/v1beta2) instead (deleting either deletes both)" in held.message
    missing = openshift_side(m, flavour_for(m), None, False)
    assert "Machine openshift-cluster-api/w-1 (cluster.x-k8s.io), which does not exist (yet)" in missing.message


def test_migrating_holds_both_sides() -> None:
    m = mapi("Migrating")
    held = openshift_side(m, flavour_for(m))
    assert not held.refuse and held.blocker.kind == "migration in progress" and held.blocker.verdict == "needs someone to act"
    c = capi()
    mirrored = cluster_api_side(c, flavour_for(c), m)
    assert not mirrored.refuse and mirrored.blocker.kind == "migration in progress"
    assert mirrored.blocker.object == "Machine openshift-machine-api/w-1 (machine.openshift.io/v1beta1)"


def test_the_authoritative_side_is_acted_on() -> None:
    assert openshift_side(mapi("MachineAPI"), flavour_for(mapi())) is None
    assert openshift_side(mapi(), flavour_for(mapi())) is None
    c = capi()
    assert cluster_api_side(c, flavour_for(c), mapi("ClusterAPI")) is None
    assert cluster_api_side(c, flavour_for(c), None) is None  # mirrors nothing: a plain Cluster API Machine


def test_a_cluster_api_mirror_of_an_authoritative_machine_api_machine_is_refused_naming_it() -> None:
    c = capi()
    held = cluster_api_side(c, flavour_for(c), mapi("MachineAPI"))
    assert held.refuse and held.blocker.object == "Machine openshift-machine-api/w-1 (machine.openshift.io/v1beta1)"
    assert held.message.startswith("Machine openshift-cluster-api/w-1 is not the authoritative one: the Machine API is authoritative for it")


def test_hooks_go_only_where_the_admission_policy_lets_them() -> None:
    m = mapi("ClusterAPI")
    refusal = hook_refusal(m, flavour_for(m), "preDrain", "backup", None)
    assert "as the annotation pre-drain.delete.hook.machine.cluster.x-k8s.io/backup" in refusal
    assert hook_refusal(mapi("Migrating"), flavour_for(m), "preDrain", "backup", None) is None  # the policy matches ClusterAPI only
    assert hook_refusal(mapi(None, "ClusterAPI"), flavour_for(m), "preDrain", "backup", None) is None  # it reads the status
    c = capi()
    refusal = hook_refusal(c, flavour_for(c), "preTerminate", "flush", mapi("MachineAPI"))
    assert "write the hook there (spec.lifecycleHooks.preTerminate)" in refusal
    assert hook_refusal(c, flavour_for(c), "preTerminate", "flush", mapi(None, "MachineAPI")) is None
    assert hook_refusal(c, flavour_for(c), "preTerminate", "flush", None) is None
