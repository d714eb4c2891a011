"""machine_terminate's pure decisions: which step is next, given the Machine,
its Node, the timeouts, the Cluster API skip reason and what has been observed."""

from __future__ import annotations

import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_BOOTSTRAP,
    STAGE_COMPLETED,
    STAGE_DELETING_NODE,
    STAGE_INFRASTRUCTURE,
    STAGE_PRE_TERMINATE,
    STAGE_VOLUMES,
    STAGE_VOLUMES_DETACHED,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import GONE as ABSENT
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState, object_state
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.migration import openshift_side
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import (
    AWAIT_INSTANCE,
    BLOCKED,
    DELETE_BOOTSTRAP,
    DELETE_INFRASTRUCTURE,
    DELETE_NODE,
    DONE,
    FINISHED,
    OBSERVE_BOOTSTRAP,
    OBSERVE_INFRASTRUCTURE,
    OBSERVE_VOLUMES,
    PENDING,
    RECORD_VOLUME_START,
    REFUSE,
    RELEASE,
    SKIPPED,
    WAIT_GONE,
    WAIT_INFRASTRUCTURE,
    WAIT_PRE_TERMINATE,
    WAIT_VOLUMES,
    WAITING,
    Facts,
    decide,
    hook_dicts,
    node_deletion_deadline,
    remove_finalizer_patch,
    snapshot,
    step_names,
    timeout_message,
    timeout_passed,
    with_volume_start,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.stalls import terminate_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import SKIP_NODE_GONE, VolumeWaitStatus
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

NOW = dt.datetime(2025, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
DELETED_AT = NOW - dt.timedelta(minutes=5)
NODE = "worker-1"
FLAVOURS = ["openshift", "v1beta1", "v1beta2"]
PRESENT = ObjectState(exists=True)


def machine(
    flavour: str, *, deleting: bool = True, node: str | None = NODE, hooks: dict | None = None, drained: bool = True, volume_wait_started: bool = True, **extra
) -> dict:
    """A Machine of ``flavour`` as the API returns it. A Cluster API Machine being deleted records the
    volume wait's start (``volume_wait_started``: Cluster API records it before it looks at the volumes)."""
    hooks = hooks or {}
    annotations = dict(extra.pop("annotations", {}))
    spec = dict(extra.pop("spec", {}))
    status: dict = dict(extra.pop("status", {}))
    meta = {
        "name": "m-1",
        "namespace": "ns",
        "resourceVersion": "42",
        "finalizers": extra.pop("finalizers", None),
        "annotations": annotations,
    }
    if deleting:
        meta["deletionTimestamp"] = rfc3339(DELETED_AT)
    if node:
        status["nodeRef"] = {"name": node}
    if flavour == "openshift":
        api_version = "machine.openshift.io/v1beta1"
        meta["finalizers"] = meta["finalizers"] if meta["finalizers"] is not None else ["machine.machine.openshift.io"]
        spec["lifecycleHooks"] = {point: [{"name": n, "owner": o} for n, o in entries] for point, entries in hooks.items()}
        if drained:
            status.setdefault("conditions", []).append({"type": "Drained", "status": "True"})
    else:
        api_version = f"cluster.x-k8s.io/{flavour}"
        meta["finalizers"] = meta["finalizers"] if meta["finalizers"] is not None else ["machine.cluster.x-k8s.io"]
        prefixes = {"preDrain": "pre-drain", "preTerminate": "pre-terminate"}
        for point, entries in hooks.items():
            for name, owner in entries:
                annotations[f"{prefixes[point]}.delete.hook.machine.cluster.x-k8s.io/{name}"] = owner
        if deleting and volume_wait_started:
            status.setdefault("deletion", {}).setdefault("waitForNodeVolumeDetachStartTime", rfc3339(NOW))
        if flavour == "v1beta1":
            spec["infrastructureRef"] = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "FakeMachine", "name": "m-1"}
            spec["bootstrap"] = {"configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "FakeBootstrapConfig", "name": "m-1"}}
            if drained:
                status.setdefault("conditions", []).append({"type": "DrainingSucceeded", "status": "True"})
        else:
            spec["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "FakeMachine", "name": "m-1"}
            spec["bootstrap"] = {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "FakeBootstrapConfig", "name": "m-1"}}
            if drained:
                status["deprecated"] = {"v1beta1": {"conditions": [{"type": "DrainingSucceeded", "status": "True"}]}}
    return {"apiVersion": api_version, "kind": "Machine", "metadata": meta, "spec": spec, "status": status}


def node_object(name: str = NODE, deleting: bool = False) -> dict:
    meta: dict = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = rfc3339(NOW)
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def facts(m: dict, **extra) -> Facts:
    values = {"node": node_object(), "volumes": VolumeWaitStatus(), "infrastructure": ABSENT, "bootstrap": ABSENT}
    values.update(extra)
    return Facts(machine=m, now=NOW, **values)


def status_of(decision, name: str) -> tuple[str, str]:
    step = next(step for step in decision.steps if step.name == name)
    return step.status, step.reason


def stage_names(decision) -> list[str | None]:
    return [stage.name if stage else None for stage in decision.stages]


# -- refusals ------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_machine_not_marked_for_deletion_is_refused(flavour) -> None:
    decision = decide(facts(machine(flavour, deleting=False)), flavour_for(machine(flavour)))
    assert decision.action == REFUSE
    assert decision.message.startswith("Refusing to terminate Machine ns/m-1 (Node worker-1): it is not marked for deletion")
    assert decision.stages == []
    assert {step.status for step in decision.steps} == {PENDING}


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_closed_pre_drain_gate_is_refused_with_hooks_and_owners(flavour) -> None:
    m = machine(flavour, hooks={"preDrain": [("etcd-quorum", "etcd-guard"), ("backup", "velero")]})
    decision = decide(facts(m), flavour_for(m))
    assert decision.action == REFUSE
    assert "preDrain gate is closed" in decision.message
    assert "etcd-quorum (owner etcd-guard)" in decision.message and "backup (owner velero)" in decision.message
    assert "Machine ns/m-1 (Node worker-1)" in decision.message
    assert sorted(hook.name for hook in decision.blocked_by) == ["backup", "etcd-quorum"]
    assert status_of(decision, "pre_drain_hook")[0] == BLOCKED
    assert decision.stages == []


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_an_unfinished_drain_is_refused(flavour) -> None:
    m = machine(flavour, drained=False)
    decision = decide(facts(m, infrastructure=PRESENT), flavour_for(m))
    assert decision.action == REFUSE
    assert decision.message == (
        "Refusing to terminate Machine ns/m-1: the drain of Node worker-1 is not finished (the drain has not started); "
        "drain it first (lifecycle.machine.machine_drain)"
    )
    assert status_of(decision, "drain")[0] == BLOCKED


@pytest.mark.parametrize(("flavour", "spec"), [("v1beta1", {"nodeDrainTimeout": "10m"}), ("v1beta2", {"deletion": {"nodeDrainTimeoutSeconds": 600}})])
def test_a_drain_within_its_timeout_is_refused(flavour, spec) -> None:
    started = NOW - dt.timedelta(minutes=3)
    m = machine(flavour, drained=False, spec=spec, status={"deletion": {"nodeDrainStartTime": rfc3339(started)}})
    decision = decide(facts(m, infrastructure=PRESENT), flavour_for(m))
    assert decision.action == REFUSE
    assert f"the drain started at {rfc3339(started)} and its timeout of 600s has not passed" in decision.message


# -- when the drain counts as finished -----------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_recorded_drain_lets_termination_go_on(flavour) -> None:
    m = machine(flavour)
    decision = decide(facts(m, infrastructure=PRESENT, volumes=None), flavour_for(m))
    assert decision.action == OBSERVE_VOLUMES
    assert status_of(decision, "drain") == (DONE, "the Machine records the drain as finished")


def test_a_cluster_api_deleting_reason_past_the_drain_counts_as_drained() -> None:
    m = machine("v1beta2", drained=False)
    m["status"]["conditions"] = [{"type": "Deleting", "status": "True", "reason": "WaitingForPreTerminateHook"}]
    assert status_of(decide(facts(m), flavour_for(m)), "drain")[0] == DONE


@pytest.mark.parametrize(
    ("flavour", "annotation"),
    [("openshift", "machine.openshift.io/exclude-node-draining"), ("v1beta1", "machine.cluster.x-k8s.io/exclude-node-draining")],
)
def test_an_excluded_drain_is_skipped(flavour, annotation) -> None:
    m = machine(flavour, drained=False, annotations={annotation: ""})
    decision = decide(facts(m), flavour_for(m))
    assert decision.action != REFUSE
    assert status_of(decision, "drain") == (SKIPPED, f"excluded by annotation {annotation}")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_gone_node_counts_as_drained(flavour) -> None:
    m = machine(flavour, drained=False)
    decision = decide(facts(m, infrastructure=PRESENT, node=None, volumes=VolumeWaitStatus(skipped=SKIP_NODE_GONE), instance_terminated=True), flavour_for(m))
    assert status_of(decision, "drain") == (SKIPPED, "Node worker-1 not found")
    decision = decide(facts(m, node=None, volumes=VolumeWaitStatus(skipped=SKIP_NODE_GONE), instance_terminated=True), flavour_for(m))
    assert status_of(decision, "node") == (DONE, "Node worker-1 is gone")


def test_an_openshift_machine_without_node_has_nothing_to_drain() -> None:
    m = machine("openshift", drained=False, node=None)
    decision = decide(facts(m, node=None, instance_terminated=True), flavour_for(m))
    assert status_of(decision, "drain") == (SKIPPED, "the Machine has no nodeRef")
    assert status_of(decision, "node") == (SKIPPED, "the Machine has no nodeRef")


@pytest.mark.parametrize(("flavour", "spec"), [("v1beta1", {"nodeDrainTimeout": "1m"}), ("v1beta2", {"deletion": {"nodeDrainTimeoutSeconds": 60}})])
def test_a_timed_out_drain_is_skipped(flavour, spec) -> None:
    started = NOW - dt.timedelta(minutes=1)
    m = machine(flavour, drained=False, spec=spec, status={"deletion": {"nodeDrainStartTime": rfc3339(started)}})
    decision = decide(facts(m, infrastructure=PRESENT), flavour_for(m))
    assert status_of(decision, "drain") == (SKIPPED, f"the drain timeout of 60s has passed since the drain started at {rfc3339(started)}")


def test_timeouts_need_a_start_and_a_limit() -> None:
    assert timeout_passed(NOW - dt.timedelta(seconds=60), 60, NOW)
    assert not timeout_passed(NOW - dt.timedelta(seconds=59), 60, NOW)
    assert not timeout_passed(None, 60, NOW)
    assert not timeout_passed(NOW - dt.timedelta(days=1), None, NOW)


# -- the Cluster API skip cases ---------------------------------------------------------


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_skip_case_skips_node_steps_but_keeps_the_pre_terminate_gate(flavour) -> None:
    m = machine(flavour, drained=False, hooks={"preDrain": [("etcd", "etcd-guard")], "preTerminate": [("flush", "logs")]})
    reason = "Cluster ns/lm-test is being deleted"
    decision = decide(facts(m, skip_reason=reason, volumes=None), flavour_for(m))
    assert decision.action == WAIT_PRE_TERMINATE
    for step in ("pre_drain_hook", "drain", "volume_detach"):
        assert status_of(decision, step) == (SKIPPED, f"Cluster API skips the Node steps: {reason}")
    assert [hook.name for hook in decision.blocked_by] == ["flush"]

    m = machine(flavour, drained=False, hooks={"preDrain": [("etcd", "etcd-guard")]})
    decision = decide(facts(m, skip_reason=reason), flavour_for(m))
    assert decision.action == RELEASE
    assert status_of(decision, "node") == (SKIPPED, f"Cluster API skips the Node steps: {reason}")


# -- volume detach wait -------------------------------------------------------------------

WAITING_FOR_CLAIM = VolumeWaitStatus(pvcs=["ns/data"])


def test_an_attachment_naming_no_volume_is_waited_for_with_cluster_apis_error() -> None:
    """Cluster API v1.14.2: its Deleting message, the error for the Warning Event, and the wait goes on."""
    m = machine("v1beta2")
    held = VolumeWaitStatus(without_pv=["csi-inline"])
    decision = decide(facts(m, infrastructure=PRESENT, volumes=held), flavour_for(m))
    assert decision.action == WAIT_VOLUMES
    assert decision.stages[0].message == "Error waiting for volumes to be detached from Node, please check controller logs for errors"
    assert decision.stages[0].error == "spec.source.persistentVolumeName for VolumeAttachment csi-inline is not set"
    assert decision.message.endswith(": spec.source.persistentVolumeName for VolumeAttachment csi-inline is not set")
    [blocker] = terminate_blockers(decision, facts(m, infrastructure=PRESENT, volumes=held), flavour_for(m))
    assert (blocker.kind, blocker.object, blocker.verdict) == ("volume attachment", "VolumeAttachment csi-inline", "clears by itself")


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_attached_volumes_record_the_start_then_wait(flavour) -> None:
    m = machine(flavour, volume_wait_started=False)
    decision = decide(facts(m, infrastructure=PRESENT, volumes=WAITING_FOR_CLAIM), flavour_for(m))
    assert decision.action == RECORD_VOLUME_START
    # OpenShift (the collection's annotation) once something is found attached; Cluster API before it looks.
    assert status_of(decision, "volume_detach")[0] == (WAITING if flavour == "openshift" else PENDING)

    started = NOW - dt.timedelta(seconds=30)
    if flavour == "openshift":
        m["metadata"]["annotations"]["lifecycle.machine.dev/volume-detach-start-time"] = rfc3339(started)
    else:
        m["status"]["deletion"] = {"waitForNodeVolumeDetachStartTime": rfc3339(started)}
    decision = decide(facts(m, infrastructure=PRESENT, volumes=WAITING_FOR_CLAIM), flavour_for(m))
    assert decision.action == WAIT_VOLUMES
    expected = f"Waiting for Node volumes to be detached (started at {rfc3339(started)})\n* PersistentVolumeClaims: ns/data"
    assert decision.message == expected
    assert stage_names(decision) == [STAGE_VOLUMES]
    assert decision.stages[0].message == expected
    assert decision.volumes["pvcs"] == ["ns/data"]
    assert decision.volumes["started_at"] == rfc3339(started)


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
@pytest.mark.parametrize(
    "volumes", [None, VolumeWaitStatus(), VolumeWaitStatus(skipped=SKIP_NODE_GONE), WAITING_FOR_CLAIM], ids=["unobserved", "none", "node-gone", "attached"]
)
def test_cluster_api_records_the_volume_wait_start_before_looking_at_the_volumes(flavour, volumes) -> None:
    # As v1.14.2's reconcileDelete: whenever the volume wait runs, whatever is attached (row 21a).
    m = machine(flavour, volume_wait_started=False)
    decision = decide(facts(m, infrastructure=PRESENT, volumes=volumes), flavour_for(m))
    assert decision.action == RECORD_VOLUME_START
    assert status_of(decision, "volume_detach") == (PENDING, "recording when the volume wait started")
    assert decision.stages == []

    m["status"]["deletion"] = {"waitForNodeVolumeDetachStartTime": rfc3339(NOW)}
    decision = decide(facts(m, infrastructure=PRESENT, volumes=volumes), flavour_for(m))
    assert decision.action != RECORD_VOLUME_START, "recorded once"


@pytest.mark.parametrize(
    ("flavour", "extra", "infrastructure", "reason"),
    [
        ("v1beta2", {"annotations": {"machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach": ""}}, PRESENT, "excluded by annotation"),
        ("v1beta2", {"status": {"deletion": {"waitForPreTerminateHookStartTime": rfc3339(NOW)}}}, PRESENT, "preTerminate"),
        ("v1beta1", {}, ABSENT, "FakeMachine"),
    ],
)
def test_cluster_api_records_no_volume_wait_start_when_the_wait_does_not_run(flavour, extra, infrastructure, reason) -> None:
    m = machine(flavour, volume_wait_started=False, **extra)
    decision = decide(facts(m, infrastructure=infrastructure), flavour_for(m))
    assert decision.action != RECORD_VOLUME_START
    assert status_of(decision, "volume_detach")[0] == SKIPPED and reason in status_of(decision, "volume_detach")[1]


@pytest.mark.parametrize("volumes", [None, VolumeWaitStatus(), VolumeWaitStatus(skipped=SKIP_NODE_GONE)], ids=["unobserved", "none", "node-gone"])
def test_openshift_records_the_volume_wait_start_only_once_something_is_attached(volumes) -> None:
    m = machine("openshift")
    decision = decide(facts(m, volumes=volumes), flavour_for(m))
    assert decision.action != RECORD_VOLUME_START


def test_check_mode_sees_the_machine_with_the_volume_wait_start() -> None:
    for flavour in FLAVOURS:
        m = machine(flavour, volume_wait_started=False)
        f = flavour_for(m)
        recorded = with_volume_start(m, f, NOW)
        assert f.volume_detach_started_at(recorded) == NOW
        assert f.volume_detach_started_at(m) is None, "the Machine given is left as it was"


def test_the_volume_wait_is_excluded_by_annotation_on_cluster_api_only() -> None:
    annotation = "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach"
    m = machine("v1beta2", annotations={annotation: ""})
    decision = decide(facts(m, volumes=None), flavour_for(m))
    assert status_of(decision, "volume_detach") == (SKIPPED, f"excluded by annotation {annotation}")
    assert decision.volumes["skipped"] == f"excluded by annotation {annotation}"
    m = machine("openshift", annotations={annotation: ""})
    assert decide(facts(m, volumes=None), flavour_for(m)).action == OBSERVE_VOLUMES


@pytest.mark.parametrize(
    ("flavour", "spec"), [("v1beta1", {"nodeVolumeDetachTimeout": "30s"}), ("v1beta2", {"deletion": {"nodeVolumeDetachTimeoutSeconds": 30}})]
)
def test_the_volume_wait_ends_at_its_timeout(flavour, spec) -> None:
    started = NOW - dt.timedelta(seconds=31)
    m = machine(flavour, spec=spec, status={"deletion": {"waitForNodeVolumeDetachStartTime": rfc3339(started)}})
    decision = decide(facts(m, infrastructure=PRESENT, volumes=WAITING_FOR_CLAIM), flavour_for(m))
    assert status_of(decision, "volume_detach")[0] == SKIPPED
    assert "volume detach timeout of 30s has passed" in status_of(decision, "volume_detach")[1]
    assert STAGE_VOLUMES not in stage_names(decision)


def test_a_gone_node_skips_the_wait_and_records_it_as_succeeded() -> None:
    m = machine("v1beta1")
    decision = decide(facts(m, infrastructure=PRESENT, node=None, volumes=VolumeWaitStatus(skipped=SKIP_NODE_GONE)), flavour_for(m))
    assert status_of(decision, "volume_detach") == (SKIPPED, SKIP_NODE_GONE)
    assert stage_names(decision)[0] == STAGE_VOLUMES_DETACHED


def test_claims_of_skipped_pods_are_reported_not_waited_for() -> None:
    m = machine("v1beta2")
    decision = decide(facts(m, infrastructure=PRESENT, volumes=VolumeWaitStatus(ignored_pvcs=["kube-system/cache"])), flavour_for(m))
    assert status_of(decision, "volume_detach") == (DONE, "no volume is attached to the Node (ignored: claims of Pods the drain skipped: kube-system/cache)")
    assert decision.volumes["ignored_pvcs"] == ["kube-system/cache"]


# -- preTerminate gate ---------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_pre_terminate_hooks_hold_everything_below(flavour) -> None:
    m = machine(flavour, hooks={"preTerminate": [("flush-logs", "log-shipper")]})
    decision = decide(facts(m, infrastructure=PRESENT if flavour != "openshift" else None, bootstrap=None), flavour_for(m))
    assert decision.action == WAIT_PRE_TERMINATE
    assert stage_names(decision) == [STAGE_VOLUMES_DETACHED, STAGE_PRE_TERMINATE]
    assert [hook.name for hook in decision.stages[1].hooks] == ["flush-logs"]
    assert decision.message == "Machine ns/m-1 (Node worker-1) waits at the preTerminate gate for hooks: flush-logs (owner log-shipper)"
    assert decision.next_step == "pre_terminate_hook"
    below = [step for step in decision.steps if step.name not in ("pre_drain_hook", "drain", "volume_detach", "pre_terminate_hook")]
    assert below and all(step.status == PENDING for step in below)
    dicts = hook_dicts(decision.blocked_by)
    assert dicts[0]["point"] == "preTerminate" and dicts[0]["owner"] == "log-shipper"
    if flavour != "openshift":
        assert dicts[0]["annotation"] == "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush-logs"
    message = timeout_message(decision, m, flavour_for(m), 30)
    expected = "Timed out after 30s waiting at the preTerminate gate of Machine ns/m-1 (Node worker-1): "
    assert message == expected + "blocked by preTerminate hooks: flush-logs (owner log-shipper)"


# -- Cluster API infrastructure and bootstrap objects ------------------------------------------


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_infrastructure_then_bootstrap_are_deleted_and_waited_for(flavour) -> None:
    m = machine(flavour)
    f = flavour_for(m)
    decision = decide(facts(m, infrastructure=None, bootstrap=None), f)
    assert decision.action == OBSERVE_INFRASTRUCTURE
    assert (decision.target.kind, decision.target.name, decision.target.namespace) == ("FakeMachine", "m-1", "ns")

    decision = decide(facts(m, infrastructure=PRESENT, bootstrap=None), f)
    assert decision.action == DELETE_INFRASTRUCTURE
    assert stage_names(decision)[-1] == STAGE_INFRASTRUCTURE
    assert decision.stages[-1].kind == "FakeMachine"

    held = ObjectState(exists=True, deleting=True, finalizers=("example.com/cleanup",))
    decision = decide(facts(m, infrastructure=held, bootstrap=None), f)
    assert decision.action == WAIT_INFRASTRUCTURE
    assert status_of(decision, "infrastructure") == (WAITING, "waiting for FakeMachine ns/m-1 to be deleted (finalizers: example.com/cleanup)")
    assert decision.message == "Waiting for FakeMachine to be deleted"
    assert timeout_message(decision, m, f, 5).startswith("Timed out after 5s waiting for FakeMachine ns/m-1 of Machine ns/m-1 to be deleted (waiting for")

    decision = decide(facts(m, infrastructure=ABSENT, bootstrap=None), f)
    assert decision.action == OBSERVE_BOOTSTRAP
    decision = decide(facts(m, infrastructure=ABSENT, bootstrap=PRESENT), f)
    assert decision.action == DELETE_BOOTSTRAP
    assert decision.stages[-1].name == STAGE_BOOTSTRAP and decision.stages[-1].kind == "FakeBootstrapConfig"
    assert status_of(decision, "infrastructure") == (DONE, "FakeMachine ns/m-1 is gone")

    decision = decide(facts(m), f)
    assert decision.action == DELETE_NODE
    assert stage_names(decision)[-1] == STAGE_DELETING_NODE


def test_a_machine_without_bootstrap_config_skips_that_step() -> None:
    m = machine("v1beta2")
    m["spec"]["bootstrap"] = {"dataSecretName": "secret"}
    decision = decide(facts(m, bootstrap=None), flavour_for(m))
    assert status_of(decision, "bootstrap") == (SKIPPED, "the Machine has no bootstrap configRef")
    assert decision.action == DELETE_NODE


# -- OpenShift: provider tasks terminate the instance -----------------------------------------


def test_openshift_stops_for_the_provider_tasks_until_told_the_instance_is_gone() -> None:
    m = machine("openshift")
    decision = decide(facts(m), flavour_for(m))
    assert decision.action == AWAIT_INSTANCE
    assert status_of(decision, "instance")[0] == WAITING
    assert stage_names(decision) == [STAGE_VOLUMES_DETACHED, None]
    assert status_of(decision, "node")[0] == PENDING

    decision = decide(facts(m, instance_terminated=True), flavour_for(m))
    assert decision.action == DELETE_NODE
    assert status_of(decision, "instance")[0] == DONE


def test_step_names_follow_the_flavour() -> None:
    assert step_names(flavour_for(machine("openshift"))) == [
        "pre_drain_hook",
        "drain",
        "volume_detach",
        "pre_terminate_hook",
        "instance",
        "node",
        "release",
    ]
    assert step_names(flavour_for(machine("v1beta1")))[4:6] == ["infrastructure", "bootstrap"]


# -- Node and release -------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_a_node_being_deleted_or_given_up_on_lets_the_machine_be_released(flavour) -> None:
    m = machine(flavour)
    decision = decide(facts(m, node=node_object(deleting=True)), flavour_for(m))
    assert status_of(decision, "node") == (DONE, "Node worker-1 is being deleted")
    assert decision.action == RELEASE
    assert stage_names(decision)[-1] == STAGE_COMPLETED

    decision = decide(facts(m, node_deletion_abandoned="gave up"), flavour_for(m))
    assert status_of(decision, "node") == (SKIPPED, "gave up")
    assert decision.action == RELEASE


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_other_finalizers_keep_a_released_machine(flavour) -> None:
    m = machine(flavour, finalizers=["example.com/keep"])
    decision = decide(facts(m, node=None, volumes=VolumeWaitStatus(skipped=SKIP_NODE_GONE), instance_terminated=True), flavour_for(m))
    assert decision.action == WAIT_GONE
    assert decision.released
    assert "finalizers still hold the Machine: example.com/keep" in status_of(decision, "release")[1]
    assert decision.message == "Machine ns/m-1 was released but is still held by finalizers: example.com/keep"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_a_gone_machine_is_finished(flavour) -> None:
    decision = decide(Facts(machine=None, now=NOW), flavour_for(machine(flavour)))
    assert decision.action == FINISHED
    assert {step.status for step in decision.steps} == {DONE}
    assert decision.next_step is None


def test_remove_finalizer_patch_keeps_every_other_finalizer() -> None:
    m = machine("v1beta1", finalizers=["a.example.com/x", "machine.cluster.x-k8s.io", "b.example.com/y"])
    assert remove_finalizer_patch(m, "machine.cluster.x-k8s.io") == {
        "metadata": {"resourceVersion": "42", "finalizers": ["a.example.com/x", "b.example.com/y"]}
    }
    assert remove_finalizer_patch(machine("v1beta1", finalizers=["other"]), "machine.cluster.x-k8s.io") is None


def test_node_deletion_deadline_follows_the_machine() -> None:
    assert node_deletion_deadline(machine("v1beta1"), flavour_for(machine("v1beta1"))) == DELETED_AT + dt.timedelta(seconds=10)
    m = machine("v1beta2", spec={"deletion": {"nodeDeletionTimeoutSeconds": 0}})
    assert node_deletion_deadline(m, flavour_for(m)) is None
    m = machine("v1beta1", spec={"nodeDeletionTimeout": "2m"})
    assert node_deletion_deadline(m, flavour_for(m)) == DELETED_AT + dt.timedelta(minutes=2)
    assert node_deletion_deadline(machine("openshift"), flavour_for(machine("openshift"))) is None


def test_object_state_and_snapshot() -> None:
    assert object_state(None) == ABSENT
    held = object_state({"metadata": {"name": "x", "deletionTimestamp": "2025-01-01T00:00:00Z", "finalizers": ["f"]}})
    assert held == ObjectState(exists=True, deleting=True, finalizers=("f",))
    m = machine("v1beta2", status={"deletion": {"waitForNodeVolumeDetachStartTime": "2025-03-01T11:00:00Z"}})
    m["status"]["conditions"] = [{"type": "Deleting", "status": "True", "reason": "WaitingForVolumeDetach", "message": "m", "lastTransitionTime": "t"}]
    assert snapshot(m, flavour_for(m), {"Node worker-1": True}) == {
        "machine": {
            "exists": True,
            "finalizers": ["machine.cluster.x-k8s.io"],
            "volume_detach_started_at": "2025-03-01T11:00:00Z",
            "conditions": [
                {"type": "Deleting", "status": "True", "reason": "WaitingForVolumeDetach", "message": "m"},
                {"type": "DrainingSucceeded", "status": "True"},
            ],
        },
        "Node worker-1": {"exists": True},
    }
    assert snapshot(None, flavour_for(m), {}) == {"machine": {"exists": False}}


# -- Cluster API: when the Node work is over for good ----------------------------------------


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_after_the_pre_terminate_wait_started_neither_drain_nor_volumes_hold_the_termination(flavour) -> None:
    m = machine(flavour, drained=False, status={"deletion": {"waitForPreTerminateHookStartTime": rfc3339(DELETED_AT)}})
    decision = decide(facts(m, infrastructure=PRESENT, volumes=WAITING_FOR_CLAIM), flavour_for(m))
    assert status_of(decision, "drain")[0] == SKIPPED and "wait for preTerminate hooks started" in status_of(decision, "drain")[1]
    assert status_of(decision, "volume_detach")[0] == SKIPPED
    assert decision.action == DELETE_INFRASTRUCTURE


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_the_infra_machine_is_read_before_the_drain_is_judged(flavour) -> None:
    m = machine(flavour, drained=False)
    decision = decide(facts(m, infrastructure=None), flavour_for(m))
    assert decision.action == OBSERVE_INFRASTRUCTURE and decision.target.kind == "FakeMachine"


@pytest.mark.parametrize("flavour", ["v1beta1", "v1beta2"])
def test_an_infra_machine_being_deleted_lets_an_undrained_machine_go_on(flavour) -> None:
    m = machine(flavour, drained=False)
    going = ObjectState(exists=True, deleting=True)
    decision = decide(facts(m, infrastructure=going, volumes=WAITING_FOR_CLAIM), flavour_for(m))
    assert status_of(decision, "drain") == (SKIPPED, "FakeMachine ns/m-1 is being deleted, so its Node is neither drained nor waited for")
    assert status_of(decision, "volume_detach")[0] == SKIPPED
    assert decision.action == WAIT_INFRASTRUCTURE


def test_openshift_drains_whatever_the_infrastructure() -> None:
    m = machine("openshift", drained=False)
    decision = decide(facts(m), flavour_for(m))
    assert decision.action == REFUSE and "drain of Node worker-1 is not finished" in decision.message


def test_stages_written_while_the_infra_machine_exists_carry_what_cluster_api_mirrors_from_it() -> None:
    """Row 32: every stage written while the InfraMachine exists carries its InfrastructureReady;
    once it is gone, none does (the stage itself then says Deleted)."""
    m = machine("v1beta2")
    f = flavour_for(m)
    going = {"metadata": {"name": "m-1", "deletionTimestamp": rfc3339(NOW)}, "status": {}}
    decision = decide(facts(m, infrastructure=object_state(going), bootstrap=None), f)
    assert decision.action == WAIT_INFRASTRUCTURE
    assert [stage.infra_machine for stage in decision.stages] == [going]
    decision = decide(facts(m, infrastructure=ABSENT, bootstrap=PRESENT), f)
    assert [stage.infra_machine for stage in decision.stages] == [None]
    # The Machine's status patch then says what Cluster API mirrors (v1beta1 and v1beta2) and, once it is gone, Deleted.
    m["status"]["initialization"] = {"infrastructureProvisioned": True}
    decision = decide(facts(m, infrastructure=object_state(going), bootstrap=None), f)
    patch = f.status_patch(m, decision.stages[0], NOW)["status"]
    assert [(c["status"], c.get("reason")) for c in patch["deprecated"]["v1beta1"]["conditions"] if c["type"] == "InfrastructureReady"] == [
        ("False", "Deleting")
    ]
    assert [(c["status"], c["reason"]) for c in patch["conditions"] if c["type"] == "InfrastructureReady"] == [("True", "Ready")]


@pytest.mark.parametrize("authority", ["ClusterAPI", "Migrating"])
def test_a_machine_its_controllers_leave_alone_is_left_alone(authority) -> None:
    """Row O5 and "Hands off": as OpenShift's machine controller (MachineAPIMigration) and Cluster API's paused
    objects, nothing is done - no stage written - while the runner found the Machine left alone."""
    m = machine("openshift", status={"authoritativeAPI": authority})
    held = openshift_side(m, flavour_for(m))
    observed = facts(m)
    observed.hands_off = held
    decision = decide(observed, flavour_for(m))
    assert decision.action == REFUSE
    assert decision.stages == []
    assert decision.message == held.message and "nothing was changed" in decision.message
    assert decide(facts(m), flavour_for(m)).action != REFUSE  # what the runner did not find holds nothing
