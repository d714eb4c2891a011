"""The objects of one chaos run on the real control plane: set up, read back, cleaned up.

Each run lives in a namespace of its own (``chaos-<seed>``) with kwok Nodes
labelled with the run: one per Machine, and a spare Node that replacement Pods
move to. Cluster API runs get a Cluster, a control-plane Machine (so that the
worker Machines are not in a Cluster API skip case) and infrastructure and
bootstrap objects; OpenShift runs get an "instance" ConfigMap per Machine that
hack/demo/tasks/provider.yml terminates. Every collection the timeline watches
has an anchor object (``chaos-anchor``) that ``Timeline.sync`` writes to.
"""

from __future__ import annotations

import base64
import time
from typing import Any

import cluster as cluster_tool
from scenario import CLASS_LABEL, EXPECT_LABEL, RULES, RUN_LABEL, Scenario, Workload

ANCHOR = "chaos-anchor"
INFRA_FINALIZER = "chaos.lifecycle.machine.dev/infra"
OPENSHIFT_FINALIZER = "machine.machine.openshift.io"
CAPI_FINALIZER = "machine.cluster.x-k8s.io"
HOOK_PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}
NOWHERE = "chaos-nowhere"  # the anchor Pod is bound to a Node that does not exist: nothing runs or drains it
INFRA = ("infrastructure.cluster.x-k8s.io", "fakemachines", "FakeMachine")
BOOTSTRAP = ("bootstrap.cluster.x-k8s.io", "fakebootstrapconfigs", "FakeBootstrapConfig")


class SetupError(RuntimeError):
    """The run's world could not be built (not a finding about the collection)."""


def wait_until(predicate, timeout: float, what: str) -> Any:
    return cluster_tool.poll(predicate, timeout, what, error=SetupError)


def hooks_of(flavour: str, machine: dict | None) -> set[tuple[str, str, str]]:
    """(point, name, owner) of every preDrain / preTerminate hook, as docs/behaviour.md §1 says
    each flavour keeps them (on Cluster API every annotation key that starts with a prefix)."""
    if not machine:
        return set()
    found = set()
    if flavour == "openshift":
        hooks = (machine.get("spec") or {}).get("lifecycleHooks") or {}
        for point in HOOK_PREFIX:
            found |= {(point, h.get("name", ""), h.get("owner", "")) for h in hooks.get(point) or []}
        return found
    for key, value in ((machine.get("metadata") or {}).get("annotations") or {}).items():
        for point, prefix in HOOK_PREFIX.items():
            if key.startswith(prefix):
                found.add((point, key[len(prefix) + 1 :] if key.startswith(prefix + "/") else key, value))
    return found


