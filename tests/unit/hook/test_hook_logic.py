"""What machine_hook decides for one Machine (``_hook/logic.py``, pure): the
action a write means, why it is refused (with OpenShift's webhook text once a
Machine is being deleted, docs/behaviour.md §1), and whether the server kept it."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._hook.logic import (
    ADDED,
    NONE,
    REMOVED,
    REOWNED,
    HookChange,
    HookRequest,
    hook_action,
    refusal,
    stored,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_CREATE, PRE_DRAIN, PRE_TERMINATE, flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

DRAIN_PREFIX = "pre-drain.delete.hook.machine.cluster.x-k8s.io"


def openshift(hooks: dict | None = None, deleting: bool = False) -> dict:
    meta = {"name": "m-1", "namespace": "openshift-machine-api", "resourceVersion": "42"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    lifecycle = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in (hooks or {}).items()}
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta, "spec": {"lifecycleHooks": lifecycle}}


def capi(annotations: dict | None = None, deleting: bool = False) -> dict:
    meta = {"name": "m-1", "namespace": "ns", "resourceVersion": "42", "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": meta}


def add(name: str = "migrate", owner: str = "team-a", point: str = PRE_DRAIN) -> HookRequest:
    return HookRequest(point=point, name=name, owner=owner)


def remove(name: str = "migrate", point: str = PRE_DRAIN) -> HookRequest:
    return HookRequest(point=point, name=name, owner=None, present=False)


def test_request_from_params() -> None:
    params = {"point": PRE_TERMINATE, "name": "flush", "owner": "logs", "state": "present", "machine": "m-1", "namespace": "ns"}
    request = HookRequest.from_params(params, check_mode=True)
    assert request == HookRequest(PRE_TERMINATE, "flush", "logs", True, MachineSelection(machine="m-1", namespace="ns"), True)
    assert (request.verb, request.written_owner) == ("add", "logs")
    absent = HookRequest.from_params({**params, "state": "absent", "owner": "ignored"}, check_mode=False)
    assert (absent.verb, absent.written_owner) == ("remove", None), "removing writes no owner"


@pytest.mark.parametrize(
    ("machine", "request_", "action"),
    [
        (openshift(), add(), ADDED),
        (openshift({PRE_DRAIN: [("migrate", "team-a")]}), add(), NONE),
        (openshift({PRE_DRAIN: [("migrate", "team-b")]}), add(), REOWNED),
        (openshift({PRE_DRAIN: [("migrate", "team-b")]}), remove(), REMOVED),
        (openshift({PRE_TERMINATE: [("migrate", "team-a")]}), remove(), NONE),
        (capi(), add(), ADDED),
        (capi({f"{DRAIN_PREFIX}/migrate": "team-a"}), add(), NONE),
        (capi({f"{DRAIN_PREFIX}/migrate": "team-b"}), add(), REOWNED),
        (capi({f"{DRAIN_PREFIX}/migrate": ""}), remove(), REMOVED),
        (capi({f"{DRAIN_PREFIX}-migrate": "team-a"}), remove(), NONE),
    ],
)
def test_hook_action(machine, request_, action) -> None:
    assert hook_action(machine, request_) == action


def test_a_valid_write_is_not_refused() -> None:
    assert refusal(openshift(), add()) is None
    assert refusal(capi(), add()) is None
    assert refusal(capi(), remove()) is None


def test_a_refusal_names_the_machine_and_every_broken_rule() -> None:
    assert refusal(openshift(), add(name="x", owner="ab")) == (
        "Cannot add preDrain hook x on Machine openshift-machine-api/m-1: hook name must be 3 to 256 characters long (got 1); "
        "hook owner must be 3 to 512 characters long (got 2)"
    )
    assert refusal(capi(), add(point=PRE_CREATE)) == (
        "Cannot add preCreate hook migrate on Machine ns/m-1: preCreate hooks exist only on OpenShift Machine API machines; "
        "Cluster API supports preDrain and preTerminate"
    )
    assert refusal(capi(), remove(name="-bad")).startswith("Cannot remove preDrain hook -bad on Machine ns/m-1: hook name must be a valid annotation name")


@pytest.mark.parametrize(("point", "word"), [(PRE_DRAIN, "pre-drain"), (PRE_TERMINATE, "pre-terminate")])
def test_openshift_refuses_new_and_reowned_hooks_once_deleting_with_the_webhooks_text(point, word) -> None:
    assert refusal(openshift(deleting=True), add(point=point)) == (
        f"Cannot add {point} hook migrate on Machine openshift-machine-api/m-1: "
        f"{word} hooks are immutable when machine is marked for deletion: the following hooks are new or changed: [{{Name:migrate Owner:team-a}}]"
    )
    reowned = openshift({point: [("migrate", "team-b")]}, deleting=True)
    assert "[{Name:migrate Owner:team-a}]" in refusal(reowned, add(point=point))


def test_openshift_allows_what_the_webhook_allows_while_deleting() -> None:
    kept = openshift({PRE_DRAIN: [("migrate", "team-a")]}, deleting=True)
    assert refusal(kept, add()) is None, "the same hook again is no change"
    assert refusal(kept, remove()) is None, "removing is always allowed"
    assert refusal(openshift(deleting=True), add(point=PRE_CREATE)) is None, "preCreate hooks are not frozen"


def test_cluster_api_has_no_rule_for_deleting_machines() -> None:
    assert refusal(capi(deleting=True), add()) is None
    assert refusal(capi({f"{DRAIN_PREFIX}/migrate": "team-b"}, deleting=True), add()) is None


def test_stored() -> None:
    flavour = flavour_for(openshift())
    assert stored(flavour, openshift({PRE_DRAIN: [("migrate", "team-a")]}), add())
    assert not stored(flavour, openshift({PRE_DRAIN: [("migrate", "team-b")]}), add()), "the owner must be ours"
    assert not stored(flavour, openshift(), add())
    assert stored(flavour, openshift(), remove())
    assert not stored(flavour, openshift({PRE_DRAIN: [("migrate", "team-b")]}), remove())


class Refused(Exception):
    pass


def test_hook_change_builds_the_patch_and_remembers_what_it_found() -> None:
    machine = openshift({PRE_DRAIN: [("other", "x-y")]})
    change = HookChange(flavour_for(machine), add(), Refused)
    patch = change.patch(machine)
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "spec": {"lifecycleHooks": {PRE_DRAIN: [{"name": "other", "owner": "x-y"}, {"name": "migrate", "owner": "team-a"}]}},
    }
    assert change.action == ADDED
    assert change.before == {PRE_DRAIN: [{"name": "other", "owner": "x-y"}], PRE_TERMINATE: [], PRE_CREATE: []}


def test_hook_change_of_nothing_is_no_patch() -> None:
    machine = capi({f"{DRAIN_PREFIX}/migrate": "team-a"})
    change = HookChange(flavour_for(machine), add(), Refused)
    assert change.patch(machine) is None
    assert change.action == NONE
    assert change.before == {PRE_DRAIN: [{"name": "migrate", "owner": "team-a", "annotation": f"{DRAIN_PREFIX}/migrate"}], PRE_TERMINATE: []}


def test_hook_change_refuses_a_machine_that_started_deleting_meanwhile() -> None:
    change = HookChange(flavour_for(openshift()), add(), Refused)
    with pytest.raises(Refused, match="hooks are immutable when machine is marked for deletion"):
        change.patch(openshift(deleting=True))
    assert change.action == NONE
