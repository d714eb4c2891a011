"""machine_terminate's API side (_terminate/api.py) against the fake transport:
what it observes (the Node, the skip reason, volumes, referenced objects) and
what it writes (stages and Events, the volume-wait start, Node deletion with
upstream's retries, the release of the finalizer)."""

from __future__ import annotations

import pytest
from fake_kube import FakeKube
from terminate_run_world import BOOTSTRAP, CAPI, INFRASTRUCTURE, NODE, NODE_PATH, NS, OPENSHIFT, World, conditions

from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.conditions import STAGE_VOLUMES_DETACHED, Stage
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.deletion import ObjectState
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import ObjectRef, flavour_for
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate import api as terminate_api
from ansible_collections.lifecycle.machine.plugins.module_utils._terminate.volumes import SKIP_NODE_GONE, SKIP_NODE_UNREACHABLE


def observer(world: World, machine: dict, **options) -> terminate_api.VolumeObserver:
    return terminate_api.VolumeObserver(world.fake, flavour_for(machine), **options)


# -- observing ---------------------------------------------------------------------


def test_observe_reads_the_node_and_the_cluster_api_skip_reason() -> None:
    world = World()
    machine = world.machine()
    facts = terminate_api.observe(world.fake, machine, flavour_for(machine), instance_terminated=True, node_abandoned="why")
    assert facts.node["metadata"]["name"] == NODE
    assert facts.skip_reason is None
    assert (facts.instance_terminated, facts.node_deletion_abandoned) == (True, "why")

    world.fake.finish(f"/apis/{CAPI}/namespaces/{NS}/machines/cp-1")  # no active control-plane Machine left
    world.fake.finish(NODE_PATH)
    facts = terminate_api.observe(world.fake, machine, flavour_for(machine))
    assert facts.node is None
    assert facts.skip_reason == f"no active control plane Machine is left in Cluster {NS}/c-1"


def test_observe_a_gone_machine_reads_nothing() -> None:
    world = World()
    facts = terminate_api.observe(world.fake, None, flavour_for(CAPI))
    assert facts.machine is None and world.fake.requests == []


def test_attached_volumes_are_waited_for() -> None:
    world = World()
    machine = world.machine()
    world.volume("data")
    status = observer(world, machine).observe(machine, world.stored(NODE_PATH))
    assert status.waiting and status.pvcs == [f"{NS}/data"]
    assert status.ignored_pvcs == []


def test_detached_volumes_need_no_persistent_volume_read() -> None:
    world = World()
    machine = world.machine()
    world.volume("data", attached=False)
    status = observer(world, machine).observe(machine, world.stored(NODE_PATH))
    assert not status.waiting and status.skipped is None
    assert ("GET", "/api/v1/persistentvolumes") not in world.fake.requests


def test_node_status_volumes_attached_is_read_too() -> None:
    world = World()
    machine = world.machine()
    world.volume("logs", attached=False)
    node = world.node(volumes_attached=["kubernetes.io/csi/csi.example.com^handle-logs"])
    assert observer(world, machine).observe(machine, node).pvcs == [f"{NS}/logs"]


def test_claims_of_pods_the_drain_skips_are_ignored() -> None:
    world = World()
    machine = world.machine()
    for claim in ("cache", "scratch", "data"):
        world.volume(claim)
    world.pod("uses-cache", "cache", labels={"cluster.x-k8s.io/drain": "skip"})
    world.pod("uses-scratch", "scratch", labels={"app": "local-cache"})
    world.pod("uses-data", "data")
    rule = {"name": "skip-local-cache", "drain": {"behavior": "Skip"}, "pods": [{"selector": {"matchLabels": {"app": "local-cache"}}}]}

    status = observer(world, machine).observe(machine, world.stored(NODE_PATH))
    assert (status.pvcs, status.ignored_pvcs) == ([f"{NS}/data", f"{NS}/scratch"], [f"{NS}/cache"])
    status = observer(world, machine, rules=[rule], use_cluster_rules=False).observe(machine, world.stored(NODE_PATH))
    assert (status.pvcs, status.ignored_pvcs) == ([f"{NS}/data"], [f"{NS}/cache", f"{NS}/scratch"])


