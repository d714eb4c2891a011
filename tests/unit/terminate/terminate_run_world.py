"""A small cluster in a FakeKube for the machine_terminate runner tests: a
deleted, drained Machine (Cluster API v1beta2 or OpenShift), its Node, its
Cluster with a control-plane Machine, the FakeMachine and FakeBootstrapConfig
it references, and helpers for volumes and Pods."""

from __future__ import annotations

import copy
import datetime as dt

from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import now, rfc3339

NS = "ns"
NAME = "m-1"
NODE = "worker-1"
CAPI = "cluster.x-k8s.io/v1beta2"
OPENSHIFT = "machine.openshift.io/v1beta1"
INFRASTRUCTURE = f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{NS}/fakemachines/{NAME}"
BOOTSTRAP = f"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{NS}/fakebootstrapconfigs/{NAME}"
NODE_PATH = f"/api/v1/nodes/{NODE}"
EVENTS = f"/api/v1/namespaces/{NS}/events"
CSI_DRIVER = "csi.example.com"
HOLD = "example.com/hold"


def machine_path(api_version: str = CAPI, name: str = NAME) -> str:
    return f"/apis/{api_version}/namespaces/{NS}/machines/{name}"


def resource(plural: str, kind: str, namespaced: bool = True) -> dict:
    return {"name": plural, "kind": kind, "namespaced": namespaced, "verbs": ["get", "list", "watch", "delete", "patch"]}


