"""The cluster_alive modules' runs (``_alive/run.py``) against the in-memory
stand-in: the Alive object created once (its namespace only when asked), a
component's finalizer hung and released, the deprovisioning that deletes the
object and waits until every finalizer is released, check mode, and an API
that is not served failing instead of reading as "already gone"."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._alive.logic import AliveRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._alive.run import manage_alive, manage_finalizer, read_alive
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError

API = "lifecycle.machine.dev/v1alpha1"
NS = "openshift-config"
PATH = f"/apis/{API}/namespaces/{NS}/alives/cluster"


def cluster() -> FakeKube:
    fake = FakeKube()
    fake.discovery.serve(API, {"kind": "Alive", "name": "alives", "namespaced": True})
    return fake


def no_warning(message: str) -> None:
    raise AssertionError(f"unexpected warning: {message}")


def test_the_alive_object_is_created_once() -> None:
    fake = cluster()
    created = manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    assert (created["changed"], created["alive"]["exists"], created["namespace_created"]) == (True, True, False)
    assert PATH in fake.objects
    again = manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    assert again["changed"] is False and "diff" not in again
    assert read_alive(fake, AliveRequest())["alive"]["exists"] is True


def test_a_missing_namespace_is_created_only_when_asked() -> None:
    fake = cluster()
    fake.missing_namespaces.add(NS)
    with pytest.raises(MachineError, match=f"^Namespace {NS} not found: create it, or set create_namespace=true"):
        manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    assert ("POST", f"/apis/{API}/namespaces/{NS}/alives") not in fake.requests
    result = manage_alive(fake, AliveRequest(create_namespace=True), check_mode=True, warn=no_warning)
    assert (result["changed"], result["namespace_created"]) == (True, True)
    assert PATH not in fake.objects, "check mode creates nothing"


def test_a_finalizer_is_hung_and_released() -> None:
    fake = cluster()
    manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    hung = manage_finalizer(fake, AliveRequest(finalizer="example.com/backup"), check_mode=False)
    assert (hung["changed"], hung["operation"]) == (True, "added")
    assert fake.objects[PATH]["metadata"]["finalizers"] == ["example.com/backup"]
    assert manage_finalizer(fake, AliveRequest(finalizer="example.com/backup"), check_mode=False)["operation"] == "none"
    released = manage_finalizer(fake, AliveRequest(finalizer="example.com/backup", state="absent"), check_mode=False)
    assert (released["changed"], released["operation"]) == (True, "removed")
    assert fake.objects[PATH]["metadata"].get("finalizers") in (None, [])


def test_deprovisioning_waits_until_every_finalizer_is_released() -> None:
    fake = cluster()
    manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    manage_finalizer(fake, AliveRequest(finalizer="example.com/backup"), check_mode=False)

    def component_cleans_up(method: str, path: str) -> None:
        # The component sees the deletion (a watch is open) and releases its finalizer.
        if method == "GET" and "watch" in path and PATH in fake.objects:
            fake.patch(PATH, {"metadata": {"finalizers": []}})

    fake.on_request = component_cleans_up
    result = manage_alive(fake, AliveRequest(state="absent", wait_timeout=60), check_mode=False, warn=no_warning)
    assert (result["changed"], result["deleted"], result["timed_out"], result["released"]) == (True, True, False, ["example.com/backup"])
    assert PATH not in fake.objects


def test_deprovisioning_in_check_mode_deletes_nothing_and_names_who_holds_it() -> None:
    fake = cluster()
    manage_alive(fake, AliveRequest(), check_mode=False, warn=no_warning)
    manage_finalizer(fake, AliveRequest(finalizer="example.com/backup"), check_mode=False)
    result = manage_alive(fake, AliveRequest(state="absent"), check_mode=True, warn=no_warning)
    assert (result["changed"], result["deleted"]) == (True, False)
    assert result["diff"]["after"]["deletion_timestamp"] == "(set by the deletion)"
    assert "deletionTimestamp" not in fake.objects[PATH]["metadata"]


def test_an_alive_object_already_gone_is_deleted_unless_its_namespace_is_missing() -> None:
    fake = cluster()
    assert manage_alive(fake, AliveRequest(state="absent"), check_mode=False, warn=no_warning)["deleted"] is True
    fake.missing_namespaces.add("typo")
    with pytest.raises(MachineError, match=r"^Namespace typo not found, so Alive"):
        manage_alive(fake, AliveRequest(state="absent", namespace="typo"), check_mode=False, warn=no_warning)


def test_an_api_that_is_not_served_is_an_error_not_an_absent_object() -> None:
    with pytest.raises(MachineError, match=f"^The API {API} is not served by this cluster"):
        read_alive(FakeKube(), AliveRequest())
