"""Which connection a Machine's Node is reached through (_workload/api.py), over the
in-memory stand-in: the choice and the refusals. Reaching a real workload cluster
through its Secret is proven in tests/integration/test_workload_cluster.py."""

from __future__ import annotations

import base64
import json

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._workload import api as workload
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import workload_settings

KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "w", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
    "users": [{"name": "u", "user": {"token": "t"}}],
    "contexts": [{"name": "w", "context": {"cluster": "w", "user": "u"}}],
    "current-context": "w",
}


class Kube(FakeKube):
    """The stand-in, recording the other clusters it is asked for and making them as the transport would."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, str]] = []

    def other_cluster(self, key, make, *, label):
        client, _renew = make()
        self.made.append((key, label))
        return client


def _capi(cluster: str | None = "c1", node: str | None = "n1") -> dict:
    machine = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": "m", "namespace": "ns"}, "spec": {}, "status": {}}
    if cluster:
        machine["spec"]["clusterName"] = cluster
    if node:
        machine["status"]["nodeRef"] = {"name": node}
    return machine


def _secret(kube: FakeKube, cluster: str = "c1", value: dict | None = None) -> None:
    data = {"value": base64.b64encode(json.dumps(value or KUBECONFIG).encode()).decode()}
    kube.put(f"/api/v1/namespaces/ns/secrets/{cluster}-kubeconfig", {"metadata": {"name": f"{cluster}-kubeconfig", "namespace": "ns"}, "data": data})


def test_an_openshift_machines_node_is_beside_it() -> None:
    kube = Kube()
    machine = {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": {"name": "m", "namespace": "ns"}}
    assert workload.node_api(kube, machine, workload_settings({})) is kube
    assert kube.made == [] and kube.requests == []


def test_a_self_hosted_cluster_uses_the_tasks_connection_and_reads_no_secret() -> None:
    kube = Kube()
    assert workload.node_api(kube, _capi(), workload_settings({"source": "management"})) is kube
    assert kube.requests == []


def test_the_default_reads_the_clusters_secret_once_per_connection() -> None:
    kube = Kube()
    _secret(kube)
    client = workload.node_api(kube, _capi(), workload_settings({}))
    assert client.configuration.host == "https://127.0.0.1:1"
    assert kube.made == [("secret:ns/c1", "the workload cluster ns/c1")]
    assert kube.requests == [("GET", "/api/v1/namespaces/ns/secrets/c1-kubeconfig")]


def test_a_missing_secret_is_refused_naming_it() -> None:
    with pytest.raises(MachineError) as raised:
        workload.node_api(Kube(), _capi(), workload_settings({}))
    assert "the Secret ns/c1-kubeconfig" in raised.value.msg


def test_a_machine_without_a_cluster_name_is_refused() -> None:
    with pytest.raises(MachineError) as raised:
        workload.node_api(Kube(), _capi(cluster=None), workload_settings({}))
    assert "Cannot tell which workload cluster Machine ns/m belongs to" in raised.value.msg


def test_a_kubeconfig_that_cannot_be_loaded_is_refused_naming_it(tmp_path) -> None:
    with pytest.raises(MachineError) as raised:
        workload.node_api(Kube(), _capi(), workload_settings({"kubeconfig": str(tmp_path / "absent")}))
    assert f"the kubeconfig {tmp_path / 'absent'} cannot be used" in raised.value.msg


def test_the_check_before_marking_refuses_another_machines_node() -> None:
    kube = Kube()
    kube.put("/api/v1/nodes/n1", {"metadata": {"name": "n1"}, "spec": {"providerID": "p://other"}})
    machine = _capi()
    machine["spec"]["providerID"] = "p://mine"
    with pytest.raises(MachineError) as raised:
        workload.check_node_side(kube, machine, workload_settings({"source": "management"}))
    assert "'p://other'" in raised.value.msg and "'p://mine'" in raised.value.msg
    assert "not marked for deletion" in raised.value.msg


def test_the_check_before_marking_is_skipped_without_a_node() -> None:
    kube = Kube()
    workload.check_node_side(kube, _capi(node=None), workload_settings({}))
    assert kube.requests == []
