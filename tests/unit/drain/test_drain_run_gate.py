"""The drain's gate against the fake transport: the preDrain gate held,
opened and timed out (on the fake clock), the skip reasons, and the pure
decisions behind them."""

from __future__ import annotations

import datetime as dt

import pytest
from drain_run_helpers import CAPI_V2, INFRA_V1, NODE, NS, OPENSHIFT_V, capi_machine, iso, machine_path, openshift_machine
from fake_kube import FakeKube

from ansible_collections.lifecycle.machine.plugins.module_utils._drain.gates import drain_skip_reason, drain_timeout_left, pre_drain_hooks
from ansible_collections.lifecycle.machine.plugins.module_utils._drain.run import DrainGate
from ansible_collections.lifecycle.machine.plugins.module_utils._errors import MachineError
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.cache import Cache
from ansible_collections.lifecycle.machine.plugins.module_utils._k8s.informer import Informer
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.api import DeletionRecorder
from ansible_collections.lifecycle.machine.plugins.module_utils._machine.flavour import flavour_for

MACHINE = machine_path()
HOOK_TEXT = "quorum-guard (owner etcd)"


def gate_for(fake: FakeKube, machine: dict, *, wait: bool = True, timeout: int = 30, dry_run: bool = False) -> DrainGate:
    recorder = DeletionRecorder(fake, machine, flavour_for(machine), dry_run=dry_run)
    return DrainGate(fake, recorder, wait=wait, wait_timeout=timeout, deadline=fake.monotonic() + timeout)


def drainable(fake: FakeKube) -> dict | None:
    conditions = fake.objects[MACHINE].get("status", {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Drainable"), None)


# -- the preDrain gate ------------------------------------------------------------


def test_open_gate_returns_at_once_and_writes_nothing() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake))
    before = len(fake.changes)
    assert gate.pre_drain() == []
    assert len(fake.changes) == before and fake.request_count == 0


def test_held_gate_without_waiting_reports_the_hooks_and_records_them() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, hooks=[("quorum-guard", "etcd")]), wait=False)
    hooks = gate.pre_drain()
    assert [(hook.name, hook.owner) for hook in hooks] == [("quorum-guard", "etcd")]
    condition = drainable(fake)
    assert (condition["status"], condition["reason"]) == ("False", "HookPresent")
    assert condition["message"] == "Drain operation currently blocked by: [{Name:quorum-guard Owner:etcd}]"
    assert gate.recorder.changed and gate.recorder.machine["status"]["conditions"] == fake.objects[MACHINE]["status"]["conditions"]


def test_held_gate_in_a_dry_run_writes_nothing() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, hooks=[("quorum-guard", "etcd")]), wait=False, dry_run=True)
    before = len(fake.changes)
    assert len(gate.pre_drain()) == 1
    assert len(fake.changes) == before and drainable(fake) is None
    assert gate.recorder.changed, "a dry run says what it would write"


def test_gate_opens_when_the_hook_is_removed_while_waiting() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, hooks=[("quorum-guard", "etcd")]))

    def remove_hook(method: str, path: str) -> None:
        if method == "GET" and path.endswith("/machines?watch"):
            opened = {**fake.objects[MACHINE], "spec": {}}
            fake.put(MACHINE, opened)

    fake.on_request = remove_hook
    started = fake.monotonic()
    assert gate.pre_drain() == []
    assert "lifecycleHooks" not in gate.machine["spec"]
    assert gate.recorder.machine is gate.machine
    assert fake.monotonic() == started, "the watch saw the change: no waiting"


def test_gate_times_out_on_the_fake_clock() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, hooks=[("quorum-guard", "etcd")]), timeout=30)
    started = fake.monotonic()
    with pytest.raises(MachineError) as failure:
        gate.pre_drain()
    assert failure.value.msg == f"Timed out after 30 s waiting for the preDrain hooks of Machine {NS}/m1 to be removed: {HOOK_TEXT}"
    result = failure.value.result
    assert (result["blocked_by"], result["timed_out"]) == ([{"name": "quorum-guard", "owner": "etcd"}], True)
    assert [(b["kind"], b["object"], b["evidence"]["owner"]) for b in result["blockers"]] == [("hook", "quorum-guard", "etcd")]
    assert fake.monotonic() >= started + 30


