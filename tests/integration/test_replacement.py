"""machine_delete's ``replacement`` on the plain control plane (no controller runs here;
tests/integration/test_replacement_beside_real_controllers.py runs the real MachineSet and
MachineDeployment controllers):

- ``none`` with ``machine_controller: absent``: the collection keeps the replicas consistent
  itself - the delete annotation on the Machine, the owner's replicas lowered by one, the Machine
  deleted through its gates, the owner's record gone; no other Machine touched;
- every refusal comes before any change (replicas, annotations and Machines as they were);
- a run stopped at each step (each state the owner's record and the Machine can be left in) is
  completed by the next run, the replicas right;
- ``first``, with the test bed playing the MachineSet controller (it creates a Machine and its
  Node when the replicas ask for one, as both controllers do): the surge, the new Node Ready before
  the old Node is cordoned, the replicas back where they began; and a run killed while it waits for
  the replacement leaves the surge recorded, which the next run completes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import REPO, ansible_env, machine_collection
from khelpers import capi_path, kill_tree, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._replace.logic import FIRST, NONE, RECORD_ANNOTATION, SCALED_DOWN, SURGED, Entry, Record

POOL_LABEL = "lifecycle.machine.dev/pool"
# What does not depend on a field layout runs on one flavour of each kind of MachineSet (OpenShift's, which no
# longer counts a Machine being deleted, and Cluster API's, which does); v1beta1's layout is covered above them.
TWO_FLAVOURS = pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)
OPENSHIFT_SETS = "/apis/machine.openshift.io/v1beta1/namespaces/{ns}/machinesets"
CAPI_DELETE = "cluster.x-k8s.io/delete-machine"
DELETE_ANNOTATION = {"openshift": "machine.openshift.io/delete-machine", "v1beta1": CAPI_DELETE, "v1beta2": CAPI_DELETE}
TEMPLATES = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/fakemachinetemplates"


def owner_collection(flavour: str, namespace: str, kind: str = "MachineSet") -> str:
    if flavour == "openshift":
        return OPENSHIFT_SETS.format(ns=namespace)
    return capi_path(flavour, kind.lower() + "s", namespace)


def owner_body(flavour: str, kind: str, name: str, replicas: int, labels: dict, *, annotations: dict | None = None) -> dict:
    """A MachineSet (or MachineDeployment) of the flavour's field layout, selecting ``labels``."""
    meta = {"name": name, "labels": dict(labels), "annotations": dict(annotations or {})}
    if flavour == "openshift":
        template_spec: dict = {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}}
        spec: dict = {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": template_spec}}
        return {"apiVersion": "machine.openshift.io/v1beta1", "kind": kind, "metadata": meta, "spec": spec}
    if flavour == "v1beta1":
        infra = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FakeMachineTemplate", "name": name}
    else:
        infra = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachineTemplate", "name": name}
    template_spec = {"clusterName": "lm-test", "bootstrap": {"dataSecretName": f"{name}-bootstrap"}, "infrastructureRef": infra}
    template = {"metadata": {"labels": labels}, "spec": template_spec}
    spec = {"clusterName": "lm-test", "replicas": replicas, "selector": {"matchLabels": labels}, "template": template}
    return {"apiVersion": f"cluster.x-k8s.io/{flavour}", "kind": kind, "metadata": meta, "spec": spec}


def controller_ref(obj: dict) -> dict:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


@dataclass
class Pool:
    """A MachineSet (under a MachineDeployment when ``deployment``) and its Machines, each with a Ready Node."""

    kube: object
    flavour: str
    namespace: str
    owner_path: str
    set_path: str
    machine_set: dict
    labels: dict
    make_machine: object
    make_node: object
    machines: list[str] = field(default_factory=list)

    def owner(self) -> dict:
        return self.kube.get(self.owner_path)

    def replicas(self) -> int:
        return self.owner()["spec"]["replicas"]

    def record(self) -> Record:
        return Record.parse(self.owner())

    def machine_path(self, name: str) -> str:
        return f"{machine_collection(self.flavour, self.namespace)}/{name}"

    def machine(self, name: str) -> dict | None:
        return self.kube.get(self.machine_path(name))

    def add(self, name: str | None = None, *, ready: bool = True) -> str:
        """A Machine of the MachineSet with a (Ready) Node, as its controller and a provider would make it."""
        name = name or f"{self.labels[POOL_LABEL]}-{uuid.uuid4().hex[:5]}"
        node = self.make_node(f"n-{name}", wait_ready=ready)
        self.make_machine(self.namespace, name=name, node=node, labels=dict(self.labels))
        self.kube.patch(self.machine_path(name), {"metadata": {"ownerReferences": [controller_ref(self.machine_set)]}})
        self.machines.append(name)
        return name

    def owned(self) -> list[dict]:
        uid = self.machine_set["metadata"]["uid"]
        listed = self.kube.list(machine_collection(self.flavour, self.namespace))
        return [m for m in listed if any(r.get("uid") == uid for r in m["metadata"].get("ownerReferences") or [])]


@pytest.fixture
def make_pool(*, kube, flavour, namespace, make_machine, make_node, capi_cluster):
    """``make_pool(replicas, deployment=False, annotations=None, set_annotations=None)``: a pool of ``replicas`` Machines."""
    created: list[str] = []
    clusters: list[str] = []

    def _make(replicas: int = 3, *, deployment: bool = False, annotations: dict | None = None, set_annotations: dict | None = None) -> Pool:
        if not clusters:
            clusters.append(capi_cluster(namespace))
        name = f"pool-{uuid.uuid4().hex[:4]}"
        labels = {POOL_LABEL: name}
        if flavour != "openshift":
            template = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FakeMachineTemplate", "metadata": {"name": name}}
            kube.create(TEMPLATES.format(ns=namespace), {**template, "spec": {"template": {"spec": {}}}})
        owner_path = None
        set_owner_refs: list[dict] = []
        if deployment:
            body = owner_body(flavour, "MachineDeployment", name, replicas, labels, annotations=annotations)
            deployment_obj = kube.create(owner_collection(flavour, namespace, "MachineDeployment"), body)
            owner_path = f"{owner_collection(flavour, namespace, 'MachineDeployment')}/{name}"
            created.append(owner_path)
            set_owner_refs = [controller_ref(deployment_obj)]
        set_name = f"{name}-a" if deployment else name
        body = owner_body(flavour, "MachineSet", set_name, replicas, labels, annotations=set_annotations if deployment else annotations)
        body["metadata"]["ownerReferences"] = set_owner_refs
        machine_set = kube.create(owner_collection(flavour, namespace), body)
        set_path = f"{owner_collection(flavour, namespace)}/{set_name}"
        created.append(set_path)
        pool = Pool(kube, flavour, namespace, owner_path or set_path, set_path, machine_set, labels, make_machine, make_node)
        for _index in range(replicas):
            pool.add()
        return pool

    yield _make
    for path in reversed(created):  # the MachineSets first: the garbage collector takes those of a deleted MachineDeployment
        if kube.get(path) is not None:
            kube.patch(path, {"metadata": {"finalizers": None}})
            kube.delete(path)


def delete_args(pool: Pool, names: list[str], **extra) -> dict:
    return {"machines": [{"name": name, "namespace": pool.namespace} for name in names], "drain_timeout": 120, "terminate_timeout": 120, **extra}


def finish(run_module, pool: Pool, names: list[str], **extra) -> dict:
    """machine_delete until the Machines are gone (OpenShift's provider tasks confirmed after their preTerminate gate opens)."""
    result = run_module("machine_delete", delete_args(pool, names, **extra))
    assert not result.get("failed"), result.get("msg") or result
    waiting = [m["key"] for m in result["machines"] if m["status"] == "awaiting_instance_termination"]
    if waiting:
        result = run_module("machine_delete", delete_args(pool, names, clock=result["clock"], instance_terminated=waiting, **extra))
        assert not result.get("failed"), result.get("msg") or result
    assert [m["status"] for m in result["machines"]] == ["done"] * len(names), result["progress"]
    return result


# ---------------------------------------------------------------------------
# none: removed for good


@pytest.mark.parametrize("deployment", [False, True], ids=["machineset", "machinedeployment"])
def test_remove_for_good_lowers_the_owners_replicas_and_touches_no_other_machine(*, flavour, kube, make_pool, run_module, deployment) -> None:
    if deployment and flavour == "openshift":
        pytest.skip("OpenShift has no MachineDeployment")
    pool = make_pool(3, deployment=deployment)
    gone, *kept = pool.machines
    before = {name: pool.machine(name)["metadata"]["resourceVersion"] for name in kept}
    result = finish(run_module, pool, [gone], replacement="none", machine_controller="absent")
    entry = result["machines"][0]
    assert entry["replacement"]["mode"] == "none" and entry["replacement"]["owner"].endswith(pool.owner()["metadata"]["name"]), entry["replacement"]
    assert pool.replicas() == 2
    assert pool.machine(gone) is None
    # The owner's record went with its last Machine; the other Machines were not written.
    assert RECORD_ANNOTATION not in (pool.owner()["metadata"].get("annotations") or {})
    assert {name: pool.machine(name)["metadata"]["resourceVersion"] for name in kept} == before
    if deployment:
        assert kube.get(pool.set_path)["spec"]["replicas"] == 3, "the MachineDeployment is scaled, not its MachineSet"
    metrics = result["metrics"][entry["key"]]
    assert metrics["pool_short_seconds"] == 0.0 and metrics["replacement_ready_seconds"] is None, metrics


def test_after_says_which_owner_replaces_the_machine(*, flavour, make_pool, run_module) -> None:
    pool = make_pool(2)
    result = run_module("machine_delete", delete_args(pool, pool.machines[:1]), check=True)
    replacement = result["machines"][0]["replacement"]
    assert replacement["mode"] == "after", replacement
    when = "once it is gone" if flavour != "openshift" else "as soon as its deletion starts"
    assert replacement["message"].startswith(f"MachineSet {pool.machines[0].rsplit('-', 1)[0]} ") and when in replacement["message"], replacement


@TWO_FLAVOURS
def test_check_mode_says_what_each_mode_would_do_and_changes_nothing(*, flavour, make_pool, run_module) -> None:
    pool = make_pool(3)
    none = run_module("machine_delete", delete_args(pool, pool.machines[:1], replacement="none"), check=True)
    first = run_module("machine_delete", delete_args(pool, pool.machines[:1], replacement="first"), check=True)
    assert "lower MachineSet" in none["machines"][0]["replacement"]["message"] and "3 -> 2" in none["machines"][0]["replacement"]["message"]
    assert "raise MachineSet" in first["machines"][0]["replacement"]["message"] and "3 -> 4" in first["machines"][0]["replacement"]["message"]
    assert pool.replicas() == 3 and pool.record() == Record()
    assert all(not (pool.machine(name)["metadata"].get("annotations") or {}).get(DELETE_ANNOTATION[flavour]) for name in pool.machines)


# ---------------------------------------------------------------------------
# Refusals, before any change


def _refused(run_module, pool: Pool, name: str, says: str, **extra) -> None:
    replicas, rv = pool.replicas(), pool.owner()["metadata"]["resourceVersion"]
    result = run_module("machine_delete", delete_args(pool, [name], **extra))
    assert result.get("failed"), result
    assert says in result["msg"], result["msg"]
    assert "nothing was changed" in result["msg"], result["msg"]
    machine = pool.machine(name)
    assert machine is not None and not machine["metadata"].get("deletionTimestamp"), machine["metadata"]
    assert DELETE_ANNOTATION[pool.flavour] not in (machine["metadata"].get("annotations") or {})
    assert (pool.replicas(), pool.owner()["metadata"]["resourceVersion"]) == (replicas, rv)


@pytest.mark.parametrize(
    ("mode", "annotations", "says"),
    [
        ("none", {"{group}/cluster-api-autoscaler-node-group-min-size": "3"}, "the cluster autoscaler's minimum"),
        ("first", {"{group}/cluster-api-autoscaler-node-group-max-size": "3"}, "the cluster autoscaler's maximum"),
    ],
    ids=["below-min-size", "above-max-size"],
)
@TWO_FLAVOURS
def test_the_autoscalers_bounds_are_refused(*, flavour, make_pool, run_module, mode, annotations, says) -> None:
    group = "machine.openshift.io" if flavour == "openshift" else "cluster.x-k8s.io"
    pool = make_pool(3, annotations={key.format(group=group): value for key, value in annotations.items()})
    _refused(run_module, pool, pool.machines[0], says, replacement=mode)


@TWO_FLAVOURS
def test_a_paused_owner_a_deleted_owner_and_a_rival_are_refused(*, flavour, kube, make_pool, run_module) -> None:
    if flavour == "openshift":
        pool = make_pool(3)
        # The MachineSet controller's Paused condition (the Default feature set's CRD has no authoritativeAPI field).
        paused = {
            "type": "Paused",
            "status": "True",
            "reason": "AuthoritativeAPINotMachineAPI",
            "message": "The AuthoritativeAPI status is set to 'ClusterAPI'",
        }
        kube.patch(pool.set_path, {"status": {"conditions": [{**paused, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}, subresource_status=True)
        _refused(
            run_module,
            pool,
            pool.machines[0],
            "is paused: its Paused condition is True (The AuthoritativeAPI status is set to 'ClusterAPI')",
            replacement="none",
        )
    else:
        pool = make_pool(3, annotations={"cluster.x-k8s.io/paused": ""})
        _refused(run_module, pool, pool.machines[0], "is paused: it has the cluster.x-k8s.io/paused annotation", replacement="first")
    rival = make_pool(3)
    kube.patch(rival.machine_path(rival.machines[2]), {"metadata": {"annotations": {DELETE_ANNOTATION[flavour]: "autoscaler"}}})
    _refused(run_module, rival, rival.machines[0], f"ranks Machine {rival.namespace}/{rival.machines[2]} as high as", replacement="none")
    going = make_pool(2)
    kube.patch(going.set_path, {"metadata": {"finalizers": ["lifecycle.machine.dev/test"]}})
    kube.delete(going.set_path)
    _refused(run_module, going, going.machines[0], "is being deleted", replacement="none")


@TWO_FLAVOURS
def test_control_plane_machine_pool_rollout_and_no_owner_are_refused(*, flavour, kube, namespace, make_machine, make_pool, run_module) -> None:
    pool = make_pool(2)
    if flavour == "openshift":
        owners = [("ControlPlaneMachineSet", "cluster", "etcd quorum")]
    else:
        owners = [("KubeadmControlPlane", "kcp", "KubeadmControlPlane controller")]
    if flavour != "openshift":
        owners.append(("MachinePool", "mp", "scale the MachinePool itself"))
    for kind, name, says in owners:
        machine = pool.add()
        ref = {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": str(uuid.uuid4()), "controller": True}
        kube.patch(pool.machine_path(machine), {"metadata": {"ownerReferences": [ref]}})
        _refused(run_module, pool, machine, says, replacement="first")
    loose = make_machine(namespace, name=f"loose-{uuid.uuid4().hex[:4]}")["metadata"]["name"]
    result = run_module("machine_delete", delete_args(pool, [loose], replacement="first"))
    assert result.get("failed") and "has no owner" in result["msg"], result
    if flavour != "openshift":
        rolling = make_pool(2, deployment=True)
        second = owner_body(flavour, "MachineSet", f"{rolling.labels[POOL_LABEL]}-b", 1, rolling.labels)
        second["metadata"]["ownerReferences"] = [controller_ref(kube.get(rolling.owner_path))]
        kube.create(owner_collection(flavour, rolling.namespace), second)
        _refused(run_module, rolling, rolling.machines[0], "is rolling out", replacement="none")
    result = run_module("machine_delete", delete_args(pool, pool.machines[:1], replacement="first", machine_controller="absent"))
    assert result.get("failed") and "needs a live MachineSet controller" in result["msg"], result


# ---------------------------------------------------------------------------
# A run stopped at any step: the next run completes it


def _write_record(pool: Pool, record: Record, replicas: int) -> None:
    pool.kube.patch(pool.owner_path, {"metadata": {"annotations": {RECORD_ANNOTATION: record.text()}}, "spec": {"replicas": replicas}})


@pytest.mark.parametrize("step", ["annotated", "scaled-down", "deleting", "gone"])
@TWO_FLAVOURS
def test_remove_for_good_stopped_at_each_step_is_completed_by_the_next_run(*, flavour, kube, make_pool, run_module, step) -> None:
    pool = make_pool(3)
    name, other, _third = pool.machines
    kube.patch(pool.machine_path(name), {"metadata": {"annotations": {DELETE_ANNOTATION[flavour]: "lifecycle.machine"}}})
    if step != "annotated":
        _write_record(pool, Record({name: Entry(NONE, SCALED_DOWN, 1)}), 2)
    if step in ("deleting", "gone"):
        kube.delete(pool.machine_path(name))
    if step == "gone":
        kube.patch(pool.machine_path(name), {"metadata": {"finalizers": None}})
        # A later removal on the same owner tidies the record the stopped run left.
        finish(run_module, pool, [other], replacement="none", machine_controller="absent")
        assert pool.replicas() == 1 and pool.record() == Record()
        return
    finish(run_module, pool, [name], replacement="none", machine_controller="absent")
    assert pool.replicas() == 2, "lowered once, whatever step the run stopped at"
    assert pool.machine(name) is None and pool.record() == Record()


@pytest.mark.parametrize("step", ["surged", "annotated", "scaled-down", "orphaned"])
@TWO_FLAVOURS
def test_replace_first_stopped_at_each_step_is_completed_by_the_next_run(*, flavour, kube, make_pool, run_module, step) -> None:
    pool = make_pool(2)
    name, _other = pool.machines
    # The surge as a stopped run leaves it: replicas 3, the record saying so, the MachineSet's new Machine Ready.
    _write_record(pool, Record({name: Entry(FIRST, SURGED, 1, time.time())}, tuple(pool.machines)), 3)
    replacement = pool.add()
    if step in ("annotated", "scaled-down"):
        kube.patch(pool.machine_path(name), {"metadata": {"annotations": {DELETE_ANNOTATION[flavour]: "lifecycle.machine"}}})
    if step == "scaled-down":
        _write_record(pool, Record({name: Entry(FIRST, SCALED_DOWN, 1)}, (name, _other)), 2)
    if step == "orphaned":
        # Someone else deleted the Machine while the surge was awaited: the next run brings the replicas back.
        kube.patch(pool.machine_path(name), {"metadata": {"finalizers": None}})
        kube.delete(pool.machine_path(name))
        wait_for(lambda: pool.machine(name) is None, 30, what="the Machine gone")
        result = run_module("machine_delete", delete_args(pool, [_other], replacement="first", replacement_timeout=5))
        # The orphan's replicas came back and its entry went (nothing left to keep); then _other's own surge waited
        # for a replacement the bed does not make (the one already there is no longer new to a fresh record).
        assert name not in pool.record().entries and pool.record().entries[_other].step == SURGED, pool.record()
        assert pool.replicas() == 3, "3 surged for _other, less the orphan's surge"
        assert result["failed_machines"] and "Timed out after 5 s waiting for the replacement" in result["failed_machines"][0]["message"]
        return
    result = finish(run_module, pool, [name], replacement="first")
    assert pool.replicas() == 2 and pool.machine(name) is None and pool.record() == Record()
    assert pool.machine(replacement) is not None
    assert result["machines"][0]["replacement"]["step"] == "deleting", result["machines"][0]["replacement"]


# ---------------------------------------------------------------------------
# first, with the test bed playing the MachineSet controller


class PlayedMachineSet:
    """The test bed as the MachineSet controller: a Machine (and a Ready Node, after ``boot`` seconds) whenever the
    MachineSet's replicas ask for more than it has - counting a Machine being deleted as Cluster API does, or not as
    OpenShift does. It never deletes (the collection deletes the Machine it lowers the replicas for)."""

    def __init__(self, pool: Pool, boot: float = 1.0):
        self.pool = pool
        self.boot = boot
        self.created: list[str] = []
        self.paused = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PlayedMachineSet:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            if self.paused.is_set():
                continue
            owned = [m for m in self.pool.owned() if self.pool.flavour != "openshift" or not m["metadata"].get("deletionTimestamp")]
            if len(owned) < self.pool.kube.get(self.pool.set_path)["spec"]["replicas"]:
                time.sleep(self.boot)
                self.created.append(self.pool.add())


@TWO_FLAVOURS
def test_replace_first_has_the_new_node_ready_before_the_old_one_is_cordoned(*, flavour, kube, make_pool, run_module, audit_events) -> None:
    pool = make_pool(2)
    name = pool.machines[0]
    old_node = f"n-{name}"
    with PlayedMachineSet(pool, boot=2.0) as played:
        result = finish(run_module, pool, [name], replacement="first")
    assert len(played.created) == 1, played.created
    new = played.created[0]
    entry = result["machines"][0]
    assert entry["replacement"]["replacement"] == new, entry["replacement"]
    assert pool.replicas() == 2 and pool.machine(name) is None and pool.record() == Record()
    ready = next(c for c in kube.get(f"/api/v1/nodes/n-{new}")["status"]["conditions"] if c["type"] == "Ready")["lastTransitionTime"]
    cordons = [e for e in audit_events(resource="nodes", subresource="", verb="patch") if e["objectRef"].get("name") == old_node]
    assert cordons, "the old Node was cordoned"
    assert ready <= cordons[0]["requestReceivedTimestamp"][:19] + "Z", (ready, cordons[0]["requestReceivedTimestamp"])
    metrics = result["metrics"][entry["key"]]
    assert metrics["pool_short_seconds"] == 0.0 and metrics["replacement_ready_seconds"] >= 2.0, metrics


@TWO_FLAVOURS
def test_a_run_killed_while_it_waits_for_the_replacement_is_completed_by_the_next(*, flavour, kube, kubeconfig, make_pool, run_module, tmp_path) -> None:
    pool = make_pool(2)
    name = pool.machines[0]
    with PlayedMachineSet(pool, boot=0.5) as played:
        played.paused.set()  # the new Machine does not come until the first run is killed
        env = ansible_env(kubeconfig)
        env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
        args = json.dumps(delete_args(pool, [name], replacement="first"))
        command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,"]
        command += ["-m", "lifecycle.machine.machine_delete", "-a", args]
        with (tmp_path / "run.log").open("w") as log:
            run = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=REPO)
            try:
                wait_for(lambda: name in pool.record().entries, 60, what="the surge recorded on the owner")
                time.sleep(1)
            finally:
                kill_tree(run.pid)
                run.wait(timeout=10)
        assert pool.replicas() == 3 and pool.record().entries[name].step == SURGED
        assert not pool.machine(name)["metadata"].get("deletionTimestamp")
        played.paused.clear()
        finish(run_module, pool, [name], replacement="first")
    assert len(played.created) == 1, "one surge, one replacement: the killed run's surge was not made twice"
    assert pool.replicas() == 2 and pool.machine(name) is None and pool.record() == Record()
