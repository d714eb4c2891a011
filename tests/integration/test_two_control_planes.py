"""The tooling of Cluster API's two-cluster layout: a management control plane
(the Machines) and workload ones (their Nodes and Pods) running side by side,
reached from the management cluster through the Secret ``<cluster>-kubeconfig``
exactly as Cluster API writes it, a ServiceAccount-token kubeconfig that stops
working once its ServiceAccount is gone, and extra workload planes on demand,
all stopped afterwards."""

from __future__ import annotations

import base64
import json
import time
import uuid
from pathlib import Path

import pytest
from conftest import cluster_tool
from khelpers import CAPI_CLUSTER, wait_for

from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.connect import api_from_kubeconfig
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.errors import ApiError

KUBE_SYSTEM = "/api/v1/namespaces/kube-system"


def server_of(kubeconfig: str) -> str:
    return cluster_tool.state_from_kubeconfig(Path(kubeconfig))["server"]


def ports_of(kubeconfig: str) -> set[int]:
    """Every port a control plane of hack/cluster.py listens on (empty for one it did not start)."""
    state = json.loads((Path(kubeconfig).parent / "state.json").read_text()) if (Path(kubeconfig).parent / "state.json").exists() else {}
    return {value for key, value in state.items() if key.endswith("_port")}


def serves_cluster_api(api: KubeApi) -> bool:
    return api.get("/apis/cluster.x-k8s.io") is not None


def secret_kubeconfig(kube: KubeApi, namespace: str, cluster: str, path: Path) -> Path:
    """The kubeconfig of the Secret ``<cluster>-kubeconfig``, decoded from ``data.value`` into ``path``."""
    secret = kube.get(f"/api/v1/namespaces/{namespace}/secrets/{cluster}-kubeconfig")
    assert secret is not None, f"no Secret {namespace}/{cluster}-kubeconfig"
    path.write_bytes(base64.b64decode(secret["data"]["value"]))
    return path


def test_both_control_planes_run_at_once_with_different_servers(kubeconfig, workload_kubeconfig, kube, workload_kube) -> None:
    assert server_of(kubeconfig) != server_of(workload_kubeconfig)
    assert kube.get(KUBE_SYSTEM)["metadata"]["uid"] != workload_kube.get(KUBE_SYSTEM)["metadata"]["uid"]
    management_ports, workload_ports = ports_of(kubeconfig), ports_of(workload_kubeconfig)
    assert not management_ports & workload_ports, "the two control planes share a port"
    # Machines live in the management cluster only: the workload one has no CRDs.
    assert serves_cluster_api(kube)
    assert not serves_cluster_api(workload_kube)
    assert workload_kube.list("/apis/apiextensions.k8s.io/v1/customresourcedefinitions") == []
    # Both are whole clusters: controllers run (the default ServiceAccount of a new namespace appears).
    assert workload_kube.get("/api/v1/namespaces/default/serviceaccounts/default") is not None


def test_a_node_of_one_name_in_each_cluster_is_two_objects(kube, workload_kube, make_node, make_workload_node) -> None:
    name = f"twin-{uuid.uuid4().hex[:6]}"
    make_node(name)
    make_workload_node(name)  # Ready: the workload plane's own kwok runs it
    in_management = kube.get(f"/api/v1/nodes/{name}")
    in_workload = workload_kube.get(f"/api/v1/nodes/{name}")
    assert in_management["metadata"]["uid"] != in_workload["metadata"]["uid"]

    workload_kube.delete(f"/api/v1/nodes/{name}")
    wait_for(lambda: workload_kube.get(f"/api/v1/nodes/{name}") is None, 30, what="the workload Node to go")
    assert kube.get(f"/api/v1/nodes/{name}")["metadata"]["uid"] == in_management["metadata"]["uid"], "deleting one deleted the other"


def test_the_namespace_holds_the_self_hosted_kubeconfig_secret(kube, namespace, tmp_path) -> None:
    secret = kube.get(f"/api/v1/namespaces/{namespace}/secrets/{CAPI_CLUSTER}-kubeconfig")
    assert secret["type"] == "cluster.x-k8s.io/secret"
    assert secret["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": CAPI_CLUSTER}
    reached = api_from_kubeconfig(str(secret_kubeconfig(kube, namespace, CAPI_CLUSTER, tmp_path / "self.kubeconfig")))
    assert reached.get(KUBE_SYSTEM)["metadata"]["uid"] == kube.get(KUBE_SYSTEM)["metadata"]["uid"]


