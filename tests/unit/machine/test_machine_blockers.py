"""The blockers every feature reports (pure): the hooks', the verdicts, the progress lines."""

from __future__ import annotations

import datetime as dt

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import (
    CLEARS,
    NEEDS_ACTION,
    NEVER,
    blocker_lines,
    budget_refused_pods,
    controller_blockers,
    hook_blockers,
    openshift_pod_blockers,
    reported_at,
    worst,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import PRE_DRAIN, flavour_for

CAPI = {
    "apiVersion": "cluster.x-k8s.io/v1beta2",
    "kind": "Machine",
    "metadata": {"name": "m", "namespace": "ns", "annotations": {"pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum": "etcd"}},
    "status": {"deletion": {"waitForPreDrainHookStartTime": "2026-01-01T00:00:00Z"}},
}


def test_a_hook_blocker_names_its_owner_and_when_the_wait_started() -> None:
    flavour = flavour_for(CAPI)
    [blocker] = hook_blockers(flavour, CAPI, PRE_DRAIN, flavour.hooks(CAPI)[PRE_DRAIN])
    assert blocker.as_dict() == {
        "phase": "preDrain hook",
        "kind": "hook",
        "object": "pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum",
        "since": "2026-01-01T00:00:00Z",
        "evidence": {"owner": "etcd", "name": "quorum", "annotation": "pre-drain.delete.hook.machine.cluster.x-k8s.io/quorum"},
        "verdict": NEEDS_ACTION,
        "reason": "its owner etcd removes it once its work before the preDrain gate is done",
    }


def test_the_gravest_verdict_wins() -> None:
    assert worst([{"verdict": CLEARS}, {"verdict": NEVER}, {"verdict": NEEDS_ACTION}]) == NEVER
    assert worst([]) is None


def test_progress_lines_name_the_gravest_blockers_first_and_leave_out_what_clears() -> None:
    blockers = [
        {"verdict": CLEARS, "kind": "pod terminating", "object": "Pod a/b", "reason": "within its grace"},
        {"verdict": NEEDS_ACTION, "kind": "hook", "object": "h", "since": "2026-01-01T00:00:00Z", "reason": "its owner removes it"},
        {"verdict": NEVER, "kind": "two budgets", "object": "Pod a/c", "reason": "change the budgets"},
    ]
    assert blocker_lines(blockers) == [
        "! can never clear as things stand: two budgets Pod a/c: change the budgets",
        "! needs someone to act: hook h since 2026-01-01T00:00:00Z: its owner removes it",
    ]
    many = [{"verdict": NEVER, "kind": "two budgets", "object": f"Pod a/{i}", "reason": "r"} for i in range(5)]
    assert blocker_lines(many)[-1] == "! and 2 more (see the result's blockers)"


def test_a_followed_controller_held_at_a_gate_is_held_by_the_hooks() -> None:
    flavour = flavour_for(CAPI)
    progress = {"phase": "drain", "reason": "WaitingForPreDrainHook", "message": "WaitingForPreDrainHook: Waiting for pre-drain hooks to succeed"}
    [hook] = controller_blockers(flavour, CAPI, progress, manager="capi-manager", reported_at=None, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert (hook.kind, hook.since, hook.evidence["owner"]) == ("hook", "2026-01-01T00:00:00Z", "etcd")


def test_a_controller_whose_report_has_not_changed_for_15_minutes_is_not_progressing() -> None:
    machine = {**CAPI, "metadata": {**CAPI["metadata"], "annotations": {}}}
    flavour = flavour_for(machine)
    progress = {"phase": "drain", "reason": "DrainingNode", "message": "DrainingNode: Drain not completed yet", "details": ["* Pod a/b: x"]}
    written = reported_at([{"type": "Deleting", "lastTransitionTime": "2026-01-01T00:00:00Z"}, {"type": "Ready"}], ("Deleting",))
    early = controller_blockers(flavour, machine, progress, manager="capi-manager", reported_at=written, now=written + dt.timedelta(minutes=5))
    assert [(b.kind, b.object, b.verdict) for b in early] == [("controller", "controller capi-manager", CLEARS)]
    late = controller_blockers(flavour, machine, progress, manager="capi-manager", reported_at=written, now=written + dt.timedelta(minutes=40))
    assert [(b.kind, b.verdict) for b in late] == [("controller not progressing", NEEDS_ACTION)]
    assert late[0].evidence == {"reason": "DrainingNode", "details": ["* Pod a/b: x"]} and "40 min" in late[0].reason


def test_a_controller_is_not_progressing_only_15_minutes_after_the_stage_it_stands_at_began() -> None:
    # Cluster API keeps Deleting True, with its first transition time, from the hook's wait to the end:
    # a drain begun after a long wait at the preDrain gate is not "not progressing" at once.
    machine = {**CAPI, "metadata": {**CAPI["metadata"], "annotations": {}}}
    machine["status"] = {"deletion": {"waitForPreDrainHookStartTime": "2026-01-01T00:00:00Z", "nodeDrainStartTime": "2026-01-01T00:20:00Z"}}
    flavour = flavour_for(machine)
    progress = {"phase": "drain", "reason": "DrainingNode", "message": "DrainingNode: Drain not completed yet", "details": []}
    deleting = reported_at([{"type": "Deleting", "lastTransitionTime": "2026-01-01T00:00:00Z"}], ("Deleting",))
    at = dt.datetime(2026, 1, 1, 0, 30, tzinfo=dt.UTC)
    [early] = controller_blockers(flavour, machine, progress, manager="capi-manager", reported_at=deleting, now=at)
    assert (early.kind, early.verdict, early.since) == ("controller", CLEARS, "2026-01-01T00:20:00Z")
    [late] = controller_blockers(flavour, machine, progress, manager="capi-manager", reported_at=deleting, now=at + dt.timedelta(minutes=10))
    assert (late.kind, late.verdict, late.since) == ("controller not progressing", NEEDS_ACTION, "2026-01-01T00:20:00Z")
    assert late.reason.startswith("it has stood at the same stage for 20 min: DrainingNode: Drain not completed yet")


def test_the_pods_a_controllers_drain_report_names_are_blockers_of_their_kind() -> None:
    machine = {**CAPI, "metadata": {**CAPI["metadata"], "annotations": {}}}
    details = [
        "* Pod apps/db-0: cannot evict pod as it would violate the pod's disruption budget. The disruption budget db needs 1 healthy pods and has 1 currently",
        "* Pods apps/a, apps/b, apps/c, ... (2 more): deletionTimestamp set, but still not removed from the Node",
        "* Pod apps/web-0: failed to evict Pod, This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "* Pod apps/x-0: failed to evict Pod, admission webhook denied the request",
        "* Pod apps/job-0: waiting for completion",
        "* 1 Pod with other issues",
    ]
    progress = {"phase": "drain", "reason": "DrainingNode", "message": "DrainingNode: Drain not completed yet", "details": details}
    found = controller_blockers(flavour_for(machine), machine, progress, manager="capi-manager", reported_at=None, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
    assert [(b.phase, b.kind, b.object, b.verdict) for b in found] == [
        ("controller", "controller", "controller capi-manager", CLEARS),
        ("drain", "budget refusal", "Pod apps/db-0", CLEARS),
        ("drain", "pod terminating", "Pod apps/a", CLEARS),
        ("drain", "pod terminating", "Pod apps/b", CLEARS),
        ("drain", "pod terminating", "Pod apps/c", CLEARS),
        ("drain", "two budgets", "Pod apps/web-0", NEVER),
        ("drain", "eviction error", "Pod apps/x-0", NEEDS_ACTION),
        ("drain", "wait-for-completion", "Pod apps/job-0", CLEARS),
    ]
    assert found[1].evidence == {"reported_by": "controller capi-manager", "report": details[0].split(": ", 1)[1]}
    assert found[6].reason == "the API server refuses its eviction: failed to evict Pod, admission webhook denied the request"


OPENSHIFT = {
    "apiVersion": "machine.openshift.io/v1beta1",
    "kind": "Machine",
    "metadata": {"name": "m", "namespace": "openshift-machine-api"},
    "status": {"phase": "Deleting"},
}


def test_the_pods_openshifts_drain_condition_names_are_blockers_of_their_kind() -> None:
    message = (
        'could not drain machine: [error when evicting pods/"db-0" -n "apps": global timeout reached: 20s,'
        ' error when evicting pods/"web-0" -n "apps": This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.,'
        ' error when evicting pods/"x-0" -n "apps": admission webhook "deny" denied the request,'
        ' error when waiting for pod "job-0" in namespace "apps" to terminate: global timeout reached: 20s]'
    )
    machine = {**OPENSHIFT, "status": {"phase": "Deleting", "conditions": [{"type": "Drained", "status": "False", "reason": "DrainError", "message": message}]}}
    progress = {"phase": "drain", "reason": "DrainError", "message": "Drained False: DrainError: could not drain machine"}
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    found = controller_blockers(flavour_for(machine), machine, progress, manager="machine-controller", reported_at=None, now=at)
    assert [(b.kind, b.object, b.verdict) for b in found] == [
        ("controller", "controller machine-controller", CLEARS),
        ("budget refusal", "Pod apps/db-0", CLEARS),
        ("two budgets", "Pod apps/web-0", NEVER),
        ("eviction error", "Pod apps/x-0", NEEDS_ACTION),
        ("pod terminating", "Pod apps/job-0", CLEARS),
    ]
    report = 'error when evicting pods/"db-0" -n "apps": global timeout reached: 20s'
    assert found[1].evidence == {"reported_by": "controller machine-controller", "report": report}
    assert found[3].reason == 'the API server refuses its eviction: admission webhook "deny" denied the request'
    assert budget_refused_pods(found) == ["apps/db-0"]
    # One Pod: no brackets around the error.
    [only] = openshift_pod_blockers(f"could not drain machine: {report}", "x")
    assert (only.object, only.kind, only.evidence["report"]) == ("Pod apps/db-0", "budget refusal", report)
    # A drain not permitted (another control-plane Node cordoned) names no Pod.
    assert openshift_pod_blockers("could not drain machine: drain not permitted: requeue in: 20s", "x") == []


def test_without_the_drained_condition_the_drain_requeued_event_names_the_pods() -> None:
    machine = {**OPENSHIFT, "status": {"phase": "Deleting"}}
    progress = {"phase": "drain", "reason": "Deleting", "message": "phase Deleting"}
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    report = 'Node drain requeued: error when evicting pods/"db-0" -n "apps": global timeout reached: 20s'
    found = controller_blockers(flavour_for(machine), machine, progress, manager="m", reported_at=None, now=at, drain_report=report)
    assert [(b.kind, b.object, b.verdict) for b in found] == [("controller", "controller m", CLEARS), ("budget refusal", "Pod apps/db-0", CLEARS)]
    assert budget_refused_pods(found) == ["apps/db-0"]
    assert [b.kind for b in controller_blockers(flavour_for(machine), machine, progress, manager="m", reported_at=None, now=at)] == ["controller"]