def test_machine_deleted_at_the_gate_fails() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, hooks=[("quorum-guard", "etcd")]))

    def delete_machine(method: str, path: str) -> None:
        if method == "GET" and path.endswith("/machines?watch") and MACHINE in fake.objects:
            fake.finish(MACHINE)

    fake.on_request = delete_machine
    with pytest.raises(MachineError, match=f"^Machine {NS}/m1 was deleted while waiting at its preDrain gate$"):
        gate.pre_drain()


def test_refresh_sees_the_machine_again_or_fails_when_it_is_gone() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake))
    fake.put(MACHINE, {**fake.objects[MACHINE], "metadata": {**fake.objects[MACHINE]["metadata"], "annotations": {"a": "b"}}})
    gate.refresh()
    assert gate.machine["metadata"]["annotations"] == {"a": "b"}
    fake.finish(MACHINE)
    with pytest.raises(MachineError, match=f"^Machine {NS}/m1 was deleted while its Node was being drained$"):
        gate.refresh()


# -- skip reasons ------------------------------------------------------------------


def test_no_skip_for_a_machine_with_a_node() -> None:
    fake = FakeKube()
    gate = gate_for(fake, capi_machine(fake))
    assert gate.node_skip_reason() is None and gate.node_name() == NODE
    assert gate.drain_skip_reason() is None


@pytest.mark.parametrize(
    ("infrastructure", "said"),
    [("gone", f"FakeMachine {NS}/m1 is gone"), ("deleting", f"FakeMachine {NS}/m1 is being deleted")],
)
def test_an_infra_machine_gone_or_going_skips_the_drain(infrastructure: str, said: str) -> None:
    fake = FakeKube()
    gate = gate_for(fake, capi_machine(fake, infrastructure=infrastructure))
    assert gate.node_skip_reason() is None, "the preDrain gate still holds: only the drain goes"
    assert gate.drain_skip_reason() == f"Machine {NS}/m1: {said}, so its Node is neither drained nor waited for"


def test_once_the_pre_terminate_wait_started_the_node_is_never_drained_again() -> None:
    fake = FakeKube()
    machine = capi_machine(fake)
    machine["status"]["deletion"] = {"waitForPreTerminateHookStartTime": "2026-01-01T00:05:00Z"}
    gate = gate_for(fake, fake.put(machine_path(api_version=CAPI_V2), machine))
    assert gate.drain_skip_reason() == (
        f"Machine {NS}/m1: the wait for preTerminate hooks started at 2026-01-01T00:05:00Z, so the Node is neither drained nor waited for again"
    )
    assert not any("fakemachines" in path for _method, path in fake.requests), "the recorded time is enough: no read"


# -- the InfraMachine through the run's cache (machine_delete) ------------------------------

INFRA_COLLECTION = f"/apis/{INFRA_V1}/namespaces/{NS}/fakemachines"
INFRA = f"{INFRA_COLLECTION}/m1"


class Listening(Informer):
    """An informer that counts as listed and watched (the stand-in runs no background watch: fed by hand)."""

    def ready(self) -> bool:
        return True