def test_the_kubeconfig_secret_round_trips_to_the_workload_cluster(
    *, kube, workload_kube, workload_kubeconfig, namespace, kubeconfig_secret, make_workload_node, tmp_path
) -> None:
    built = cluster_tool.kubeconfig_secret("wl", namespace, cluster_tool.inline_kubeconfig(workload_kubeconfig))
    assert built["metadata"] == {"name": "wl-kubeconfig", "namespace": namespace, "labels": {"cluster.x-k8s.io/cluster-name": "wl"}}
    assert built["type"] == "cluster.x-k8s.io/secret"
    assert list(built["data"]) == ["value"]

    stored = kubeconfig_secret(namespace, "wl", workload_kubeconfig)
    assert stored["metadata"]["name"] == "wl-kubeconfig" and stored["type"] == "cluster.x-k8s.io/secret"
    path = secret_kubeconfig(kube, namespace, "wl", tmp_path / "wl.kubeconfig")
    config = json.loads(path.read_text())
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    assert cluster["server"] == server_of(workload_kubeconfig)
    assert cluster["certificate-authority-data"] and "certificate-authority" not in cluster, "the CA is not inline"
    assert user["token"]

    node = make_workload_node()
    reached = api_from_kubeconfig(str(path))
    assert reached.get(f"/api/v1/nodes/{node}")["metadata"]["uid"] == workload_kube.get(f"/api/v1/nodes/{node}")["metadata"]["uid"]
    assert kube.get(f"/api/v1/nodes/{node}") is None, "the Node is in the management cluster too"

    # Replacing the default Secret points the cluster lm-test at the workload cluster instead of itself.
    kubeconfig_secret(namespace, CAPI_CLUSTER, Path(workload_kubeconfig).read_text())
    replaced = api_from_kubeconfig(str(secret_kubeconfig(kube, namespace, CAPI_CLUSTER, tmp_path / "replaced.kubeconfig")))
    assert replaced.get(KUBE_SYSTEM)["metadata"]["uid"] == workload_kube.get(KUBE_SYSTEM)["metadata"]["uid"]


def test_a_service_account_kubeconfig_answers_401_once_its_service_account_is_deleted(workload_kubeconfig, workload_kube, tmp_path) -> None:
    account = f"lm-rotated-{uuid.uuid4().hex[:6]}"
    try:
        text = cluster_tool.service_account_kubeconfig(workload_kubeconfig, account)
        config = json.loads(text)
        assert config["clusters"][0]["cluster"]["server"] == server_of(workload_kubeconfig)
        assert config["users"][0]["user"]["token"] != cluster_tool.ADMIN_TOKEN
        path = tmp_path / "rotated.kubeconfig"
        path.write_text(text)
        as_account = api_from_kubeconfig(str(path))
        review = as_account.create("/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:kube-system:{account}"
        assert as_account.get(KUBE_SYSTEM)["metadata"]["uid"] == workload_kube.get(KUBE_SYSTEM)["metadata"]["uid"]

        workload_kube.delete(f"{KUBE_SYSTEM}/serviceaccounts/{account}")
        # The API server keeps a token's successful authentication for 10 s (a
        # built-in cache, no flag): measured here, the 401 comes 9.9-10.0 s after
        # the deletion. A test of a rotated kubeconfig has to allow for that.
        deadline = time.monotonic() + 20
        status = None
        while time.monotonic() < deadline:
            try:
                as_account.get(KUBE_SYSTEM)
            except ApiError as exc:
                status = exc.status
                if status == 401:
                    break
            time.sleep(0.25)
        assert status == 401, f"the token of the deleted ServiceAccount still answers {status or 200}, not 401"
        # The admin kubeconfig of the same cluster is untouched.
        assert workload_kube.get(KUBE_SYSTEM) is not None
    finally:
        workload_kube.delete(f"{KUBE_SYSTEM}/serviceaccounts/{account}")
        workload_kube.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/lm-kube-system-{account}")


@pytest.fixture(scope="module")
def stopped_afterwards():
    """The pids of the control planes a test records here must all be gone once the
    module's fixtures are torn down. Requested before ``extra_workload_clusters``,
    so set up before it and torn down after it."""
    recorded: dict[str, list[int]] = {}
    yield recorded
    deadline = time.monotonic() + 10
    alive = recorded
    while alive and time.monotonic() < deadline:
        alive = {where: [pid for pid in pids if cluster_tool._pid_alive(pid)] for where, pids in recorded.items()}
        alive = {where: pids for where, pids in alive.items() if pids}
        time.sleep(0.2)
    assert not alive, f"control planes still running after the module: {alive}"
    assert not [where for where in recorded if (Path(where) / "state.json").exists()], "a control plane was not stopped through down()"


def test_extra_workload_clusters_are_more_distinct_servers(stopped_afterwards, extra_workload_clusters, kubeconfig, workload_kubeconfig) -> None:
    extra = extra_workload_clusters(2)
    assert len(extra) == 2
    every = [kubeconfig, workload_kubeconfig, *extra]
    assert len({server_of(path) for path in every}) == 4
    uids = set()
    for path in extra:
        api = api_from_kubeconfig(path)
        uids.add(api.get(KUBE_SYSTEM)["metadata"]["uid"])
        assert not serves_cluster_api(api)
        state = json.loads((Path(path).parent / "state.json").read_text())
        assert state["workload"] is True
        assert Path(path).parent.parent.name == ".tmp", "extra control planes live in .tmp/"
        stopped_afterwards[str(Path(path).parent)] = list(state["pids"].values())
    assert len(uids) == 2
    assert not ports_of(extra[0]) & ports_of(extra[1])
