"""Plain helpers for integration tests (import as ``from khelpers import ...``)."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import cluster as cluster_tool
import pytest


def fake_node(name: str, labels: dict | None = None, ready: bool = True) -> dict:
    """A Node that kwok manages (annotation ``kwok.x-k8s.io/node: fake``)."""
    return cluster_tool.kwok_node(name, labels)


def node_ready(node: dict | None) -> bool:
    for condition in ((node or {}).get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def wait_for(predicate: Callable[[], Any], timeout: float = 60, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns a truthy value; fail the test on timeout."""
    return cluster_tool.poll(predicate, timeout, what, interval, error=pytest.fail.Exception)


def drained_status(flavour: str) -> dict:
    """The Machine status a finished drain leaves: OpenShift's Drained, Cluster API's
    DrainingSucceeded (under ``deprecated.v1beta1`` on v1beta2)."""
    stamp = "2026-01-01T00:00:00Z"
    if flavour == "openshift":
        return {"conditions": [{"type": "Drained", "status": "True", "message": "Drain finished successfully", "lastTransitionTime": stamp}]}
    v1beta1 = [{"type": "DrainingSucceeded", "status": "True", "lastTransitionTime": stamp}]
    return {"conditions": v1beta1} if flavour == "v1beta1" else {"deprecated": {"v1beta1": {"conditions": v1beta1}}}


OPENSHIFT_MACHINES = "/apis/machine.openshift.io/v1beta1/namespaces/{ns}/machines"


# The Cluster API cluster of the tests' Machines (``capi_machine``'s default), whose
# kubeconfig Secret (``lm-test-kubeconfig``) every ``namespace`` fixture holds.
CAPI_CLUSTER = "lm-test"


def put_kubeconfig_secret(kube: Any, namespace: str, cluster_name: str, kubeconfig_text: str | bytes) -> dict:
    """Create, or replace, the Secret ``<cluster_name>-kubeconfig`` of ``namespace``
    as Cluster API writes it (``cluster.kubeconfig_secret``), holding ``kubeconfig_text``;
    the Secret as stored."""
    body = cluster_tool.kubeconfig_secret(cluster_name, namespace, kubeconfig_text)
    collection = f"/api/v1/namespaces/{namespace}/secrets"
    existing = kube.get(f"{collection}/{body['metadata']['name']}")
    if existing is None:
        return kube.create(collection, body)
    body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
    return kube.replace(f"{collection}/{body['metadata']['name']}", body)


def self_hosted_kubeconfig_secret(kube: Any, namespace: str, kubeconfig: str, cluster_name: str = CAPI_CLUSTER) -> dict:
    """The kubeconfig Secret of a self-hosted cluster: ``<cluster_name>-kubeconfig`` in
    ``namespace`` pointing at the cluster of ``kubeconfig`` itself (management and
    workload cluster in one), for Cluster API Machines created in a namespace that
    the ``namespace`` fixture did not make, or of another cluster name."""
    return put_kubeconfig_secret(kube, namespace, cluster_name, cluster_tool.inline_kubeconfig(kubeconfig))


def capi_path(version: str, plural: str, namespace: str, name: str | None = None) -> str:
    path = f"/apis/cluster.x-k8s.io/{version}/namespaces/{namespace}/{plural}"
    return f"{path}/{name}" if name else path


def openshift_machine(name: str, hooks: dict | None = None, *, labels: dict | None = None, annotations: dict | None = None) -> dict:
    """An OpenShift Machine API Machine as the installer would create it (no provider behind it)."""
    machine: dict = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "labels": {"machine.openshift.io/cluster-api-cluster": "lm-test", **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": ["machine.machine.openshift.io"],
        },
        "spec": {"providerSpec": {"value": {"kind": "FakeProviderSpec"}}},
    }
    if hooks:
        machine["spec"]["lifecycleHooks"] = hooks
    return machine