def test_the_drain_rules_and_the_cluster_are_read_once_per_run() -> None:
    world = World()
    machine = world.machine()
    world.volume("data")
    world.pod("uses-data", "data")
    volumes = observer(world, machine)
    for _pass in range(3):
        volumes.observe(machine, world.stored(NODE_PATH))
    assert world.fake.requests.count(("GET", f"/apis/{CAPI}/namespaces/{NS}/clusters/c-1")) == 1


@pytest.mark.parametrize(("node", "skipped"), [(None, SKIP_NODE_GONE), ("unreachable", SKIP_NODE_UNREACHABLE)])
def test_no_volume_wait_without_a_reachable_node(node, skipped) -> None:
    world = World()
    machine = world.machine()
    world.volume("data")
    node_object = world.node(ready="Unknown") if node else None
    world.fake.requests.clear()
    assert observer(world, machine).observe(machine, node_object).skipped == skipped
    assert world.fake.requests == []


def test_referenced_objects_are_found_through_discovery_once() -> None:
    world = World()
    machine = world.machine(infrastructure_finalizers=("example.com/hold",))
    flavour = flavour_for(machine)
    objects = terminate_api.ReferencedObjects(world.fake)
    infrastructure = flavour.infrastructure_ref(machine)
    assert objects.path(infrastructure) == INFRASTRUCTURE
    assert objects.path(flavour.bootstrap_ref(machine)) == BOOTSTRAP
    assert objects.state(infrastructure) == ObjectState(exists=True, finalizers=("example.com/hold",))
    # The answer to the DELETE says what became of it: held by its finalizer.
    assert objects.delete(infrastructure) == (True, ObjectState(exists=True, deleting=True, finalizers=("example.com/hold",)))
    assert objects.state(infrastructure) == ObjectState(exists=True, deleting=True, finalizers=("example.com/hold",))
    world.fake.finish(INFRASTRUCTURE)
    assert objects.state(infrastructure) == ObjectState(exists=False)
    assert objects.delete(infrastructure) == (False, ObjectState(exists=False))


def test_a_reference_to_an_unserved_kind_fails_clearly() -> None:
    world = World()
    objects = terminate_api.ReferencedObjects(world.fake)
    with pytest.raises(MachineError, match=r"^The cluster serves no API group example\.com \(for Thing ns/t\)$"):
        objects.path(ObjectRef(kind="Thing", name="t", namespace=NS, api_group="example.com"))


# -- acting ------------------------------------------------------------------------------


def test_a_stage_is_recorded_once_with_the_volumes_detached_event() -> None:
    world = World()
    machine = world.machine()
    flavour = flavour_for(machine)
    machine, written = terminate_api.record_stage(world.fake, machine, flavour, Stage(STAGE_VOLUMES_DETACHED))
    assert written == "record stage VolumesDetached"
    assert world.events() == [("Normal", "NodeVolumesDetached", f'success waiting for node volumes detaching Machine\'s node "{NODE}"')]
    assert conditions(world.stored(world.path))["v1beta1/VolumeDetachSucceeded"]["status"] == "True"
    _machine, written = terminate_api.record_stage(world.fake, machine, flavour, Stage(STAGE_VOLUMES_DETACHED))
    assert written is None and len(world.events()) == 1


def test_a_stage_recorded_as_a_dry_run_writes_nothing() -> None:
    world = World()
    machine = world.machine()
    changes = len(world.fake.changes)
    _machine, written = terminate_api.record_stage(world.fake, machine, flavour_for(machine), Stage(STAGE_VOLUMES_DETACHED), dry_run=True)
    assert written == "record stage VolumesDetached"
    assert len(world.fake.changes) == changes and world.events() == []


@pytest.mark.parametrize("api_version", [CAPI, OPENSHIFT])
def test_the_volume_wait_start_is_recorded_once(api_version) -> None:
    world = World(api_version)
    stale = world.machine()
    flavour = flavour_for(stale)
    _machine, written = terminate_api.record_volume_start(world.fake, stale, flavour)
    assert written == ["record the start of the volume detach wait"]
    started = flavour.volume_detach_started_at(world.stored(world.path))
    assert started is not None
    # A run that still holds the Machine from before (a stale resourceVersion) re-reads it and writes nothing.
    _machine, written = terminate_api.record_volume_start(world.fake, stale, flavour)
    assert written == [] and flavour.volume_detach_started_at(world.stored(world.path)) == started


