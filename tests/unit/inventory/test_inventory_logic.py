"""What the machines inventory plugin makes of Machines (pure): the keys of a connection and what is wrong with
one, host names, groups and host variables."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._inventory.logic import (
    CONNECTION_KEYS,
    InventoryConnection,
    connection_errors,
    forbidden_warning,
    group_name,
    host_groups,
    host_name,
    host_variables,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._options.connection import ALIASES, CONNECTION_OPTIONS


def test_a_connection_takes_every_connection_option_and_alias_and_its_own_keys() -> None:
    assert set(CONNECTION_KEYS) == {"name", "namespaces", "label_selectors", "api_version", *CONNECTION_OPTIONS, *ALIASES}


def test_a_connection_from_its_configuration() -> None:
    given = {"context": "prod-admin", "verify_ssl": False, "namespaces": ["a", "b"], "label_selectors": ["x=1", "y"], "api_key": None}
    assert InventoryConnection.from_config(given) == InventoryConnection(
        name="prod-admin", options={"context": "prod-admin", "validate_certs": False}, namespaces=("a", "b"), label_selector="x=1,y"
    )
    assert InventoryConnection.from_config({}) == InventoryConnection(name="default", options={}, namespaces=(None,))
    assert InventoryConnection.from_config({"name": "n", "host": "https://h"}).name == "n"
    assert InventoryConnection.from_config({"host": "https://h"}).name == "https://h"


@pytest.mark.parametrize(
    ("connections", "errors"),
    [
        ([{"kubeconfig": "k", "namespaces": ["ns"]}], []),
        (None, []),
        (["k"], ["connections[0] must be a mapping"]),
        ([{}, {"namespace": ["ns"]}], ["connections[1] has unknown key(s) namespace (allowed: "]),
        ([{"namespaces": "ns"}], ["connections[0].namespaces must be a list"]),
        ([{"namespaces": ["ok", "Not_OK"]}], ["connections[0].namespaces 'Not_OK' can never name a Namespace"]),
    ],
)
def test_what_is_wrong_with_the_connections(connections, errors) -> None:
    found = connection_errors(connections)
    assert len(found) == len(errors) and all(error.startswith(start) for error, start in zip(found, errors, strict=True)), found


def test_hosts_and_their_groups() -> None:
    info = {
        "name": "w-1",
        "namespace": "capi-system",
        "api_version": "cluster.x-k8s.io/v1beta2",
        "flavour": "clusterapi",
        "cluster_name": "Prod.East",
        "phase": "Running",
        "deleting": True,
        "labels": {"cluster.x-k8s.io/set-name": "md-0-abc", "cluster.x-k8s.io/deployment-name": "md-0"},
    }
    assert host_name(info) == "capi-system.w-1"
    assert host_groups(info, "prod") == [
        "lm_machines",
        "lm_clusterapi",
        "lm_connection_prod",
        "lm_cluster_prod_east",
        "lm_machineset_md_0_abc",
        "lm_machinedeployment_md_0",
        "lm_phase_running",
        "lm_deleting",
    ]
    openshift = {"name": "m", "namespace": "openshift-machine-api", "flavour": "openshift", "labels": {"machine.openshift.io/cluster-api-cluster": "ocp"}}
    assert host_groups(openshift, "default") == ["lm_machines", "lm_openshift", "lm_connection_default", "lm_cluster_ocp"]
    assert group_name("connection", "https://api.example.com:6443") == "lm_connection_https___api_example_com_6443"


def test_host_variables() -> None:
    info = {"name": "m", "namespace": "ns", "api_version": "machine.openshift.io/v1beta1", "flavour": "openshift", "phase": None}
    assert host_variables("prod", info, "/usr/bin/python3") == {
        "machine_name": "m",
        "machine_namespace": "ns",
        "machine_api_version": "machine.openshift.io/v1beta1",
        "machine_flavour": "openshift",
        "machine_phase": None,
        "machine_ref": {"name": "m", "namespace": "ns", "api_version": "machine.openshift.io/v1beta1", "flavour": "openshift"},
        "machine_connection": "prod",
        "ansible_connection": "local",
        "ansible_python_interpreter": "/usr/bin/python3",
    }


def test_one_warning_names_at_most_five_secrets() -> None:
    assert forbidden_warning([]) is None
    assert forbidden_warning(["ns/a-kubeconfig"]).startswith("may not read the kubeconfig Secrets ns/a-kubeconfig (403 Forbidden), so ")
    many = forbidden_warning([f"ns/c{index}-kubeconfig" for index in range(7)])
    assert "ns/c4-kubeconfig and 2 more (403 Forbidden)" in many and "c5" not in many
