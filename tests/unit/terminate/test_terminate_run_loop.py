"""machine_terminate's run (_terminate/run.py) against the fake transport: the
observe -> decide -> act loop end to end, its waits on the fake clock, check
mode, the repeated-write guard, and failures that carry the partial result."""

from __future__ import annotations

import copy

import pytest
from fake_kube import FakeKube
from terminate_run_world import BOOTSTRAP, CAPI, INFRASTRUCTURE, NAME, NODE, NODE_PATH, NS, OPENSHIFT, World, conditions, steps

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.run import MAX_REPEATED_WRITES, TerminateRequest, terminate_machine

CAPI_FINALIZER = "machine.cluster.x-k8s.io"
OPENSHIFT_FINALIZER = "machine.machine.openshift.io"


def terminate(world: World, **options) -> dict:
    return terminate_machine(world.fake, TerminateRequest(namespace=NS, machine=NAME, **options))


def failure(world: World, **options) -> MachineError:
    with pytest.raises(MachineError) as caught:
        terminate(world, **options)
    return caught.value


# -- the request ---------------------------------------------------------------------


def test_the_request_is_read_from_the_module_parameters() -> None:
    params = {
        "machine": NAME,
        "namespace": NS,
        "api_version": None,
        "wait": True,
        "wait_timeout": 60,
        "wait_sleep": 1,
        "instance_terminated": True,
        "rules": None,
        "use_cluster_rules": False,
    }
    assert TerminateRequest.from_params(params, True) == TerminateRequest(
        namespace=NS, machine=NAME, wait=True, wait_timeout=60, wait_sleep=1, instance_terminated=True, use_cluster_rules=False, check_mode=True
    )


@pytest.mark.parametrize(("wait", "deadline"), [(True, 1000.0 + 30), (False, None)])
def test_the_transport_deadline_is_the_task_deadline_when_waiting(wait, deadline) -> None:
    world = World()
    terminate(world, wait=wait, wait_timeout=30)  # the Machine does not exist
    # The task's requests go through one fork of the transport, made with the task's deadline.
    assert [fork.deadline for fork in world.fake.forks] == [deadline]


def test_a_machine_that_is_gone_is_reported_as_terminated() -> None:
    result = terminate(World())
    assert (result["changed"], result["gone"], result["released"], result["steps"]) == (False, True, True, [])


# -- whole runs ----------------------------------------------------------------------------


def test_a_cluster_api_machine_goes_in_order_infrastructure_bootstrap_node_release() -> None:
    world = World()
    world.machine(infrastructure_finalizers=("example.com/hold",), bootstrap_finalizers=("example.com/hold",))
    world.go_when_watched(INFRASTRUCTURE)
    world.go_when_watched(BOOTSTRAP)

    result = terminate(world, wait=True)

    assert result["gone"] is True and result["released"] is True and result["changed"] is True
    assert [entry["status"] for entry in result["steps"]] == ["done"] * 8, result["steps"]
    assert result["actions"] == [
        "record the start of the volume detach wait",
        "record stage VolumesDetached",
        "record stage WaitingForInfrastructureDeletion",
        f"delete FakeMachine {NS}/{NAME}",
        "record stage WaitingForBootstrapDeletion",
        f"delete FakeBootstrapConfig {NS}/{NAME}",
        f"delete Node {NODE}",
        "record stage DeletionCompleted",
        f"remove finalizer {CAPI_FINALIZER}",
    ]
    deletes = [path for method, path in world.writes() if method == "DELETE"]
    assert deletes == [INFRASTRUCTURE, BOOTSTRAP, NODE_PATH], "the Node goes only once the bootstrap config is gone"
    for path in (INFRASTRUCTURE, BOOTSTRAP, NODE_PATH, world.path):
        assert world.stored(path) is None
    assert result["diff"]["before"][f"FakeMachine {NS}/{NAME}"] == {"exists": True}
    assert result["diff"]["after"] == {
        "machine": {"exists": False},
        f"FakeBootstrapConfig {NS}/{NAME}": {"exists": False},
        f"FakeMachine {NS}/{NAME}": {"exists": False},
        f"Node {NODE}": {"exists": False},
    }
    assert ("Normal", "NodeVolumesDetached", f'success waiting for node volumes detaching Machine\'s node "{NODE}"') in world.events()


