"""The machines inventory plugin's view of workload clusters, without a cluster: which workload cluster a
Machine is of, and one read of each kubeconfig Secret, a forbidden read being no failure."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.logic import workload_cluster
from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.run import kubeconfig_secrets
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError


def capi(name: str, *, spec_cluster: str | None = None, label_cluster: str | None = None) -> dict:
    labels = {"cluster.x-k8s.io/cluster-name": label_cluster} if label_cluster else {}
    spec = {"clusterName": spec_cluster} if spec_cluster else {}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec}


def test_the_workload_cluster_is_spec_cluster_name_else_the_label_and_none_for_openshift() -> None:
    assert workload_cluster(capi("a", spec_cluster="c1", label_cluster="other")) == "c1"
    assert workload_cluster(capi("b", label_cluster="c2")) == "c2"
    assert workload_cluster(capi("c")) is None
    openshift = {
        "apiVersion": "machine.openshift.io/v1beta1",
        "kind": "Machine",
        "metadata": {"name": "o", "namespace": "openshift-machine-api", "labels": {"machine.openshift.io/cluster-api-cluster": "ocp"}},
        "spec": {},
    }
    assert workload_cluster(openshift) is None


class SecretsApi:
    """Answers GETs of Secrets: those in ``existing``, 404 for others, ``errors`` by name."""

    def __init__(self, existing: set[str], errors: dict[str, int] | None = None):
        self.existing, self.errors, self.paths = existing, errors or {}, []

    def get(self, path: str) -> dict | None:
        self.paths.append(path)
        name = path.rsplit("/", 1)[1]
        if name in self.errors:
            raise ApiError(self.errors[name], "Forbidden" if self.errors[name] == 403 else "Internal Server Error", {}, "GET", path)
        return {"metadata": {"name": name}} if name in self.existing else None


def test_each_secret_is_read_once_and_a_forbidden_one_is_unknown() -> None:
    api = SecretsApi({"c1-kubeconfig"}, {"c3-kubeconfig": 403})
    forbidden: list[str] = []
    found = kubeconfig_secrets(api, {("ns", "c1"), ("ns", "c2"), ("other", "c3")}, forbidden)
    assert found == {("ns", "c1"): True, ("ns", "c2"): False, ("other", "c3"): None}
    assert sorted(api.paths) == [
        "/api/v1/namespaces/ns/secrets/c1-kubeconfig",
        "/api/v1/namespaces/ns/secrets/c2-kubeconfig",
        "/api/v1/namespaces/other/secrets/c3-kubeconfig",
    ]
    assert forbidden == ["other/c3-kubeconfig"]


def test_any_other_error_fails_naming_the_secret() -> None:
    with pytest.raises(MachineError, match="cannot tell whether the Secret ns/c1-kubeconfig exists"):
        kubeconfig_secrets(SecretsApi(set(), {"c1-kubeconfig": 500}), {("ns", "c1")}, [])
