"""Unit tests for the condition rules and the exact upstream condition strings (docs/behaviour.md §6)."""

from __future__ import annotations

import copy
import datetime as dt

import pytest

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import (
    STAGE_BOOTSTRAP,
    STAGE_COMPLETED,
    STAGE_DELETING_NODE,
    STAGE_DRAIN_FAILED,
    STAGE_DRAIN_SKIPPED,
    STAGE_DRAINED,
    STAGE_DRAINING,
    STAGE_INFRASTRUCTURE,
    STAGE_NODE_DELETE_FAILED,
    STAGE_PRE_DRAIN,
    STAGE_PRE_TERMINATE,
    STAGE_VOLUMES,
    STAGE_VOLUMES_DETACHED,
    STAGES,
    Stage,
    capi_deleting_condition,
    capi_deleting_message,
    capi_infrastructure_ready,
    capi_ready_summary,
    capi_v1beta1_conditions,
    capi_v1beta2_infrastructure_ready,
    hook_condition_type,
    openshift_conditions,
    openshift_hook_list,
    set_metav1_condition,
    set_v1beta1_condition,
)
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import Hook
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339

T0 = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=dt.UTC)
T1 = dt.datetime(2026, 1, 1, 0, 5, 0, tzinfo=dt.UTC)
S0 = "2026-01-01T00:00:00Z"
S1 = "2026-01-01T00:05:00Z"
DRAIN_PREFIX = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
TERMINATE_PREFIX = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"


def by_type(conditions: list[dict]) -> dict[str, dict]:
    return {c["type"]: c for c in conditions}


def strip_time(conditions: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conditions]


def test_stages_are_in_workflow_order() -> None:
    assert STAGES == (
        "WaitingForPreDrainHook",
        "DrainingNode",
        "DrainingFailed",
        "Drained",
        "DrainSkipped",
        "WaitingForVolumeDetach",
        "VolumesDetached",
        "WaitingForPreTerminateHook",
        "WaitingForInfrastructureDeletion",
        "WaitingForBootstrapDeletion",
        "DeletingNode",
        "NodeDeletionFailed",
        "DeletionCompleted",
    )


# -- v1beta1-style conditions (OpenShift and Cluster API v1beta1) -----------------


def test_v1beta1_new_condition_gets_the_time() -> None:
    result = set_v1beta1_condition([], {"type": "Drained", "status": "True"}, T0)
    assert result == [{"type": "Drained", "status": "True", "lastTransitionTime": S0}]


def test_v1beta1_same_state_keeps_the_time() -> None:
    current = [{"type": "Drained", "status": "False", "reason": "DrainError", "severity": "Warning", "message": "m", "lastTransitionTime": S0}]
    result = set_v1beta1_condition(current, {"type": "Drained", "status": "False", "reason": "DrainError", "severity": "Warning", "message": "m"}, T1)
    assert result == current


@pytest.mark.parametrize(
    "change",
    [{"status": "True"}, {"reason": "Other"}, {"severity": "Info"}, {"message": "another message"}],
)
def test_v1beta1_time_moves_on_any_state_change(change) -> None:
    old = {"type": "Drained", "status": "False", "reason": "DrainError", "severity": "Warning", "message": "m"}
    current = [{**old, "lastTransitionTime": S0}]
    result = set_v1beta1_condition(current, {**old, **change}, T1)
    assert result == [{**old, **change, "lastTransitionTime": S1}]


def test_v1beta1_missing_and_empty_fields_are_the_same_state() -> None:
    current = [{"type": "Drainable", "status": "True", "reason": "", "lastTransitionTime": S0}]
    assert set_v1beta1_condition(current, {"type": "Drainable", "status": "True"}, T1) == current


