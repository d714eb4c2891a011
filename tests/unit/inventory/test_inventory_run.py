"""The machines inventory plugin's runner against the in-memory stand-in (pure logic only; the plugin itself is
proven against the real API server in tests/integration/test_inventory.py)."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.logic import InventoryConnection
from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.run import read_inventory

OPENSHIFT = "machine.openshift.io/v1beta1"
CAPI = "cluster.x-k8s.io/v1beta2"


def machine(api_version: str, namespace: str, name: str, cluster: str | None = None) -> dict:
    spec = {"clusterName": cluster} if cluster else {}
    return {"apiVersion": api_version, "kind": "Machine", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def world() -> FakeKube:
    fake = FakeKube()
    fake.discovery.serve(OPENSHIFT)
    fake.discovery.serve(CAPI)
    for obj in (
        machine(OPENSHIFT, "openshift-machine-api", "o-1"),
        machine(CAPI, "fleet", "c1-a", "c1"),
        machine(CAPI, "fleet", "c1-b", "c1"),
        machine(CAPI, "fleet", "c2-a", "c2"),
    ):
        fake.put(f"/apis/{obj['apiVersion']}/namespaces/{obj['metadata']['namespace']}/machines/{obj['metadata']['name']}", obj)
    fake.put("/api/v1/namespaces/fleet/secrets/c1-kubeconfig", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "c1-kubeconfig"}})
    return fake


def test_every_machine_of_each_connection_with_its_workload_cluster_and_secret() -> None:
    fake = world()
    made: list[dict] = []

    def connect(**options):
        made.append(options)
        return fake

    read = read_inventory(
        [InventoryConnection(name="prod", options={"kubeconfig": "~/k", "context": "c"}), InventoryConnection(name="fleet", namespaces=("fleet",))],
        kubeconfig_file=lambda path: f"/decrypted/{path.strip('~/')}",
        connect=connect,
    )
    assert made == [{"kubeconfig": "/decrypted/k", "context": "c"}, {}]
    seen = [(connection, info["namespace"], info["name"], info["workload_cluster"], info["workload_kubeconfig_secret"]) for connection, info in read.machines]
    assert seen == [
        ("prod", "fleet", "c1-a", "c1", True),
        ("prod", "fleet", "c1-b", "c1", True),
        ("prod", "fleet", "c2-a", "c2", False),
        ("prod", "openshift-machine-api", "o-1", None, None),
        ("fleet", "fleet", "c1-a", "c1", True),
        ("fleet", "fleet", "c1-b", "c1", True),
        ("fleet", "fleet", "c2-a", "c2", False),
    ]
    secret_reads = [path for method, path in fake.requests if "/secrets/" in path]
    assert len(secret_reads) == 4, "one GET per workload cluster and connection, not one per Machine"
    assert read.warning is None


def test_a_forbidden_secret_is_a_warning_and_a_missing_namespace_a_failure() -> None:
    fake = world()
    fake.fail("GET", "/api/v1/namespaces/fleet/secrets/c2-kubeconfig", FakeKube.error(403, "forbidden"))
    read = read_inventory([InventoryConnection(namespaces=("fleet",))], connect=lambda **_options: fake)
    assert {info["name"]: info["workload_kubeconfig_secret"] for _c, info in read.machines} == {"c1-a": True, "c1-b": True, "c2-a": None}
    assert read.warning.startswith("may not read the kubeconfig Secrets fleet/c2-kubeconfig (403 Forbidden)")
    fake.missing_namespaces.add("typo")
    with pytest.raises(MachineError, match=r"^cannot read the Machines of connection default: Namespace typo not found$"):
        read_inventory([InventoryConnection(namespaces=("typo",))], connect=lambda **_options: fake)


def test_a_kubeconfig_that_cannot_be_read_names_the_connection() -> None:
    def unreadable(path: str) -> str:
        raise MachineError(f"could not find or access '{path}'")

    with pytest.raises(MachineError, match=r"^cannot read the Machines of connection prod: could not find or access 'k'$"):
        read_inventory([InventoryConnection(name="prod", options={"kubeconfig": "k"})], kubeconfig_file=unreadable, connect=lambda **_options: world())
