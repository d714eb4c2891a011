"""Cluster API as it is deployed: Machines in the management cluster, their Nodes
in a workload cluster reached through the Secret ``<cluster>-kubeconfig``
(docs/topology.md). Two real control planes (hack/cluster.py); the same Node
name exists in both, with Pods of its own in each, so that touching the wrong
one shows."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import cluster as cluster_tool
import pytest
from conftest import ansible_env, read_audit_log
from fault_fixtures import upstream_of
from faultproxy import FaultProxy
from khelpers import FAKE_MACHINES, capi_machine, capi_path, fake_node, node_ready, put_fake_object, stop_process, wait_for
from test_preflight import replicated

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig

V = "v1beta2"


def _audit(kubeconfig: str, **filters: str) -> list:
    """The audit events of the control plane ``kubeconfig`` belongs to."""
    return read_audit_log(Path(kubeconfig).parent / "audit.log", **filters)


def _pod(name: str, node: str, labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0, "containers": [{"name": "c", "image": "registry.invalid/x"}]},
    }


class Split:
    """One workload cluster ``cluster`` of a Cluster API management cluster: its
    Cluster and a running control-plane Machine (so no skip rule applies), a
    namespace of the same name on both sides, and helpers for Nodes, Pods and Machines."""

    def __init__(self, kube, workload_kube, workload_kubeconfig: str, namespace: str, cluster: str = "c1"):
        self.kube, self.workload, self.workload_kubeconfig = kube, workload_kube, workload_kubeconfig
        self.namespace, self.cluster = namespace, cluster
        self.nodes: list[tuple[object, str]] = []

    def setup_cluster(self, cluster: str | None = None) -> None:
        cluster = cluster or self.cluster
        ns = self.namespace
        self.kube.create(capi_path(V, "clusters", ns), {"apiVersion": f"cluster.x-k8s.io/{V}", "kind": "Cluster", "metadata": {"name": cluster}})
        control_plane = capi_machine(f"{cluster}-cp-0", V, cluster=cluster, labels={"cluster.x-k8s.io/control-plane": ""})
        control_plane["metadata"]["finalizers"] = []
        self.kube.create(capi_path(V, "machines", ns), control_plane)

    def ensure_workload_namespace(self, api=None) -> None:
        api = api or self.workload
        if api.get(f"/api/v1/namespaces/{self.namespace}") is None:
            api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace}})

    def node(self, api, name: str, provider_id: str | None = None, pods: int = 3, prefix: str = "p") -> list[str]:
        """A Ready kwok Node ``name`` in the cluster of ``api`` with ``pods`` Pods of its own."""
        body = fake_node(name)
        if provider_id:
            body["spec"]["providerID"] = provider_id
        api.create("/api/v1/nodes", body)
        self.nodes.append((api, name))
        wait_for(lambda: node_ready(api.get(f"/api/v1/nodes/{name}")), timeout=60, what=f"Node {name} Ready")
        names = [f"{prefix}-{name}-{i}" for i in range(pods)]
        for pod in names:
            api.create(f"/api/v1/namespaces/{self.namespace}/pods", _pod(pod, name))
        return names

    def machine(self, name: str, node: str, cluster: str | None = None, provider_id: str | None = None) -> str:
        body = capi_machine(name, V, cluster=cluster or self.cluster, spec={"providerID": provider_id} if provider_id else None)
        put_fake_object(self.kube, FAKE_MACHINES.format(ns=self.namespace), name)
        self.kube.create(capi_path(V, "machines", self.namespace), body)
        self.kube.request(
            "PATCH",
            capi_path(V, "machines", self.namespace, name) + "/status",
            body={"status": {"nodeRef": {"name": node}}},
            content_type="application/merge-patch+json",
        )
        return name

    def get_machine(self, name: str) -> dict | None:
        return self.kube.get(capi_path(V, "machines", self.namespace, name))

    def pods(self, api) -> list[str]:
        return sorted(pod["metadata"]["name"] for pod in api.list(f"/api/v1/namespaces/{self.namespace}/pods") if not pod["metadata"].get("deletionTimestamp"))

    def cleanup(self) -> None:
        for api, name in self.nodes:
            if api.get(f"/api/v1/nodes/{name}") is not None:
                api.delete(f"/api/v1/nodes/{name}")
        for plural in ("machines", "clusters"):
            for obj in self.kube.list(capi_path(V, plural, self.namespace)):
                path = capi_path(V, plural, self.namespace, obj["metadata"]["name"])
                self.kube.patch(path, {"metadata": {"finalizers": None}})
                self.kube.delete(path)


@pytest.fixture
def split(capi_generation, workload_kube, workload_kubeconfig, namespace, kubeconfig_secret):
    kube = capi_generation.kube
    capi_generation.use(V)
    world = Split(kube, workload_kube, workload_kubeconfig, namespace)
    world.setup_cluster()
    world.ensure_workload_namespace()
    kubeconfig_secret(namespace, world.cluster, workload_kubeconfig)
    yield world
    world.cleanup()
    workload_kube.delete(f"/api/v1/namespaces/{namespace}")


def _node_name() -> str:
    return f"w-{uuid.uuid4().hex[:6]}"


def test_a_machine_is_drained_and_its_node_deleted_in_the_workload_cluster_only(split, run_module, kubeconfig) -> None:
    """The issue's own case: the same Node name in both clusters, Pods on both; the
    deletion evicts the workload cluster's Pods and deletes its Node, and the
    management cluster's Node and Pods are never touched (both audit logs)."""
    node = _node_name()
    management_pods = split.node(split.kube, node, prefix="mgmt")
    workload_pods = split.node(split.workload, node, prefix="wl")
    split.machine("w-0", node)

    result = run_module("machine_delete", {"machines": [{"name": "w-0", "namespace": split.namespace}], "drain_timeout": 120, "terminate_timeout": 120})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    assert result["machines"][0]["cluster"] == split.cluster
    assert f"{split.namespace}/w-0 (workload cluster {split.cluster}): done at release" in result["progress"]
    assert split.get_machine("w-0") is None
    assert split.workload.get(f"/api/v1/nodes/{node}") is None
    assert split.pods(split.workload) == []
    evicted = {e["objectRef"]["name"] for e in _audit(split.workload_kubeconfig, namespace=split.namespace, resource="pods", subresource="eviction")}
    assert evicted == set(workload_pods)
    # The management cluster's Node of the same name, and its Pods, are untouched.
    assert split.kube.get(f"/api/v1/nodes/{node}") is not None
    assert not split.kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")
    assert split.pods(split.kube) == sorted(management_pods)
    assert _audit(kubeconfig, namespace=split.namespace, resource="pods", subresource="eviction") == []
    assert [e for e in _audit(kubeconfig, resource="nodes", verb="delete") if e["objectRef"].get("name") == node] == []