def test_v1beta1_sorted_ready_first_then_by_type() -> None:
    current = [
        {"type": "Terminable", "status": "True", "lastTransitionTime": S0},
        {"type": "Drainable", "status": "True", "lastTransitionTime": S0},
        {"type": "Ready", "status": "True", "lastTransitionTime": S0},
    ]
    result = set_v1beta1_condition(current, {"type": "InstanceExists", "status": "True"}, T1)
    assert [c["type"] for c in result] == ["Ready", "Drainable", "InstanceExists", "Terminable"]


def test_v1beta1_does_not_change_its_input() -> None:
    current = [{"type": "Drained", "status": "False", "lastTransitionTime": S0}]
    before = copy.deepcopy(current)
    set_v1beta1_condition(current, {"type": "Drained", "status": "True"}, T1)
    assert current == before


# -- metav1.Condition style (Cluster API v1beta2) ---------------------------------


def test_metav1_new_condition_has_every_field() -> None:
    result = set_metav1_condition([], {"type": "Deleting", "status": "True", "reason": "DrainingNode"}, T0, generation=4)
    assert result == [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "", "observedGeneration": 4, "lastTransitionTime": S0}]


def test_metav1_time_moves_only_when_the_status_changes() -> None:
    current = [{"type": "Deleting", "status": "True", "reason": "WaitingForPreDrainHook", "message": "a", "observedGeneration": 4, "lastTransitionTime": S0}]
    moved_on = set_metav1_condition(current, {"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b"}, T1, generation=4)
    assert moved_on == [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b", "observedGeneration": 4, "lastTransitionTime": S0}]
    flipped = set_metav1_condition(current, {"type": "Deleting", "status": "False", "reason": "NotDeleting", "message": ""}, T1, generation=4)
    assert flipped[0]["lastTransitionTime"] == S1


def test_metav1_observed_generation_is_updated() -> None:
    current = [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b", "observedGeneration": 4, "lastTransitionTime": S0}]
    result = set_metav1_condition(current, {"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b"}, T1, generation=5)
    assert result == [{**current[0], "observedGeneration": 5}]


def test_metav1_unchanged_condition_is_returned_as_is() -> None:
    current = [
        {"type": "Ready", "status": "False", "reason": "Deleting", "message": "", "lastTransitionTime": S0},
        {"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b", "observedGeneration": 4, "lastTransitionTime": S0},
    ]
    before = copy.deepcopy(current)
    assert set_metav1_condition(current, {"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "b"}, T1, generation=4) == current
    assert current == before


def test_metav1_keeps_the_order_and_appends_new_types() -> None:
    current = [{"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": S0}]
    result = set_metav1_condition(current, {"type": "Available", "status": "True", "reason": "Available"}, T1)
    assert [c["type"] for c in result] == ["Ready", "Available"]
    assert "observedGeneration" not in result[1]


# -- OpenShift: Drainable, Terminable, Drained (exact strings) ---------------------


def hooks(**points: list[tuple[str, str]]) -> dict[str, list[Hook]]:
    return {point: [Hook(point, n, o) for n, o in entries] for point, entries in points.items()}


def test_openshift_hook_list_is_gos_plus_v_format() -> None:
    assert openshift_hook_list([Hook("preDrain", "a", "b")]) == "[{Name:a Owner:b}]"
    assert (
        openshift_hook_list([Hook("preDrain", "a", "b"), Hook("preDrain", "c", "clusteroperator/etcd")])
        == "[{Name:a Owner:b} {Name:c Owner:clusteroperator/etcd}]"
    )
    assert openshift_hook_list([]) == "[]"


def test_openshift_blocked_gates_exact_messages() -> None:
    result = by_type(
        openshift_conditions(
            [], hooks(preDrain=[("EtcdQuorumOperator", "clusteroperator/etcd")], preTerminate=[("backup", "velero"), ("flush", "logs")]), None, T0
        )
    )
    assert result["Drainable"] == {
        "type": "Drainable",
        "status": "False",
        "severity": "Warning",
        "reason": "HookPresent",
        "message": "Drain operation currently blocked by: [{Name:EtcdQuorumOperator Owner:clusteroperator/etcd}]",
        "lastTransitionTime": S0,
    }
    assert result["Terminable"] == {
        "type": "Terminable",
        "status": "False",
        "severity": "Warning",
        "reason": "HookPresent",
        "message": "Terminate operation currently blocked by: [{Name:backup Owner:velero} {Name:flush Owner:logs}]",
        "lastTransitionTime": S0,
    }
    assert "Drained" not in result


def test_openshift_open_gates_are_plain_true() -> None:
    result = openshift_conditions([], hooks(), None, T0)
    assert result == [{"type": "Drainable", "status": "True", "lastTransitionTime": S0}, {"type": "Terminable", "status": "True", "lastTransitionTime": S0}]


def test_openshift_removing_the_last_hook_opens_the_gate_and_moves_the_time() -> None:
    blocked = openshift_conditions([], hooks(preDrain=[("guard", "ctl")]), None, T0)
    opened = by_type(openshift_conditions(blocked, hooks(), None, T1))
    assert opened["Drainable"] == {"type": "Drainable", "status": "True", "lastTransitionTime": S1}
    assert opened["Terminable"]["lastTransitionTime"] == S0


def test_openshift_conditions_keep_other_conditions() -> None:
    current = [{"type": "InstanceExists", "status": "True", "lastTransitionTime": S0}]
    result = openshift_conditions(current, hooks(), None, T1)
    assert [c["type"] for c in result] == ["Drainable", "InstanceExists", "Terminable"]


@pytest.mark.parametrize(
    ("stage", "drained"),
    [
        (Stage(STAGE_DRAINED), {"type": "Drained", "status": "True", "message": "Drain finished successfully"}),
        (Stage(STAGE_DRAIN_SKIPPED), {"type": "Drained", "status": "True", "message": "Node drain skipped"}),
        (
            Stage(STAGE_DRAIN_FAILED, 'error when evicting pods/"web-1" -n "apps": too many requests'),
            {
                "type": "Drained",
                "status": "False",
                "severity": "Warning",
                "reason": "DrainError",
                "message": 'could not drain machine: error when evicting pods/"web-1" -n "apps": too many requests',
            },
        ),
        (
            Stage(STAGE_DRAINING, "2 pods still to evict"),
            {"type": "Drained", "status": "False", "severity": "Warning", "reason": "DrainError", "message": "could not drain machine: 2 pods still to evict"},
        ),
    ],
)
def test_openshift_drained_exact_strings(stage, drained) -> None:
    result = by_type(openshift_conditions([], hooks(), stage, T0))
    assert result["Drained"] == {**drained, "lastTransitionTime": S0}


@pytest.mark.parametrize(
    "stage", [STAGE_PRE_DRAIN, STAGE_VOLUMES, STAGE_PRE_TERMINATE, STAGE_INFRASTRUCTURE, STAGE_DELETING_NODE, STAGE_NODE_DELETE_FAILED, STAGE_COMPLETED]
)
def test_openshift_other_stages_leave_drained_alone(stage) -> None:
    current = [{"type": "Drained", "status": "True", "message": "Drain finished successfully", "lastTransitionTime": S0}]
    result = by_type(openshift_conditions(current, hooks(), Stage(stage), T1))
    assert result["Drained"] == current[0]


# -- Cluster API v1beta1 conditions per stage --------------------------------------

PRE_DRAIN_OK = {"type": "PreDrainDeleteHookSucceeded", "status": "True"}
PRE_TERMINATE_OK = {"type": "PreTerminateDeleteHookSucceeded", "status": "True"}
# Written from the termination on, as Cluster API v1.14.2 was seen to write them side by side.
NODE_DELETING = {"type": "NodeHealthy", "status": "False", "severity": "Info", "reason": "Deleting"}
INFRASTRUCTURE_DELETED = {"type": "InfrastructureReady", "status": "False", "severity": "Info", "reason": "Deleted"}
READY_DELETED = {"type": "Ready", "status": "False", "severity": "Info", "reason": "Deleted"}


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([], None),
        ([{"type": "PreDrainDeleteHookSucceeded", "status": "False", "reason": "WaitingExternalHook", "severity": "Info"}], None),
        ([{"type": "InfrastructureReady", "status": "True"}, {"type": "DrainingSucceeded", "status": "True"}], {"type": "Ready", "status": "True"}),
        (
            # The first False input in order of precedence wins among equals ...
            [
                {"type": "DrainingSucceeded", "status": "False", "reason": "Draining", "severity": "Info", "message": "m"},
                {"type": "InfrastructureReady", "status": "False", "reason": "Deleted", "severity": "Info"},
            ],
            {"type": "Ready", "status": "False", "reason": "Deleted", "severity": "Info"},
        ),
        (
            # ... but a more severe one comes first.
            [
                {"type": "InfrastructureReady", "status": "False", "reason": "Deleted", "severity": "Info"},
                {"type": "DrainingSucceeded", "status": "False", "reason": "DrainingFailed", "severity": "Warning", "message": "boom"},
            ],
            {"type": "Ready", "status": "False", "reason": "DrainingFailed", "severity": "Warning", "message": "boom"},
        ),
    ],
)
def test_capi_ready_summarises_as_the_machine_controller(conditions, ready) -> None:
    """Seen beside Cluster API v1.14.2: Ready follows DrainingSucceeded while draining and
    InfrastructureReady once the infrastructure is deleted."""
    assert capi_ready_summary(conditions) == ready


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        (
            Stage(STAGE_PRE_DRAIN, "ignored"),
            [{"type": "PreDrainDeleteHookSucceeded", "status": "False", "severity": "Info", "reason": "WaitingExternalHook"}],
        ),
        (
            Stage(STAGE_DRAINING),
            [
                {"type": "Ready", "status": "False", "severity": "Info", "reason": "Draining", "message": "Draining the node before deletion"},
                {"type": "DrainingSucceeded", "status": "False", "severity": "Info", "reason": "Draining", "message": "Draining the node before deletion"},
                PRE_DRAIN_OK,
            ],
        ),
        (
            Stage(STAGE_DRAINING, "Drain not completed yet (started at 2026-01-01T00:00:00Z):\n* Pods web-1: cannot evict"),
            [
                {
                    "type": "Ready",
                    "status": "False",
                    "severity": "Info",
                    "reason": "Draining",
                    "message": "Drain not completed yet (started at 2026-01-01T00:00:00Z):\n* Pods web-1: cannot evict",
                },
                {
                    "type": "DrainingSucceeded",
                    "status": "False",
                    "severity": "Info",
                    "reason": "Draining",
                    "message": "Drain not completed yet (started at 2026-01-01T00:00:00Z):\n* Pods web-1: cannot evict",
                },
                PRE_DRAIN_OK,
            ],
        ),
        (
            Stage(STAGE_DRAIN_FAILED, "failed to cordon Node n-1"),
            [
                {"type": "Ready", "status": "False", "severity": "Warning", "reason": "DrainingFailed", "message": "failed to cordon Node n-1"},
                {"type": "DrainingSucceeded", "status": "False", "severity": "Warning", "reason": "DrainingFailed", "message": "failed to cordon Node n-1"},
                PRE_DRAIN_OK,
            ],
        ),
        (Stage(STAGE_DRAINED), [{"type": "Ready", "status": "True"}, {"type": "DrainingSucceeded", "status": "True"}, PRE_DRAIN_OK]),
        (Stage(STAGE_DRAIN_SKIPPED), [PRE_DRAIN_OK]),
        (
            Stage(STAGE_VOLUMES),
            [
                PRE_DRAIN_OK,
                {
                    "type": "VolumeDetachSucceeded",
                    "status": "False",
                    "severity": "Info",
                    "reason": "WaitingForVolumeDetach",
                    "message": "Waiting for node volumes to be detached",
                },
            ],
        ),
        (Stage(STAGE_VOLUMES_DETACHED), [PRE_DRAIN_OK, {"type": "VolumeDetachSucceeded", "status": "True"}]),
        (
            Stage(STAGE_PRE_TERMINATE, "ignored"),
            [{"type": "PreTerminateDeleteHookSucceeded", "status": "False", "severity": "Info", "reason": "WaitingExternalHook"}],
        ),
        (Stage(STAGE_INFRASTRUCTURE, kind="FakeMachine"), [NODE_DELETING, PRE_TERMINATE_OK]),
        (Stage(STAGE_BOOTSTRAP, kind="FakeBootstrapConfig"), [READY_DELETED, INFRASTRUCTURE_DELETED, NODE_DELETING, PRE_TERMINATE_OK]),
        (Stage(STAGE_DELETING_NODE), [READY_DELETED, INFRASTRUCTURE_DELETED, NODE_DELETING, PRE_TERMINATE_OK]),
        (
            Stage(STAGE_NODE_DELETE_FAILED, "ignored"),
            [
                READY_DELETED,
                INFRASTRUCTURE_DELETED,
                {"type": "NodeHealthy", "status": "False", "severity": "Warning", "reason": "DeletionFailed"},
                PRE_TERMINATE_OK,
            ],
        ),
        (Stage(STAGE_COMPLETED), [READY_DELETED, INFRASTRUCTURE_DELETED, NODE_DELETING, PRE_TERMINATE_OK]),
    ],
)
def test_capi_v1beta1_conditions_per_stage(stage, expected) -> None:
    result = capi_v1beta1_conditions([], stage, T0)
    assert strip_time(result) == expected
    assert all(c["lastTransitionTime"] == S0 for c in result)


