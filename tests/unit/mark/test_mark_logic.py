"""The first step of a deletion (``_mark/logic.py``, pure): the finalizer that
holds the Machine, and what the step reports (docs/behaviour.md §2)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._mark.logic import deletion_state, with_finalizer

OPENSHIFT = "machine.openshift.io/v1beta1"
CAPI = "cluster.x-k8s.io/v1beta2"
FINALIZERS = {OPENSHIFT: "machine.machine.openshift.io", CAPI: "machine.cluster.x-k8s.io"}


def machine(api_version: str, finalizers: list | None = None, deleting: bool = False) -> dict:
    meta: dict = {"name": "m-1", "namespace": "ns", "resourceVersion": "42"}
    if finalizers is not None:
        meta["finalizers"] = finalizers
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta}


@pytest.mark.parametrize("api_version", [OPENSHIFT, CAPI])
def test_the_finalizer_is_added_guarded_by_the_resource_version(api_version) -> None:
    build = with_finalizer(flavour_for(api_version))
    ours = FINALIZERS[api_version]
    assert build(machine(api_version)) == {"metadata": {"resourceVersion": "42", "finalizers": [ours]}}
    assert build(machine(api_version, ["example.com/keep"])) == {"metadata": {"resourceVersion": "42", "finalizers": ["example.com/keep", ours]}}


@pytest.mark.parametrize("api_version", [OPENSHIFT, CAPI])
def test_nothing_to_add_when_it_is_there_or_the_machine_is_being_deleted(api_version) -> None:
    build = with_finalizer(flavour_for(api_version))
    assert build(machine(api_version, [FINALIZERS[api_version]])) is None
    assert build(machine(api_version, ["example.com/keep"], deleting=True)) is None, "the API server accepts no new finalizer then"


def test_deletion_state() -> None:
    flavour = flavour_for(CAPI)
    assert deletion_state(machine(CAPI), flavour) == {"deleting": False, "finalizers": [], "held": False}
    held = machine(CAPI, ["example.com/keep", FINALIZERS[CAPI]], deleting=True)
    assert deletion_state(held, flavour) == {"deleting": True, "finalizers": ["example.com/keep", FINALIZERS[CAPI]], "held": True}
    assert deletion_state(machine(CAPI, [FINALIZERS[OPENSHIFT]], deleting=True), flavour)["held"] is False, "another flavour's finalizer does not hold it"
