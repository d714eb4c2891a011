"""Which Machines stand at a chosen hook's gate, and which to announce (``_gates/logic.py``, pure)."""

from __future__ import annotations

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._gates.logic import GateSourceRequest, GateTracker, gate_event, gates_reached

DRAIN_KEY = "pre-drain.delete.hook.machine.cluster.x-k8s.io/backup"
TERMINATE_KEY = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush"
DRAINED = {"type": "Drained", "status": "True", "reason": "Drained"}


def openshift(hooks: dict | None = None, *, deleting: bool = True, drained: bool = False, uid: str = "u-1", name: str = "m-1") -> dict:
    meta = {"name": name, "namespace": "openshift-machine-api", "uid": uid, "finalizers": ["machine.machine.openshift.io"]}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    lifecycle = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in (hooks or {}).items()}
    status = {"conditions": [DRAINED] if drained else []}
    return {"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine", "metadata": meta, "spec": {"lifecycleHooks": lifecycle}, "status": status}


def capi(annotations: dict, *, deleting: bool = True, conditions: list | None = None) -> dict:
    meta = {"name": "m-2", "namespace": "ns", "uid": "u-2", "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status = {"conditions": conditions or []}
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": meta, "spec": {"clusterName": "c"}, "status": status}


def request(**args) -> GateSourceRequest:
    return GateSourceRequest.from_args({"hook_owner": "ctl", **args})


# -- the arguments -----------------------------------------------------------------------


def test_arguments_and_their_defaults() -> None:
    got = GateSourceRequest.from_args({"hook_name": "backup", "point": "preDrain", "namespace": "ns", "label_selectors": ["a=b", "c"], "kubeconfig": "/k"})
    assert (got.points, got.hook_name, got.hook_owner, got.gate, got.namespace) == (("preDrain",), "backup", None, "auto", "ns")
    assert (got.label_selector, got.resync_interval, got.connection) == ("a=b,c", 300, {"kubeconfig": "/k"})
    both = request()
    assert both.points == ("preDrain", "preTerminate")
    assert (both.gate_for("preDrain"), both.gate_for("preTerminate")) == ("deleting", "drained")
    assert request(gate="deleting", point=["preTerminate"]).gate_for("preTerminate") == "deleting"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "Give hook_name, hook_owner or both"),
        ({"hook_owner": "ctl", "point": "preCreate"}, "point must be one of preDrain, preTerminate, got preCreate"),
        ({"hook_owner": "ctl", "gate": "gone"}, "gate must be one of auto, deleting, drained, got 'gone'"),
        ({"hook_owner": "ctl", "gate": "drained"}, "A preDrain hook cannot wait for the drain"),
        ({"hook_owner": "ctl", "resync_interval": -1}, "resync_interval must be 0"),
        ({"hook_owner": "ctl", "resync_interval": "often"}, "resync_interval must be a number of seconds or a Go duration such as 90s, 5m or 1h30m"),
        ({"hook_owner": "ctl", "resync_interval": "-1m"}, "resync_interval must be 0"),
        ({"hook_owner": "ctl", "label_selectors": "a=b"}, None),
        ({"hook_owner": "ctl", "label_selectors": [1]}, "label_selectors must be a list of non-empty strings"),
        ({"hook_owner": 3}, "hook_owner must be a string"),
        ({"hook_owner": "ctl", "hook_nmae": "x"}, "Unknown argument(s) of lifecycle.machine.machine_gates: hook_nmae"),
        ({"hook_owner": "ctl", "namespace": "Openshift-Machine-API"}, "namespace 'Openshift-Machine-API' can never name a Namespace"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, message) -> None:
    if message is None:
        assert GateSourceRequest.from_args(args).label_selectors == ("a=b",)
        return
    with pytest.raises(MachineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GateSourceRequest.from_args(args)


# -- the gates -----------------------------------------------------------------------------


def test_a_pre_drain_gate_is_reached_when_the_deletion_starts() -> None:
    hooks = {"preDrain": [("backup", "ctl"), ("other", "someone-else")]}
    assert gates_reached(request(), openshift(hooks, deleting=False)) == []
    [gate] = gates_reached(request(), openshift(hooks))
    assert (gate.point, gate.hook_name, gate.hook_owner, gate.gate, gate.key) == ("preDrain", "backup", "ctl", "deleting", ("u-1", "preDrain", "backup"))


def test_a_pre_terminate_gate_waits_for_the_drain_unless_told_otherwise() -> None:
    hooks = {"preTerminate": [("flush", "ctl")]}
    assert gates_reached(request(), openshift(hooks)) == []
    assert [g.hook_name for g in gates_reached(request(), openshift(hooks, drained=True))] == ["flush"]
    assert [g.gate for g in gates_reached(request(gate="deleting", point="preTerminate"), openshift(hooks))] == ["deleting"]
    past_drain = [{"type": "Deleting", "status": "True", "reason": "WaitingForPreTerminateHook"}]
    assert [g.hook_name for g in gates_reached(request(), capi({TERMINATE_KEY: "ctl"}, conditions=past_drain))] == ["flush"]


def test_hooks_are_chosen_by_name_owner_and_point() -> None:
    machine = capi({DRAIN_KEY: "ctl", "pre-drain.delete.hook.machine.cluster.x-k8s.io/other": "ctl"})
    assert sorted(g.hook_name for g in gates_reached(request(), machine)) == ["backup", "other"]
    assert [g.hook_name for g in gates_reached(GateSourceRequest.from_args({"hook_name": "backup"}), machine)] == ["backup"]
    assert gates_reached(request(point="preTerminate"), machine) == []
    assert gates_reached(GateSourceRequest.from_args({"hook_owner": "nobody"}), machine) == []


def test_the_event_carries_the_machine_as_machine_info_shows_it() -> None:
    machine = openshift({"preDrain": [("backup", "ctl")]})
    [gate] = gates_reached(request(), machine)
    event = gate_event(machine, gate, reason="watch")["machine_gate"]
    assert {k: event[k] for k in ("point", "hook", "gate", "reason")} == {
        "point": "preDrain",
        "hook": {"name": "backup", "owner": "ctl"},
        "gate": "deleting",
        "reason": "watch",
    }
    assert (event["machine"]["name"], event["machine"]["flavour"], event["machine"]["deleting"]) == ("m-1", "openshift", True)


# -- announcing each gate once ------------------------------------------------------------------


def test_each_gate_is_announced_once_until_it_is_left() -> None:
    tracker = GateTracker(request())
    hooked = openshift({"preDrain": [("backup", "ctl")], "preTerminate": [("flush", "ctl")]})
    assert [e["machine_gate"]["point"] for e in tracker.seen(hooked)] == ["preDrain"]
    assert tracker.seen(hooked) == [], "a change of the Machine at the same gate (our own condition write) is not a new gate"
    drained = openshift({"preDrain": [], "preTerminate": [("flush", "ctl")]}, drained=True)
    assert [e["machine_gate"]["point"] for e in tracker.seen(drained)] == ["preTerminate"]
    assert tracker.pending() == 1
    released = openshift({}, drained=True)
    assert tracker.seen(released) == []
    assert tracker.pending() == 0
    assert [e["machine_gate"]["point"] for e in tracker.seen(drained)] == ["preTerminate"], "a hook put back is a gate again"


def test_a_resync_announces_every_gate_again_for_that_api_only() -> None:
    tracker = GateTracker(request())
    machine_os = openshift({"preDrain": [("backup", "ctl")]})
    machine_capi = capi({DRAIN_KEY: "ctl"})
    assert len(tracker.seen(machine_os)) == len(tracker.seen(machine_capi)) == 1
    events = tracker.resync("machine.openshift.io/v1beta1", [machine_os, openshift({}, uid="u-3", name="m-3")])
    assert [(e["machine_gate"]["machine"]["name"], e["machine_gate"]["reason"]) for e in events] == [("m-1", "resync")]
    assert tracker.seen(machine_capi) == [], "the other API's gates are still announced"


def test_a_deleted_machine_is_forgotten() -> None:
    tracker = GateTracker(request())
    machine = openshift({"preDrain": [("backup", "ctl")]})
    tracker.seen(machine)
    tracker.gone(machine)
    assert tracker.pending() == 0
    assert len(tracker.seen(machine)) == 1


def test_the_resync_interval_is_seconds_or_a_go_duration() -> None:
    assert GateSourceRequest.from_args({"hook_owner": "ctl", "resync_interval": "5m"}).resync_interval == 300
    assert GateSourceRequest.from_args({"hook_owner": "ctl", "resync_interval": "90"}).resync_interval == 90