def test_capi_v1beta1_volume_wait_message_is_always_upstreams() -> None:
    """The Machine controller writes VolumeDetachSucceeded's message once; the
    progress of the wait goes to the v1beta2 Deleting condition only."""
    stage = Stage(STAGE_VOLUMES, "Waiting for Node volumes to be detached (started at 2026-01-01T00:00:00Z)\n* PersistentVolumes: pv-1")
    result = by_type(capi_v1beta1_conditions([], stage, T0))
    assert result["VolumeDetachSucceeded"]["message"] == "Waiting for node volumes to be detached"
    assert result["VolumeDetachSucceeded"]["message"].__class__ is str  # a plain str, as the API client serialises it
    assert capi_deleting_condition([], stage, T0)[0]["message"] == stage.message


def test_capi_v1beta1_no_stage_changes_nothing() -> None:
    current = [{"type": "Ready", "status": "True", "lastTransitionTime": S0}]
    assert capi_v1beta1_conditions(current, None, T1) == current


def test_capi_v1beta1_progress_messages_move_the_time() -> None:
    first = capi_v1beta1_conditions([], Stage(STAGE_DRAINING, "3 pods left"), T0)
    second = by_type(capi_v1beta1_conditions(first, Stage(STAGE_DRAINING, "1 pod left"), T1))
    assert second["DrainingSucceeded"]["lastTransitionTime"] == S1
    assert second["PreDrainDeleteHookSucceeded"]["lastTransitionTime"] == S0


