"""The playbooks' workload cluster variables, end to end on the real control plane: a Cluster API Machine's Node
is reached the way workload_cluster_source / workload_kubeconfig say, through the role (delete_machine.yml) or
machine_drain (drain_node.yml). The local control plane is both the management and the workload cluster, so each
way (the kubeconfig Secret, the management cluster, a kubeconfig file) reaches the same Node."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

CLUSTER = "lm-test"  # the Cluster the victim's Machine belongs to (capi_cluster)


def deletion_vars(victim, **workload) -> dict:
    return {"machine_name": victim.name, "machine_namespace": victim.namespace, "drain_timeout": 300, "terminate_timeout": 300, **workload}


def assert_gone(kube, victim) -> None:
    assert kube.get(victim.path) is None, "the Machine is still there"
    assert kube.get(f"/api/v1/nodes/{victim.node}") is None, "the Node is still there"


@pytest.mark.parametrize(
    ("flavour", "source"),
    [("v1beta2", "secret"), ("v1beta2", "kubeconfig"), ("v1beta1", "management")],
    indirect=["flavour"],
)
def test_delete_machine_reaches_the_node_the_way_the_survey_says(*, flavour, source, kube, kubeconfig, victim, run_playbook, kubeconfig_secret) -> None:
    v = victim()
    workload = {"workload_cluster_source": source}
    if source == "secret":
        # As Cluster API keeps it: the workload cluster's kubeconfig under the key value.
        kubeconfig_secret(v.namespace, CLUSTER, Path(kubeconfig).read_text())
    else:
        # The other ways never read it: without it they still reach the Node.
        kube.delete(f"/api/v1/namespaces/{v.namespace}/secrets/{CLUSTER}-kubeconfig")
    if source == "kubeconfig":
        workload["workload_kubeconfig"] = kubeconfig
    result = run_playbook(REPO / "playbooks" / "delete_machine.yml", deletion_vars(v, **workload))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert f"(workload cluster {CLUSTER})" in result.stdout, "the progress names the workload cluster"
    assert_gone(kube, v)


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_without_its_secret_the_node_is_not_touched_and_the_message_says_how_to_reach_it(*, flavour, kube, victim, run_playbook) -> None:
    v = victim()
    kube.delete(f"/api/v1/namespaces/{v.namespace}/secrets/{CLUSTER}-kubeconfig")  # the namespace fixture's self-hosted one
    result = run_playbook(REPO / "playbooks" / "delete_machine.yml", deletion_vars(v))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0
    assert f"the Secret {v.namespace}/{CLUSTER}-kubeconfig (its kubeconfig) does not exist in the management cluster" in output
    node = kube.get(f"/api/v1/nodes/{v.node}")
    assert node is not None and not node["spec"].get("unschedulable"), "the Node was neither cordoned nor deleted"


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_drain_node_drains_a_machines_node_through_the_management_source(*, flavour, kube, victim, run_playbook) -> None:
    v = victim()
    extra = {"machine": v.name, "machine_namespace": v.namespace, "workload_cluster_source": "management", "drain_timeout": 300}
    result = run_playbook(REPO / "playbooks" / "drain_node.yml", extra)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert kube.get(f"/api/v1/nodes/{v.node}")["spec"].get("unschedulable") is True
    assert not [p for p in v.web_pods() if p["spec"].get("nodeName") == v.node and not p["metadata"].get("deletionTimestamp")]
