"""machine_condition against the real API server, for OpenShift, Cluster API
v1beta1-only and Cluster API v1beta2 Machines."""

from __future__ import annotations

import threading

import pytest
from conftest import machine_collection

from ansible_collections.lifecycle.machine.plugins.module_utils._condition.logic import ConditionRequest
from ansible_collections.lifecycle.machine.plugins.module_utils._condition.run import manage_condition
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.client import KubeApi

CONDITION = "PreTerminateFlushLogsSucceeded"
HOOK = {"point": "preTerminate", "name": "flush-logs"}


def stored(kube: KubeApi, flavour: str, namespace: str, name: str) -> dict:
    return kube.get(f"{machine_collection(flavour, namespace)}/{name}")


def condition_of(machine: dict, condition_type: str = CONDITION) -> dict | None:
    return next((c for c in (machine.get("status") or {}).get("conditions") or [] if c["type"] == condition_type), None)


def events_of(kube: KubeApi, namespace: str, name: str) -> list[dict]:
    return kube.list(f"/api/v1/namespaces/{namespace}/events", field_selector=f"involvedObject.name={name}")


def failed_args(machine: str, namespace: str, **extra) -> dict:
    return {"machine": machine, "namespace": namespace, "hook": HOOK, "status": "False", "reason": "HookFailed", "msg": "log shipper unreachable", **extra}