def test_machine_drain_rules_come_from_the_management_cluster(split, run_module) -> None:
    """MachineDrainRules are defined in the management cluster and applied to the
    workload cluster's Pods: a Pod the rule skips stays on the drained Node."""
    node = _node_name()
    split.node(split.workload, node, pods=0)
    split.workload.create(f"/api/v1/namespaces/{split.namespace}/pods", _pod("keep-me", node, {"app": "keep"}))
    split.workload.create(f"/api/v1/namespaces/{split.namespace}/pods", _pod("move-me", node, {"app": "move"}))
    rule = {
        "apiVersion": f"cluster.x-k8s.io/{V}",
        "kind": "MachineDrainRule",
        "metadata": {"name": "keep"},
        "spec": {"drain": {"behavior": "Skip"}, "machines": [{"selector": {}}], "pods": [{"selector": {"matchLabels": {"app": "keep"}}}]},
    }
    split.kube.create(capi_path(V, "machinedrainrules", split.namespace), rule)
    split.machine("w-1", node)

    result = run_module("machine_drain", {"machine": "w-1", "namespace": split.namespace, "wait_timeout": 60})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"]
    assert split.pods(split.workload) == ["keep-me"]
    assert split.workload.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") is True
    # Check mode plans from the same two places.
    plan = run_module("machine_drain", {"machine": "w-1", "namespace": split.namespace}, check=True)
    assert not plan.get("failed"), plan.get("msg")


