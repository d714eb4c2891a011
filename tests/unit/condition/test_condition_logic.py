"""What machine_condition writes (``_condition/logic.py``, pure): the condition
and the Event asked for with their defaults, why a flavour refuses them, and
the status patch (docs/behaviour.md §6)."""

from __future__ import annotations

import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._condition.logic import (
    ConditionRequest,
    desired_condition,
    desired_event,
    refusal,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import patch_builder
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.selection import MachineSelection

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
STAMP = "2026-01-02T03:04:05Z"
PARAMS = {
    "type": "BackupDone",
    "hook": None,
    "state": "present",
    "status": "True",
    "reason": "Flushed",
    "msg": "",
    "severity": None,
    "event": None,
    "machine": None,
    "namespace": "ns",
    "label_selectors": ["pool=a", "zone=b"],
    "api_version": None,
}


def machine(api_version: str = "machine.openshift.io/v1beta1", conditions: list | None = None) -> dict:
    meta = {"name": "m-1", "namespace": "ns", "resourceVersion": "42", "generation": 3}
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta, "status": {"conditions": conditions or []}}


def request(**changes) -> ConditionRequest:
    return ConditionRequest(**{"condition_type": "BackupDone", "reason": "Flushed", **changes})


def event(type_: str | None = None, reason: str | None = None, msg: str | None = None) -> dict:
    return {"type": type_, "reason": reason, "msg": msg}


def test_request_from_params() -> None:
    made = ConditionRequest.from_params(PARAMS, check_mode=False)
    assert made == ConditionRequest(
        "BackupDone", True, "True", "Flushed", "", None, None, MachineSelection(namespace="ns", label_selectors=("pool=a", "zone=b"))
    )
    assert made.verb == "set"


def test_the_condition_of_a_hook_is_named_after_it() -> None:
    made = ConditionRequest.from_params(
        {**PARAMS, "type": None, "hook": {"point": "preTerminate", "name": "flush-logs"}, "state": "absent", "reason": None, "msg": None}, True
    )
    assert made.condition_type == "PreTerminateFlushLogsSucceeded"
    assert (made.present, made.reason, made.msg, made.verb, made.check_mode) == (False, "", "", "remove", True)


def test_desired_condition() -> None:
    assert desired_condition(request(msg="ok")) == {"type": "BackupDone", "status": "True", "reason": "Flushed", "message": "ok"}
    assert desired_condition(request(present=False)) is None


@pytest.mark.parametrize(
    ("status", "severity", "expected"), [("False", None, "Warning"), ("False", "Error", "Error"), ("Unknown", None, ""), ("Unknown", "Info", "Info")]
)
def test_a_condition_that_is_not_true_has_a_severity(status, severity, expected) -> None:
    assert desired_condition(request(status=status, severity=severity))["severity"] == expected


def test_setting_a_condition_needs_a_reason() -> None:
    with pytest.raises(MachineError, match=r"^reason is required to set condition BackupDone$"):
        desired_condition(request(reason=""))


def test_no_event_unless_asked() -> None:
    assert desired_event(request()) is None


def test_the_event_defaults_to_the_condition() -> None:
    assert desired_event(request(msg="all flushed", event=event())) == {"type": "Normal", "reason": "Flushed", "message": "all flushed"}
    assert desired_event(request(status="False", msg="stuck", event=event()))["type"] == "Warning"
    assert desired_event(request(status="Unknown", event=event()))["type"] == "Normal"
    given = desired_event(request(status="False", msg="stuck", event=event("Normal", "Retrying", "")))
    assert given == {"type": "Normal", "reason": "Retrying", "message": ""}, "an empty message given is kept"


def test_removing_a_condition_records_only_the_event_given() -> None:
    removing = request(present=False, status="False", reason="", event=event(reason="Cleared", msg="gone"))
    assert desired_event(removing) == {"type": "Normal", "reason": "Cleared", "message": "gone"}
    message = r"^event\.reason and event\.msg are required to record an Event when removing a condition$"
    with pytest.raises(MachineError, match=message):
        desired_event(request(present=False, event=event(msg="gone")))
    with pytest.raises(MachineError, match=message):
        desired_event(request(present=False, event=event(reason="Cleared")))


def test_a_valid_condition_is_not_refused() -> None:
    for api_version in ("machine.openshift.io/v1beta1", "cluster.x-k8s.io/v1beta1", "cluster.x-k8s.io/v1beta2"):
        assert refusal(machine(api_version), request()) is None


def test_a_refusal_names_the_machine_and_the_rules() -> None:
    refused = refusal(machine(), request(condition_type="not a type", reason="has space"))
    assert refused.startswith("Cannot set condition not a type on Machine ns/m-1: condition type must be at most 256 characters matching ")
    assert "; condition reason must be at most 256 characters matching " in refused
    v1beta2 = refusal(machine("cluster.x-k8s.io/v1beta2"), request(reason=""))
    assert (
        v1beta2 == "Cannot set condition BackupDone on Machine ns/m-1: a reason is required in the metav1.Condition conditions of Cluster API v1beta2 Machines"
    )
    too_long = refusal(machine(), request(msg="x" * 10241))
    assert too_long.endswith("condition message must be at most 10240 characters (got 10241)")


def test_removing_checks_only_the_type() -> None:
    assert refusal(machine(), request(present=False, reason="has space", msg="x" * 20000)) is None
    assert refusal(machine(), request(condition_type="", present=False)).startswith("Cannot remove condition  on Machine ns/m-1: condition type must be")


def test_the_patch_sets_the_condition_and_notes_what_was_there() -> None:
    before = {"type": "BackupDone", "status": "False", "reason": "Pending", "severity": "Warning", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    current = machine(conditions=[before])
    seen: dict = {}
    build = patch_builder(flavour_for(current), "BackupDone", desired_condition(request(msg="done")), NOW, seen)
    patch = build(current)
    assert seen == {"before": before}
    assert patch == {
        "metadata": {"resourceVersion": "42"},
        "status": {"conditions": [{"type": "BackupDone", "status": "True", "reason": "Flushed", "message": "done", "lastTransitionTime": STAMP}]},
    }


def test_the_patch_removes_the_condition_or_is_nothing() -> None:
    seen: dict = {}
    current = machine(conditions=[{"type": "BackupDone", "status": "True"}, {"type": "Other", "status": "True"}])
    build = patch_builder(flavour_for(current), "BackupDone", None, NOW, seen)
    assert build(current) == {"metadata": {"resourceVersion": "42"}, "status": {"conditions": [{"type": "Other", "status": "True"}]}}
    assert build(machine()) is None
    assert seen == {"before": None}