def test_set_is_idempotent_and_follows_the_flavours_rules(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    result = run_module("machine_condition", failed_args(machine, namespace), diff=True)
    assert result["changed"] is True, result
    assert result["condition_type"] == CONDITION
    (entry,) = result["machines"]
    assert entry["action"] == "set"
    assert result["diff"]["before"] == {f"{namespace}/{machine}": None}

    written = condition_of(stored(kube, flavour, namespace, machine))
    assert entry["condition"] == written
    assert result["diff"]["after"][f"{namespace}/{machine}"] == written
    assert (written["status"], written["reason"], written["message"]) == ("False", "HookFailed", "log shipper unreachable")
    assert written["lastTransitionTime"]
    if flavour == "v1beta2":  # metav1.Condition: no severity, observedGeneration recorded
        assert "severity" not in written
        assert written["observedGeneration"] == stored(kube, flavour, namespace, machine)["metadata"]["generation"]
    else:  # v1beta1 style: severity, no observedGeneration
        assert written["severity"] == "Warning"
        assert "observedGeneration" not in written

    version = stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"]
    again = run_module("machine_condition", failed_args(machine, namespace))
    assert again["changed"] is False
    assert again["machines"][0]["action"] == "none"
    assert stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"] == version


def test_success_replaces_failure_and_absent_removes(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    run_module("machine_condition", failed_args(machine, namespace))
    succeeded = run_module("machine_condition", {"machine": machine, "namespace": namespace, "type": CONDITION, "status": "True", "reason": "HookSucceeded"})
    assert succeeded["changed"] is True
    written = condition_of(stored(kube, flavour, namespace, machine))
    assert (written["status"], written["reason"], written.get("message", "")) == ("True", "HookSucceeded", "")
    assert "severity" not in written

    removed = run_module("machine_condition", {"machine": machine, "namespace": namespace, "type": CONDITION, "state": "absent"}, diff=True)
    assert removed["changed"] is True
    assert removed["machines"][0]["action"] == "removed"
    assert removed["machines"][0]["condition"] is None
    assert removed["diff"]["after"] == {f"{namespace}/{machine}": None}
    assert condition_of(stored(kube, flavour, namespace, machine)) is None
    assert run_module("machine_condition", {"machine": machine, "namespace": namespace, "type": CONDITION, "state": "absent"})["changed"] is False


def test_other_conditions_are_kept(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    path = f"{machine_collection(flavour, namespace)}/{machine}"
    other = {"type": "Drained", "status": "True", "reason": "Done", "message": "Drain finished successfully", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    kube.patch(path, {"status": {"conditions": [other]}}, subresource_status=True)
    run_module("machine_condition", failed_args(machine, namespace))
    run_module("machine_condition", {"machine": machine, "namespace": namespace, "type": "ZetaSucceeded", "reason": "Done"})
    conditions = stored(kube, flavour, namespace, machine)["status"]["conditions"]
    assert {c["type"] for c in conditions} == {"Drained", CONDITION, "ZetaSucceeded"}
    assert condition_of(stored(kube, flavour, namespace, machine), "Drained")["lastTransitionTime"] == "2026-01-01T00:00:00Z"


def test_check_mode_predicts_and_changes_nothing(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    version = stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"]
    result = run_module("machine_condition", failed_args(machine, namespace, event={"type": "Warning"}), check=True, diff=True)
    assert result["changed"] is True
    assert result["machines"][0]["condition"]["reason"] == "HookFailed"
    assert result["machines"][0]["event"]["name"] is None
    assert result["diff"]["after"][f"{namespace}/{machine}"]["status"] == "False"
    assert stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"] == version
    assert events_of(kube, namespace, machine) == []


def test_event_is_recorded_on_the_machine(flavour, namespace, make_machine, run_module, kube) -> None:
    created = make_machine(namespace)
    machine = created["metadata"]["name"]
    result = run_module("machine_condition", failed_args(machine, namespace, event={}))
    recorded = result["machines"][0]["event"]
    assert (recorded["type"], recorded["reason"], recorded["message"]) == ("Warning", "HookFailed", "log shipper unreachable")
    (event,) = events_of(kube, namespace, machine)
    assert event["metadata"]["name"] == recorded["name"]
    assert (event["type"], event["reason"], event["message"]) == ("Warning", "HookFailed", "log shipper unreachable")
    involved = event["involvedObject"]
    assert (involved["kind"], involved["name"], involved["uid"]) == ("Machine", machine, created["metadata"]["uid"])
    assert involved["apiVersion"] == created["apiVersion"]

    # An Event records an occurrence: recorded again even though the condition is unchanged.
    again = run_module("machine_condition", failed_args(machine, namespace, event={"type": "Normal", "reason": "StillFailing", "msg": "retry later"}))
    assert again["changed"] is True
    assert again["machines"][0]["action"] == "none"
    assert sorted(e["reason"] for e in events_of(kube, namespace, machine)) == ["HookFailed", "StillFailing"]


def test_works_on_a_machine_being_deleted(flavour, namespace, make_machine, run_module, kube) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    kube.delete(f"{machine_collection(flavour, namespace)}/{machine}")
    result = run_module("machine_condition", failed_args(machine, namespace))
    assert result["changed"] is True
    current = stored(kube, flavour, namespace, machine)
    assert current["metadata"]["deletionTimestamp"]
    assert condition_of(current)["status"] == "False"


def test_label_selectors_choose_every_matching_machine(flavour, namespace, make_machine, run_module, kube) -> None:
    pool = sorted(make_machine(namespace, labels={"pool": "blue"})["metadata"]["name"] for _pool_member in range(2))
    other = make_machine(namespace, labels={"pool": "green"})["metadata"]["name"]
    result = run_module("machine_condition", {"label_selectors": ["pool=blue"], "namespace": namespace, "type": "Audited", "reason": "Checked"})
    assert sorted(m["name"] for m in result["machines"]) == pool
    for name in pool:
        assert condition_of(stored(kube, flavour, namespace, name), "Audited")["status"] == "True"
    assert condition_of(stored(kube, flavour, namespace, other), "Audited") is None


def _write_condition(manage_condition, kube: KubeApi, params: dict, barrier: threading.Barrier, errors: list) -> None:
    barrier.wait()
    try:
        manage_condition(kube, ConditionRequest.from_params(params, False))
    except Exception as exc:  # reported by the test
        errors.append(exc)


def test_concurrent_writers_of_different_conditions_both_win(flavour, namespace, make_machine, kube) -> None:

    machine = make_machine(namespace)["metadata"]["name"]
    base = {
        "machine": machine,
        "namespace": namespace,
        "label_selectors": None,
        "api_version": None,
        "hook": None,
        "status": "True",
        "reason": "Done",
        "msg": "",
        "severity": None,
        "state": "present",
        "event": None,
    }
    for round_number in range(5):
        types = [f"WriterA{round_number}", f"WriterB{round_number}"]
        barrier = threading.Barrier(2)
        errors: list[Exception] = []

        threads = [threading.Thread(target=_write_condition, args=(manage_condition, kube, {**base, "type": t}, barrier, errors)) for t in types]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        present = {c["type"] for c in stored(kube, flavour, namespace, machine)["status"]["conditions"]}
        assert present == {f"Writer{w}{r}" for r in range(round_number + 1) for w in "AB"}


@pytest.mark.parametrize(
    ("extra", "rule"),
    [
        ({"hook": None, "type": "has spaces"}, "condition type must be"),
        ({"reason": "not-camel-case"}, "condition reason must be"),
    ],
)
def test_invalid_input_fails_and_changes_nothing(*, flavour, namespace, make_machine, run_module, kube, extra, rule) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    version = stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"]
    args = {k: v for k, v in failed_args(machine, namespace, **extra).items() if v is not None}
    result = run_module("machine_condition", args)
    assert result.get("failed"), result
    assert f"on Machine {namespace}/{machine}" in result["msg"]
    assert rule in result["msg"]
    assert stored(kube, flavour, namespace, machine)["metadata"]["resourceVersion"] == version


def test_reason_is_required_to_set(flavour, namespace, make_machine, run_module) -> None:
    machine = make_machine(namespace)["metadata"]["name"]
    result = run_module("machine_condition", {"machine": machine, "namespace": namespace, "type": CONDITION})
    assert result.get("failed")
    assert "reason" in result["msg"]


def test_missing_machine_fails(flavour, namespace, run_module) -> None:
    result = run_module("machine_condition", failed_args("no-such-machine", namespace))
    assert result.get("failed")
    assert f"Machine {namespace}/no-such-machine not found" in result["msg"]