def test_check_mode_plans_from_the_workload_clusters_pods(split, run_module) -> None:
    node = _node_name()
    split.node(split.kube, node, prefix="mgmt")
    workload_pods = split.node(split.workload, node, prefix="wl")
    split.machine("w-2", node)

    plan = run_module("machine_delete", {"machines": [{"name": "w-2", "namespace": split.namespace}]}, check=True)

    assert not plan.get("failed"), plan.get("msg")
    planned = json.dumps(plan["machines"][0]["drain"])
    assert all(pod in planned for pod in workload_pods), planned
    assert "mgmt-" not in planned
    assert split.get_machine("w-2")["metadata"].get("deletionTimestamp") is None
    assert split.pods(split.workload) == sorted(workload_pods)


def test_the_volume_wait_reads_the_workload_clusters_volume_attachments(split, run_module) -> None:
    node = _node_name()
    split.node(split.workload, node, pods=0)
    attachment = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": f"va-{node}"},
        "spec": {"attacher": "csi.example.com", "nodeName": node, "source": {"persistentVolumeName": f"pv-{node}"}},
    }
    split.workload.create("/apis/storage.k8s.io/v1/volumeattachments", attachment)
    split.workload.request(
        "PATCH",
        f"/apis/storage.k8s.io/v1/volumeattachments/va-{node}/status",
        body={"status": {"attached": True}},
        content_type="application/merge-patch+json",
    )
    split.machine("w-3", node)
    machines = [{"name": "w-3", "namespace": split.namespace}]

    held = run_module("machine_delete", {"machines": machines, "drain_timeout": 60, "terminate_timeout": 4, "wait_sleep": 1})
    assert held.get("failed") or not held["completed"]
    text = json.dumps(held)
    assert "volume" in text.lower(), text
    assert split.workload.get(f"/api/v1/nodes/{node}") is not None

    split.workload.delete(f"/apis/storage.k8s.io/v1/volumeattachments/va-{node}")
    done = run_module("machine_delete", {"machines": machines, "drain_timeout": 60, "terminate_timeout": 60, "wait_sleep": 1})
    assert not done.get("failed"), done.get("msg")
    assert done["completed"], done["progress"]
    assert split.workload.get(f"/api/v1/nodes/{node}") is None


def test_a_node_with_another_machines_provider_id_is_refused(split, run_module) -> None:
    node = _node_name()
    workload_pods = split.node(split.workload, node, provider_id="fake://other-machine")
    split.machine("w-4", node, provider_id="fake://w-4")

    result = run_module("machine_delete", {"machines": [{"name": "w-4", "namespace": split.namespace}], "drain_timeout": 30})

    assert not result.get("failed") or "providerID" in result.get("msg", "")
    text = json.dumps(result)
    assert "fake://other-machine" in text and "fake://w-4" in text, text
    assert split.get_machine("w-4")["metadata"].get("deletionTimestamp") is None
    assert split.pods(split.workload) == sorted(workload_pods)
    assert not split.workload.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")

    drained = run_module("machine_drain", {"machine": "w-4", "namespace": split.namespace, "wait_timeout": 10})
    assert drained.get("failed")
    assert "providerID" in drained["msg"]
    assert split.pods(split.workload) == sorted(workload_pods)


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        (None, "c9-kubeconfig (its kubeconfig) does not exist in the management cluster"),
        ({"other": "eA=="}, "has no key 'value'"),
        ({"value": base64.b64encode(b"not: [a kubeconfig").decode()}, "is not a kubeconfig"),
    ],
    ids=["missing", "no-value", "not-a-kubeconfig"],
)
def test_a_workload_cluster_that_cannot_be_found_changes_nothing(split, run_module, secret, expected) -> None:
    node = _node_name()
    split.setup_cluster("c9")
    workload_pods = split.node(split.workload, node)
    if secret is not None:
        body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c9-kubeconfig"}, "data": secret}
        split.kube.create(f"/api/v1/namespaces/{split.namespace}/secrets", body)
    split.machine("w-5", node, cluster="c9")

    result = run_module("machine_delete", {"machines": [{"name": "w-5", "namespace": split.namespace}], "drain_timeout": 30})
    drained = run_module("machine_drain", {"machine": "w-5", "namespace": split.namespace, "wait_timeout": 10})

    assert expected in json.dumps(result), result
    assert not result["completed"]
    assert result["failed_machines"][0]["name"] == "w-5"
    assert drained.get("failed") and expected in drained["msg"]
    assert "workload_cluster" in drained["msg"]  # the option that would fix it
    assert split.get_machine("w-5")["metadata"].get("deletionTimestamp") is None
    assert split.pods(split.workload) == sorted(workload_pods)
    assert not split.workload.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable")