def test_node_deletion_is_retried_for_ten_seconds_on_the_transport_clock() -> None:
    world = World()
    machine = world.machine()
    world.fake.fail("DELETE", NODE_PATH, FakeKube.error(500, "etcd hiccup"), FakeKube.error(500, "etcd hiccup"))
    started = world.fake.monotonic()
    outcome = terminate_api.delete_node(world.fake, machine, flavour_for(machine))
    assert (outcome.error, outcome.abandoned, outcome.written) == (None, None, [])
    assert world.fake.monotonic() - started == 4
    assert world.fake.requests.count(("DELETE", NODE_PATH)) == 3
    assert world.stored(NODE_PATH) is None and world.events() == []


@pytest.mark.parametrize(("timeout", "abandoned"), [(3600, False), (10, True)])
def test_a_failing_node_deletion_is_recorded_then_given_up_past_the_timeout(timeout, abandoned) -> None:
    world = World()
    machine = world.machine(spec={"deletion": {"nodeDeletionTimeoutSeconds": timeout}})
    world.fake.fail("DELETE", NODE_PATH, *[FakeKube.error(403, "this Node may not be deleted")] * 10)
    started = world.fake.monotonic()
    outcome = terminate_api.delete_node(world.fake, machine, flavour_for(machine))
    assert world.fake.monotonic() - started == 10
    assert world.fake.requests.count(("DELETE", NODE_PATH)) == 6
    assert outcome.error == "this Node may not be deleted"
    assert outcome.written == ["record stage NodeDeletionFailed"]
    assert world.events() == [("Warning", "FailedDeleteNode", f"error deleting Machine's Node: error deleting node {NODE}: this Node may not be deleted")]
    found = conditions(world.stored(world.path))
    assert (found["Deleting"]["reason"], found["Deleting"]["message"]) == ("DeletingNode", "Error deleting Node, please check controller logs for errors")
    assert (found["v1beta1/NodeHealthy"]["status"], found["v1beta1/NodeHealthy"]["reason"]) == ("False", "DeletionFailed")
    if abandoned:
        assert outcome.abandoned == (
            f"deleting Node {NODE} failed (this Node may not be deleted) and the node deletion timeout of 10s "
            "since the Machine's deletionTimestamp has passed: going on without deleting it"
        )
    else:
        assert outcome.abandoned is None
    assert world.stored(NODE_PATH) is not None


def test_a_dry_run_node_deletion_names_why_it_would_fail() -> None:
    world = World()
    world.machine()
    assert terminate_api.dry_run_delete_node(world.fake, NODE) is None
    world.fake.fail("DELETE", NODE_PATH, FakeKube.error(403, "denied"))
    assert terminate_api.dry_run_delete_node(world.fake, NODE) == "denied"
    assert world.stored(NODE_PATH) is not None


def test_release_removes_only_our_finalizer() -> None:
    world = World()
    machine = world.machine(finalizers=["example.com/first", "machine.cluster.x-k8s.io", "example.com/keep"])
    released, sent = terminate_api.release(world.fake, machine, "machine.cluster.x-k8s.io")
    assert sent is True
    assert released["metadata"]["finalizers"] == ["example.com/first", "example.com/keep"]
    assert world.stored(world.path)["metadata"]["finalizers"] == ["example.com/first", "example.com/keep"]
    again, sent = terminate_api.release(world.fake, released, "machine.cluster.x-k8s.io")
    assert sent is False and again["metadata"]["finalizers"] == ["example.com/first", "example.com/keep"]


def test_release_of_the_last_finalizer_lets_the_machine_go() -> None:
    world = World()
    machine = world.machine()
    assert terminate_api.release(world.fake, machine, "machine.cluster.x-k8s.io", dry_run=True)[1] is True
    assert world.stored(world.path) is not None
    terminate_api.release(world.fake, machine, "machine.cluster.x-k8s.io")
    assert world.stored(world.path) is None
    world.fake.fail("PATCH", world.path, FakeKube.error(404, "gone"))
    assert terminate_api.release(world.fake, machine, "machine.cluster.x-k8s.io") == (None, False)