def test_capi_v1beta1_whole_deletion_in_order() -> None:
    conditions: list[dict] = [{"type": "Ready", "status": "True", "lastTransitionTime": S0}]
    for name in (STAGE_PRE_DRAIN, STAGE_DRAINING, STAGE_DRAINED, STAGE_VOLUMES, STAGE_VOLUMES_DETACHED, STAGE_PRE_TERMINATE, STAGE_INFRASTRUCTURE):
        conditions = capi_v1beta1_conditions(conditions, Stage(name), T1)
    assert {c["type"]: c["status"] for c in conditions} == {
        "Ready": "True",
        "DrainingSucceeded": "True",
        "PreDrainDeleteHookSucceeded": "True",
        "PreTerminateDeleteHookSucceeded": "True",
        "VolumeDetachSucceeded": "True",
        "NodeHealthy": "False",
    }
    assert conditions[0]["type"] == "Ready"


# -- Cluster API v1beta2 Deleting condition per stage -------------------------------


def capi_hooks(prefix: str, *hook_names: str) -> list[Hook]:
    return [Hook("x", name, "owner", f"{prefix}/{name}") for name in hook_names]


@pytest.mark.parametrize(
    ("stage", "reason", "message"),
    [
        (
            Stage(STAGE_PRE_DRAIN, hooks=capi_hooks(DRAIN_PREFIX, "zz-last", "etcd")),
            "WaitingForPreDrainHook",
            f"Waiting for pre-drain hooks to succeed (hooks: {DRAIN_PREFIX}/etcd,{DRAIN_PREFIX}/zz-last)",
        ),
        (
            Stage(STAGE_DRAINING, "Drain not completed yet (started at 2026-01-01T00:00:00Z):"),
            "DrainingNode",
            "Drain not completed yet (started at 2026-01-01T00:00:00Z):",
        ),
        (Stage(STAGE_DRAIN_FAILED, "failed to cordon Node n-1"), "DrainingNode", "Error draining Node, please check controller logs for errors"),
        (
            Stage(STAGE_VOLUMES, "Waiting for Node volumes to be detached (started at 2026-01-01T00:00:00Z)"),
            "WaitingForVolumeDetach",
            "Waiting for Node volumes to be detached (started at 2026-01-01T00:00:00Z)",
        ),
        (
            Stage(STAGE_PRE_TERMINATE, hooks=capi_hooks(TERMINATE_PREFIX, "flush-logs")),
            "WaitingForPreTerminateHook",
            f"Waiting for pre-terminate hooks to succeed (hooks: {TERMINATE_PREFIX}/flush-logs)",
        ),
        (Stage(STAGE_INFRASTRUCTURE, kind="FakeMachine"), "WaitingForInfrastructureDeletion", "Waiting for FakeMachine to be deleted"),
        (Stage(STAGE_BOOTSTRAP, kind="KubeadmConfig"), "WaitingForBootstrapDeletion", "Waiting for KubeadmConfig to be deleted"),
        (Stage(STAGE_NODE_DELETE_FAILED), "DeletingNode", "Error deleting Node, please check controller logs for errors"),
        (Stage(STAGE_COMPLETED), "DeletionCompleted", "Deletion completed"),
    ],
)
def test_capi_deleting_reason_and_message_per_stage(stage, reason, message) -> None:
    assert capi_deleting_message(stage) == message
    result = capi_deleting_condition([], stage, T0, machine_generation=2)
    assert result == [{"type": "Deleting", "status": "True", "reason": reason, "message": message, "observedGeneration": 2, "lastTransitionTime": S0}]


