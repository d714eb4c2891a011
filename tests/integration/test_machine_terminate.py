"""machine_terminate against the real API server, for OpenShift, Cluster API
v1beta1-only and Cluster API v1beta2 Machines: the gates hold (watched), the
objects go in order, the conditions carry the upstream reasons and messages,
and a second or resumed run changes nothing more."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import ansible_env, machine_collection
from khelpers import put_fake_object, stop_process, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import write_stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_DRAINED, Stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for

CAPI = ["v1beta1", "v1beta2"]
INFRASTRUCTURE = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/fakemachines"
BOOTSTRAP = "/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{ns}/fakebootstrapconfigs"
HOLD = "lifecycle.machine.dev/test-hold"
PRE_TERMINATE_KEY = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush-logs"
CSI_DRIVER = "csi.lifecycle.example.com"


def machine_path(flavour: str, namespace: str, name: str) -> str:
    return f"{machine_collection(flavour, namespace)}/{name}"


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def conditions(kube: KubeApi, flavour: str, path: str) -> dict[str, dict]:
    """Condition type -> condition; for Cluster API v1beta2 the deprecated v1beta1 ones are keyed ``v1beta1/<type>``."""
    status = kube.get(path).get("status") or {}
    found = {c["type"]: c for c in status.get("conditions") or []}
    if flavour == "v1beta2":
        found.update({f"v1beta1/{c['type']}": c for c in ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []})
    return found


def step(result: dict, name: str) -> dict:
    return next(s for s in result["steps"] if s["name"] == name)


class Watcher(threading.Thread):
    """Records every change the API server reports for one object from now on."""

    def __init__(self, kubeconfig: str, path: str):
        super().__init__(daemon=True)
        self.api = api_from_kubeconfig(kubeconfig)
        self.collection, _slash, self.name = path.rpartition("/")
        self.version = self.api.get(path)["metadata"]["resourceVersion"]
        self.events: list[tuple[str, dict]] = []
        self.stopping = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.stopping.is_set():
            for event in self.api.watch(self.collection, field_selector=f"metadata.name={self.name}", resource_version=self.version, timeout=1):
                if event.get("type") in ("MODIFIED", "DELETED"):
                    self.events.append((event["type"], event["object"]))
                    self.version = event["object"]["metadata"]["resourceVersion"]

    def stop(self) -> list[tuple[str, dict]]:
        self.stopping.set()
        self.join(10)
        return self.events


class Background(threading.Thread):
    """Runs a module in the background, as a second task would."""

    def __init__(self, run_module, params: dict):
        super().__init__(daemon=True)
        self.run_module, self.params, self.result = run_module, params, None
        self.start()

    def run(self) -> None:
        self.result = self.run_module("machine_terminate", self.params)

    def outcome(self, timeout: float = 180) -> dict:
        self.join(timeout)
        assert self.result is not None, "machine_terminate did not finish"
        return self.result


@pytest.fixture
def doomed(*, kube, flavour, namespace, make_machine, make_node, capi_cluster):
    """Factory for a Machine marked for deletion (and drained unless told otherwise),
    with a kwok Node and, for Cluster API, its FakeMachine and FakeBootstrapConfig.

    Returns a dict of names and REST paths.
    """
    held: list[str] = []

    def _make(
        *,
        hooks: dict | None = None,
        drained: bool = True,
        node: bool = True,
        node_labels: dict | None = None,
        annotations: dict | None = None,
        spec: dict | None = None,
        extra_finalizers: tuple[str, ...] = (),
        infrastructure_finalizers: tuple[str, ...] = (),
        bootstrap_finalizers: tuple[str, ...] = (),
        deleting: bool = True,
        cluster_deleting: bool = False,
    ) -> dict:
        capi_cluster(namespace, deleting=cluster_deleting)
        node_name = make_node(labels=node_labels) if node else None
        name = f"m-{uuid.uuid4().hex[:6]}"
        extra = {"annotations": annotations or {}}
        if spec:
            extra["spec"] = spec
        make_machine(namespace, name=name, node=node_name, hooks=hooks, **extra)
        path = machine_path(flavour, namespace, name)
        objects = {}
        if flavour != "openshift":
            for key, collection, finalizers in (
                ("infrastructure", INFRASTRUCTURE, infrastructure_finalizers),
                ("bootstrap", BOOTSTRAP, bootstrap_finalizers),
            ):
                objects[key] = put_fake_object(kube, collection.format(ns=namespace), name, finalizers=finalizers)
                held.append(objects[key])
        if extra_finalizers:
            finalizers = kube.get(path)["metadata"]["finalizers"] + list(extra_finalizers)
            kube.patch(path, {"metadata": {"finalizers": finalizers}})
        if deleting:
            kube.delete(path)
        if drained:
            machine = kube.get(path)
            write_stage(kube, machine, flavour_for(machine), Stage(STAGE_DRAINED))
        return {"name": name, "namespace": namespace, "path": path, "node": node_name, **objects}

    yield _make
    for path in held:  # let the namespace go away
        if kube.get(path) is not None:
            kube.patch(path, {"metadata": {"finalizers": None}})


def args(machine: dict, **extra) -> dict:
    return {"machine": machine["name"], "namespace": machine["namespace"], **extra}


def remove_hook(kube: KubeApi, flavour: str, machine: dict, point: str = "preTerminate") -> None:
    if flavour == "openshift":
        kube.patch(machine["path"], {"spec": {"lifecycleHooks": {point: None}}})
    else:
        prefix = {"preDrain": "pre-drain", "preTerminate": "pre-terminate"}[point]
        annotations = kube.get(machine["path"])["metadata"].get("annotations") or {}
        kube.patch(machine["path"], {"metadata": {"annotations": {k: None for k in annotations if k.startswith(prefix)}}})


def release_finalizer(kube: KubeApi, path: str, finalizer: str) -> None:
    current = kube.get(path)
    kube.patch(path, {"metadata": {"finalizers": [f for f in current["metadata"].get("finalizers") or [] if f != finalizer]}})


def untouched(kube: KubeApi, machine: dict) -> dict:
    """resourceVersions of the Machine and what it owns, to prove nothing was written."""
    return {key: (kube.get(machine[key]) or {}).get("metadata", {}).get("resourceVersion") for key in ("path", "infrastructure", "bootstrap") if key in machine}


# -- refusals ------------------------------------------------------------------------------


def test_refuses_a_machine_not_marked_for_deletion(flavour, doomed, run_module, kube) -> None:
    machine = doomed(deleting=False, drained=False)
    before = untouched(kube, machine)
    for check in (True, False):
        result = run_module("machine_terminate", args(machine, wait=True), check=check)
        assert result.get("failed") is True, result
        assert result["msg"].startswith(f"Refusing to terminate Machine {machine['namespace']}/{machine['name']} (Node {machine['node']})")
        assert "not marked for deletion" in result["msg"]
    assert untouched(kube, machine) == before
    assert kube.get(node_path(machine["node"])) is not None


def test_refuses_a_closed_pre_drain_gate_then_an_unfinished_drain(flavour, doomed, run_module, kube) -> None:
    machine = doomed(hooks={"preDrain": [("etcd-quorum", "etcd-guard")]}, drained=False)
    before = untouched(kube, machine)
    result = run_module("machine_terminate", args(machine))
    assert result.get("failed") is True, result
    assert "the preDrain gate is closed" in result["msg"]
    assert "etcd-quorum (owner etcd-guard)" in result["msg"] and machine["node"] in result["msg"]
    assert result["blocked_by"][0]["name"] == "etcd-quorum" and result["blocked_by"][0]["owner"] == "etcd-guard"
    assert step(result, "pre_drain_hook")["status"] == "blocked"
    assert untouched(kube, machine) == before

    remove_hook(kube, flavour, machine, "preDrain")
    before = untouched(kube, machine)
    result = run_module("machine_terminate", args(machine, wait=True))
    assert result.get("failed") is True, result
    assert result["msg"] == (
        f"Refusing to terminate Machine {machine['namespace']}/{machine['name']}: the drain of Node {machine['node']} is not finished "
        "(the drain has not started); drain it first (lifecycle.machine.machine_drain)"
    )
    assert result["changed"] is False
    assert untouched(kube, machine) == before
    assert kube.get(node_path(machine["node"])) is not None


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_refuses_invalid_inline_rules_before_anything_is_written(flavour, doomed, run_module, kube) -> None:
    machine = doomed()
    before = untouched(kube, machine)
    result = run_module("machine_terminate", args(machine, rules=[{"name": "typo", "drain": {"behavior": "Evict"}}]))
    assert result.get("failed") is True, result
    assert result["msg"].startswith("Invalid MachineDrainRule typo: spec.drain.behavior must be one of Drain, Skip, WaitCompleted")
    assert untouched(kube, machine) == before


# -- the preTerminate gate and the whole termination ---------------------------------------------


def assert_pre_terminate_conditions(kube: KubeApi, flavour: str, path: str) -> None:
    found = conditions(kube, flavour, path)
    if flavour == "openshift":
        terminable = found["Terminable"]
        assert (terminable["status"], terminable["reason"]) == ("False", "HookPresent")
        assert terminable["message"] == "Terminate operation currently blocked by: [{Name:flush-logs Owner:log-shipper}]"
    else:
        v1beta1 = found["PreTerminateDeleteHookSucceeded" if flavour == "v1beta1" else "v1beta1/PreTerminateDeleteHookSucceeded"]
        assert (v1beta1["status"], v1beta1["reason"], v1beta1["severity"]) == ("False", "WaitingExternalHook", "Info")
    if flavour == "v1beta2":
        deleting = found["Deleting"]
        assert (deleting["status"], deleting["reason"]) == ("True", "WaitingForPreTerminateHook")
        assert deleting["message"] == f"Waiting for pre-terminate hooks to succeed (hooks: {PRE_TERMINATE_KEY})"


def finish_openshift(kube: KubeApi, run_module, machine: dict, waiting: Background) -> dict:
    """The gate is open: the module stops for the provider tasks, then finishes when told the instance is gone."""
    result = waiting.outcome()
    assert result.get("failed") is not True, result
    assert result["awaiting_instance_termination"] is True
    assert step(result, "instance")["status"] == "waiting"
    assert kube.get(node_path(machine["node"])) is not None
    assert conditions(kube, "openshift", machine["path"])["Terminable"]["status"] == "True"
    result = run_module("machine_terminate", args(machine, instance_terminated=True, wait=True))
    assert result.get("failed") is not True, result
    return result


def finish_capi(kube: KubeApi, flavour: str, machine: dict, waiting: Background) -> dict:
    """The gate is open: the infrastructure goes first; the module then waits for the bootstrap config, which a finalizer holds."""
    wait_for(lambda: (kube.get(machine["bootstrap"]) or {}).get("metadata", {}).get("deletionTimestamp"), timeout=60, what="bootstrap deletion")
    assert kube.get(machine["infrastructure"]) is None
    time.sleep(1)
    assert waiting.is_alive()
    assert kube.get(node_path(machine["node"])) is not None, "the Node went before the bootstrap config"
    if flavour == "v1beta2":
        deleting = conditions(kube, flavour, machine["path"])["Deleting"]
        assert (deleting["reason"], deleting["message"]) == ("WaitingForBootstrapDeletion", "Waiting for FakeBootstrapConfig to be deleted")
    release_finalizer(kube, machine["bootstrap"], HOLD)
    result = waiting.outcome()
    assert result.get("failed") is not True, result
    assert "delete FakeMachine" in " ".join(result["actions"]) and "delete FakeBootstrapConfig" in " ".join(result["actions"])
    assert kube.get(machine["bootstrap"]) is None
    return result


def test_pre_terminate_gate_holds_then_everything_goes_in_order(flavour, doomed, run_module, kube, kubeconfig) -> None:
    machine = doomed(hooks={"preTerminate": [("flush-logs", "log-shipper")]}, bootstrap_finalizers=(HOLD,))

    gated = run_module("machine_terminate", args(machine))
    assert gated.get("failed") is not True, gated
    # Cluster API records the stage now; OpenShift's Terminable already said so when the drain was recorded.
    assert gated["changed"] is (flavour != "openshift"), gated["actions"]
    assert gated["next_step"] == "pre_terminate_hook"
    assert step(gated, "pre_terminate_hook")["status"] == "blocked"
    assert step(gated, "pre_terminate_hook")["reason"] == "preTerminate hooks: flush-logs (owner log-shipper)"
    assert [(h["name"], h["owner"]) for h in gated["blocked_by"]] == [("flush-logs", "log-shipper")]
    assert gated["released"] is False and gated["awaiting_instance_termination"] is False
    assert_pre_terminate_conditions(kube, flavour, machine["path"])

    again = run_module("machine_terminate", args(machine))
    assert again["changed"] is False, again["actions"]

    # While the hook exists, neither the Node nor the infrastructure is touched, even by a waiting run.
    watchers = [Watcher(kubeconfig, node_path(machine["node"]))]
    if flavour != "openshift":
        watchers += [Watcher(kubeconfig, machine["infrastructure"]), Watcher(kubeconfig, machine["bootstrap"])]
    waiting = Background(run_module, args(machine, wait=True, wait_timeout=120))
    time.sleep(4)
    assert waiting.is_alive(), waiting.result
    changes = {f"{w.collection}/{w.name}": w.stop() for w in watchers}
    assert changes == {key: [] for key in changes}, "changed while the preTerminate hook exists"

    remove_hook(kube, flavour, machine)
    result = finish_openshift(kube, run_module, machine, waiting) if flavour == "openshift" else finish_capi(kube, flavour, machine, waiting)
    assert result["changed"] is True
    assert result["released"] is True and result["gone"] is True
    assert [s["status"] for s in result["steps"]] == ["done"] * len(result["steps"]), result["steps"]
    assert kube.get(node_path(machine["node"])) is None
    assert kube.get(machine["path"]) is None

    second = run_module("machine_terminate", args(machine, wait=True, instance_terminated=True))
    assert second.get("failed") is not True, second
    assert (second["changed"], second["gone"], second["released"]) == (False, True, True)


def test_check_mode_reports_the_next_step_and_writes_nothing(flavour, doomed, run_module, kube) -> None:
    machine = doomed()
    before = untouched(kube, machine)
    result = run_module("machine_terminate", args(machine, wait=True), check=True, diff=True)
    assert result.get("failed") is not True, result
    # OpenShift has nothing to write before the provider tasks: Terminable was recorded with the drain.
    assert result["changed"] is (flavour != "openshift")
    if flavour == "openshift":
        assert result["next_step"] == "instance"
        assert result["awaiting_instance_termination"] is True
    else:
        assert result["next_step"] == "infrastructure"
        assert f"would delete FakeMachine {machine['namespace']}/{machine['name']}" in result["actions"]
        key = f"FakeMachine {machine['namespace']}/{machine['name']}"
        assert result["diff"]["before"][key] == {"exists": True}
        assert result["diff"]["after"][key] == {"exists": False}
    assert all(action.startswith("would ") for action in result["actions"])
    assert untouched(kube, machine) == before
    assert kube.get(node_path(machine["node"])) is not None


# -- the volume-detach wait -------------------------------------------------------------------------


@pytest.fixture
def volumes(kube):
    """Create PersistentVolumes (CSI) claimed by ``namespace/claim`` and VolumeAttachments; removed after the test."""
    created: list[str] = []

    def _pv(namespace: str, claim: str) -> tuple[str, str]:
        name = f"pv-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "csi": {"driver": CSI_DRIVER, "volumeHandle": f"handle-{name}"},
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": namespace, "name": claim},
            },
        }
        kube.create("/api/v1/persistentvolumes", body)
        created.append(f"/api/v1/persistentvolumes/{name}")
        return name, f"kubernetes.io/csi/{CSI_DRIVER}^handle-{name}"

    def _attach(node: str, pv: str) -> str:
        name = f"va-{uuid.uuid4().hex[:8]}"
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": CSI_DRIVER, "nodeName": node, "source": {"persistentVolumeName": pv}},
        }
        path = f"/apis/storage.k8s.io/v1/volumeattachments/{name}"
        kube.create("/apis/storage.k8s.io/v1/volumeattachments", body)
        kube.patch(path, {"status": {"attached": True}}, subresource_status=True)
        created.append(path)
        return path

    yield _pv, _attach
    for path in created:
        kube.delete(path)


def volume_start(kube: KubeApi, flavour: str, path: str) -> str | None:
    machine = kube.get(path)
    if flavour == "openshift":
        return (machine["metadata"].get("annotations") or {}).get("lifecycle.machine.dev/volume-detach-start-time")
    return ((machine.get("status") or {}).get("deletion") or {}).get("waitForNodeVolumeDetachStartTime")


def test_volume_wait_holds_while_a_volume_attachment_is_attached(flavour, doomed, volumes, run_module, kube) -> None:
    make_pv, attach = volumes
    machine = doomed()
    pv, _unique = make_pv(machine["namespace"], "data")
    attachment = attach(machine["node"], pv)
    claim = f"{machine['namespace']}/data"

    result = run_module("machine_terminate", args(machine))
    assert result.get("failed") is not True, result
    assert result["next_step"] == "volume_detach"
    assert result["volumes"]["waiting"] is True and result["volumes"]["pvcs"] == [claim]
    started = volume_start(kube, flavour, machine["path"])
    assert started and result["volumes"]["started_at"] == started
    message = f"Waiting for Node volumes to be detached (started at {started})\n* PersistentVolumeClaims: {claim}"
    assert step(result, "volume_detach") == {"name": "volume_detach", "status": "waiting", "reason": message}
    found = conditions(kube, flavour, machine["path"])
    if flavour == "v1beta2":
        assert (found["Deleting"]["reason"], found["Deleting"]["message"]) == ("WaitingForVolumeDetach", message)
    if flavour == "v1beta1":
        assert (found["VolumeDetachSucceeded"]["status"], found["VolumeDetachSucceeded"]["reason"]) == ("False", "WaitingForVolumeDetach")
    before = untouched(kube, machine)

    time.sleep(1.1)  # a new start time would differ
    again = run_module("machine_terminate", args(machine))
    assert again["changed"] is False, again["actions"]
    assert volume_start(kube, flavour, machine["path"]) == started, "the start of the wait was recorded twice"
    assert untouched(kube, machine) == before

    waiting = Background(run_module, args(machine, wait=True, wait_sleep=1, wait_timeout=120))
    time.sleep(3)
    assert waiting.is_alive(), waiting.result
    assert untouched(kube, machine) == before
    kube.patch(attachment, {"status": {"attached": False}}, subresource_status=True)
    result = waiting.outcome()
    assert result.get("failed") is not True, result
    assert step(result, "volume_detach")["status"] == "done"
    if flavour == "openshift":
        assert result["awaiting_instance_termination"] is True
    else:
        assert result["gone"] is True
        assert kube.get(node_path(machine["node"])) is None


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_an_attachment_naming_no_persistent_volume_holds_the_wait_with_cluster_apis_error(flavour, doomed, volumes, run_module, kube) -> None:
    """An inline (CSI-migrated) volume's VolumeAttachment names no PersistentVolume: as Cluster API v1.14.2, each look
    of the wait ends in its error - Deleting's message, a Warning Event naming the attachment - and the wait goes on
    until the attachment is detached (docs/behaviour.md, 4 and row 21b)."""
    _make_pv, _attach = volumes
    machine = doomed()
    name = f"va-inline-{uuid.uuid4().hex[:6]}"
    path = f"/apis/storage.k8s.io/v1/volumeattachments/{name}"
    inline = {"csi": {"driver": CSI_DRIVER, "volumeHandle": f"handle-{name}"}, "accessModes": ["ReadWriteOnce"]}
    body = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": CSI_DRIVER, "nodeName": machine["node"], "source": {"inlineVolumeSpec": inline}},
    }
    kube.create("/apis/storage.k8s.io/v1/volumeattachments", body)
    try:
        kube.patch(path, {"status": {"attached": True}}, subresource_status=True)
        error = f"spec.source.persistentVolumeName for VolumeAttachment {name} is not set"

        result = run_module("machine_terminate", args(machine))
        assert result.get("failed") is not True, result
        assert result["next_step"] == "volume_detach" and result["volumes"]["error"] == error
        found = conditions(kube, flavour, machine["path"])
        assert (found["Deleting"]["reason"], found["Deleting"]["message"]) == (
            "WaitingForVolumeDetach",
            "Error waiting for volumes to be detached from Node, please check controller logs for errors",
        )
        [blocker] = [b for b in result["blockers"] if b["kind"] == "volume attachment"]
        assert (blocker["object"], blocker["verdict"], blocker["evidence"]["error"]) == (f"VolumeAttachment {name}", "clears by itself", error)
        events = kube.list(f"/api/v1/namespaces/{machine['namespace']}/events", field_selector=f"involvedObject.name={machine['name']}")
        warned = [e["message"] for e in events if e["reason"] == "FailedWaitForVolumeDetach"]
        assert warned == [f'error waiting for node volumes detaching, Machine\'s node "{machine["node"]}": {error}'], warned
        again = run_module("machine_terminate", args(machine))
        events = kube.list(f"/api/v1/namespaces/{machine['namespace']}/events", field_selector=f"involvedObject.name={machine['name']}")
        assert again["changed"] is False and len([e for e in events if e["reason"] == "FailedWaitForVolumeDetach"]) == 1, "once per change"

        waiting = Background(run_module, args(machine, wait=True, wait_sleep=1, wait_timeout=120))
        time.sleep(3)
        assert waiting.is_alive(), waiting.result
        kube.patch(path, {"status": {"attached": False}}, subresource_status=True)
        result = waiting.outcome()
        assert result.get("failed") is not True, result
        assert step(result, "volume_detach")["status"] == "done" and result["gone"] is True
    finally:
        kube.delete(path)


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_volume_wait_reads_node_status_volumes_attached(flavour, doomed, volumes, run_module, kube) -> None:
    make_pv, _attach = volumes
    machine = doomed()
    _pv, unique_name = make_pv(machine["namespace"], "logs")
    # kwok leaves status.volumesAttached alone (its heartbeat runs every ten minutes or more).
    kube.patch(node_path(machine["node"]), {"status": {"volumesAttached": [{"name": unique_name, "devicePath": ""}]}}, subresource_status=True)

    result = run_module("machine_terminate", args(machine))
    assert result["volumes"]["pvcs"] == [f"{machine['namespace']}/logs"], result
    assert kube.get(machine["infrastructure"]) is not None

    kube.patch(node_path(machine["node"]), {"status": {"volumesAttached": []}}, subresource_status=True)
    result = run_module("machine_terminate", args(machine, wait=True))
    assert result.get("failed") is not True, result
    assert result["gone"] is True


def create_pod(kube: KubeApi, namespace: str, name: str, *, node: str, claim: str, labels: dict) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "app", "image": "registry.example/app:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }
    kube.create(f"/api/v1/namespaces/{namespace}/pods", body)


@pytest.mark.parametrize("flavour", ["openshift", "v1beta2"], indirect=True)
def test_claims_of_pods_the_drain_skips_are_ignored(flavour, doomed, volumes, run_module, kube) -> None:
    make_pv, attach = volumes
    machine = doomed()
    namespace = machine["namespace"]
    for claim, labels in (("cache", {"cluster.x-k8s.io/drain": "skip"}), ("scratch", {"app": "local-cache"})):
        create_pod(kube, namespace, f"uses-{claim}", node=machine["node"], claim=claim, labels=labels)
        pv, _unique = make_pv(namespace, claim)
        attach(machine["node"], pv)
    both = [f"{namespace}/cache", f"{namespace}/scratch"]

    result = run_module("machine_terminate", args(machine))
    assert result.get("failed") is not True, result
    assert result["volumes"]["ignored_pvcs"] == [f"{namespace}/cache"]
    assert result["volumes"]["pvcs"] == [f"{namespace}/scratch"]
    assert result["next_step"] == "volume_detach"

    # A MachineDrainRule of the Machine's namespace that makes the drain skip the Pod: its claim no longer holds the wait.
    skip = {"behavior": "Skip"}
    local_cache = [{"selector": {"matchLabels": {"app": "local-cache"}}}]
    rule = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDrainRule", "metadata": {"name": "skip-local-cache"}}
    kube.create(f"/apis/cluster.x-k8s.io/v1beta2/namespaces/{namespace}/machinedrainrules", {**rule, "spec": {"drain": skip, "pods": local_cache}})
    predicted = run_module("machine_terminate", args(machine), check=True)
    assert (step(predicted, "volume_detach")["status"], predicted["volumes"]["ignored_pvcs"]) == ("done", both), predicted
    ignored = run_module("machine_terminate", args(machine, use_cluster_rules=False), check=True)
    assert ignored["volumes"]["pvcs"] == [f"{namespace}/scratch"]
    # An inline rule replaces the cluster's rule of the same name, as in machine_drain.
    replaced = [{"name": "skip-local-cache", "drain": {"behavior": "Drain"}, "pods": local_cache}]
    ignored = run_module("machine_terminate", args(machine, rules=replaced), check=True)
    assert ignored["volumes"]["pvcs"] == [f"{namespace}/scratch"]

    # The inline rule the drain used (OpenShift clusters have no MachineDrainRule objects) works the same way.
    inline = [{"name": "inline-local-cache", "drain": skip, "pods": local_cache}]
    result = run_module("machine_terminate", args(machine, rules=inline, use_cluster_rules=False, wait=True))
    assert result.get("failed") is not True, result
    assert result["volumes"]["ignored_pvcs"] == both
    assert step(result, "volume_detach")["status"] == "done"
    assert result["awaiting_instance_termination"] if flavour == "openshift" else result["gone"]


# -- Cluster API skip cases -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", CAPI, indirect=True)
@pytest.mark.parametrize("case", ["no_node_ref", "cluster_deleting"])
def test_cluster_api_skip_cases_skip_node_steps_but_honour_pre_terminate(flavour, case, doomed, run_module, kube) -> None:
    hooks = {"preDrain": [("etcd-quorum", "etcd-guard")], "preTerminate": [("flush-logs", "log-shipper")]}
    machine = doomed(hooks=hooks, drained=False, node=case != "no_node_ref", cluster_deleting=case == "cluster_deleting")
    reason = "the Machine has no nodeRef" if case == "no_node_ref" else f"Cluster {machine['namespace']}/lm-test is being deleted"

    gated = run_module("machine_terminate", args(machine))
    assert gated.get("failed") is not True, gated
    for name in ("pre_drain_hook", "drain", "volume_detach"):
        assert step(gated, name) == {"name": name, "status": "skipped", "reason": f"Cluster API skips the Node steps: {reason}"}
    assert gated["next_step"] == "pre_terminate_hook"
    assert kube.get(machine["infrastructure"]) is not None

    remove_hook(kube, flavour, machine)
    result = run_module("machine_terminate", args(machine, wait=True))
    assert result.get("failed") is not True, result
    assert step(result, "node") == {"name": "node", "status": "skipped", "reason": f"Cluster API skips the Node steps: {reason}"}
    assert result["gone"] is True
    assert kube.get(machine["infrastructure"]) is None and kube.get(machine["bootstrap"]) is None
    if machine["node"]:
        assert kube.get(node_path(machine["node"])) is not None, "the Node was deleted although Cluster API skips it"


# -- Node deletion failures -------------------------------------------------------------------------


@pytest.fixture
def undeletable_label(kube):
    """A label that makes Node deletion fail, enforced by a ValidatingAdmissionPolicy of the API server."""
    key = f"lifecycle.machine.dev/undeletable-{uuid.uuid4().hex[:6]}"
    name = key.rpartition("/")[2]
    base = "/apis/admissionregistration.k8s.io/v1"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["nodes"]}]},
            "validations": [{"expression": "false", "message": "this Node may not be deleted (test policy)"}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"], "matchResources": {"objectSelector": {"matchLabels": {key: "true"}}}},
    }
    kube.create(f"{base}/validatingadmissionpolicies", policy)
    kube.create(f"{base}/validatingadmissionpolicybindings", binding)
    yield key
    kube.delete(f"{base}/validatingadmissionpolicybindings/{name}")
    kube.delete(f"{base}/validatingadmissionpolicies/{name}")


def wait_until_denied(kube: KubeApi, node: str) -> None:
    def denied() -> bool:
        try:
            kube.delete(node_path(node), dry_run=True)
        except ApiError:
            return True
        return False

    wait_for(denied, timeout=30, what="the admission policy to take effect")


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_failed_node_deletion_is_reported_then_given_up_after_the_timeout(flavour, doomed, undeletable_label, run_module, kube) -> None:
    machine = doomed(node_labels={undeletable_label: "true"}, spec={"deletion": {"nodeDeletionTimeoutSeconds": 3600}})
    wait_until_denied(kube, machine["node"])

    predicted = run_module("machine_terminate", args(machine), check=True)
    assert predicted.get("failed") is not True, predicted
    assert predicted["next_step"] == "infrastructure"  # check mode stops at the first write

    result = run_module("machine_terminate", args(machine))
    assert result.get("failed") is True, result
    assert result["msg"].startswith(f"Failed to delete Node {machine['node']} of Machine {machine['namespace']}/{machine['name']}: ")
    assert "this Node may not be deleted" in result["msg"]
    assert step(result, "node")["status"] == "blocked"
    deleting = conditions(kube, flavour, machine["path"])["Deleting"]
    assert (deleting["reason"], deleting["message"]) == ("DeletingNode", "Error deleting Node, please check controller logs for errors")
    node_healthy = conditions(kube, flavour, machine["path"])["v1beta1/NodeHealthy"]
    assert (node_healthy["status"], node_healthy["reason"], node_healthy["severity"]) == ("False", "DeletionFailed", "Warning")
    events = kube.list(f"/api/v1/namespaces/{machine['namespace']}/events", field_selector=f"involvedObject.name={machine['name']}")
    failed = [e for e in events if e["reason"] == "FailedDeleteNode"]
    assert failed and failed[0]["type"] == "Warning"
    assert (
        failed[0]["message"].startswith(f"error deleting Machine's Node: error deleting node {machine['node']}: ")
        and "this Node may not be deleted" in failed[0]["message"]
    )
    assert kube.get(machine["path"]) is not None and kube.get(machine["infrastructure"]) is None

    # Once the Machine's node deletion timeout has passed since its deletionTimestamp, the workflow goes on without it.
    kube.patch(machine["path"], {"spec": {"deletion": {"nodeDeletionTimeoutSeconds": 1}}})
    result = run_module("machine_terminate", args(machine, wait=True))
    assert result.get("failed") is not True, result
    assert step(result, "node")["status"] == "skipped"
    assert "node deletion timeout of 1s" in step(result, "node")["reason"]
    assert result["gone"] is True
    assert kube.get(node_path(machine["node"])) is not None
    kube.patch(node_path(machine["node"]), {"metadata": {"labels": {undeletable_label: None}}})


# -- release -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["openshift", "v1beta1"], indirect=True)
def test_release_keeps_other_finalizers_and_names_them(flavour, doomed, run_module, kube) -> None:
    machine = doomed(extra_finalizers=("example.com/keep",))
    result = run_module("machine_terminate", args(machine, instance_terminated=True, wait=True, wait_timeout=3))
    assert result.get("failed") is True, result
    assert result["msg"].endswith(f"Machine {machine['namespace']}/{machine['name']} was released but is still held by finalizers: example.com/keep")
    assert result["released"] is True and result["gone"] is False
    assert kube.get(machine["path"])["metadata"]["finalizers"] == ["example.com/keep"]

    again = run_module("machine_terminate", args(machine, instance_terminated=True))
    assert again.get("failed") is not True, again
    assert (again["changed"], again["released"], again["gone"]) == (False, True, False)
    assert step(again, "release")["reason"].endswith("finalizers still hold the Machine: example.com/keep")

    release_finalizer(kube, machine["path"], "example.com/keep")
    wait_for(lambda: kube.get(machine["path"]) is None, timeout=30, what="the Machine to go")


# -- resuming ------------------------------------------------------------------------------------------


def start_module(kubeconfig: str, params: dict) -> subprocess.Popen:
    """Start machine_terminate as its own process group, so the test can kill it like a cancelled AWX job."""
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,"]
    command += ["-m", "lifecycle.machine.machine_terminate", "-a", json.dumps(params)]
    env = ansible_env(kubeconfig)
    env["ANSIBLE_PYTHON_INTERPRETER"] = sys.executable
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_run_killed_while_waiting_is_continued_by_the_next(flavour, doomed, run_module, kube, kubeconfig) -> None:
    machine = doomed(hooks={"preTerminate": [("flush-logs", "log-shipper")]}, infrastructure_finalizers=(HOLD,))
    process = start_module(kubeconfig, args(machine, wait=True, wait_timeout=300))
    try:
        wait_for(lambda: conditions(kube, flavour, machine["path"]).get("Deleting", {}).get("reason") == "WaitingForPreTerminateHook", timeout=60)
        stop_process(process)  # killed at the preTerminate gate
        remove_hook(kube, flavour, machine)
        process = start_module(kubeconfig, args(machine, wait=True, wait_timeout=300))
        wait_for(lambda: (kube.get(machine["infrastructure"]) or {}).get("metadata", {}).get("deletionTimestamp"), timeout=60)
        stop_process(process)  # killed while waiting for the infrastructure
    finally:
        stop_process(process)
    deleting = conditions(kube, flavour, machine["path"])["Deleting"]
    assert (deleting["reason"], deleting["message"]) == ("WaitingForInfrastructureDeletion", "Waiting for FakeMachine to be deleted")
    assert kube.get(machine["bootstrap"]) is not None and kube.get(node_path(machine["node"])) is not None

    release_finalizer(kube, machine["infrastructure"], HOLD)
    result = run_module("machine_terminate", args(machine, wait=True))
    assert result.get("failed") is not True, result
    assert "delete FakeMachine" not in " ".join(result["actions"]), "the infrastructure was deleted twice"
    assert result["gone"] is True
    assert kube.get(machine["bootstrap"]) is None and kube.get(node_path(machine["node"])) is None


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_machine_delete_retries_a_failing_node_deletion_until_its_timeout_lets_the_machine_go(flavour, doomed, undeletable_label, run_module, kube) -> None:
    """As the Machine controller requeues: a Node that cannot be deleted is tried again
    every wait_sleep within the terminate budget; once the node-deletion timeout has
    passed since the deletion, the Machine is released without it - one task, no failure."""
    machine = doomed(node_labels={undeletable_label: "true"}, spec={"deletion": {"nodeDeletionTimeoutSeconds": 15}})
    wait_until_denied(kube, machine["node"])
    result = run_module("machine_delete", {"machines": [{"name": machine["name"], "namespace": machine["namespace"]}], "terminate_timeout": 120})
    assert result.get("failed") is not True, result
    entry = result["machines"][0]
    assert (entry["status"], entry["carried_out_by"]) == ("done", "collection"), result["progress"]
    assert kube.get(machine["path"]) is None
    assert kube.get(node_path(machine["node"])) is not None, "the refused Node is left, as upstream leaves it"
    events = kube.list(f"/api/v1/namespaces/{machine['namespace']}/events", field_selector=f"involvedObject.name={machine['name']}")
    assert [e for e in events if e["reason"] == "FailedDeleteNode"], "the failed tries were recorded"
    kube.patch(node_path(machine["node"]), {"metadata": {"labels": {undeletable_label: None}}})