def test_without_wait_the_run_stops_at_the_first_wait_and_a_second_run_continues() -> None:
    world = World()
    world.machine(infrastructure_finalizers=("example.com/hold",))
    first = terminate(world)
    assert first["next_step"] == "infrastructure"
    assert steps(first)["infrastructure"] == ("waiting", f"waiting for FakeMachine {NS}/{NAME} to be deleted (finalizers: example.com/hold)")
    assert conditions(world.stored(world.path))["Deleting"]["reason"] == "WaitingForInfrastructureDeletion"

    again = terminate(world)
    assert (again["changed"], again["actions"]) == (False, [])

    world.fake.finish(INFRASTRUCTURE)
    last = terminate(world)
    assert last["gone"] is True
    assert f"delete FakeMachine {NS}/{NAME}" not in last["actions"]


def test_openshift_stops_for_the_provider_tasks_then_resumes_with_instance_terminated() -> None:
    world = World(OPENSHIFT)
    world.machine()

    stopped = terminate(world, wait=True)
    assert stopped["awaiting_instance_termination"] is True
    assert steps(stopped)["instance"] == ("waiting", "the instance is terminated by provider tasks; run again with instance_terminated=true once they succeed")
    assert stopped["next_step"] == "instance"
    assert world.stored(NODE_PATH) is not None
    assert conditions(world.stored(world.path))["Terminable"]["status"] == "True"

    finished = terminate(world, wait=True, instance_terminated=True)
    assert finished["gone"] is True and finished["awaiting_instance_termination"] is False
    assert steps(finished)["instance"] == ("done", "the provider tasks reported the instance terminated (instance_terminated=true)")
    assert finished["actions"][-2:] == [f"delete Node {NODE}", f"remove finalizer {OPENSHIFT_FINALIZER}"]
    assert world.stored(NODE_PATH) is None and world.stored(world.path) is None


def test_a_volume_wait_polls_on_the_fake_clock_until_the_volume_detaches() -> None:
    world = World(OPENSHIFT)
    world.machine()
    attachment = world.volume("data")
    polls = []

    def detach_on_the_third_poll(method: str, path: str) -> None:
        if (method, path) == ("GET", "/apis/storage.k8s.io/v1/volumeattachments"):
            polls.append(world.fake.monotonic())
            if len(polls) == 3:
                world.fake.put(attachment, {**world.stored(attachment), "status": {"attached": False}})

    world.fake.on_request = detach_on_the_third_poll
    result = terminate(world, wait=True, wait_sleep=5)
    assert [later - polls[0] for later in polls] == [0, 5, 10]
    assert steps(result)["volume_detach"][0] == "done"
    assert result["timing"]["waited_seconds"] == 10.0
    assert result["actions"][:2] == ["record the start of the volume detach wait", "record stage WaitingForVolumeDetach"]


def test_a_cluster_api_run_records_the_volume_wait_start_once_with_nothing_attached() -> None:
    world = World()
    world.machine(hooks={"preTerminate": [("flush-logs", "log-shipper")]})
    first = terminate(world)
    assert first["actions"][0] == "record the start of the volume detach wait"
    assert steps(first)["volume_detach"] == ("done", "no volume is attached to the Node")
    started = world.stored(world.path)["status"]["deletion"]["waitForNodeVolumeDetachStartTime"]

    changes = len(world.fake.changes)
    again = terminate(world)
    assert "record the start of the volume detach wait" not in again["actions"]
    assert world.stored(world.path)["status"]["deletion"]["waitForNodeVolumeDetachStartTime"] == started
    assert len(world.fake.changes) == changes, "a later run writes nothing more"


def test_check_mode_records_no_volume_wait_start() -> None:
    world = World()
    world.machine(hooks={"preTerminate": [("flush-logs", "log-shipper")]})
    changes = len(world.fake.changes)
    result = terminate(world, check_mode=True)
    assert result["actions"][0] == "would record the start of the volume detach wait"
    assert result["next_step"] == "pre_terminate_hook"
    assert len(world.fake.changes) == changes, "check mode changed something"
    assert not (world.stored(world.path).get("status") or {}).get("deletion", {}).get("waitForNodeVolumeDetachStartTime")