def capi_machine(
    name: str,
    version: str,
    *,
    cluster: str = CAPI_CLUSTER,
    node: str | None = None,
    labels: dict | None = None,
    annotations: dict | None = None,
    infrastructure: str | None = None,
    bootstrap: str | None = None,
    spec: dict | None = None,
) -> dict:
    """A Cluster API Machine of ``version`` (v1beta1 or v1beta2 field layout)."""
    if version == "v1beta1":
        infra_ref = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FakeMachine", "name": infrastructure or name}
        bootstrap_ref = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "FakeBootstrapConfig", "name": bootstrap or name}
    else:
        infra_ref = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": infrastructure or name}
        bootstrap_ref = {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": bootstrap or name}
    return {
        "apiVersion": f"cluster.x-k8s.io/{version}",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "labels": {"cluster.x-k8s.io/cluster-name": cluster, **(labels or {})},
            "annotations": dict(annotations or {}),
            "finalizers": ["machine.cluster.x-k8s.io"],
        },
        "spec": {"clusterName": cluster, "bootstrap": {"configRef": bootstrap_ref}, "infrastructureRef": infra_ref, **(spec or {})},
    }


FAKE_MACHINES = "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/{ns}/fakemachines"
FAKE_BOOTSTRAP_CONFIGS = "/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{ns}/fakebootstrapconfigs"


def put_fake_object(kube, collection: str, name: str, *, finalizers: tuple[str, ...] = (), spec: dict | None = None) -> str:
    """Create the stand-in infrastructure (``FAKE_MACHINES``) or bootstrap
    (``FAKE_BOOTSTRAP_CONFIGS``) object ``name`` of a Cluster API Machine, or give
    the one already there ``finalizers`` and ``spec``; its path. (Cluster API drains
    a Node only while the Machine's InfraMachine exists.)"""
    path = f"{collection}/{name}"
    group = collection.split("/")[2]
    kind = "FakeMachine" if collection.endswith("/fakemachines") else "FakeBootstrapConfig"
    if kube.get(path) is None:
        body = {"apiVersion": f"{group}/v1beta1", "kind": kind, "metadata": {"name": name, "finalizers": list(finalizers)}, "spec": dict(spec or {})}
        kube.create(collection, body)
    elif finalizers or spec:
        kube.patch(path, {"metadata": {"finalizers": list(finalizers)}, "spec": dict(spec or {})})
    return path


# ---------------------------------------------------------------------------
# Watching Pods from the side (appended for the machine_drain tests)


def deployment(name: str, replicas: int, node_selector: dict, grace: int) -> dict:
    """A Deployment of ``replicas`` Pods labelled ``app: <name>`` on the Nodes that
    ``node_selector`` picks, each with ``grace`` seconds of termination grace."""
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": grace,
                    "nodeSelector": node_selector,
                    "containers": [{"name": name, "image": f"registry.invalid/{name}:1"}],
                },
            },
        },
    }


