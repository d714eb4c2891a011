"""What holds a termination where decide() stopped it (pure)."""

from __future__ import annotations

from test_terminate_logic import DELETED_AT, PRESENT, WAITING_FOR_CLAIM, facts, machine

from ansible_collections.lifecycle.machine.plugins.module_utils._machine.blockers import CLEARS, NEEDS_ACTION
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.logic import decide
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.stalls import node_deletion_blocker, terminate_blockers
from ansible_collections.lifecycle.machine.plugins.module_utils._timeutil import rfc3339


def blockers_of(m: dict, **extra) -> list:
    f = facts(m, **extra)
    return terminate_blockers(decide(f, flavour_for(m)), f, flavour_for(m))


def test_pre_terminate_hooks_with_the_time_cluster_api_records() -> None:
    started = rfc3339(DELETED_AT)
    m = machine("v1beta2", hooks={"preTerminate": [("flush-logs", "log-shipper")]}, status={"deletion": {"waitForPreTerminateHookStartTime": started}})
    [hook] = blockers_of(m, infrastructure=PRESENT)
    assert (hook.phase, hook.kind, hook.verdict, hook.since) == ("preTerminate hook", "hook", NEEDS_ACTION, started)
    assert hook.evidence["owner"] == "log-shipper" and hook.object == "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush-logs"


def test_pre_drain_hooks_and_an_unfinished_drain_are_refusals() -> None:
    [hook] = blockers_of(machine("openshift", hooks={"preDrain": [("quorum", "etcd")]}))
    assert (hook.phase, hook.object, hook.since) == ("preDrain hook", "quorum", None)
    [drain] = blockers_of(machine("openshift", drained=False))
    assert (drain.kind, drain.verdict, drain.object) == ("drain unfinished", NEEDS_ACTION, "Node worker-1")


def test_attached_volumes_clear_by_themselves() -> None:
    m = machine("v1beta2", status={"deletion": {"waitForNodeVolumeDetachStartTime": rfc3339(DELETED_AT)}})
    [volume] = blockers_of(m, infrastructure=PRESENT, volumes=WAITING_FOR_CLAIM)
    assert (volume.kind, volume.object, volume.verdict, volume.since) == ("volume attachment", "PersistentVolumeClaim ns/data", CLEARS, rfc3339(DELETED_AT))


def test_an_infrastructure_object_kept_by_finalizers() -> None:
    held = ObjectState(exists=True, deleting=True, finalizers=("infrastructure.example.com/vm",))
    [infra] = blockers_of(machine("v1beta2"), infrastructure=held)
    assert (infra.kind, infra.object, infra.evidence) == ("infrastructure finalizer", "FakeMachine ns/m-1", {"finalizers": ["infrastructure.example.com/vm"]})
    assert infra.since is None, "not read being deleted: no time to say"
    read = {"metadata": {"name": "m-1", "deletionTimestamp": rfc3339(DELETED_AT), "finalizers": ["infrastructure.example.com/vm"]}}
    deleting = ObjectState(exists=True, deleting=True, finalizers=("infrastructure.example.com/vm",), obj=read)
    [infra] = blockers_of(machine("v1beta2"), infrastructure=deleting)
    assert infra.since == rfc3339(DELETED_AT), "since its deletion was asked for"


def test_openshift_waits_for_provider_tasks_and_a_node_deletion_error_needs_someone() -> None:
    [instance] = blockers_of(machine("openshift"))
    assert (instance.kind, instance.verdict) == ("instance", NEEDS_ACTION)
    node = node_deletion_blocker("worker-1", "deleting Node worker-1 failed: forbidden")
    assert (node.phase, node.kind, node.object) == ("node", "node deletion error", "Node worker-1")


def test_nothing_holds_a_finished_termination() -> None:
    assert blockers_of(machine("v1beta2", finalizers=[]), instance_terminated=True) == []