def test_a_pre_terminate_wait_times_out_on_the_fake_clock() -> None:
    world = World()
    world.machine(hooks={"preTerminate": [("flush-logs", "log-shipper")]})
    started = world.fake.monotonic()
    error = failure(world, wait=True, wait_timeout=90)
    assert error.msg == (
        f"Timed out after 90s waiting at the preTerminate gate of Machine {NS}/{NAME} (Node {NODE}): "
        "blocked by preTerminate hooks: flush-logs (owner log-shipper)"
    )
    assert world.fake.monotonic() - started == 90
    assert error.result["timing"]["waited_seconds"] == 90.0
    assert error.result["blocked_by"] == [
        {"point": "preTerminate", "name": "flush-logs", "owner": "log-shipper", "annotation": "pre-terminate.delete.hook.machine.cluster.x-k8s.io/flush-logs"}
    ]
    assert error.result["next_step"] == "pre_terminate_hook"
    assert world.stored(INFRASTRUCTURE) is not None


def test_a_pre_terminate_wait_ends_when_the_hook_goes() -> None:
    world = World(OPENSHIFT)
    world.machine(hooks={"preTerminate": [("flush-logs", "log-shipper")]})

    def remove_hook_when_watched(method: str, path: str) -> None:
        if method == "GET" and path.endswith("/machines?watch"):
            machine = world.stored(world.path)
            machine["spec"]["lifecycleHooks"] = {}
            world.fake.put(world.path, machine)

    world.fake.on_request = remove_hook_when_watched
    result = terminate(world, wait=True)
    assert result["awaiting_instance_termination"] is True
    assert steps(result)["pre_terminate_hook"] == ("done", "no preTerminate hook")


# -- Node deletion ---------------------------------------------------------------------------


def test_a_node_deletion_that_keeps_failing_fails_the_task_with_the_result() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.fake.fail("DELETE", NODE_PATH, *[FakeKube.error(403, "this Node may not be deleted")] * 6)
    error = failure(world, instance_terminated=True)
    assert error.msg == f"Failed to delete Node {NODE} of Machine {NS}/{NAME}: this Node may not be deleted"
    assert steps(error.result)["node"] == ("blocked", f"deleting Node {NODE} failed: this Node may not be deleted")
    assert error.result["timing"]["elapsed_seconds"] == 10.0
    assert world.events()[-1] == ("Warning", "FailedDeleteNode", f"error deleting Machine's Node: error deleting node {NODE}: this Node may not be deleted")
    assert world.stored(world.path)["metadata"]["finalizers"] == [OPENSHIFT_FINALIZER]


def test_a_node_deletion_failing_past_the_node_deletion_timeout_is_given_up() -> None:
    world = World()
    world.machine(spec={"deletion": {"nodeDeletionTimeoutSeconds": 60}}, deleted_ago=120)
    world.fake.fail("DELETE", NODE_PATH, *[FakeKube.error(403, "this Node may not be deleted")] * 6)
    result = terminate(world, wait=True)
    assert result["gone"] is True
    status, reason = steps(result)["node"]
    assert status == "skipped" and "the node deletion timeout of 60s since the Machine's deletionTimestamp has passed" in reason
    assert f"give up deleting Node {NODE}" in result["actions"]
    assert ("Warning", "FailedDeleteNode", f"error deleting Machine's Node: error deleting node {NODE}: this Node may not be deleted") in world.events()
    assert world.stored(NODE_PATH) is not None


def test_a_node_deletion_that_recovers_within_the_retries_goes_on() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.fake.fail("DELETE", NODE_PATH, FakeKube.error(500, "etcd hiccup"))
    result = terminate(world, instance_terminated=True)
    assert result["gone"] is True
    assert result["timing"]["elapsed_seconds"] == 2.0
    assert not any(reason == "FailedDeleteNode" for _type, reason, _message in world.events())