def test_capi_deleting_hooks_message_lists_non_recommended_keys_whole() -> None:
    bare = [Hook("preDrain", DRAIN_PREFIX, "x", DRAIN_PREFIX), Hook("preDrain", "a", "y", f"{DRAIN_PREFIX}/a")]
    assert capi_deleting_message(Stage(STAGE_PRE_DRAIN, hooks=bare)) == f"Waiting for pre-drain hooks to succeed (hooks: {DRAIN_PREFIX},{DRAIN_PREFIX}/a)"


@pytest.mark.parametrize(
    "stage", [None, Stage(STAGE_DRAINED), Stage(STAGE_DRAIN_SKIPPED), Stage(STAGE_VOLUMES_DETACHED), Stage(STAGE_DELETING_NODE, "Deleting Node n-1")]
)
def test_capi_deleting_unchanged_by_stages_that_end_a_step(stage) -> None:
    """Seen beside Cluster API v1.14.2: it deletes the Node and releases the Machine in one
    reconcile, so a Node deletion that works never shows the DeletingNode reason."""
    current = [{"type": "Deleting", "status": "True", "reason": "DrainingNode", "message": "m", "lastTransitionTime": S0}]
    assert capi_deleting_condition(current, stage, T1) == current


def test_capi_deleting_stays_true_through_the_stages_so_its_time_is_kept() -> None:
    conditions = capi_deleting_condition([], Stage(STAGE_PRE_DRAIN, hooks=capi_hooks(DRAIN_PREFIX, "a")), T0)
    conditions = capi_deleting_condition(conditions, Stage(STAGE_DRAINING, "draining"), T1)
    assert conditions[0]["reason"] == "DrainingNode"
    assert conditions[0]["lastTransitionTime"] == S0


