"""What becomes of a Machine's place in its pool (pure): the owner's record, the refusals, which Machine
replaces which, and what each mode says (plugins/module_utils/_replace/logic.py)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import (
    FIRST,
    NONE,
    RECORD_ANNOTATION,
    REPLACE,
    REPLACEMENT_READY,
    SCALED_DOWN,
    SURGED,
    Entry,
    Owner,
    Record,
    after_message,
    match_replacements,
    orphaned_surges,
    owner_patch,
    refusal,
    replacement_figures,
    rival_of,
    selector_query,
    self_replacing,
    settled,
    wanted_replacements,
    with_entry,
)

CAPI = "cluster.x-k8s.io/v1beta2"
OPENSHIFT = "machine.openshift.io/v1beta1"


def machine(name: str, api_version: str = CAPI, *, owner: tuple[str, str] | None = ("MachineSet", "ms"), labels=None, annotations=None, **extra) -> dict:
    created = extra.pop("created", "2026-01-01T00:00:00Z")
    meta = {"name": name, "namespace": "ns", "labels": labels or {}, "annotations": annotations or {}, "creationTimestamp": created}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": owner[0], "name": owner[1], "uid": f"uid-{owner[1]}", "controller": True}]
    if extra.pop("deleting", False):
        meta["deletionTimestamp"] = extra.pop("deleted_at", "2026-01-02T00:00:00Z")
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta, "spec": {}, "status": extra.pop("status", {})}


def machine_set(name: str = "ms", api_version: str = CAPI, *, replicas: int = 3, annotations=None, **meta) -> dict:
    return {
        "apiVersion": api_version,
        "kind": "MachineSet",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "7", "annotations": annotations or {}, **meta},
        "spec": {"replicas": replicas, "clusterName": "c", "selector": {"matchLabels": {"pool": name}}},
    }


def owner_of(obj: dict, machines: list[dict] | None = None, **kwargs) -> Owner:
    return Owner("MachineSet", obj, obj, flavour_for(obj["apiVersion"]), machines or [], **kwargs)


# -- the record -------------------------------------------------------------


def test_a_record_round_trips_through_its_annotation_and_goes_when_empty():
    record = Record({"a": Entry(FIRST, SURGED, 1, 100.0), "b": Entry(NONE, SCALED_DOWN, 2)}, ("a", "x"))
    owner = machine_set(annotations={RECORD_ANNOTATION: record.text()})
    assert Record.parse(owner) == record
    assert json.loads(record.text())["machines"]["b"] == {"mode": "none", "step": "scaled-down", "seq": 2}
    assert Record().text() is None
    assert owner_patch(owner, Record(), 2) == {"metadata": {"resourceVersion": "7", "annotations": {RECORD_ANNOTATION: None}}, "spec": {"replicas": 2}}


@pytest.mark.parametrize("text", ["not json", "[]", json.dumps({"machines": {"a": {"mode": "sideways", "step": SURGED}}})])
def test_a_record_not_ours_to_read_is_an_empty_one(text):
    assert Record.parse(machine_set(annotations={RECORD_ANNOTATION: text})) == Record()


def test_the_first_surge_notes_the_owners_machines_and_the_last_done_surge_forgets_them():
    machines = [machine("a"), machine("b")]
    record = with_entry(Record(), "a", Entry(FIRST, SURGED, 1), machines)
    assert record.before == ("a", "b")
    # A second surge keeps what the first noted: the first's replacement is new to both.
    record = with_entry(record, "b", Entry(FIRST, SURGED, 2), [*machines, machine("new-1")])
    assert record.before == ("a", "b")
    # Done surges stay while another surge is awaited: their replacements stay theirs.
    record = with_entry(record, "a", Entry(FIRST, SCALED_DOWN, 1), machines)
    assert settled(record, {"b", "new-1"}).entries.keys() == {"a", "b"}
    record = with_entry(record, "b", Entry(FIRST, SCALED_DOWN, 2), machines)
    assert settled(record, {"new-1", "new-2"}) == Record()


def test_a_removal_is_forgotten_once_its_machine_is_gone():
    record = Record({"a": Entry(NONE, SCALED_DOWN, 1), "b": Entry(NONE, SCALED_DOWN, 2)})
    assert settled(record, {"b"}).entries.keys() == {"b"}


def test_a_surge_whose_machine_someone_else_deleted_is_an_orphan():
    record = Record({"a": Entry(FIRST, SURGED, 1), "b": Entry(FIRST, SURGED, 2), "c": Entry(FIRST, SCALED_DOWN, 3)})
    assert orphaned_surges(record, {"b"}) == ["a"]


# -- the refusals -------------------------------------------------------------


def test_after_is_never_refused_and_says_who_replaces_the_machine():
    capi = machine("a", labels={"cluster.x-k8s.io/deployment-name": "md"})
    assert refusal("after", machine("cp", labels={"cluster.x-k8s.io/control-plane": ""}), None) is None
    assert after_message(capi, flavour_for(CAPI)) == (
        "MachineSet ms (MachineDeployment md) will create a replacement once it is gone (it counts a Machine until it is gone)"
    )
    assert "as soon as its deletion starts" in after_message(machine("a", OPENSHIFT), flavour_for(OPENSHIFT))
    assert after_message(machine("a", owner=None), flavour_for(CAPI)) == "it has no owner: nothing replaces it"


@pytest.mark.parametrize(
    ("owner", "labels", "api_version", "says"),
    [
        (("KubeadmControlPlane", "kcp"), {"cluster.x-k8s.io/control-plane": ""}, CAPI, "the KubeadmControlPlane controller replaces"),
        (("ControlPlaneMachineSet", "cluster"), {}, OPENSHIFT, "etcd quorum preDrain hook"),
        (("MachinePool", "mp"), {}, CAPI, "scale the MachinePool itself"),
        (None, {"machine.openshift.io/cluster-api-machine-role": "master"}, OPENSHIFT, "ControlPlaneMachineSet"),
        (("Widget", "w"), {}, CAPI, "not by a MachineSet"),
    ],
)
def test_machines_their_owner_replaces_itself_are_not_the_collections(owner, labels, api_version, says):
    found = self_replacing(machine("m", api_version, owner=owner, labels=labels), flavour_for(api_version))
    assert found is not None and says in found


def test_a_machine_set_machine_is_the_collections():
    assert self_replacing(machine("m"), flavour_for(CAPI)) is None


def test_replace_first_needs_an_owner_and_remove_for_good_does_not():
    loose = machine("m", owner=None)
    assert "nothing would create its replacement" in refusal(FIRST, loose, None)
    assert refusal(NONE, loose, None) is None


@pytest.mark.parametrize(
    ("mode", "obj", "says"),
    [
        (NONE, machine_set(deletionTimestamp="2026-01-03T00:00:00Z"), "is being deleted"),
        (FIRST, machine_set(annotations={"cluster.x-k8s.io/paused": ""}), "is paused: it has the cluster.x-k8s.io/paused annotation"),
        (NONE, machine_set(annotations={"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "3"}), "minimum"),
        (FIRST, machine_set(annotations={"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"}), "a surge of 1 would take it above"),
        (FIRST, machine_set(annotations={"cluster.x-k8s.io/disable-machine-create": "true"}), "creates no Machine"),
    ],
)
def test_what_cannot_be_done_safely_is_refused(mode, obj, says):
    found = refusal(mode, machine("m"), owner_of(obj))
    assert found is not None and says in found


def test_the_bounds_count_the_tasks_machines_of_the_same_owner():
    obj = machine_set(replicas=5, annotations={"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "3"})
    assert refusal(NONE, machine("m"), owner_of(obj), removing=2) is None
    assert "removing 3 Machines" in refusal(NONE, machine("m"), owner_of(obj), removing=3)
    top = machine_set(replicas=5, annotations={"cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "6"})
    assert refusal(FIRST, machine("m"), owner_of(top), surging=1) is None
    assert "a surge of 2" in refusal(FIRST, machine("m"), owner_of(top), surging=2)


def test_a_paused_cluster_and_an_openshift_owner_not_authoritative_are_paused():
    cluster = {"metadata": {"name": "c"}, "spec": {"paused": True}}
    assert "its Cluster c has spec.paused set to true" in refusal(NONE, machine("m"), owner_of(machine_set(), cluster=cluster))
    openshift = machine_set(api_version=OPENSHIFT)
    openshift["status"] = {"authoritativeAPI": "ClusterAPI"}
    assert "authoritativeAPI is 'ClusterAPI'" in refusal(NONE, machine("m", OPENSHIFT), owner_of(openshift))


def test_a_deployment_rolling_out_is_refused():
    owner = Owner("MachineDeployment", machine_set("md"), machine_set(), flavour_for(CAPI), [], active_sets=["md-a", "md-b"])
    assert "is rolling out (MachineSets md-a, md-b have replicas)" in refusal(FIRST, machine("m"), owner)


def test_too_late_to_remove_for_good_an_openshift_machine_already_replaced():
    deleting = machine("m", OPENSHIFT, deleting=True)
    assert "too late to remove it for good" in refusal(NONE, deleting, owner_of(machine_set(api_version=OPENSHIFT)))
    # Cluster API still counts it: lowering the replicas removes it for good.
    assert refusal(NONE, machine("m", deleting=True), owner_of(machine_set())) is None


def test_a_machine_the_record_holds_is_past_the_checks():
    obj = machine_set(annotations={RECORD_ANNOTATION: Record({"m": Entry(FIRST, SURGED, 1)}, ("m",)).text(), "cluster.x-k8s.io/paused": ""})
    assert refusal(FIRST, machine("m"), owner_of(obj)) is None


def test_another_machine_its_delete_policy_ranks_as_high_is_a_rival():
    annotated = machine("z", annotations={"cluster.x-k8s.io/delete-machine": "yes"})
    owner = owner_of(machine_set(), [machine("m"), annotated])
    assert "ranks Machine ns/z as high as m (it carries cluster.x-k8s.io/delete-machine too)" in rival_of(machine("m"), owner)
    assert rival_of(machine("m"), owner, {"z"}) is None  # one of the task's own
    failed = machine("f", OPENSHIFT, status={"errorReason": "InvalidConfiguration"})
    assert "it failed (InvalidConfiguration)" in rival_of(machine("m", OPENSHIFT), owner_of(machine_set(api_version=OPENSHIFT), [failed]))
    # Cluster API ranks a failed Machine below an annotated one.
    assert rival_of(machine("m"), owner_of(machine_set(), [machine("f", status={"errorReason": "x"})])) is None


# -- the replacements -----------------------------------------------------------


def test_each_surge_gets_its_own_ready_replacement_earliest_first():
    record = Record({"a": Entry(FIRST, SURGED, 1), "b": Entry(FIRST, SURGED, 2)}, ("a", "b", "c"))
    wanted = [("a", None), ("b", None)]
    assert match_replacements(wanted, [machine("c"), machine("n1")], record) == {"a": "n1", "b": None}
    both = match_replacements(wanted, [machine("n1"), machine("n2")], record)
    assert sorted(both.values()) == ["n1", "n2"]
    # A Machine being deleted, or one the record holds, replaces nobody.
    assert match_replacements(wanted, [machine("n1", deleting=True), machine("b")], record) == {"a": None, "b": None}


def test_a_machine_its_owner_replaced_by_itself_is_replaced_by_one_created_since_its_deletion():
    owner = owner_of(machine_set(api_version=OPENSHIFT))
    deleting = machine("a", OPENSHIFT, deleting=True, deleted_at="2026-01-02T00:00:05Z")
    wanted = wanted_replacements(Record(), owner, deleting)
    assert wanted == [("a", "2026-01-02T00:00:05Z")]
    old, new = machine("old", OPENSHIFT, created="2026-01-01T00:00:00Z"), machine("new", OPENSHIFT, created="2026-01-02T00:00:06Z")
    assert match_replacements(wanted, [old, new], Record()) == {"a": "new"}
    # Cluster API replaces it only once it is gone: nothing is awaited without a surge.
    assert wanted_replacements(Record(), owner_of(machine_set()), machine("a", deleting=True)) == []


def test_the_selector_as_a_query():
    assert selector_query({"matchLabels": {"b": "2", "a": "1"}, "matchExpressions": [{"key": "x", "operator": "In", "values": ["p", "q"]}]}) == (
        "a=1,b=2,x in (p,q)"
    )
    assert selector_query({}) is None


def test_the_figures_say_how_long_the_replacement_took_and_that_the_pool_never_ran_short():
    phases = {REPLACE: 100.0, REPLACEMENT_READY: 190.5, "drain": 192.0}
    assert replacement_figures(FIRST, phases) == {"replacement_ready_seconds": 90.5, "pool_short_seconds": 0.0}
    assert replacement_figures(FIRST, {REPLACE: 100.0, REPLACEMENT_READY: 200.0, "drain": 150.0})["pool_short_seconds"] == 50.0
    assert replacement_figures(NONE, {}) == {"replacement_ready_seconds": None, "pool_short_seconds": 0.0}
    assert replacement_figures("after", {})["pool_short_seconds"] is None
