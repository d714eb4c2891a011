"""Who carries out a Machine's deletion (_machine/controller.py): the controller's
hand read from managedFields, the grace, and where a live controller stands."""

from __future__ import annotations

import datetime as _dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._delete.logic import IN_PROGRESS, Outcome, progress_lines
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.controller import (
    COLLECTION,
    CONTROLLER,
    UNDECIDED,
    controller_progress,
    following_message,
    predicted_actor,
    status_writers,
    timeout_message,
    who_deletes,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for

DELETED = "2026-11-26T06:00:00Z"
DELETED_AT = _dt.datetime(2026, 11, 26, 6, 0, 0, tzinfo=_dt.UTC).timestamp()


def entry(manager: str, time: str, subresource: str = "status") -> dict:
    return {"manager": manager, "operation": "Update", "time": time, "subresource": subresource, "fieldsType": "FieldsV1", "fieldsV1": {}}


def machine(*fields: dict, deleted: str | None = DELETED, api_version: str = "cluster.x-k8s.io/v1beta2", status: dict | None = None) -> dict:
    meta = {"name": "m", "namespace": "ns", "managedFields": list(fields)}
    if deleted:
        meta["deletionTimestamp"] = deleted
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta, "spec": {}, "status": status or {}}


def test_a_status_write_by_another_manager_after_the_deletion_is_a_live_controller() -> None:
    actor = who_deletes(machine(entry("capi-manager", "2026-11-26T06:00:01Z")), "auto", 10, DELETED_AT + 1)
    assert (actor.who, actor.manager) == (CONTROLLER, "capi-manager")
    assert "after the deletion was requested" in actor.reason


def test_the_same_second_as_the_deletion_counts() -> None:
    assert who_deletes(machine(entry("capi-manager", DELETED)), "auto", 10, DELETED_AT).who == CONTROLLER


def test_the_collections_own_writes_and_spec_writes_are_not_a_controller() -> None:
    fields = (entry("lifecycle.machine", "2026-11-26T06:00:05Z"), entry("kubectl-label", "2026-11-26T06:00:05Z", subresource=""))
    actor = who_deletes(machine(*fields), "auto", 10, DELETED_AT + 1)
    assert actor.who == COLLECTION
    assert "no controller ever wrote its status" in actor.reason
    assert status_writers(machine(*fields)) == []


def test_a_controller_that_served_the_machine_before_gets_the_grace_then_the_collection_acts() -> None:
    before = machine(entry("mapi-controller", "2026-11-26T05:00:00Z"))
    waiting = who_deletes(before, "auto", 10, DELETED_AT + 3)
    assert (waiting.who, waiting.wait_until, waiting.manager) == (UNDECIDED, DELETED_AT + 10, "mapi-controller")
    after = who_deletes(before, "auto", 10, DELETED_AT + 10)
    assert after.who == COLLECTION and "did not answer within 10 s" in after.reason
    # The grace counts from when this task marked it, when it did.
    assert who_deletes(before, "auto", 10, DELETED_AT + 12, marked_at=DELETED_AT + 5).who == UNDECIDED


@pytest.mark.parametrize(("setting", "who"), [("live", CONTROLLER), ("absent", COLLECTION)])
def test_an_explicit_setting_is_followed_whatever_the_machine_says(setting: str, who: str) -> None:
    for fields in ((), (entry("capi-manager", "2026-11-26T06:00:01Z"),)):
        assert who_deletes(machine(*fields), setting, 10, DELETED_AT).who == who


def test_a_machine_not_being_deleted_has_no_controller_draining_it() -> None:
    assert who_deletes(machine(entry("capi-manager", "2026-11-26T06:00:01Z"), deleted=None), "auto", 10, DELETED_AT).who == COLLECTION


def test_check_mode_predicts_from_whether_a_controller_ever_wrote_the_status() -> None:
    assert predicted_actor(machine(entry("capi-manager", "2026-11-26T05:00:00Z"), deleted=None), "auto").who == CONTROLLER
    assert predicted_actor(machine(deleted=None), "auto").who == COLLECTION
    assert predicted_actor(machine(deleted=None), "live").who == CONTROLLER


def test_cluster_api_progress_follows_the_deleting_condition() -> None:
    def with_reason(reason: str, message: str = "") -> dict:
        return machine(status={"conditions": [{"type": "Deleting", "status": "True", "reason": reason, "message": message}]})

    capi = flavour_for(with_reason("DrainingNode"))
    draining = controller_progress(with_reason("DrainingNode", "Drain not completed yet (started at x):\n* Pod a: evicting"), capi)
    assert (draining["phase"], draining["drained"]) == ("drain", False)
    assert draining["message"] == "DrainingNode: Drain not completed yet (started at x)"
    hook = controller_progress(with_reason("WaitingForPreTerminateHook", "Waiting for pre-terminate hooks to succeed (hooks: a)"), capi)
    assert (hook["phase"], hook["drained"]) == ("terminate", True)
    assert controller_progress(None, capi)["phase"] == "gone"
    assert "machine_controller: absent" in timeout_message(who_deletes(with_reason("DrainingNode"), "live", 0, 0), draining, 60)


def test_openshift_progress_follows_its_conditions() -> None:
    conditions = [{"type": "Drainable", "status": "False", "reason": "HookPresent", "message": "Drain operation currently blocked by: [a]"}]
    blocked = machine(api_version="machine.openshift.io/v1beta1", status={"phase": "Deleting", "conditions": conditions})
    progress = controller_progress(blocked, flavour_for(blocked))
    assert progress["phase"] == "drain" and progress["message"].startswith("Drainable False: HookPresent")
    drained = machine(api_version="machine.openshift.io/v1beta1", status={"phase": "Deleting", "conditions": [{"type": "Drained", "status": "True"}]})
    assert controller_progress(drained, flavour_for(drained))["phase"] == "terminate"


def test_a_followed_drain_shows_what_the_controller_lists_in_the_progress_lines() -> None:
    message = "Drain not completed yet (started at 2026-11-26T06:00:01Z):\n* Pod apps/web-1: cannot evict pod as it would violate the pod's disruption budget."
    draining = machine(status={"conditions": [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": message}]})
    actor = who_deletes(draining, "live", 0, 0)
    outcome = Outcome(machine={"name": "m", "namespace": "ns"}, status=IN_PROGRESS, step="drain", carried_out_by=CONTROLLER)
    outcome.message = following_message(actor, controller_progress(draining, flavour_for(draining)))
    assert progress_lines([outcome], 5)[1:] == [
        "ns/m: in progress at drain",
        "    its controller is deleting it: DrainingNode: Drain not completed yet (started at 2026-11-26T06:00:01Z)",
        "    * Pod apps/web-1: cannot evict pod as it would violate the pod's disruption budget.",
    ]