# -- condition named after a hook (seed 000) -----------------------------------------


@pytest.mark.parametrize(
    ("point", "name", "condition_type"),
    [
        ("preTerminate", "flush-logs", "PreTerminateFlushLogsSucceeded"),
        ("preDrain", "MigrateImportantApp", "PreDrainMigrateImportantAppSucceeded"),
        ("preDrain", "EtcdQuorumOperator", "PreDrainEtcdQuorumOperatorSucceeded"),
        ("preDrain", "etcdQuorum", "PreDrainEtcdQuorumSucceeded"),
        ("preTerminate", "backup_v2.volumes", "PreTerminateBackupV2VolumesSucceeded"),
        ("preCreate", "example.com/ipam", "PreCreateExampleComIpamSucceeded"),
        ("preDrain", "x", "PreDrainXSucceeded"),
        ("preDrain", "9to5", "PreDrain9to5Succeeded"),
    ],
)
def test_hook_condition_type(point, name, condition_type) -> None:
    assert hook_condition_type(point, name) == condition_type


# -- row 32: InfrastructureReady while the InfraMachine exists -------------------------------


@pytest.mark.parametrize(
    ("infra", "expected"),
    [
        (None, None),
        # No Ready condition: the fallback, from whether the InfraMachine reports provisioned (either contract).
        ({"status": {"initialization": {"provisioned": True}}}, {"type": "InfrastructureReady", "status": "True"}),
        ({"status": {"ready": True}}, {"type": "InfrastructureReady", "status": "True"}),
        ({}, {"type": "InfrastructureReady", "status": "False", "severity": "Info", "reason": "Deleting"}),
        ({"status": {"ready": False}}, {"type": "InfrastructureReady", "status": "False", "severity": "Info", "reason": "Deleting"}),
        # Its own Ready condition wins, whatever it reports provisioned: v1beta1 conditions in status.conditions...
        (
            {"status": {"ready": True, "conditions": [{"type": "Ready", "status": "False", "reason": "Deleting", "severity": "Info", "message": "going"}]}},
            {"type": "InfrastructureReady", "status": "False", "severity": "Info", "reason": "Deleting", "message": "going"},
        ),
        # ... or, once a provider moved to v1beta2, in status.deprecated.v1beta1.conditions (preferred over status.conditions).
        (
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
                    "deprecated": {"v1beta1": {"conditions": [{"type": "Ready", "status": "False", "reason": "Deleting", "severity": "Warning"}]}},
                }
            },
            {"type": "InfrastructureReady", "status": "False", "severity": "Warning", "reason": "Deleting"},
        ),
    ],
)
def test_capi_infrastructure_ready_mirrors_the_infra_machine(infra, expected) -> None:
    assert capi_infrastructure_ready(infra) == expected


