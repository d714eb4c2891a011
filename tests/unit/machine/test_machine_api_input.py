"""Finding Machines refuses what cannot be meant (``_machine/api.py`` against the fake
transport): an ``api_version`` that serves no Machines, and a label selector the
API server cannot parse, each named in the failure instead of selecting nothing."""

from __future__ import annotations

import re

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import (
    get_machine,
    list_machines,
    machine_api_versions,
    require_namespace,
    select_machines,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

OPENSHIFT = "machine.openshift.io/v1beta1"
CAPI_V1 = "cluster.x-k8s.io/v1beta1"


def cluster(*served: str) -> FakeKube:
    fake = FakeKube()
    for group_version in served:
        fake.discovery.serve(group_version)
    return fake


def test_a_served_api_version_is_the_only_one_asked() -> None:
    fake = cluster(OPENSHIFT, CAPI_V1)
    assert machine_api_versions(fake, CAPI_V1) == [CAPI_V1]
    assert machine_api_versions(fake) == [OPENSHIFT, CAPI_V1]


@pytest.mark.parametrize("api_version", ["cluster.x-k8s.io/v1beta2", "machine.openshift.io/v1", "apps/v1"])
def test_an_api_version_that_serves_no_machines_fails_naming_those_that_do(api_version: str) -> None:
    fake = cluster(OPENSHIFT, CAPI_V1)
    message = f"api_version {api_version} is not a Machine API this cluster serves; it serves Machines as {OPENSHIFT}, {CAPI_V1}"
    with pytest.raises(MachineError, match="^" + message.replace(".", r"\.") + "$"):
        get_machine(fake, "ns", "m1", api_version)
    with pytest.raises(MachineError, match="is not a Machine API this cluster serves"):
        list_machines(fake, None, "a=b", api_version)
    assert [path for _method, path in fake.requests if "machines" in path] == [], "no Machine was read"


def test_a_selector_the_server_cannot_parse_is_named() -> None:
    fake = cluster(CAPI_V1)
    path = f"/apis/{CAPI_V1}/machines"
    fake.fail("GET", path, FakeKube.error(400, "unable to parse requirement: found '', expected: ',' or ')'"))
    with pytest.raises(MachineError) as caught:
        list_machines(fake, None, "app in (web")
    assert caught.value.msg == "Invalid label selector 'app in (web': unable to parse requirement: found '', expected: ',' or ')'"


def test_choosing_no_machine_in_a_namespace_that_does_not_exist_fails() -> None:
    """Finding nothing there must not read as "already done" (marked, terminated, deleted)."""
    fake = cluster(OPENSHIFT, CAPI_V1)
    fake.missing_namespaces.add("defualt")
    message = "Namespace defualt not found, so no Machine can be in it: check the namespace; nothing was changed"
    with pytest.raises(MachineError, match="^" + re.escape(message) + "$"):
        select_machines(fake, MachineSelection(label_selectors=("a=b",), namespace="defualt"))
    with pytest.raises(MachineError, match=re.escape(message)):
        select_machines(fake, MachineSelection(machine="m1", namespace="defualt"))
    assert select_machines(fake, MachineSelection(label_selectors=("a=b",), namespace="ns")) == [], "an existing empty namespace is fine"


def test_a_namespace_that_cannot_be_read_is_not_called_missing() -> None:
    fake = cluster(OPENSHIFT)
    fake.fail("GET", "/api/v1/namespaces/team-a", FakeKube.error(403, "namespaces is forbidden"))
    require_namespace(fake, "team-a")
