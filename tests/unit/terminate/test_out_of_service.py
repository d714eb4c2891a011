"""The out_of_service option (``_terminate/out_of_service.py``): what is understood, what is refused, and
when the taint goes on a Machine's Node (only on its own Node, not Ready, while the Machine is being deleted)."""

from __future__ import annotations

import datetime as _dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.out_of_service import (
    ALREADY,
    NO_NODE,
    NODE_READY,
    NOT_DELETING,
    NOT_REACHED,
    OTHER_NODE,
    TAINT_KEY,
    TAINTED,
    OutOfService,
    decide,
    event_message,
    has_taint,
    node_ready,
    normalize_out_of_service,
    result_entry,
    taint_patch,
)

MACHINES = ("default/worker-1", "default/worker-2")
AT = _dt.datetime(2026, 11, 27, 8, 0, tzinfo=_dt.UTC)


def node(ready: str | None = "Unknown", taints: list | None = None) -> dict:
    conditions = [] if ready is None else [{"type": "Ready", "status": ready}]
    return {"metadata": {"name": "w-1", "resourceVersion": "42"}, "spec": {"taints": taints or []}, "status": {"conditions": conditions}}


def test_entries_are_understood_by_machine() -> None:
    found = normalize_out_of_service([{"machine": "default/worker-1", "reason": " INC-1: powered off "}], MACHINES)
    assert found == {"default/worker-1": OutOfService("default/worker-1", "INC-1: powered off")}
    assert normalize_out_of_service(None, MACHINES) == {}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"machine": "default/worker-1"}, "out_of_service[0].reason must say who confirmed"),
        ({"machine": "default/worker-1", "reason": "  "}, "out_of_service[0].reason must say who confirmed"),
        ({"machine": "default/worker-9", "reason": "x"}, "default/worker-9 is not a Machine of this task"),
        ({"machine": "worker-1", "reason": "x"}, "must be the Machine's namespace/name, not 'worker-1'"),
        ({"machine": "default/worker-1", "reason": "x", "node": "w-1"}, "unknown keys ['node']"),
        ("default/worker-1", "must be a mapping"),
    ],
)
def test_bad_entries_are_refused_before_anything_is_touched(entry, words) -> None:
    with pytest.raises(MachineError) as caught:
        normalize_out_of_service([entry], MACHINES)
    assert words in caught.value.msg
    assert caught.value.msg.endswith("nothing was changed")


def test_a_machine_given_twice_is_refused() -> None:
    entry = {"machine": "default/worker-1", "reason": "x"}
    with pytest.raises(MachineError, match=r"out_of_service\[1\].machine default/worker-1 is given twice"):
        normalize_out_of_service([entry, entry], MACHINES)


@pytest.mark.parametrize(("ready", "expected"), [("True", True), ("False", False), ("Unknown", False), (None, False)])
def test_ready_is_what_the_pod_garbage_collector_calls_ready(ready, expected) -> None:
    assert node_ready(node(ready)) is expected


def test_a_not_ready_node_of_a_machine_being_deleted_is_tainted() -> None:
    verdict = decide(deleting=True, node_name="w-1", node=node("Unknown"))
    assert (verdict.state, verdict.apply) == (TAINTED, True)
    assert decide(deleting=True, node_name="w-1", node=node("False")).apply is True


@pytest.mark.parametrize(
    ("given", "state", "words"),
    [
        ({"deleting": False, "node_name": "w-1", "node": node()}, NOT_DELETING, "not being deleted"),
        ({"deleting": True, "node_name": None, "node": None}, NO_NODE, "names no Node"),
        ({"deleting": True, "node_name": "w-1", "node": None}, NO_NODE, "Node w-1 is gone"),
        ({"deleting": True, "node_name": "w-1", "node": None, "error": "403 forbidden"}, NOT_REACHED, "could not be read"),
        ({"deleting": True, "node_name": "w-1", "node": node(), "conflict": "Refusing to touch Node w-1"}, OTHER_NODE, "Refusing"),
        ({"deleting": True, "node_name": "w-1", "node": node("True")}, NODE_READY, "evidently not gone"),
        ({"deleting": True, "node_name": "w-1", "node": node(taints=[{"key": TAINT_KEY, "effect": "NoSchedule"}])}, ALREADY, "already"),
    ],
)
def test_the_taint_does_not_go_on_otherwise(given, state, words) -> None:
    verdict = decide(**given)
    assert (verdict.state, verdict.apply) == (state, False)
    assert words in verdict.message


def test_the_patch_keeps_the_nodes_taints_and_is_guarded() -> None:
    kept = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    patch = taint_patch(node(taints=[kept]), AT)
    assert patch["metadata"] == {"resourceVersion": "42"}
    assert patch["spec"]["taints"] == [kept, {"key": TAINT_KEY, "value": "nodeshutdown", "effect": "NoExecute", "timeAdded": "2026-11-27T08:00:00Z"}]
    assert has_taint({"spec": patch["spec"]})


def test_the_record_says_who_asked() -> None:
    confirmation = OutOfService("default/worker-1", "INC-1: powered off")
    assert event_message("w-1", confirmation).endswith("as asked: INC-1: powered off")
    entry = result_entry(confirmation, "w-1", decide(deleting=True, node_name="w-1", node=node()), at=AT, dry_run=True)
    assert entry["action"] == "out_of_service_taint"
    assert (entry["applied"], entry["dry_run"], entry["state"], entry["at"]) == (True, True, TAINTED, "2026-11-27T08:00:00Z")
    assert entry["reason"] == "INC-1: powered off"
    assert entry["taint"] == {"key": TAINT_KEY, "value": "nodeshutdown", "effect": "NoExecute"}