WAITING_FOR_INFRA = {"type": "InfrastructureReady", "status": "False", "severity": "Info", "reason": "WaitingForInfrastructure", "lastTransitionTime": S0}


def test_capi_v1beta1_an_unprovisioned_infra_machine_reads_deleting_from_the_first_write() -> None:
    """The controller's fallback before the deletion (WaitingForInfrastructure) becomes its deleting
    fallback (Deleting) with the first write of the deletion, and Ready with it."""
    result = capi_v1beta1_conditions([WAITING_FOR_INFRA], Stage(STAGE_DRAINING, message="Drain not completed yet"), T1)
    infra = next(c for c in result if c["type"] == "InfrastructureReady")
    assert (infra["status"], infra["reason"], infra["severity"], infra.get("message"), infra["lastTransitionTime"]) == (
        "False",
        "Deleting",
        "Info",
        None,
        rfc3339(T1),
    )
    ready = next(c for c in result if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["severity"], ready.get("message")) == ("False", "Deleting", "Info", None)


def test_capi_v1beta1_a_mirrored_infra_machine_wins_and_the_gone_one_reads_deleted() -> None:
    provisioned = {"type": "InfrastructureReady", "status": "True"}
    own = {"type": "Ready", "status": "False", "reason": "Deleting", "severity": "Info", "message": "instance terminating"}
    mirrored = {**own, "type": "InfrastructureReady"}
    infra_machine = {"metadata": {"name": "m-1"}, "status": {"ready": True, "conditions": [own]}}
    result = capi_v1beta1_conditions(
        [{**provisioned, "lastTransitionTime": S0}], Stage(STAGE_INFRASTRUCTURE, kind="FakeMachine", infra_machine=infra_machine), T1
    )
    assert {k: v for k, v in next(c for c in result if c["type"] == "InfrastructureReady").items() if k != "lastTransitionTime"} == mirrored
    # Once it is gone the stage says Deleted, whatever was mirrored before.
    result = capi_v1beta1_conditions(result, Stage(STAGE_BOOTSTRAP, kind="FakeBootstrapConfig"), T1)
    assert next(c for c in result if c["type"] == "InfrastructureReady")["reason"] == "Deleted"


