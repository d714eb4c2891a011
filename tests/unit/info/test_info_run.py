"""machine_info's run (``_info/run.py``) against the in-memory stand-in: the
chosen Machines' views, a query picking some of them, a Machine that does not
exist (absent, not an error; gone for a wait), and a wait that ends when the
gate is reached or fails naming the Machines still short of it."""

from __future__ import annotations

import pytest
from fake_machines import CAPI, CAPI_NS, OPENSHIFT, OPENSHIFT_NS, cluster, machine_path, put_capi, put_openshift

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._info.logic import InfoRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._info.run import read_machines
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

BLUE = MachineSelection(label_selectors=("pool=blue",))


def test_the_chosen_machines_are_described() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    put_openshift(fake, "other")
    result = read_machines(fake, InfoRequest(selection=BLUE))
    assert result["changed"] is False and "waited" not in result
    assert sorted((m["name"], m["flavour"], m["exists"]) for m in result["machines"]) == [("m-1", "openshift", True), ("m-2", "clusterapi", True)]
    assert [m["node_name"] for m in result["machines"] if m["name"] == "m-1"] == ["m-1-node"]


def test_a_query_picks_machines_out_of_the_views() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    result = read_machines(fake, InfoRequest(selection=BLUE, query="[?flavour=='clusterapi']"))
    assert [m["name"] for m in result["machines"]] == ["m-2"]


def test_a_machine_that_does_not_exist_is_absent_or_gone() -> None:
    fake = cluster()
    selection = MachineSelection(machine="m-9", namespace=OPENSHIFT_NS, api_version=OPENSHIFT)
    assert read_machines(fake, InfoRequest(selection=selection)) == {"changed": False, "machines": []}
    waited = read_machines(fake, InfoRequest(selection=selection, wait=True, wait_for="drained"))
    assert waited["machines"] == [{"name": "m-9", "namespace": OPENSHIFT_NS, "api_version": OPENSHIFT, "exists": False}]
    fake.missing_namespaces.add("typo")
    with pytest.raises(MachineError, match=r"^Namespace typo not found"):
        read_machines(fake, InfoRequest(selection=MachineSelection(machine="m-9", namespace="typo", api_version=OPENSHIFT)))


def test_a_wait_ends_when_each_machine_has_reached_the_gate() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})  # no preDrain hook: drainable
    put_capi(fake, "m-2", labels={"pool": "blue"})
    result = read_machines(fake, InfoRequest(selection=BLUE, wait=True, wait_for="drainable", wait_timeout=30))
    assert [m["gates"]["drainable"] for m in result["machines"]] == [True, True]
    assert "waited" in result


def test_a_wait_that_times_out_names_the_machines_short_of_the_gate() -> None:
    fake = cluster()
    put_openshift(fake, "m-1", labels={"pool": "blue"})
    put_capi(fake, "m-2", labels={"pool": "blue"})
    with pytest.raises(MachineError) as caught:
        read_machines(fake, InfoRequest(selection=BLUE, wait=True, wait_for="deleted", wait_timeout=5))
    assert caught.value.msg.startswith("Timed out after 5 s waiting for Machine ") and caught.value.msg.endswith(" to be deleted")
    assert f"{OPENSHIFT_NS}/m-1" in caught.value.msg and f"{CAPI_NS}/m-2" in caught.value.msg
    assert [m["exists"] for m in caught.value.result["machines"]] == [True, True]


def test_a_machine_deleted_during_the_wait_has_reached_deleted() -> None:
    fake = cluster()
    put_capi(fake, "m-2", labels={"pool": "blue"})
    path = machine_path("m-2", CAPI, CAPI_NS)

    def goes(method: str, request_path: str) -> None:
        if method == "GET" and "watch" in request_path and path in fake.objects:
            fake.delete(path)  # no finalizer: gone at once

    fake.on_request = goes
    result = read_machines(fake, InfoRequest(selection=BLUE, wait=True, wait_for="deleted", wait_timeout=30))
    assert [(m["name"], m["exists"]) for m in result["machines"]] == [("m-2", False)]