class World:
    """Paths and objects of one scenario; ``api`` is an admin KubeApi straight to the API server."""

    def __init__(self, api: Any, scenario: Scenario, kubeconfig_text: str | None = None):
        self.api = api
        # The Cluster API Cluster's kubeconfig Secret: the same cluster (a self-hosted one).
        self.kubeconfig_text = kubeconfig_text
        self.s = scenario
        self.ns = scenario.namespace
        self.version = "v1beta1" if scenario.flavour == "openshift" else scenario.flavour

    # -- paths -----------------------------------------------------------------------------

    @property
    def machines_path(self) -> str:
        if self.s.flavour == "openshift":
            return f"/apis/machine.openshift.io/v1beta1/namespaces/{self.ns}/machines"
        return f"/apis/cluster.x-k8s.io/{self.version}/namespaces/{self.ns}/machines"

    def machine_path(self, index: int) -> str:
        return f"{self.machines_path}/{self.s.machine_name(index)}"

    @property
    def pods_path(self) -> str:
        return f"/api/v1/namespaces/{self.ns}/pods"

    def fake_path(self, kind: tuple[str, str, str], name: str | None = None) -> str:
        path = f"/apis/{kind[0]}/v1beta1/namespaces/{self.ns}/{kind[1]}"
        return f"{path}/{name}" if name else path

    @property
    def configmaps_path(self) -> str:
        return f"/api/v1/namespaces/{self.ns}/configmaps"

    def owned_objects(self, index: int) -> dict[str, str]:
        """What the deletion of Machine ``index`` must remove besides the Machine: collection -> path."""
        name = self.s.machine_name(index)
        objects = {"nodes": f"/api/v1/nodes/{self.s.node_name(index)}"}
        if self.s.capi:
            objects["infra"] = self.fake_path(INFRA, name)
            objects["bootstrap"] = self.fake_path(BOOTSTRAP, name)
        else:
            objects["instances"] = f"{self.configmaps_path}/instance-{name}"
        return objects

    def watched(self) -> list[tuple[str, str, str, str | None]]:
        """(collection, path, anchor path, label selector) of every collection the timeline follows."""
        run = f"{RUN_LABEL}={self.s.run_id}"
        collections = [
            ("machines", self.machines_path, f"{self.machines_path}/{ANCHOR}", None),
            ("pods", self.pods_path, f"{self.pods_path}/{ANCHOR}", None),
            ("nodes", "/api/v1/nodes", f"/api/v1/nodes/{self.s.spare_node}", run),
        ]
        if self.s.capi:
            collections += [
                ("infra", self.fake_path(INFRA), self.fake_path(INFRA, ANCHOR), None),
                ("bootstrap", self.fake_path(BOOTSTRAP), self.fake_path(BOOTSTRAP, ANCHOR), None),
            ]
        else:
            collections.append(("instances", self.configmaps_path, f"{self.configmaps_path}/{ANCHOR}", None))
        return collections

    # -- setup -----------------------------------------------------------------------------

    def setup(self) -> None:
        api, s = self.api, self.s
        if api.get(f"/api/v1/namespaces/{self.ns}") is not None:
            raise SetupError(f"namespace {self.ns} is left from an earlier run; delete it first")
        api.create("/api/v1/namespaces", {"metadata": {"name": self.ns, "labels": {RUN_LABEL: s.run_id}}})
        wait_until(lambda: api.get(f"/api/v1/namespaces/{self.ns}/serviceaccounts/default"), 60, "the default ServiceAccount")
        nodes = [s.node_name(i) for i in range(s.machines)] + [s.spare_node]
        for node in nodes:
            api.create("/api/v1/nodes", self._node(node, cordoned=node == s.spare_node))
        wait_until(lambda: all(_ready(api.get(f"/api/v1/nodes/{n}")) for n in nodes), 60, "the Nodes to be Ready")
        self._anchors()
        if s.capi:
            self._capi_cluster()
        for index in range(s.machines):
            self._machine(index)
        for workload in s.workloads:
            self._workload(workload)
        wait_until(self._workloads_running, 90, "the workloads to run on their Nodes")
        api.patch(f"/api/v1/nodes/{s.spare_node}", {"spec": {"unschedulable": None}})

    def _node(self, name: str, cordoned: bool) -> dict:
        node = cluster_tool.kwok_node(name, {RUN_LABEL: self.s.run_id})
        node["spec"]["unschedulable"] = cordoned or None
        return node

    def _anchors(self) -> None:
        api = self.api
        api.create(self.machines_path, self._machine_body(ANCHOR, labels={}, annotations={}, finalizers=[]))
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": ANCHOR, "labels": {"cluster.x-k8s.io/drain": "skip"}},
            "spec": {"nodeName": NOWHERE, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.invalid/anchor:1"}]},
        }
        api.create(self.pods_path, pod)
        if self.s.capi:
            for kind in (INFRA, BOOTSTRAP):
                api.create(self.fake_path(kind), {"apiVersion": f"{kind[0]}/v1beta1", "kind": kind[2], "metadata": {"name": ANCHOR}})
        else:
            api.create(self.configmaps_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ANCHOR}})

    def _capi_cluster(self) -> None:
        api, version = self.api, self.version
        cluster = {"apiVersion": f"cluster.x-k8s.io/{version}", "kind": "Cluster", "metadata": {"name": "chaos"}}
        api.create(f"/apis/cluster.x-k8s.io/{version}/namespaces/{self.ns}/clusters", cluster)
        if self.kubeconfig_text is not None:
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "chaos-kubeconfig", "labels": {"cluster.x-k8s.io/cluster-name": "chaos"}},
                "type": "cluster.x-k8s.io/secret",
                "data": {"value": base64.b64encode(self.kubeconfig_text.encode()).decode()},
            }
            api.create(f"/api/v1/namespaces/{self.ns}/secrets", secret)
        control_plane = self._machine_body("control-plane-0", labels={"cluster.x-k8s.io/control-plane": ""}, annotations={}, finalizers=[])
        api.create(self.machines_path, control_plane)
        for name in self.s.cluster_rules:
            rule = {
                "apiVersion": f"cluster.x-k8s.io/{version}",
                "kind": "MachineDrainRule",
                "metadata": {"name": f"chaos-{name}"},
                "spec": {"drain": RULES[name], "pods": [{"selector": {"matchLabels": {CLASS_LABEL: name}}}]},
            }
            api.create(f"/apis/cluster.x-k8s.io/{version}/namespaces/{self.ns}/machinedrainrules", rule)

    def _machine_body(self, name: str, *, labels: dict, annotations: dict, finalizers: list, hooks: dict | None = None) -> dict:
        if self.s.flavour == "openshift":
            spec: dict = {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}}
            if hooks:
                spec["lifecycleHooks"] = hooks
            return {
                "apiVersion": "machine.openshift.io/v1beta1",
                "kind": "Machine",
                "metadata": {"name": name, "labels": labels, "annotations": annotations, "finalizers": finalizers},
                "spec": spec,
            }
        if self.version == "v1beta1":
            infra = {"apiVersion": f"{INFRA[0]}/v1beta1", "kind": INFRA[2], "name": name}
            bootstrap = {"apiVersion": f"{BOOTSTRAP[0]}/v1beta1", "kind": BOOTSTRAP[2], "name": name}
        else:
            infra = {"apiGroup": INFRA[0], "kind": INFRA[2], "name": name}
            bootstrap = {"apiGroup": BOOTSTRAP[0], "kind": BOOTSTRAP[2], "name": name}
        return {
            "apiVersion": f"cluster.x-k8s.io/{self.version}",
            "kind": "Machine",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": "chaos", **labels}, "annotations": annotations, "finalizers": finalizers},
            "spec": {"clusterName": "chaos", "bootstrap": {"configRef": bootstrap}, "infrastructureRef": infra},
        }

    def _machine(self, index: int) -> None:
        api, s = self.api, self.s
        name, node = s.machine_name(index), s.node_name(index)
        hooks = [h for h in s.hooks if h.machine == index]
        annotations: dict = {}
        lifecycle: dict = {}
        for hook in hooks:
            if s.capi:
                annotations[f"{HOOK_PREFIX[hook.point]}/{hook.name}"] = hook.owner
            else:
                lifecycle.setdefault(hook.point, []).append({"name": hook.name, "owner": hook.owner})
        finalizer = CAPI_FINALIZER if s.capi else OPENSHIFT_FINALIZER
        body = self._machine_body(name, labels={RUN_LABEL: s.run_id}, annotations=annotations, finalizers=[finalizer], hooks=lifecycle)
        api.create(self.machines_path, body)
        node_ref = {"name": node} if self.version == "v1beta2" else {"apiVersion": "v1", "kind": "Node", "name": node}
        api.patch(self.machine_path(index), {"status": {"nodeRef": node_ref}}, subresource_status=True)
        finalizers = [INFRA_FINALIZER] if s.infra_finalizer[index] is not None else []
        if s.capi:
            for kind in (INFRA, BOOTSTRAP):
                api.create(self.fake_path(kind), {"apiVersion": f"{kind[0]}/v1beta1", "kind": kind[2], "metadata": {"name": name, "finalizers": finalizers}})
        else:
            instance = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"instance-{name}", "finalizers": finalizers},
                "data": {"state": "running"},
            }
            api.create(self.configmaps_path, instance)

    def _labels(self, workload: Workload) -> dict:
        return {"app": workload.name, RUN_LABEL: self.s.run_id, EXPECT_LABEL: workload.expect, **workload.labels}

    def _pod_spec(self, workload: Workload) -> dict:
        return {"terminationGracePeriodSeconds": workload.grace, "containers": [{"name": "c", "image": f"registry.invalid/{workload.name}:1"}]}

    def _workload(self, workload: Workload) -> None:
        api, s = self.api, self.s
        labels = self._labels(workload)
        if workload.kind == "pod":
            spec = {**self._pod_spec(workload), "nodeName": s.node_name(workload.machine)}
            api.create(self.pods_path, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": workload.name, "labels": labels}, "spec": spec})
            return
        if workload.kind == "daemonset":
            template = {"metadata": {"labels": labels}, "spec": {**self._pod_spec(workload), "nodeSelector": {RUN_LABEL: s.run_id}}}
            body = {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {"name": workload.name},
                "spec": {"selector": {"matchLabels": {"app": workload.name}}, "template": template},
            }
            api.create(f"/apis/apps/v1/namespaces/{self.ns}/daemonsets", body)
            return
        # A Deployment starts on its Machine's Node; its replacements can only go to the spare Node.
        hosts = [s.node_name(workload.machine), s.spare_node]
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": hosts}]}]
                }
            }
        }
        template = {"metadata": {"labels": labels}, "spec": {**self._pod_spec(workload), "affinity": affinity}}
        body = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": workload.name},
            "spec": {"replicas": workload.replicas, "selector": {"matchLabels": {"app": workload.name}}, "template": template},
        }
        api.create(f"/apis/apps/v1/namespaces/{self.ns}/deployments", body)
        if workload.budget:
            budget = {"metadata": {"name": workload.name}, "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": workload.name}}}}
            api.create(f"/apis/policy/v1/namespaces/{self.ns}/poddisruptionbudgets", budget)

    def _workloads_running(self) -> bool:
        s = self.s
        running: dict[tuple[str, str], int] = {}
        for pod in self.api.list(self.pods_path, label_selector=f"{RUN_LABEL}={s.run_id}"):
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])
            if ready and not pod["metadata"].get("deletionTimestamp"):
                key = (pod["metadata"]["labels"]["app"], pod["spec"].get("nodeName", ""))
                running[key] = running.get(key, 0) + 1
        for workload in s.workloads:
            if workload.kind == "daemonset":
                nodes = [s.node_name(i) for i in range(s.machines)]
                if any(running.get((workload.name, node), 0) < 1 for node in nodes):
                    return False
            elif running.get((workload.name, s.node_name(workload.machine)), 0) < workload.replicas:
                return False
        return True

    # -- afterwards ------------------------------------------------------------------------

    def left_behind(self) -> list[str]:
        """What the run's deletion should have removed but did not."""
        left = []
        for index in range(self.s.machines):
            if self.api.get(self.machine_path(index)) is not None:
                left.append(f"Machine {self.s.machine_name(index)}")
            for collection, path in self.owned_objects(index).items():
                if self.api.get(path) is not None:
                    left.append(f"{collection} {path.rsplit('/', 1)[-1]}")
        return left

    def cleanup(self, timeout: float = 90) -> list[str]:
        """Remove everything the run left (our finalizers, Pods on Nodes no kubelet serves), the
        namespace and the Nodes; the problems met (a namespace that does not go away)."""
        api, ns = self.api, self.ns
        if api.get(f"/api/v1/namespaces/{ns}") is not None:
            api.delete(f"/api/v1/namespaces/{ns}")
        paths = [self.machines_path, self.configmaps_path]
        if self.s.capi:
            paths += [self.fake_path(INFRA), self.fake_path(BOOTSTRAP)]
        deadline = time.monotonic() + timeout
        while api.get(f"/api/v1/namespaces/{ns}") is not None:
            if time.monotonic() > deadline:
                return [f"namespace {ns} still there after {timeout:.0f}s"]
            for path in paths:
                for item in api.list(path):
                    if item["metadata"].get("finalizers"):
                        api.patch(f"{path}/{item['metadata']['name']}", {"metadata": {"finalizers": None}})
            # Pods of Nodes that are gone: no kubelet will confirm their deletion (what pod-gc would do).
            for pod in api.list(self.pods_path):
                if pod["metadata"].get("deletionTimestamp") or pod["spec"].get("nodeName") not in self._live_nodes():
                    api.delete(f"{self.pods_path}/{pod['metadata']['name']}", {"gracePeriodSeconds": 0})
            time.sleep(1)
        for node in api.list("/api/v1/nodes", label_selector=f"{RUN_LABEL}={self.s.run_id}"):
            api.delete(f"/api/v1/nodes/{node['metadata']['name']}")
        return []

    def _live_nodes(self) -> set[str]:
        return {n["metadata"]["name"] for n in self.api.list("/api/v1/nodes", label_selector=f"{RUN_LABEL}={self.s.run_id}")}


def _ready(node: dict | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in ((node or {}).get("status") or {}).get("conditions") or [])
