"""Issue 29: a Cluster API Machine's status writes grouped as Cluster API v1.14.2's Machine
controller groups them. One reconcile goes on from the drain's end through the volume wait
to deleting the InfraMachine and patches once, at its end; a volume wait that has to wait
ends the reconcile (its own patch), and the reconcile that finds the volumes detached writes
their end with WaitingForInfrastructureDeletion. OpenShift Machines keep a write per step."""

from __future__ import annotations

import copy

from terminate_run_world import INFRASTRUCTURE, NAME, NODE, NS, OPENSHIFT, World, conditions

from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.run import TerminateRequest, terminate_machine


def terminate(world: World, **options) -> dict:
    return terminate_machine(world.fake, TerminateRequest(namespace=NS, machine=NAME, **options))


def status_patches(world: World) -> list[dict]:
    """The body of every status write, in order."""
    sent: list[dict] = []
    patch = world.fake.patch

    def recording(path, body, *args, **kwargs):
        if kwargs.get("subresource_status"):
            sent.append(copy.deepcopy(body))
        return patch(path, body, *args, **kwargs)

    world.fake.patch = recording
    return sent


def deleting(patch: dict) -> str | None:
    """The v1beta2 Deleting condition's reason a status patch writes."""
    found = [c for c in (patch.get("status") or {}).get("conditions") or [] if c["type"] == "Deleting"]
    return found[0]["reason"] if found else None


def v1beta1(patch: dict, kind: str) -> tuple[str, str] | None:
    found = [c for c in ((patch.get("status") or {}).get("deprecated") or {}).get("v1beta1", {}).get("conditions") or [] if c["type"] == kind]
    return (found[0]["status"], found[0].get("reason", "")) if found else None


def deletion(patch: dict) -> dict:
    return (patch.get("status") or {}).get("deletion") or {}


def test_nothing_attached_the_volume_wait_and_the_infrastructure_deletion_are_one_write() -> None:
    world = World()
    world.machine(infrastructure_finalizers=("example.com/hold",))
    sent = status_patches(world)
    terminate(world)  # stops at the wait for the InfraMachine
    assert len(sent) == 1, sent
    (write,) = sent
    assert "waitForNodeVolumeDetachStartTime" in deletion(write)
    assert v1beta1(write, "VolumeDetachSucceeded") == ("True", "")
    assert deleting(write) == "WaitingForInfrastructureDeletion"
    assert write["metadata"]["resourceVersion"], "guarded by the resourceVersion"
    # The order of the writes: the status first (as the controller's stage), then the InfraMachine's deletion.
    writes = [write for write in world.writes() if not write[1].endswith("/events")]
    assert writes[0] == ("PATCH", f"{world.path}/status") and writes[1] == ("DELETE", INFRASTRUCTURE)
    machine = world.stored(world.path)
    assert conditions(machine)["Deleting"]["reason"] == "WaitingForInfrastructureDeletion"
    assert conditions(machine)["v1beta1/VolumeDetachSucceeded"]["status"] == "True"


def test_a_whole_deletion_writes_one_status_patch_per_reconcile_upstream_ends() -> None:
    world = World()
    world.machine(infrastructure_finalizers=("example.com/hold",), bootstrap_finalizers=("example.com/hold",))
    world.go_when_watched(INFRASTRUCTURE)
    world.go_when_watched(f"/apis/bootstrap.cluster.x-k8s.io/v1beta1/namespaces/{NS}/fakebootstrapconfigs/{NAME}")
    sent = status_patches(world)
    result = terminate(world, wait=True)
    assert result["gone"] is True
    # WaitingForInfrastructureDeletion (with the volume wait), WaitingForBootstrapDeletion, DeletionCompleted.
    assert [deleting(write) for write in sent] == ["WaitingForInfrastructureDeletion", "WaitingForBootstrapDeletion", "DeletionCompleted"]
    assert ("Normal", "NodeVolumesDetached", f'success waiting for node volumes detaching Machine\'s node "{NODE}"') in world.events()