# -- release ---------------------------------------------------------------------------------


def test_release_keeps_other_finalizers_and_a_wait_names_them() -> None:
    world = World(OPENSHIFT)
    world.machine(finalizers=[OPENSHIFT_FINALIZER, "example.com/keep"])
    result = terminate(world, instance_terminated=True)
    assert (result["released"], result["gone"], result["next_step"]) == (True, False, None)
    assert result["machine"]["finalizers"] == ["example.com/keep"]
    assert steps(result)["release"] == ("done", f"finalizer {OPENSHIFT_FINALIZER} removed; finalizers still hold the Machine: example.com/keep")

    error = failure(world, instance_terminated=True, wait=True, wait_timeout=5)
    assert error.msg == f"Timed out after 5s: Machine {NS}/{NAME} was released but is still held by finalizers: example.com/keep"
    assert error.result["changed"] is False
    assert world.stored(world.path)["metadata"]["finalizers"] == ["example.com/keep"]


# -- check mode ---------------------------------------------------------------------------------


def test_check_mode_tries_the_next_write_as_a_dry_run_and_writes_nothing() -> None:
    world = World()
    world.machine()
    changes = len(world.fake.changes)
    result = terminate(world, check_mode=True, wait=True)
    assert len(world.fake.changes) == changes, "check mode changed something"
    assert result["actions"] == [
        "would record the start of the volume detach wait",
        "would record stage VolumesDetached",
        "would record stage WaitingForInfrastructureDeletion",
        f"would delete FakeMachine {NS}/{NAME}",
    ]
    assert ("DELETE", INFRASTRUCTURE) in world.writes(), "the delete was tried as a dry run"
    assert ("DELETE", BOOTSTRAP) not in world.writes() and ("DELETE", NODE_PATH) not in world.writes()
    assert result["next_step"] == "infrastructure"
    assert result["diff"]["after"][f"FakeMachine {NS}/{NAME}"] == {"exists": False}
    assert world.events() == []


def test_check_mode_release_shows_the_finalizer_gone() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.fake.finish(NODE_PATH)
    result = terminate(world, check_mode=True, instance_terminated=True)
    assert result["actions"][-1] == f"would remove finalizer {OPENSHIFT_FINALIZER}"
    assert result["diff"]["after"]["machine"]["finalizers"] == []
    assert world.stored(world.path)["metadata"]["finalizers"] == [OPENSHIFT_FINALIZER]


def test_check_mode_reports_a_node_deletion_that_would_fail() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.fake.fail("DELETE", NODE_PATH, FakeKube.error(403, "denied"))
    result = terminate(world, check_mode=True, instance_terminated=True)
    assert steps(result)["node"] == ("blocked", f"deleting Node {NODE} would fail: denied")
    assert world.stored(NODE_PATH) is not None


# -- guards and failures ---------------------------------------------------------------------------


def test_a_write_that_keeps_not_taking_effect_stops_the_run() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.fake.delete(NODE_PATH)  # nothing left but the release
    patch = world.fake.patch

    def finalizer_put_back(path: str, body, **options) -> dict:
        """Something (a mutating webhook, say) puts the finalizer back as it is removed: the answer shows it still there."""
        answer = patch(path, body, **options)
        if path.endswith(f"/machines/{NAME}"):
            answer = copy.deepcopy(answer)
            answer["metadata"]["finalizers"] = [OPENSHIFT_FINALIZER]
            answer = world.fake.put(path, answer)
        return answer

    world.fake.patch = finalizer_put_back
    error = failure(world, instance_terminated=True)
    assert error.msg == f"Machine {NS}/{NAME}: release did not take effect after {MAX_REPEATED_WRITES} attempts"
    assert error.result["actions"].count(f"remove finalizer {OPENSHIFT_FINALIZER}") == MAX_REPEATED_WRITES