class Sharing(FakeKube):
    """machine_delete's transport: the run's cache, the InfraMachines' collection in it."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = Cache(self)
        self.infra = self.cache._informers[INFRA_COLLECTION] = Listening(self, INFRA_COLLECTION, INFRA_V1, "FakeMachine", lambda _obj: True)

    def infra_gets(self) -> int:
        return self.requests.count(("GET", INFRA))


def test_in_a_machine_delete_task_the_infra_machine_costs_no_get() -> None:
    fake = Sharing()
    gate = gate_for(fake, capi_machine(fake))
    fake.infra._relist()  # the task's LIST of the collection (shared by every Machine of the namespace)
    assert gate.drain_skip_reason() is None
    assert gate.drain_skip_reason() is None, "before each pass"
    going = fake.put(INFRA, {**fake.objects[INFRA], "metadata": {**fake.objects[INFRA]["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}})
    fake.infra._on_event({"type": "MODIFIED", "object": going})
    assert gate.drain_skip_reason() == f"Machine {NS}/m1: FakeMachine {NS}/m1 is being deleted, so its Node is neither drained nor waited for"
    went = {**going, "metadata": {**going["metadata"], "resourceVersion": str(int(going["metadata"]["resourceVersion"]) + 1)}}
    fake.infra._on_event({"type": "DELETED", "object": went})
    assert gate.drain_skip_reason() == f"Machine {NS}/m1: FakeMachine {NS}/m1 is gone, so its Node is neither drained nor waited for"
    assert fake.infra_gets() == 0


def test_an_infra_machine_the_feed_has_not_shown_is_gone_only_on_the_servers_word() -> None:
    fake = Sharing()
    fake.infra._relist()  # listed before the InfraMachine was made: the watch has not delivered it yet
    gate = gate_for(fake, capi_machine(fake))
    assert gate.drain_skip_reason() is None and fake.infra_gets() == 1, "not in the feed: read, not taken as gone"
    fake.finish(INFRA)
    gone = f"Machine {NS}/m1: FakeMachine {NS}/m1 is gone, so its Node is neither drained nor waited for"
    assert gate.drain_skip_reason() == gone and fake.infra_gets() == 2, "the GET says it went"


def test_machine_drain_alone_reads_the_infra_machine_with_a_get_each_look() -> None:
    fake = FakeKube()  # no cache
    gate = gate_for(fake, capi_machine(fake))
    assert gate.drain_skip_reason() is None and gate.drain_skip_reason() is None
    assert fake.requests.count(("GET", INFRA)) == 2


def test_a_held_pre_drain_gate_records_when_the_wait_started() -> None:
    fake = FakeKube()
    gate = gate_for(fake, capi_machine(fake, hooks=["quorum-guard"]), wait=False)
    assert len(gate.pre_drain()) == 1
    assert fake.objects[machine_path(api_version=CAPI_V2)]["status"]["deletion"]["waitForPreDrainHookStartTime"]


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ({"cluster_deleting": True}, f"Cluster {NS}/c1 is being deleted"),
        ({"control_plane_machines": 0}, f"no active control plane Machine is left in Cluster {NS}/c1"),
    ],
)
def test_cluster_api_skip_reasons(setup, reason) -> None:
    fake = FakeKube()
    gate = gate_for(fake, capi_machine(fake, **setup))
    assert gate.node_skip_reason() == reason


def test_cluster_api_skip_cases_only_apply_while_deleting() -> None:
    fake = FakeKube()
    gate = gate_for(fake, capi_machine(fake, deleting=False, cluster_deleting=True))
    assert gate.node_skip_reason() is None


def test_no_node_ref_is_a_skip() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, node=None))
    assert gate.node_skip_reason() == f"Machine {NS}/m1 has no status.nodeRef"


def test_exclude_annotation_skips_the_drain() -> None:
    fake = FakeKube()
    gate = gate_for(fake, openshift_machine(fake, annotations={"machine.openshift.io/exclude-node-draining": ""}))
    assert gate.drain_skip_reason() == f"Machine {NS}/m1 has the machine.openshift.io/exclude-node-draining annotation"


def test_passed_drain_timeout_skips_the_drain() -> None:
    fake = FakeKube()
    started = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
    gate = gate_for(fake, capi_machine(fake, drain_timeout=60, drain_started=iso(started)))
    assert gate.drain_skip_reason() == (f"the node drain timeout of Machine {NS}/m1 (60 s) has passed since the drain started at {iso(started)}")


# -- the pure decisions ------------------------------------------------------------

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def capi(**spec) -> dict:
    return {"apiVersion": CAPI_V2, "kind": "Machine", "metadata": {"name": "m1", "namespace": NS}, "spec": spec, "status": {}}


def test_drain_timeout_counts_only_while_deleting() -> None:
    machine = capi(deletion={"nodeDrainTimeoutSeconds": 60})
    machine["status"]["deletion"] = {"nodeDrainStartTime": "2026-01-02T03:00:00Z"}
    flavour = flavour_for(machine)
    assert drain_skip_reason(flavour, machine, deleting=False, now=NOW) is None
    assert drain_skip_reason(flavour, machine, deleting=True, now=NOW).startswith("the node drain timeout of Machine")


def test_drain_timeout_left_is_one_second_past_the_timeout() -> None:
    machine = capi(deletion={"nodeDrainTimeoutSeconds": 60})
    flavour = flavour_for(machine)
    assert drain_timeout_left(flavour, machine, started_at=NOW - dt.timedelta(seconds=50), now=NOW) == 11
    assert drain_timeout_left(flavour, capi(), started_at=NOW, now=NOW) is None


def test_pre_drain_hooks_of_a_gone_machine_are_none() -> None:
    machine = {"apiVersion": OPENSHIFT_V, "metadata": {}, "spec": {"lifecycleHooks": {"preDrain": [{"name": "a", "owner": "b"}]}}}
    assert [hook.name for hook in pre_drain_hooks(flavour_for(machine), machine)] == ["a"]
    assert pre_drain_hooks(flavour_for(machine), None) == []