def test_a_volume_wait_that_waits_writes_its_start_with_its_stage_then_its_end_with_the_next_stage() -> None:
    world = World()
    world.machine()
    attachment = world.volume("data")
    world.pod("web-0", "data")
    sent = status_patches(world)
    polls = []

    def detach_on_the_second_poll(method: str, path: str) -> None:
        if (method, path) == ("GET", "/apis/storage.k8s.io/v1/volumeattachments"):
            polls.append(path)
            if len(polls) == 2:
                world.fake.put(attachment, {**world.stored(attachment), "status": {"attached": False}})

    world.fake.on_request = detach_on_the_second_poll
    assert terminate(world, wait=True, wait_sleep=5)["gone"] is True
    first, second = sent[:2]
    # The reconcile that starts the wait: its start, VolumeDetachSucceeded False and WaitingForVolumeDetach.
    assert "waitForNodeVolumeDetachStartTime" in deletion(first)
    assert v1beta1(first, "VolumeDetachSucceeded") == ("False", "WaitingForVolumeDetach")
    assert deleting(first) == "WaitingForVolumeDetach"
    # The reconcile that finds them detached: their end with WaitingForInfrastructureDeletion, the start not written again.
    assert deletion(second) == {}
    assert v1beta1(second, "VolumeDetachSucceeded") == ("True", "")
    assert deleting(second) == "WaitingForInfrastructureDeletion"
    assert [deleting(write) for write in sent[2:]] == ["WaitingForBootstrapDeletion", "DeletionCompleted"]


def test_the_pre_terminate_gate_is_recorded_with_the_volume_wait_in_one_write() -> None:
    world = World()
    world.machine(hooks={"preTerminate": [("flush-logs", "log-shipper")]})
    sent = status_patches(world)
    result = terminate(world)
    assert result["next_step"] == "pre_terminate_hook"
    assert len(sent) == 1, sent
    (write,) = sent
    assert set(deletion(write)) == {"waitForNodeVolumeDetachStartTime", "waitForPreTerminateHookStartTime"}
    assert v1beta1(write, "VolumeDetachSucceeded") == ("True", "")
    assert v1beta1(write, "PreTerminateDeleteHookSucceeded") == ("False", "WaitingExternalHook")
    assert deleting(write) == "WaitingForPreTerminateHook"
    assert result["actions"] == [
        "record the start of the volume detach wait",
        "record the start of the wait for preTerminate hooks",
        "record stage VolumesDetached",
        "record stage WaitingForPreTerminateHook",
    ]


def test_a_conflict_rebuilds_the_write_and_another_writers_start_time_wins() -> None:
    world = World()
    world.machine(infrastructure_finalizers=("example.com/hold",))
    theirs = "2020-01-01T00:00:00Z"
    sent = status_patches(world)
    status = f"{world.path}/status"
    conflicts = []

    def someone_writes_first(method: str, path: str) -> None:
        if (method, path) == ("PATCH", status) and not conflicts:
            conflicts.append(path)
            machine = world.stored(world.path)
            machine["status"].setdefault("deletion", {})["waitForNodeVolumeDetachStartTime"] = theirs
            world.fake.put(world.path, machine)  # a new resourceVersion: our write gets a 409

    world.fake.on_request = someone_writes_first
    terminate(world)
    assert "waitForNodeVolumeDetachStartTime" in deletion(sent[0])
    assert "waitForNodeVolumeDetachStartTime" not in deletion(sent[-1]), "the rebuilt write leaves their time"
    assert world.stored(world.path)["status"]["deletion"]["waitForNodeVolumeDetachStartTime"] == theirs
    assert conditions(world.stored(world.path))["Deleting"]["reason"] == "WaitingForInfrastructureDeletion"


def test_check_mode_keeps_its_dry_runs_step_by_step() -> None:
    world = World()
    world.machine()
    changes = len(world.fake.changes)
    result = terminate(world, check_mode=True)
    assert result["actions"][0] == "would record the start of the volume detach wait"
    assert len(world.fake.changes) == changes


def test_an_openshift_machine_keeps_a_write_per_step() -> None:
    world = World(OPENSHIFT)
    world.machine()
    world.volume("data")
    world.pod("web-0", "data")
    result = terminate(world)
    # Its controller is not Cluster API's: the volume wait's start and its stage are written one by one, as before.
    assert result["actions"][:2] == ["record the start of the volume detach wait", "record stage WaitingForVolumeDetach"]
    patches = [write for write in world.writes() if write[0] == "PATCH"]
    assert len(patches) == 2, patches