@pytest.mark.parametrize("way", ["management", "kubeconfig"])
def test_the_option_replaces_the_secret_per_cluster(split, run_module, way) -> None:
    """No Secret for the cluster: ``management`` (self-hosted) finds the Node in the management
    cluster, a kubeconfig given for ``namespace/name`` finds it in the workload cluster."""
    node = _node_name()
    split.setup_cluster(way)
    api = split.kube if way == "management" else split.workload
    split.node(api, node, prefix=way)
    split.machine("w-6", node, cluster=way)
    how = "management" if way == "management" else {"kubeconfig": split.workload_kubeconfig}

    machines = [{"name": "w-6", "namespace": split.namespace}]
    result = run_module("machine_delete", {"machines": machines, "workload_cluster": {"clusters": {f"{split.namespace}/{way}": how}}, "drain_timeout": 60})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    assert api.get(f"/api/v1/nodes/{node}") is None
    assert split.pods(api) == []


def test_a_mistyped_workload_cluster_option_is_refused(split, run_module) -> None:
    node = _node_name()
    split.node(split.workload, node)
    split.machine("w-8", node)
    result = run_module("machine_delete", {"machines": [{"name": "w-8", "namespace": split.namespace}], "workload_cluster": {"sorce": "management"}})
    assert result.get("failed")
    assert "unknown key(s) sorce" in result["msg"]
    assert split.get_machine("w-8")["metadata"].get("deletionTimestamp") is None


def test_three_workload_clusters_in_one_run_read_each_secret_once(split, run_module, extra_workload_clusters, kubeconfig, kubeconfig_secret) -> None:
    """Machines of three workload clusters, two each, deleted side by side: one
    connection per workload cluster (each Secret read once), every Node in its own cluster."""
    others = extra_workload_clusters(2)
    clusters = {split.cluster: (split.workload, split.workload_kubeconfig)}
    for index, other in enumerate(others, start=2):
        clusters[f"c{index}"] = (api_from_kubeconfig(other), other)
    machines, nodes = [], {}
    for cluster, (api, config) in clusters.items():
        if cluster != split.cluster:
            split.setup_cluster(cluster)
            kubeconfig_secret(split.namespace, cluster, config)
            split.ensure_workload_namespace(api)
        for index in range(2):
            node = f"shared-{index}"  # the same Node names in every cluster
            split.node(api, node, pods=2, prefix=cluster)
            name = split.machine(f"{cluster}-m{index}", node, cluster=cluster)
            machines.append({"name": name, "namespace": split.namespace})
            nodes[(cluster, node)] = api
    before = len(_audit(kubeconfig, namespace=split.namespace, resource="secrets", verb="get"))

    result = run_module("machine_delete", {"machines": machines, "drain_timeout": 120, "terminate_timeout": 120})

    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    for (cluster, node), api in nodes.items():
        assert api.get(f"/api/v1/nodes/{node}") is None, f"Node {node} of {cluster}"
        assert split.pods(api) == []
    reads = _audit(kubeconfig, namespace=split.namespace, resource="secrets", verb="get")[before:]
    assert sorted(e["objectRef"]["name"] for e in reads) == [f"{c}-kubeconfig" for c in sorted(clusters)]
    assert {line.split(" (workload cluster ")[1].split(")")[0] for line in result["progress"] if "(workload cluster" in line} == set(clusters)


@pytest.fixture
def workload_fault_proxy(workload_kubeconfig: str, tmp_path: Path):
    """Fault proxies in front of the workload cluster (``rate=1.0, kinds=["reset"]``: a
    cluster that does not answer), stopped at teardown; ``.kubeconfig`` points at one."""
    ca_file = tmp_path / "workload-ca.crt"
    upstream = upstream_of(workload_kubeconfig, ca_file)
    proxies: list[FaultProxy] = []

    def _make(**options) -> FaultProxy:
        proxy = FaultProxy(upstream, ca_file, **options)
        proxies.append(proxy)
        proxy.start()
        proxy.kubeconfig_from(workload_kubeconfig, tmp_path / f"workload-proxy-{len(proxies)}.kubeconfig")
        return proxy

    yield _make
    for proxy in proxies:
        proxy.stop()