def test_capi_v1beta1_a_provisioned_infra_machine_is_left_as_recorded() -> None:
    recorded = [{"type": "InfrastructureReady", "status": "True", "lastTransitionTime": S0}]
    result = capi_v1beta1_conditions(recorded, Stage(STAGE_DRAINING, message="Drain not completed yet"), T1)
    assert next(c for c in result if c["type"] == "InfrastructureReady") == recorded[0]


# -- row 32, v1beta2 ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stage", "provisioned", "expected"),
    [
        # Not read (the drain's writes): nothing said.
        (Stage(STAGE_DRAINING), True, None),
        # Read, no Ready condition of its own: from what the Machine records.
        (Stage(STAGE_INFRASTRUCTURE, infra_machine={}), True, ("True", "Ready", "")),
        (Stage(STAGE_INFRASTRUCTURE, infra_machine={}), False, ("False", "NotReady", "FakeMachine status.initialization.provisioned is false")),
        # Its own Ready (status.v1beta2.conditions first, else status.conditions) is mirrored, the provider's reason kept.
        (
            Stage(
                STAGE_INFRASTRUCTURE, infra_machine={"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Deleting", "message": "going"}]}}
            ),
            True,
            ("False", "Deleting", "going"),
        ),
        (
            Stage(
                STAGE_PRE_TERMINATE,
                infra_machine={
                    "status": {
                        "conditions": [{"type": "Ready", "status": "True"}],
                        "v1beta2": {"conditions": [{"type": "Ready", "status": "False", "reason": "X"}]},
                    }
                },
            ),
            True,
            ("False", "X", ""),
        ),
        (
            Stage(STAGE_INFRASTRUCTURE, infra_machine={"status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
            False,
            ("True", "Ready", ""),
        ),
        # Gone.
        (Stage(STAGE_BOOTSTRAP), True, ("False", "ObjectDeleted", "FakeMachine has been deleted")),
        (Stage(STAGE_COMPLETED), False, ("False", "ObjectDoesNotExist", "FakeMachine does not exist")),
        (Stage(STAGE_NODE_DELETE_FAILED), True, ("False", "ObjectDeleted", "FakeMachine has been deleted")),
        (None, True, None),
    ],
)
def test_capi_v1beta2_infrastructure_ready(stage, provisioned, expected) -> None:
    condition = capi_v1beta2_infrastructure_ready(stage, kind="FakeMachine", provisioned=provisioned)
    assert (None if condition is None else (condition["status"], condition["reason"], condition["message"])) == expected