def pod_is_ready(pod: dict) -> bool:
    """Ready condition True and not terminating: what a PodDisruptionBudget counts as healthy."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def ready_pods_on(kube, namespace: str, selector: str, node: str) -> list[str]:
    """Names of the Ready Pods matching ``selector`` that run on ``node``."""
    pods = kube.list(f"/api/v1/namespaces/{namespace}/pods", label_selector=selector)
    return [p["metadata"]["name"] for p in pods if pod_is_ready(p) and p["spec"].get("nodeName") == node]


class PodRecorder:
    """Records, from a watch on one namespace's Pods, the order in which Pods
    got a deletionTimestamp and disappeared, independently of the code under test.

    Events of one watch arrive in the order the API server stored them, so
    their sequence numbers order the changes exactly. ``sync()`` makes sure
    every change made before it was called has been recorded.
    """

    def __init__(self, api: Any, namespace: str):
        self.api = api
        self.namespace = namespace
        self.path = f"/api/v1/namespaces/{namespace}/pods"
        self.events: list[dict] = []  # {"seq", "time", "type", "key", "pod"}
        self.deleting_at: dict[str, int] = {}  # first event with a deletionTimestamp
        self.deleting_time: dict[str, float] = {}
        self.gone_at: dict[str, int] = {}
        self.grace: dict[str, int | None] = {}  # deletionGracePeriodSeconds when first seen terminating
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._seen = threading.Condition(self._lock)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._marker = 0
        self.error: BaseException | None = None

    def start(self) -> PodRecorder:
        listed = self.api.request("GET", self.path)
        self._resource_version = listed["metadata"]["resourceVersion"]
        for pod in listed.get("items") or []:
            self._record("LISTED", pod)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                for event in self.api.watch(self.path, resource_version=self._resource_version, timeout=2):
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise RuntimeError(f"watch failed: {obj}")
                    self._resource_version = obj["metadata"]["resourceVersion"]
                    self._record(event["type"], obj)
        except BaseException as exc:  # surfaced by sync()
            self.error = exc

    def _record(self, kind: str, pod: dict) -> None:
        meta = pod["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        with self._seen:
            seq = len(self.events)
            self.events.append({"seq": seq, "time": time.monotonic(), "type": kind, "key": key, "pod": pod})
            if meta.get("deletionTimestamp") and key not in self.deleting_at:
                self.deleting_at[key] = seq
                self.deleting_time[key] = time.monotonic()
                self.grace[key] = meta.get("deletionGracePeriodSeconds")
            if kind == "DELETED":
                self.gone_at[key] = seq
            self._seen.notify_all()

    def sync(self, timeout: float = 30) -> None:
        """Wait until every change made before this call has been recorded.

        A marker Pod (bound to no real Node, labelled to be skipped by any
        drain) is created and deleted; its events arrive after everything
        stored before them.
        """
        self._marker += 1
        name = f"lm-marker-{self._marker}"
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/drain": "skip", "lifecycle.machine.dev/marker": "true"}},
            "spec": {"nodeName": "lm-no-such-node", "containers": [{"name": "c", "image": "marker"}]},
        }
        self.api.create(self.path, body)
        self.api.request("DELETE", f"{self.path}/{name}", query={"gracePeriodSeconds": 0})
        key = f"{self.namespace}/{name}"
        deadline = time.monotonic() + timeout
        with self._seen:
            while key not in self.gone_at:
                if self.error is not None:
                    raise AssertionError(f"the Pod watch failed: {self.error!r}")
                if time.monotonic() > deadline:
                    pytest.fail(f"the Pod watch did not catch up within {timeout}s")
                self._seen.wait(timeout=0.5)

    def pods_evicted_out_of_order(self, orders: dict[str, int]) -> list[str]:
        """Violations of the ordering rule: a Pod of order N got a deletionTimestamp
        while a Pod of a lower order was still there."""
        problems = []
        for key, order in orders.items():
            started = self.deleting_at.get(key)
            if started is None:
                continue
            for other, other_order in orders.items():
                if other_order < order and self.gone_at.get(other, float("inf")) > started:
                    problems.append(f"{key} (order {order}) got a deletionTimestamp before {other} (order {other_order}) was gone")
        return problems

    def fewest_ready(self, match: Callable[[dict], bool], after_seq: int = 0) -> int:
        """The fewest Pods matching ``match`` that were Ready (and not terminating)
        at any moment after event ``after_seq``."""
        state: dict[str, dict] = {}
        fewest: int | None = None
        for event in self.events:
            if event["type"] == "DELETED":
                state.pop(event["key"], None)
            else:
                state[event["key"]] = event["pod"]
            if event["seq"] >= after_seq:
                count = sum(1 for pod in state.values() if match(pod) and pod_is_ready(pod))
                fewest = count if fewest is None else min(fewest, count)
        return fewest if fewest is not None else 0


# ---------------------------------------------------------------------------
# Processes a test starts: stopped with everything they started, pass or fail


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    return children


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, grandchildren, ...), read from /proc."""
    children, found, todo = _children(), [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal ``pid`` and every process below it. The tree is read first: Ansible's
    workers run in process groups of their own and would outlive a killed group."""
    for target in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(target, sig)


def stop_process(proc: Any, timeout: float = 10) -> None:
    """Stop a ``subprocess.Popen`` and everything it started; reap it."""
    if proc.poll() is None:
        kill_tree(proc.pid)
    with contextlib.suppress(Exception):
        proc.wait(timeout=timeout)