def _start_module(kubeconfig: str, module: str, params: dict) -> subprocess.Popen:
    command = [str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-i", "localhost,", "-m", f"lifecycle.machine.{module}"]
    command += ["-a", json.dumps(params)]
    env = ansible_env(kubeconfig)
    env.update({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json", "ANSIBLE_PYTHON_INTERPRETER": sys.executable})
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _result(proc: subprocess.Popen, timeout: float = 300) -> dict:
    out, err = proc.communicate(timeout=timeout)
    try:
        return json.loads(out[out.index("{\n") :])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    except (ValueError, KeyError, IndexError):
        raise AssertionError(f"rc={proc.returncode}\n{out}\n{err}") from None


def _condition_naming(machine: dict, text: str) -> str | None:
    """The message of a condition that says ``text``: as upstream, a v1beta2 Machine's
    Deleting condition says only that the drain failed, and the error goes to its
    v1beta1 DrainingSucceeded condition (kept under status.deprecated.v1beta1)."""
    status = machine.get("status") or {}
    conditions = [*(status.get("conditions") or []), *(((status.get("deprecated") or {}).get("v1beta1") or {}).get("conditions") or [])]
    return next((c["message"] for c in conditions if text in str(c.get("message"))), None)


def test_a_workload_cluster_down_for_part_of_the_run_is_waited_for(split, kubeconfig, kubeconfig_secret, workload_fault_proxy) -> None:
    """The workload cluster stops answering (a proxy that resets every connection)
    while a Machine is being deleted: the run waits and says so on the Machine,
    the Machine of another workload cluster goes on, and once the cluster answers
    again the deletion finishes in the same run."""
    proxy = workload_fault_proxy(rate=1.0, kinds=["reset"])
    split.setup_cluster("flaky")
    kubeconfig_secret(split.namespace, "flaky", Path(proxy.kubeconfig).read_text())
    flaky_node, healthy_node = _node_name(), _node_name()
    split.node(split.workload, flaky_node, pods=2)
    split.node(split.workload, healthy_node, pods=2)
    split.machine("flaky-0", flaky_node, cluster="flaky")
    split.machine("healthy-0", healthy_node)
    # Already being deleted (a run before this one marked it): a silent workload cluster is then waited for.
    split.kube.delete(capi_path(V, "machines", split.namespace, "flaky-0"))
    machines = [{"name": "flaky-0", "namespace": split.namespace}, {"name": "healthy-0", "namespace": split.namespace}]

    params = {"machines": machines, "drain_timeout": 180, "terminate_timeout": 120, "wait_sleep": 1}
    proc = _start_module(kubeconfig, "machine_delete", params)
    try:
        wait_for(lambda: split.get_machine("healthy-0") is None, timeout=90, what="the healthy cluster's Machine deleted meanwhile")
        message = wait_for(lambda: _condition_naming(split.get_machine("flaky-0"), "workload cluster"), timeout=60, what="the condition")
        assert f"the workload cluster {split.namespace}/flaky" in message
        assert split.pods(split.workload) != []  # the flaky cluster's Pods are still there
        proxy.faults_enabled = False
        result = _result(proc)
    finally:
        stop_process(proc)
    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    assert split.get_machine("flaky-0") is None
    assert split.workload.get(f"/api/v1/nodes/{flaky_node}") is None


def test_a_silent_workload_cluster_refuses_a_machine_not_yet_marked(split, run_module, kubeconfig_secret, workload_fault_proxy) -> None:
    proxy = workload_fault_proxy(rate=1.0, kinds=["reset"])
    split.setup_cluster("down")
    kubeconfig_secret(split.namespace, "down", Path(proxy.kubeconfig).read_text())
    node = _node_name()
    pods = split.node(split.workload, node, pods=2)
    split.machine("down-0", node, cluster="down")

    result = run_module("machine_delete", {"machines": [{"name": "down-0", "namespace": split.namespace}], "drain_timeout": 30})

    assert not result["completed"]
    assert f"the workload cluster {split.namespace}/down" in result["errors"][0]
    assert split.get_machine("down-0")["metadata"].get("deletionTimestamp") is None
    assert split.pods(split.workload) == sorted(pods)


def test_a_rotated_kubeconfig_secret_is_read_again(split, kubeconfig, kubeconfig_secret) -> None:
    """The Secret holds a ServiceAccount token; mid-run the Secret is rotated to a
    new token and the old ServiceAccount deleted (its token now answers 401): the
    run reads the Secret once more and finishes."""
    old_account = f"lm-old-{uuid.uuid4().hex[:5]}"
    old = cluster_tool.service_account_kubeconfig(split.workload_kubeconfig, old_account)
    split.setup_cluster("rotated")
    kubeconfig_secret(split.namespace, "rotated", old)
    node = _node_name()
    split.node(split.workload, node, pods=2, prefix="rot")
    # A budget that allows no disruption holds the drain until it is deleted.
    for pod in split.workload.list(f"/api/v1/namespaces/{split.namespace}/pods"):
        split.workload.patch(f"/api/v1/namespaces/{split.namespace}/pods/{pod['metadata']['name']}", {"metadata": {"labels": {"app": "rot"}}})
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "hold"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "rot"}}},
    }
    split.workload.create(f"/apis/policy/v1/namespaces/{split.namespace}/poddisruptionbudgets", budget)
    split.machine("rot-0", node, cluster="rotated")
    before = len(_audit(kubeconfig, namespace=split.namespace, resource="secrets", verb="get"))
    proc = _start_module(kubeconfig, "machine_delete", {"machines": [{"name": "rot-0", "namespace": split.namespace}], "drain_timeout": 180, "wait_sleep": 1})
    try:
        wait_for(lambda: split.workload.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable"), timeout=60, what="the Node cordoned")
        new = cluster_tool.service_account_kubeconfig(split.workload_kubeconfig, f"lm-new-{uuid.uuid4().hex[:5]}")
        kubeconfig_secret(split.namespace, "rotated", new)
        split.workload.delete(f"/api/v1/namespaces/kube-system/serviceaccounts/{old_account}")
        # The API server keeps accepting a token it has seen for 10 s after its ServiceAccount goes.
        time.sleep(12)
        split.workload.delete(f"/apis/policy/v1/namespaces/{split.namespace}/poddisruptionbudgets/hold")
        result = _result(proc)
    finally:
        stop_process(proc)
    assert not result.get("failed"), result.get("msg")
    assert result["completed"], result["progress"]
    assert split.workload.get(f"/api/v1/nodes/{node}") is None
    reads = [e["objectRef"]["name"] for e in _audit(kubeconfig, namespace=split.namespace, resource="secrets", verb="get")[before:]]
    # The run read the Secret once, and once more after the 401; the test's own rotation read it once.
    assert reads == ["rotated-kubeconfig"] * 3


def test_the_nodes_counted_are_the_workload_clusters(split, run_module) -> None:
    """machine_delete's check-mode preflight (test_preflight.py): a Cluster API Machine's Pods are judged
    against the Nodes of its workload cluster, never the management cluster's."""
    node = _node_name()
    split.node(split.kube, node, prefix="mgmt")  # the same name in the management cluster, with Pods of its own
    split.node(split.kube, _node_name(), pods=0)  # a schedulable Node, but in the management cluster: no home for a workload Pod
    lost = split.node(split.workload, node, prefix="wl", pods=1)
    replicated(split.workload, split.namespace, "web", [node])
    split.machine("w-pf", node)
    key = f"{split.namespace}/w-pf"

    plan = run_module("machine_delete", {"machines": [{"name": "w-pf", "namespace": split.namespace}]}, check=True)

    assert not plan.get("failed"), plan.get("msg")
    batch = plan["preflight"]["batch"]
    assert batch["counted"] == [key] and batch["not_counted"] == {}
    by_kind = {f["kind"]: f for f in batch["findings"]}
    assert by_kind["unreplicated pod"]["evidence"]["pods"] == [f"{split.namespace}/{lost[0]}"]
    others = [n for n in split.workload.list("/api/v1/nodes") if n["metadata"]["name"] != node and not n["spec"].get("unschedulable")]
    if not others:  # the workload cluster has no other Node: the replacement stays Pending
        homeless = by_kind["no node for replacements"]
        assert (homeless["machines"], homeless["evidence"]["cluster"]) == ([key], f"{split.namespace}/{split.cluster}")
        assert homeless["evidence"]["pods"] == [f"{split.namespace}/web-0"] and homeless["evidence"]["nodes_outside_batch"] == {}
    assert "mgmt-" not in json.dumps(batch)
    assert split.get_machine("w-pf")["metadata"].get("deletionTimestamp") is None