class World:
    """The fake transport and what is stored in it."""

    def __init__(self, api_version: str = CAPI):
        self.api_version = api_version
        self.fake = FakeKube()
        self.path = machine_path(api_version)
        discovery = self.fake.discovery
        if api_version == CAPI:
            discovery.serve(CAPI, resource("machines", "Machine"), resource("clusters", "Cluster"))
            discovery.serve("infrastructure.cluster.x-k8s.io/v1beta1", resource("fakemachines", "FakeMachine"))
            discovery.serve("bootstrap.cluster.x-k8s.io/v1beta1", resource("fakebootstrapconfigs", "FakeBootstrapConfig"))
        else:
            discovery.serve(OPENSHIFT, resource("machines", "Machine"))

    # -- objects ---------------------------------------------------------------------
    def machine(
        self,
        *,
        hooks: dict | None = None,
        finalizers: list[str] | None = None,
        spec: dict | None = None,
        infrastructure_finalizers: tuple[str, ...] = (),
        bootstrap_finalizers: tuple[str, ...] = (),
        deleted_ago: float = 300,
    ) -> dict:
        """A Machine marked for deletion ``deleted_ago`` seconds ago, drained, with its Node
        (and, for Cluster API, its Cluster, a control-plane Machine and the referenced objects)."""
        hooks = hooks or {}
        meta: dict = {
            "name": NAME,
            "namespace": NS,
            "deletionTimestamp": rfc3339(now() - dt.timedelta(seconds=deleted_ago)),
            "annotations": {},
        }
        status: dict = {"nodeRef": {"kind": "Node", "name": NODE}}
        body: dict = {"apiVersion": self.api_version, "kind": "Machine", "metadata": meta, "spec": copy.deepcopy(spec or {}), "status": status}
        if self.api_version == CAPI:
            meta["finalizers"] = finalizers if finalizers is not None else ["machine.cluster.x-k8s.io"]
            meta["labels"] = {"cluster.x-k8s.io/cluster-name": "c-1"}
            for name, owner in hooks.get("preTerminate", []):
                meta["annotations"][f"pre-terminate.delete.hook.machine.cluster.x-k8s.io/{name}"] = owner
            body["spec"].update(
                clusterName="c-1",
                infrastructureRef={"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": NAME},
                bootstrap={"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": NAME}},
            )
            status["deprecated"] = {"v1beta1": {"conditions": [{"type": "DrainingSucceeded", "status": "True"}]}}
            self.fake.put(f"/apis/{CAPI}/namespaces/{NS}/clusters/c-1", {"apiVersion": CAPI, "kind": "Cluster", "metadata": {"name": "c-1"}})
            control_plane = {"apiVersion": CAPI, "kind": "Machine", "metadata": {"name": "cp-1", "namespace": NS}}
            control_plane["metadata"]["labels"] = {"cluster.x-k8s.io/cluster-name": "c-1", "cluster.x-k8s.io/control-plane": ""}
            self.fake.put(machine_path(CAPI, "cp-1"), control_plane)
            for path, kind, held in ((INFRASTRUCTURE, "FakeMachine", infrastructure_finalizers), (BOOTSTRAP, "FakeBootstrapConfig", bootstrap_finalizers)):
                self.fake.put(path, {"kind": kind, "metadata": {"name": NAME, "namespace": NS, "finalizers": list(held)}})
        else:
            meta["finalizers"] = finalizers if finalizers is not None else ["machine.machine.openshift.io"]
            body["spec"]["lifecycleHooks"] = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in hooks.items()}
            status["conditions"] = [{"type": "Drained", "status": "True"}]
        self.node()
        return self.fake.put(self.path, body)

    def node(self, *, ready: str = "True", volumes_attached: list[str] | None = None) -> dict:
        status = {"conditions": [{"type": "Ready", "status": ready}], "volumesAttached": [{"name": n, "devicePath": ""} for n in volumes_attached or []]}
        return self.fake.put(NODE_PATH, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}, "status": status})

    def volume(self, claim: str, *, attached: bool = True) -> str:
        """A CSI PersistentVolume bound to claim ``ns/<claim>`` and a VolumeAttachment of it to the Node."""
        pv = f"pv-{claim}"
        spec = {"csi": {"driver": CSI_DRIVER, "volumeHandle": f"handle-{claim}"}, "claimRef": {"kind": "PersistentVolumeClaim", "namespace": NS, "name": claim}}
        self.fake.put(f"/api/v1/persistentvolumes/{pv}", {"kind": "PersistentVolume", "metadata": {"name": pv}, "spec": spec})
        attachment = f"/apis/storage.k8s.io/v1/volumeattachments/va-{claim}"
        body = {"kind": "VolumeAttachment", "spec": {"attacher": CSI_DRIVER, "nodeName": NODE, "source": {"persistentVolumeName": pv}}}
        self.fake.put(attachment, {**body, "status": {"attached": attached}})
        return attachment

    def pod(self, name: str, claim: str, labels: dict | None = None) -> None:
        """A Pod on the Node using claim ``ns/<claim>`` (its Namespace too)."""
        self.fake.put(f"/api/v1/namespaces/{NS}", {"kind": "Namespace", "metadata": {"name": NS}})
        spec = {"nodeName": NODE, "containers": [{"name": "app"}], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}
        meta = {"name": name, "namespace": NS, "labels": labels or {}}
        self.fake.put(f"/api/v1/namespaces/{NS}/pods/{name}", {"kind": "Pod", "metadata": meta, "spec": spec})

    # -- what happened -------------------------------------------------------------
    def stored(self, path: str) -> dict | None:
        return copy.deepcopy(self.fake.objects.get(path))

    def events(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["reason"], e["message"]) for e in self.fake.list(EVENTS)]

    def writes(self) -> list[tuple[str, str]]:
        """The requests that are not reads."""
        return [(method, path) for method, path in self.fake.requests if method != "GET"]

    def go_when_watched(self, path: str) -> None:
        """The object at ``path`` goes away (its finalizers done) as soon as a wait watches for it."""
        collection = path.rpartition("/")[0]
        previous = self.fake.on_request

        def hook(method: str, requested: str) -> None:
            if previous is not None:
                previous(method, requested)
            if method == "GET" and requested == f"{collection}?watch" and path in self.fake.objects:
                self.fake.finish(path)

        self.fake.on_request = hook


def conditions(machine: dict) -> dict[str, dict]:
    """Condition type -> condition (v1beta2's deprecated v1beta1 conditions keyed ``v1beta1/<type>``)."""
    status = machine.get("status") or {}
    found = {c["type"]: c for c in status.get("conditions") or []}
    found.update({f"v1beta1/{c['type']}": c for c in ((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or []})
    return found


def steps(result: dict) -> dict[str, tuple[str, str]]:
    return {entry["name"]: (entry["status"], entry["reason"]) for entry in result["steps"]}