def test_an_api_error_mid_run_fails_with_the_partial_result() -> None:
    world = World()
    world.machine()
    world.fake.fail("DELETE", INFRASTRUCTURE, FakeKube.error(403, "fakemachines is forbidden"))
    error = failure(world)
    assert error.msg == f"Kubernetes API error: DELETE fakemachines {NS}/{NAME}: 403 fakemachines is forbidden"
    assert error.result["status"] == 403
    assert error.result["changed"] is True
    assert error.result["actions"] == [
        "record the start of the volume detach wait",
        "record stage VolumesDetached",
        "record stage WaitingForInfrastructureDeletion",
    ]
    assert error.result["next_step"] == "infrastructure"
    assert steps(error.result)["volume_detach"][0] == "done"
    assert "diff" in error.result and error.result["machine"]["exists"] is True


def test_an_api_error_that_outlasted_the_deadline_is_a_timeout() -> None:
    world = World()
    world.machine()
    error = FakeKube.error(503, "etcdserver: request timed out")
    error.out_of_time = True  # the transport was still retrying when the task's deadline came
    world.fake.fail("DELETE", INFRASTRUCTURE, error)
    failed = failure(world)
    assert failed.msg.startswith("Kubernetes API error: ")
    assert failed.result["timed_out"] is True and failed.result["status"] == 503


def test_an_api_error_that_is_not_about_time_is_no_timeout() -> None:
    world = World()
    world.machine()
    world.fake.fail("DELETE", INFRASTRUCTURE, FakeKube.error(503, "etcdserver: request timed out"))
    assert "timed_out" not in failure(world).result


def test_an_api_error_between_two_stage_writes_keeps_the_first() -> None:
    world = World()
    world.machine()
    status = f"{world.path}/status"
    patches = []

    def refuse_the_second_stage_write(method: str, path: str) -> None:
        # The first status patch records, as one Cluster API reconcile, the volume wait's start, its end and
        # WaitingForInfrastructureDeletion; the second, after the InfraMachine is gone, WaitingForBootstrapDeletion.
        if (method, path) == ("PATCH", status):
            patches.append(path)
            if len(patches) == 2:
                world.fake.fail("PATCH", status, FakeKube.error(422, "invalid"))

    world.fake.on_request = refuse_the_second_stage_write
    error = failure(world)
    assert error.msg == f"Kubernetes API error: PATCH status of Machine {NS}/{NAME}: 422 invalid"
    assert error.result["actions"] == [
        "record the start of the volume detach wait",
        "record stage VolumesDetached",
        "record stage WaitingForInfrastructureDeletion",
        f"delete FakeMachine {NS}/{NAME}",
    ]
    assert any(c["type"] == "VolumeDetachSucceeded" for c in error.result["diff"]["after"]["machine"]["conditions"])


def test_an_api_error_reading_the_machine_fails_with_what_is_known() -> None:
    world = World()
    world.machine()
    world.fake.fail("GET", world.path, FakeKube.error(503, "etcdserver: request timed out"))
    error = failure(world)
    assert error.msg == f"Kubernetes API error: GET Machine {NS}/{NAME}: 503 etcdserver: request timed out"
    assert error.result == {
        "status": 503,
        "changed": False,
        "machine": {"name": NAME, "namespace": NS, "api_version": None},
        "steps": [],
        "actions": [],
    }


def test_a_domain_error_deep_in_the_run_carries_the_result() -> None:
    world = World()
    world.machine()
    world.fake.finish(f"/apis/{CAPI}/namespaces/{NS}/clusters/c-1")
    error = failure(world)
    assert error.msg == f"Cluster {NS}/c-1 of Machine {NS}/{NAME} not found"
    assert error.result["changed"] is False and error.result["steps"] == []


def test_a_cancelled_run_fails_with_the_partial_result() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.volume("data")

    def cancel_once_waiting(method: str, path: str) -> None:
        if method == "PATCH" and path.endswith("/status"):
            world.fake.cancel()

    world.fake.on_request = cancel_once_waiting
    error = failure(world, wait=True)
    assert error.msg == "Cancelled: the run was cancelled"
    assert error.result["actions"] == ["record the start of the volume detach wait", "record stage WaitingForVolumeDetach"]
    assert error.result["volumes"]["pvcs"] == [f"{NS}/data"]
    assert steps(error.result)["volume_detach"][0] == "waiting"
