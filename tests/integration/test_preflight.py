"""machine_delete's check mode answers for the chosen Machines together, against
the real API server (docs/stalls.md, "Asking before starting"): a budget whose
Pods sit on several of them serialises their drains, a bare Pod is lost, and
Pods that no Node outside the batch can take keep their budget from ever
allowing again, and replacements that ask for more than the Nodes that could
take them have free are named. Nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, ansible_env
from khelpers import deployment, pod_is_ready, wait_for
from test_inventory import inventory_file
from test_machine_drain import GRACE, create_pdb, evictions, machine_path

NEVER = "can never clear as things stand"
CLEARS = "clears by itself"
# What the inventory file of test_inventory groups as lm_deleting_candidates.
CANDIDATE = {"lm-test/delete": "yes"}


def bound_pod(name: str, node: str, labels: dict, node_selector: dict | None = None, requests: dict | None = None) -> dict:
    app = {"name": "app", "image": "app:1", **({"resources": {"requests": requests}} if requests else {})}
    spec: dict = {"nodeName": node, "terminationGracePeriodSeconds": GRACE, "containers": [app]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def replicated(kube, namespace: str, app: str, nodes: list[str], node_selector: dict | None = None, *, requests: dict | None = None) -> None:
    """One Pod of ``app`` on each of ``nodes``, adopted by a ReplicaSet of as many replicas (which recreates them)."""
    for index, node in enumerate(nodes):
        kube.create(f"/api/v1/namespaces/{namespace}/pods", bound_pod(f"{app}-{index}", node, {"app": app}, node_selector, requests))
    for index in range(len(nodes)):
        wait_for(lambda index=index: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/{app}-{index}") or {}), what=f"Pod {app}-{index} Ready")
    template_spec = {"nodeSelector": node_selector or {"lm-nowhere": "true"}, "containers": [{"name": "app", "image": "app:1"}]}
    body = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": app},
        "spec": {"replicas": len(nodes), "selector": {"matchLabels": {"app": app}}, "template": {"metadata": {"labels": {"app": app}}, "spec": template_spec}},
    }
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/replicasets", body)

    def adopted() -> bool:
        pods = [kube.get(f"/api/v1/namespaces/{namespace}/pods/{app}-{index}") for index in range(len(nodes))]
        return all((pod["metadata"].get("ownerReferences") or [{}])[0].get("kind") == "ReplicaSet" for pod in pods)

    wait_for(adopted, what=f"the {app} Pods adopted by their ReplicaSet")


def check_playbook(kubeconfig: str, namespace: str, tmp_path: Path) -> tuple[int, str, dict[str, str]]:
    """playbooks/delete_machines.yml with --check over the namespace's candidates: its exit code, output and recap by host."""
    env = {**ansible_env(kubeconfig), "ANSIBLE_PYTHON_INTERPRETER": sys.executable}
    extra = {"machine_group": "lm_deleting_candidates", "machine_controller": "absent"}
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory_file(tmp_path, kubeconfig, namespace))]
    command += [str(REPO / "playbooks" / "delete_machines.yml"), "--check", "-e", json.dumps(extra)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False, timeout=600)
    recap = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith(f"{namespace}.") and "ok=" in line}
    return proc.returncode, proc.stdout, recap


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_check_mode_counts_what_the_batch_does_to_itself_and_changes_nothing(
    *, flavour, kube, kubeconfig, namespace, machine_node, make_node, make_machine, run_module, audit_events, tmp_path
) -> None:
    first, first_node = machine_node(labels=CANDIDATE)  # the first also makes the Cluster

    def another(labels: dict | None = None) -> tuple[str, str]:
        node = make_node(labels=labels)
        return make_machine(namespace, node=node, labels=CANDIDATE)["metadata"]["name"], node

    web = [(first, first_node), another(), another()]
    db_label = {"lm-db": namespace}
    db = [another(db_label), another(db_label)]
    make_node()  # outside the batch, schedulable: the web Pods' replacements can go there
    spare_db = make_node(labels=db_label)  # the one other Node the db Pods could go to: cordoned
    kube.patch(f"/api/v1/nodes/{spare_db}", {"spec": {"unschedulable": True}})

    replicated(kube, namespace, "web", [node for _machine, node in web])
    create_pdb(kube, namespace, "web", selector={"app": "web"}, min_available=2, healthy=3)  # allows 1
    replicated(kube, namespace, "db", [node for _machine, node in db], node_selector=db_label)
    create_pdb(kube, namespace, "db", selector={"app": "db"}, min_available=1, healthy=2)  # allows 1
    kube.create(f"/api/v1/namespaces/{namespace}/pods", bound_pod("solo", first_node, {"app": "solo"}))
    wait_for(lambda: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/solo") or {}), what="Pod solo Ready")

    machines = [{"name": name, "namespace": namespace} for name, _node in web + db]
    began = time.monotonic()
    plan = run_module("machine_delete", {"machines": machines, "machine_controller": "absent", "concurrency": 10}, check=True)
    assert time.monotonic() - began < 60, "check mode answers at once"

    assert not plan.get("failed"), plan.get("msg")
    answer = plan["preflight"]
    batch = answer["batch"]
    web_keys = sorted(f"{namespace}/{name}" for name, _node in web)
    db_keys = sorted(f"{namespace}/{name}" for name, _node in db)
    by_object = {(f["kind"], f["object"]): f for f in batch["findings"]}

    # The web budget allows 1 and the batch evicts 3 of its healthy Pods from 3 Machines at once: serialised, they wait.
    shared = by_object[("batch budget", f"PodDisruptionBudget {namespace}/web")]
    assert (shared["verdict"], shared["holds"], shared["machines"]) == (CLEARS, True, web_keys)
    assert (shared["evidence"]["disruptions_allowed"], shared["evidence"]["to_evict"], shared["evidence"]["at_once"]) == (1, 3, 3)
    # The bare Pod is lost with its Machine.
    lost = by_object[("unreplicated pod", f"Pod {namespace}/solo")]
    assert (lost["machines"], lost["holds"]) == ([f"{namespace}/{first}"], False)
    # No Node outside the batch can take the db Pods' replacements: the db budget never allows again.
    stuck = by_object[("batch budget", f"PodDisruptionBudget {namespace}/db")]
    assert (stuck["verdict"], stuck["machines"], sorted(stuck["evidence"]["never_back"])) == (NEVER, db_keys, [f"{namespace}/db-0", f"{namespace}/db-1"])
    [homeless] = [f for f in batch["findings"] if f["kind"] == "no node for replacements"]
    assert (homeless["verdict"], homeless["machines"], homeless["evidence"]["budgets"]) == (NEVER, db_keys, [f"{namespace}/db"])
    assert homeless["evidence"]["nodes_outside_batch"][spare_db] == "cordoned"
    assert batch["suggested_concurrency"] == 1 and batch["concurrency"] == 10
    assert sorted(batch["counted"]) == sorted(web_keys + db_keys) and batch["not_counted"] == {}

    assert sorted(answer["would_wait"]) == web_keys and sorted(answer["can_never_finish"]) == db_keys and answer["would_finish"] == []
    assert list(answer["would_lose"]) == [f"{namespace}/{first}"]

    # The playbook over an inventory group, with --check: each host reports its own Machine's preflight.
    returncode, stdout, recap = check_playbook(kubeconfig, namespace, tmp_path)
    assert returncode != 0, "a Machine that can never finish fails its host"
    assert all("failed=0" in recap[f"{namespace}.{name}"] for name, _node in web), stdout[-4000:]
    assert all("failed=1" in recap[f"{namespace}.{name}"] for name, _node in db), stdout[-4000:]
    assert "would wait: clears by itself: batch budget" in stdout and "it would lose: needs someone to act: unreplicated pod" in stdout
    assert f"can never finish as things stand: can never clear as things stand: batch budget PodDisruptionBudget {namespace}/db" in stdout
    assert "is the largest at which no budget shared by these Machines serialises their drains" in stdout

    # Check mode changed nothing: no Machine marked, no Node cordoned, no eviction sent.
    assert all(not kube.get(machine_path(flavour, namespace, m["name"]))["metadata"].get("deletionTimestamp") for m in machines)
    assert not any(kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") for _name, node in web + db)
    assert evictions(audit_events, namespace) == {}


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_a_single_replica_deployment_behind_min_available_one_is_named_as_never(*, kube, namespace, machine_node, run_module) -> None:
    pool = {"lm-single": namespace}
    machine, node = machine_node()
    kube.patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": pool}})
    kube.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment("db", 1, pool, GRACE))
    wait_for(lambda: [p for p in kube.list(f"/api/v1/namespaces/{namespace}/pods") if pod_is_ready(p)], what="the db Pod Ready")
    create_pdb(kube, namespace, "db", selector={"app": "db"}, min_available=1, healthy=1)

    plan = run_module("machine_delete", {"machines": [{"name": machine, "namespace": namespace}], "machine_controller": "absent"}, check=True)

    assert not plan.get("failed"), plan.get("msg")
    [single] = [f for f in plan["preflight"]["batch"]["findings"] if f["kind"] == "single replica"]
    assert (single["object"], single["verdict"], single["holds"]) == (f"Deployment {namespace}/db", NEVER, True)
    assert (single["evidence"]["replicas"], single["evidence"]["budget"], single["evidence"]["min_available"]) == (1, f"{namespace}/db", 1)
    assert list(plan["preflight"]["can_never_finish"]) == [f"{namespace}/{machine}"]


@pytest.mark.parametrize("flavour", ["v1beta2"], indirect=True)
def test_check_mode_names_replacements_that_cannot_fit_in_what_the_nodes_outside_the_batch_have_free(
    *, flavour, kube, namespace, machine_node, make_node, make_machine, run_module, audit_events
) -> None:
    pool = {"lm-room": namespace}
    first, first_node = machine_node()
    second_node = make_node(labels=pool)
    second = make_machine(namespace, node=second_node)["metadata"]["name"]
    kube.patch(f"/api/v1/nodes/{first_node}", {"metadata": {"labels": pool}})
    # The one Node outside the batch the Pods can go to: 1 cpu, of which a Pod already there takes 300m.
    spare = make_node(labels=pool)
    small = {"cpu": "1", "memory": "1Gi", "pods": "110"}
    kube.patch(f"/api/v1/nodes/{spare}", {"status": {"capacity": small, "allocatable": small}}, subresource_status=True)
    kube.create(f"/api/v1/namespaces/{namespace}/pods", bound_pod("there", spare, {"app": "there"}, requests={"cpu": "300m"}))
    wait_for(lambda: pod_is_ready(kube.get(f"/api/v1/namespaces/{namespace}/pods/there") or {}), what="Pod there Ready")
    # Two Pods of 600m come back: 1200m asked, 700m free.
    replicated(kube, namespace, "big", [first_node, second_node], node_selector=pool, requests={"cpu": "600m", "memory": "64Mi"})
    assert kube.get(f"/api/v1/nodes/{spare}")["status"]["allocatable"]["cpu"] == "1", "kwok keeps the allocatable the test set"

    machines = [{"name": name, "namespace": namespace} for name in (first, second)]
    began = time.monotonic()
    plan = run_module("machine_delete", {"machines": machines, "machine_controller": "absent", "concurrency": 2}, check=True)
    assert time.monotonic() - began < 60, "check mode answers at once"

    assert not plan.get("failed"), plan.get("msg")
    answer = plan["preflight"]
    keys = sorted(f"{namespace}/{name}" for name in (first, second))
    [room] = [f for f in answer["batch"]["findings"] if f["kind"] == "no room for replacements"]
    assert (room["verdict"], room["holds"], room["machines"] != []) == ("needs someone to act", False, True)
    assert room["evidence"]["nodes"] == [spare] and room["evidence"]["pods"] == [f"{namespace}/big-0", f"{namespace}/big-1"]
    assert room["evidence"]["short"] == {"cpu": {"requested": "1200m", "free": "700m", "shortfall": "500m"}}
    assert room["evidence"]["workloads"] == [f"ReplicaSet {namespace}/big"] and len(room["evidence"]["pending"]) == 1
    assert "Node by Node" in room["reason"]
    # It costs the workload, it does not hold the drains: both would finish, one would lose a replica for a while.
    assert sorted(answer["would_finish"]) == keys and set(answer["would_lose"]) <= set(keys) and answer["would_lose"]

    # Check mode changed nothing: no Machine marked, no Node cordoned, no eviction sent.
    assert all(not kube.get(machine_path(flavour, namespace, m["name"]))["metadata"].get("deletionTimestamp") for m in machines)
    assert not any(kube.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable") for node in (first_node, second_node))
    assert evictions(audit_events, namespace) == {}
