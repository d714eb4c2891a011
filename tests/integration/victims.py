"""The ``victim`` fixture: a Machine of the current flavour on its own kwok Node,
with two web Pods behind a PodDisruptionBudget and a spare Node to move to,
as the delete_machine tests (and the fault, cancel and AWX tests) delete it.
Loaded by conftest.py as a pytest plugin."""

from __future__ import annotations

import uuid

import pytest
from conftest import machine_collection
from khelpers import deployment, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

PREFIX = {"preDrain": "pre-drain.delete.hook.machine.cluster.x-k8s.io", "preTerminate": "pre-terminate.delete.hook.machine.cluster.x-k8s.io"}


class Victim:
    """A Machine of the current flavour on its own kwok Node, with two web Pods
    behind a PodDisruptionBudget on that Node and a spare Node to move to."""

    def __init__(self, kube: KubeApi, flavour: str, namespace: str, name: str, node: str):
        self.kube, self.flavour, self.namespace, self.name, self.node = kube, flavour, namespace, name, node
        self.path = f"{machine_collection(flavour, namespace)}/{name}"

    @property
    def infra_paths(self) -> list[str]:
        if self.flavour == "openshift":
            return [f"/api/v1/namespaces/{self.namespace}/configmaps/instance-{self.name}"]
        return [
            f"/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{self.namespace}/fakemachines/{self.name}",
            f"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{self.namespace}/fakebootstrapconfigs/{self.name}",
        ]

    def remove_hook(self, point: str, name: str) -> None:
        machine = self.kube.get(self.path)
        if self.flavour == "openshift":
            kept = [h for h in machine["spec"]["lifecycleHooks"][point] if h["name"] != name]
            version = machine["metadata"]["resourceVersion"]
            self.kube.patch(self.path, {"metadata": {"resourceVersion": version}, "spec": {"lifecycleHooks": {point: kept or None}}})
        else:
            self.kube.patch(self.path, {"metadata": {"annotations": {f"{PREFIX[point]}/{name}": None}}})

    def web_pods(self) -> list[dict]:
        return self.kube.list(f"/api/v1/namespaces/{self.namespace}/pods", label_selector="app=web")


@pytest.fixture
def victim(*, kube, flavour, namespace, make_node, make_machine, capi_cluster):
    """Build a Victim; ``victim(hooks=..., **machine_options)``."""

    def _make(hooks: dict | None = None, **options) -> Victim:
        pool = f"pool-{uuid.uuid4().hex[:6]}"
        node = make_node(labels={"lm-pool": pool})
        spare = make_node(labels={"lm-pool": pool})
        kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": True}})
        capi_cluster(namespace)
        name = f"victim-{uuid.uuid4().hex[:5]}"
        make_machine(namespace, name=name, node=node, hooks=hooks, **options)
        result = Victim(kube, flavour, namespace, name, node)
        if flavour == "openshift":
            kube.create(f"/api/v1/namespaces/{namespace}/configmaps", {"metadata": {"name": f"instance-{name}"}, "data": {"state": "running"}})
        else:
            # make_machine creates the FakeMachine already (Cluster API drains only while it exists).
            for path in (p for p in result.infra_paths if kube.get(p) is None):
                group_version = path.split("/namespaces/", 1)[0].removeprefix("/apis/")
                kind = "FakeMachine" if "fakemachines" in path else "FakeBootstrapConfig"
                kube.create(path.rsplit("/", 1)[0], {"apiVersion": group_version, "kind": kind, "metadata": {"name": name}})
        kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("web", 2, {"lm-pool": pool}, 2))
        kube.create(
            f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
            {"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}},
        )

        def on_victim() -> bool:
            return len([p for p in result.web_pods() if p["spec"].get("nodeName") == node and p.get("status", {}).get("phase") == "Running"]) == 2

        wait_for(on_victim, 60, what="web on the victim Node")
        kube.patch(f"/api/v1/nodes/{spare}", {"spec": {"unschedulable": False}})
        return result

    return _make
