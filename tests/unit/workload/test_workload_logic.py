"""The workload_cluster option and what a kubeconfig Secret holds (pure logic of _workload)."""

from __future__ import annotations

import base64

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._workload.logic import (
    KUBECONFIG,
    MANAGEMENT,
    SECRET,
    WorkloadEntry,
    cluster_key,
    kubeconfig_from_secret,
    missing_secret_message,
    provider_id_conflict,
    workload_settings,
)


def test_the_default_reads_every_workload_cluster_from_its_secret() -> None:
    settings = workload_settings({})
    assert settings.entry("ns", "c1") == WorkloadEntry(SECRET)
    assert workload_settings(None).entry("ns", "c1").source == SECRET


def test_clusters_by_name_or_namespace_and_name_override_the_default() -> None:
    settings = workload_settings(
        {"source": MANAGEMENT, "clusters": {"c1": "/etc/c1.kubeconfig", "team/c2": {"kubeconfig": "/etc/c2", "context": "admin"}, "c3": "secret"}}
    )
    assert settings.entry("any", "c1") == WorkloadEntry(KUBECONFIG, "/etc/c1.kubeconfig")
    assert settings.entry("team", "c2") == WorkloadEntry(KUBECONFIG, "/etc/c2", "admin")
    assert settings.entry("other", "c2").source == MANAGEMENT  # namespace/name only matches that namespace
    assert settings.entry("ns", "c3").source == SECRET
    assert settings.entry("ns", "c4").source == MANAGEMENT


def test_a_kubeconfig_alone_implies_its_source() -> None:
    assert workload_settings({"kubeconfig": {"clusters": [{}]}}).default.source == KUBECONFIG


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"sorce": "management"}, "workload_cluster has unknown key(s) sorce"),
        ({"source": "workload"}, "workload_cluster.source must be one of secret, management, kubeconfig, not 'workload'"),
        ({"source": "kubeconfig"}, "workload_cluster.kubeconfig is not given"),
        ({"source": "secret", "context": "x"}, "workload_cluster.context is given but workload_cluster.source is secret"),
        ({"clusters": {"c1": {"kubconfig": "/x"}}}, "workload_cluster.clusters[c1] has unknown key(s) kubconfig"),
        ({"clusters": {"a/b/c": "management"}}, "'a/b/c' is not a cluster name nor namespace/name"),
        ({"clusters": ["c1"]}, "workload_cluster.clusters must map cluster names"),
        ({"kubeconfig": 3}, "workload_cluster.kubeconfig must be a path or a mapping"),
        ({"clusters": {"c1": {"clusters": {}}}}, "workload_cluster.clusters[c1] has unknown key(s) clusters"),
    ],
)
def test_mistakes_are_refused_with_every_reason(value, expected) -> None:
    with pytest.raises(MachineError) as raised:
        workload_settings(value)
    assert expected in raised.value.msg
    errors: list[str] = []
    workload_settings(value, errors)
    assert any(expected in error for error in errors)


def test_round_trips_to_the_option() -> None:
    option = {"source": "management", "clusters": {"c1": {"source": "kubeconfig", "kubeconfig": "/k", "context": "x"}}}
    assert workload_settings(option).as_option() == option


def test_the_connection_key_shares_a_secret_per_cluster_and_a_file_per_file() -> None:
    assert cluster_key("ns", "c1", WorkloadEntry()) == "secret:ns/c1"
    assert cluster_key("ns", "c1", WorkloadEntry(KUBECONFIG, "/k")) == cluster_key("other", "c2", WorkloadEntry(KUBECONFIG, "/k"))


def _secret(value: bytes | None, **more: str) -> dict:
    data = dict(more)
    if value is not None:
        data["value"] = base64.b64encode(value).decode()
    return {"data": data}


def test_a_secret_holds_a_yaml_or_json_kubeconfig() -> None:
    yaml_text = b"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: https://x}\n"
    assert kubeconfig_from_secret(_secret(yaml_text), "ns", "c1")["clusters"][0]["name"] == "c"
    assert kubeconfig_from_secret(_secret(b'{"clusters": [{"name": "j"}]}'), "ns", "c1")["clusters"][0]["name"] == "j"


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        (_secret(None, other="eA=="), "the Secret ns/c1-kubeconfig has no key 'value' (keys: other)"),
        (_secret(b"not: [closed"), "'value' in the Secret ns/c1-kubeconfig is not a kubeconfig"),
        (_secret(b"just text"), "is not a kubeconfig (no clusters in it)"),
        ({"data": {"value": "%%%"}}, "is not a kubeconfig"),
    ],
)
def test_a_secret_that_holds_no_kubeconfig_is_named(secret, expected) -> None:
    with pytest.raises(MachineError) as raised:
        kubeconfig_from_secret(secret, "ns", "c1")
    assert expected in raised.value.msg
    assert "workload_cluster" in raised.value.msg


def test_the_missing_secret_message_names_the_secret_and_the_option() -> None:
    message = missing_secret_message("ns/w-0", "ns", "c1")
    assert "the Secret ns/c1-kubeconfig" in message and "workload_cluster" in message and "not touched" in message


def test_a_node_with_another_provider_id_is_not_the_machines() -> None:
    machine = {"metadata": {"name": "m", "namespace": "ns"}, "spec": {"providerID": "aws:///i-1"}}
    node = {"metadata": {"name": "n"}, "spec": {"providerID": "aws:///i-2"}}
    message = provider_id_conflict(machine, node, "the workload cluster ns/c1")
    assert "aws:///i-2" in message and "aws:///i-1" in message and "ns/m" in message
    assert provider_id_conflict(machine, {"metadata": {"name": "n"}, "spec": {"providerID": "aws:///i-1"}}, "x") is None
    assert provider_id_conflict(machine, {"metadata": {"name": "n"}, "spec": {}}, "x") is None
    assert provider_id_conflict({"metadata": {}, "spec": {}}, node, "x") is None
    assert provider_id_conflict(machine, None, "x") is None
